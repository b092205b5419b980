-- retire_named_units: take free units of a named key out of sale (a seat
-- removed). All or nothing: a unit that is held or sold is refused, and so
-- is a label the key does not have. The units leave named_units, the ledger
-- row's on_hand and allocated go down by their number, with one movement
-- (reason adjust) naming them.
-- Returns the key's units on hand (free and held; sold ones not).
-- Locks: the key's refill lock, then its ledger row (pending claims folded
-- first), then the units' free rows FOR UPDATE in position order, waiting
-- for a reservation in flight (it either takes the unit, which is then
-- refused here as held, or rolls back and leaves it free). Nobody that
-- holds a free row waits for a named key's ledger row or refill lock.
-- Raises 22004 (NULL argument or array element), 22023 (empty or
-- multi-dimensional p_labels, a label repeated), SP001 (unknown key), SP010
-- (a counted key), SP013 (a label the key does not have), SP012 (a unit held
-- or sold: nothing is retired).
-- Touches stock, named_units, named_free, movements (pending_claims folded).
CREATE OR REPLACE FUNCTION stockpool.retire_named_units(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_labels text[]
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_count integer := pg_catalog.cardinality(p_labels);
    v_positions integer[];
    v_missing text;
    v_freed integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_labels IS NULL THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_labels'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_labels IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF v_count = 0 OR pg_catalog.array_ndims(p_labels) <> 1 THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: p_labels must be a non-empty one-dimensional array'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_labels, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: p_labels must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    IF (SELECT pg_catalog.count(DISTINCT l.label) FROM pg_catalog.unnest(p_labels) AS l (label)) < v_count THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: p_labels repeats a label'
            USING ERRCODE = '22023';
    END IF;

    PERFORM pg_catalog.pg_advisory_xact_lock(
        stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));
    PERFORM stockpool._settle(p_shop_id, p_item_id, p_location_id, true);
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    IF NOT v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, false);
    END IF;

    SELECT pg_catalog.string_agg(l.label, ', ' ORDER BY l.label) INTO v_missing
    FROM pg_catalog.unnest(p_labels) AS l (label)
    WHERE NOT EXISTS (
        SELECT
        FROM stockpool.named_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
            AND u.label = l.label
    );
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: (shop %, item %, location %) has no unit labelled %',
            p_shop_id, p_item_id, p_location_id, v_missing
            USING ERRCODE = 'SP013';
    END IF;
    SELECT pg_catalog.array_agg(u.position ORDER BY u.position) INTO v_positions
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels);

    WITH picked AS (
        SELECT f.ctid AS row_id
        FROM stockpool.named_free AS f
        WHERE f.shop_id = p_shop_id
            AND f.item_id = p_item_id
            AND f.location_id = p_location_id
            AND f.position = ANY(v_positions)
        ORDER BY f.position
        FOR UPDATE
    )
    DELETE FROM stockpool.named_free AS d
    USING picked
    WHERE d.ctid = picked.row_id;
    GET DIAGNOSTICS v_freed = ROW_COUNT;
    IF v_freed < v_count THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: % of the % units are held or sold; nothing was retired',
            v_count - v_freed, v_count
            USING ERRCODE = 'SP012',
                  HINT = 'Retire a unit once its hold is released or expires; a sold unit stays sold.';
    END IF;

    DELETE FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels);
    UPDATE stockpool.stock AS s
    SET on_hand = s.on_hand - v_count,
        allocated = s.allocated - v_count,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    INSERT INTO stockpool.movements
        (shop_id, item_id, location_id, delta, on_hand_after, reason, labels)
    VALUES (p_shop_id, p_item_id, p_location_id, -v_count, v_stock.on_hand - v_count, 'adjust', p_labels);
    RETURN v_stock.on_hand - v_count;
END;
$function$;

COMMENT ON FUNCTION stockpool.retire_named_units(bigint, bigint, bigint, text[]) IS
'Take free units of a named key out of sale, all or nothing; held or sold ones are refused. '
'Returns the key''s units on hand. SQLSTATEs: 22004 NULL argument or element, 22023 empty, multi-dimensional '
'or repeated labels, SP001 unknown key, SP010 counted key, SP013 unknown label, SP012 unit held or sold.';
