-- reserve_labels: hold exactly the units p_labels of a named key for a
-- checkout (a buyer picked seats), all or nothing, for p_ttl.
-- Returns true when held (or already held by this checkout: a retry is a
-- no-op), false when any of them is held or sold (nothing is held then).
-- Locks: the checkout lock; the checkout's hold row read (a retry renews an
-- overdue one); the units' free rows FOR UPDATE in position order, waiting
-- for units locked by an in-flight transaction (a buyer that rolls back
-- leaves them free, and this call gets them); so whatever order the labels
-- come in, two buyers lock in one order and cannot deadlock. When a unit is
-- not free, the rows taken are given back (subtransaction rolled back), the
-- key's overdue holds are expired (waiting for holds a sweeper or their
-- owner has locked; nothing else held) and the units tried once more: an
-- overdue hold never makes it answer false. Then the new hold row. Never
-- the ledger row or the key's refill lock.
-- Counted (stockpool.metrics()): a new hold by _tally_reservation, a refusal
-- by _tally_refusal, expiries by _tally_expiry; a retry is not counted.
-- Raises 22004 (NULL argument or array element), 22023 (empty or
-- multi-dimensional p_labels, a label repeated, ttl <= 0), SP001 (unknown
-- key), SP010 (a counted key), SP013 (a label the key does not have), SP007
-- (the checkout holds other units of this key).
-- Touches holds, named_free (named_units read).
CREATE OR REPLACE FUNCTION stockpool.reserve_labels(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_labels text[],
    p_checkout_id uuid,
    p_ttl interval DEFAULT '15 minutes'
)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_count integer := pg_catalog.cardinality(p_labels);
    v_labels text[];
    v_positions integer[];
    v_held text[];
    v_missing text;
    v_got integer;
    v_expired integer;
    v_try integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_labels IS NULL
        OR p_checkout_id IS NULL OR p_ttl IS NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_labels: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_labels', 'p_checkout_id', 'p_ttl'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_labels IS NULL,
                      p_checkout_id IS NULL, p_ttl IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF v_count = 0 OR pg_catalog.array_ndims(p_labels) <> 1 THEN
        RAISE EXCEPTION 'stockpool.reserve_labels: p_labels must be a non-empty one-dimensional array'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_labels, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_labels: p_labels must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'stockpool.reserve_labels: p_ttl must be positive, got %', p_ttl
            USING ERRCODE = '22023';
    END IF;

    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    IF NOT v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, false);
    END IF;

    -- The units in position order: the order they are locked in, and the
    -- order the hold records them in.
    SELECT pg_catalog.array_agg(u.label ORDER BY u.position), pg_catalog.array_agg(u.position ORDER BY u.position)
    INTO v_labels, v_positions
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels);
    IF coalesce(pg_catalog.cardinality(v_labels), 0) < v_count THEN
        IF (SELECT pg_catalog.count(DISTINCT l.label) FROM pg_catalog.unnest(p_labels) AS l (label)) < v_count THEN
            RAISE EXCEPTION 'stockpool.reserve_labels: p_labels repeats a label'
                USING ERRCODE = '22023';
        END IF;
        SELECT pg_catalog.string_agg(l.label, ', ' ORDER BY l.label) INTO v_missing
        FROM pg_catalog.unnest(p_labels) AS l (label)
        WHERE l.label <> ALL(coalesce(v_labels, '{}'));
        RAISE EXCEPTION 'stockpool.reserve_labels: (shop %, item %, location %) has no unit labelled %',
            p_shop_id, p_item_id, p_location_id, v_missing
            USING ERRCODE = 'SP013';
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    -- A hold row of this checkout on this key already: a retry (true, if it
    -- holds these very units), or a released or expired hold to take again.
    SELECT h.labels INTO v_held
    FROM stockpool.holds AS h
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id
        AND h.status IN ('held', 'claimed');
    IF FOUND AND v_held IS DISTINCT FROM v_labels THEN
        RAISE EXCEPTION 'checkout % already holds units % of item % at location %, not %',
            p_checkout_id, v_held, p_item_id, p_location_id, v_labels
            USING ERRCODE = 'SP007',
                  HINT = 'Release the checkout first, or reserve under a new checkout id.';
    END IF;
    IF FOUND AND stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                          v_count, p_ttl) THEN
        RETURN true;
    END IF;

    v_expired := 0;
    FOR v_try IN 1..2 LOOP
        BEGIN
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
            GET DIAGNOSTICS v_got = ROW_COUNT;
            IF v_got < v_count THEN
                RAISE EXCEPTION USING ERRCODE = 'SPX05';
            END IF;
            PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                           v_count, p_ttl, p_reopen => true, p_labels => v_labels);
            FOR v_i IN 1..v_expired LOOP
                PERFORM stockpool._tally_expiry();
            END LOOP;
            PERFORM stockpool._tally_reservation();
            RETURN true;
        EXCEPTION
            WHEN SQLSTATE 'SPX05' THEN
                NULL;
        END;
        -- A unit not free: holding nothing now, expire the key's overdue
        -- holds (their units come back) and look once more, if any did.
        EXIT WHEN v_try = 2;
        v_expired := stockpool._expire_key(p_shop_id, p_item_id, p_location_id, v_stock.buckets);
        EXIT WHEN v_expired = 0;
    END LOOP;

    FOR v_i IN 1..v_expired LOOP
        PERFORM stockpool._tally_expiry();
    END LOOP;
    PERFORM stockpool._tally_refusal();
    RETURN false;
END;
$function$;

COMMENT ON FUNCTION stockpool.reserve_labels(bigint, bigint, bigint, text[], uuid, interval) IS
'Hold exactly the units p_labels of a named key for a checkout until now() + p_ttl, all or nothing. '
'true = held (a retry by the same checkout is a no-op), false = a unit is held or sold. Labels may come in any order '
'(locked in position order). SQLSTATEs: 22004 NULL argument or element, 22023 empty, multi-dimensional or repeated '
'labels or ttl not positive, SP001 unknown key, SP010 counted key, SP013 unknown label, SP007 checkout holds other '
'units of this key.';
