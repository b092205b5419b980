-- set_named_units: add labelled units to a named key, creating the key as a
-- named key when it is new. p_positions orders the units and defines
-- adjacency (consecutive positions are side by side, a gap breaks a block);
-- without it the labels follow the key's last position in array order.
-- The units are free at once; the ledger row's on_hand and allocated go up
-- by their number (a named key's free units are its pool), with one
-- movement (reason adjust) naming them.
-- Returns the key's units on hand (free and held; sold ones not).
-- Locks: the key's refill lock, then its ledger row (pending claims folded
-- first), as set_stock; writes new rows only.
-- Raises 22004 (NULL argument or array element), 22023 (empty or
-- multi-dimensional arrays, p_positions not as long as p_labels), SP010 (a
-- counted key), SP011 (a label or a position repeated, in the arrays or
-- already on the key, sold units included).
-- Touches stock, named_units, named_free, movements (pending_claims folded).
CREATE OR REPLACE FUNCTION stockpool.set_named_units(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_labels text[],
    p_positions integer[] DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_count integer := pg_catalog.cardinality(p_labels);
    v_positions integer[] := p_positions;
    v_repeated text;
    v_units integer;
    v_buckets integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_labels IS NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_labels'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_labels IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF v_count = 0 OR pg_catalog.array_ndims(p_labels) <> 1
        OR pg_catalog.array_ndims(p_positions) <> 1
        OR pg_catalog.cardinality(p_positions) <> v_count THEN
        RAISE EXCEPTION 'stockpool.set_named_units: p_labels must be a non-empty one-dimensional array, and p_positions (if given) one of the same length (got % labels, % positions)',
            v_count, pg_catalog.cardinality(p_positions)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_labels, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_positions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: labels and positions must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    SELECT pg_catalog.string_agg(r.label, ', ' ORDER BY r.label) INTO v_repeated
    FROM (
        SELECT l.label
        FROM pg_catalog.unnest(p_labels) AS l (label)
        GROUP BY l.label
        HAVING pg_catalog.count(*) > 1
    ) AS r;
    IF v_repeated IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: labels repeated: %', v_repeated
            USING ERRCODE = 'SP011',
                  HINT = 'Every unit of a key has a label of its own.';
    END IF;
    SELECT pg_catalog.string_agg(r.position::text, ', ' ORDER BY r.position) INTO v_repeated
    FROM (
        SELECT p.position
        FROM pg_catalog.unnest(p_positions) AS p (position)
        GROUP BY p.position
        HAVING pg_catalog.count(*) > 1
    ) AS r;
    IF v_repeated IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: positions repeated: %', v_repeated
            USING ERRCODE = 'SP011',
                  HINT = 'Every unit of a key has a position of its own.';
    END IF;

    -- set_stock's order: the refill lock, then the ledger row (true figure).
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
        INSERT INTO stockpool.stock (shop_id, item_id, location_id, on_hand, named)
        VALUES (p_shop_id, p_item_id, p_location_id, 0, true)
        RETURNING * INTO v_stock;
    ELSIF NOT v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, false);
    END IF;

    SELECT pg_catalog.string_agg(u.label, ', ' ORDER BY u.label) INTO v_repeated
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels);
    IF v_repeated IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: (shop %, item %, location %) has units labelled % already',
            p_shop_id, p_item_id, p_location_id, v_repeated
            USING ERRCODE = 'SP011',
                  HINT = 'Every unit of a key has a label of its own (sold units keep theirs).';
    END IF;
    IF v_positions IS NULL THEN
        SELECT pg_catalog.array_agg(m.last_position + g.n ORDER BY g.n) INTO v_positions
        FROM (
            SELECT coalesce(pg_catalog.max(u.position), 0) AS last_position
            FROM stockpool.named_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
        ) AS m
        CROSS JOIN pg_catalog.generate_series(1, v_count) AS g (n);
    ELSE
        SELECT pg_catalog.string_agg(u.position::text, ', ' ORDER BY u.position) INTO v_repeated
        FROM stockpool.named_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
            AND u.position = ANY(p_positions);
        IF v_repeated IS NOT NULL THEN
            RAISE EXCEPTION 'stockpool.set_named_units: (shop %, item %, location %) has units at positions % already',
                p_shop_id, p_item_id, p_location_id, v_repeated
                USING ERRCODE = 'SP011',
                      HINT = 'Every unit of a key has a position of its own (sold units keep theirs).';
        END IF;
    END IF;

    -- Spread grows with the key, as a pool's does (one bucket per 128 units,
    -- at most 1,024); raised, never lowered.
    SELECT pg_catalog.count(*)::integer + v_count INTO v_units
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id;
    v_buckets := GREATEST(v_stock.buckets, LEAST(1024, v_units / 128));

    INSERT INTO stockpool.named_units (shop_id, item_id, location_id, label, position)
    SELECT p_shop_id, p_item_id, p_location_id, n.label, n.position
    FROM ROWS FROM (pg_catalog.unnest(p_labels), pg_catalog.unnest(v_positions)) AS n (label, position);
    PERFORM stockpool._free_labels(p_shop_id, p_item_id, p_location_id, p_labels, v_buckets);

    UPDATE stockpool.stock AS s
    SET on_hand = s.on_hand + v_count,
        allocated = s.allocated + v_count,
        buckets = v_buckets,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    INSERT INTO stockpool.movements
        (shop_id, item_id, location_id, delta, on_hand_after, reason, labels)
    VALUES (p_shop_id, p_item_id, p_location_id, v_count, v_stock.on_hand + v_count, 'adjust', p_labels);
    RETURN v_stock.on_hand + v_count;
END;
$function$;

COMMENT ON FUNCTION stockpool.set_named_units(bigint, bigint, bigint, text[], integer[]) IS
'Add labelled units to a named key (creating it), free at once; p_positions orders them and defines adjacency '
'(default: after the key''s last position, in array order). Returns the key''s units on hand. '
'SQLSTATEs: 22004 NULL argument or element, 22023 empty, multi-dimensional or unequal arrays, SP010 counted key, '
'SP011 label or position repeated.';
