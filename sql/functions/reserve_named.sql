-- reserve_named: hold p_quantity free units of a named key for a checkout,
-- all or nothing, for p_ttl, and say which: with p_adjacent, one block of
-- consecutive positions (seats together).
-- Returns the labels held, in position order (best first: one of the lowest
-- free positions), or NULL when not enough units are free (with p_adjacent:
-- no such block). A retry by the same checkout returns the same labels.
-- Spread: a buyer starts at a random bucket of the key's free units (bucket
-- = position % the key's buckets) and takes the lowest free position there,
-- SKIP LOCKED, so that buyers do not all fight for the first free row (the
-- cloakroom's ORDER BY position LIMIT 1), and the positions given out stay
-- among the lowest free ones. A single unit is taken in one statement with
-- a cached plan and no subtransaction. No shared row is written: the free
-- row is deleted and the hold row inserted, the ledger row is not touched
-- (a named key's free units are allocated already; claim folds later).
-- Near sellout (the SKIP LOCKED take came back short): the key's overdue
-- holds are expired (waiting for holds a sweeper or their owner has
-- locked), then the lowest free units are taken waiting for those locked
-- by in-flight transactions, in position order; only then is the answer
-- NULL. So a unit whose locker rolls back, or an overdue hold, never makes
-- it answer NULL while units would be free.
-- Locks: the checkout lock; the checkout's hold row read (a retry renews an
-- overdue one, waiting for an expirer that has it); named_free rows SKIP
-- LOCKED, or near sellout first overdue hold rows of the key (checkout_id
-- order) then named_free rows in position order, waiting; then the new hold
-- row (inserted, nobody else writes it). Never the ledger row or the key's
-- refill lock.
-- Counted (stockpool.metrics()): a new hold by _tally_reservation, a refusal
-- by _tally_refusal, expiries on the near-sellout path by _tally_expiry; a
-- retry is not counted.
-- Raises 22004 (NULL argument), 22023 (quantity <= 0, ttl <= 0), SP001
-- (unknown key), SP010 (a counted key), SP007 (the checkout holds a
-- different quantity of this key).
-- Touches holds, named_free (named_units read).
CREATE OR REPLACE FUNCTION stockpool.reserve_named(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_checkout_id uuid,
    p_ttl interval DEFAULT '15 minutes',
    p_adjacent boolean DEFAULT false
)
RETURNS text[]
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_labels text[];
    v_label text;
    v_start integer;
    v_expired integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_quantity IS NULL
        OR p_checkout_id IS NULL OR p_ttl IS NULL OR p_adjacent IS NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_named: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_quantity', 'p_checkout_id', 'p_ttl',
                      'p_adjacent'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_quantity IS NULL,
                      p_checkout_id IS NULL, p_ttl IS NULL, p_adjacent IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_quantity <= 0 THEN
        RAISE EXCEPTION 'stockpool.reserve_named: p_quantity must be positive, got %', p_quantity
            USING ERRCODE = '22023';
    END IF;
    IF p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'stockpool.reserve_named: p_ttl must be positive, got %', p_ttl
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

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    -- A hold row of this checkout on this key already: a retry (the same
    -- labels), or a released or expired hold to take again.
    SELECT h.labels INTO v_labels
    FROM stockpool.holds AS h
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id;
    IF FOUND AND stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                          p_quantity, p_ttl) THEN
        RETURN v_labels;
    END IF;

    IF p_quantity > v_stock.on_hand THEN
        PERFORM stockpool._tally_refusal();
        RETURN NULL;
    END IF;

    IF p_quantity = 1 THEN
        -- _take_named's spread take, inlined for one unit: one statement per
        -- direction, a cached plan, nothing locked when nothing is found.
        v_start := pg_catalog.floor(pg_catalog.random() * v_stock.buckets)::integer;
        DELETE FROM stockpool.named_free AS d
        WHERE d.ctid = (
                SELECT f.ctid
                FROM stockpool.named_free AS f
                WHERE f.shop_id = p_shop_id
                    AND f.item_id = p_item_id
                    AND f.location_id = p_location_id
                    AND f.bucket >= v_start
                ORDER BY f.bucket, f.position
                LIMIT 1
                FOR UPDATE SKIP LOCKED
            )
        RETURNING d.label INTO v_label;
        IF NOT FOUND AND v_start > 0 THEN
            DELETE FROM stockpool.named_free AS d
            WHERE d.ctid = (
                    SELECT f.ctid
                    FROM stockpool.named_free AS f
                    WHERE f.shop_id = p_shop_id
                        AND f.item_id = p_item_id
                        AND f.location_id = p_location_id
                        AND f.bucket < v_start
                    ORDER BY f.bucket, f.position
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                )
            RETURNING d.label INTO v_label;
        END IF;
        v_labels := CASE WHEN v_label IS NOT NULL THEN ARRAY[v_label] END;
    ELSE
        v_labels := stockpool._take_named(p_shop_id, p_item_id, p_location_id, p_quantity,
                                          v_stock.buckets, p_adjacent, false);
    END IF;

    IF v_labels IS NULL THEN
        -- Near sellout, holding no free row: overdue holds first (their
        -- units come back), then wait for units locked by in-flight buyers.
        v_expired := stockpool._expire_key(p_shop_id, p_item_id, p_location_id, v_stock.buckets);
        FOR v_i IN 1..v_expired LOOP
            PERFORM stockpool._tally_expiry();
        END LOOP;
        v_labels := stockpool._take_named(p_shop_id, p_item_id, p_location_id, p_quantity,
                                          v_stock.buckets, p_adjacent, true);
        IF v_labels IS NULL THEN
            PERFORM stockpool._tally_refusal();
            RETURN NULL;
        END IF;
    END IF;

    PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                   p_quantity, p_ttl, p_reopen => true, p_labels => v_labels);
    PERFORM stockpool._tally_reservation();
    RETURN v_labels;
END;
$function$;

COMMENT ON FUNCTION stockpool.reserve_named(bigint, bigint, bigint, integer, uuid, interval, boolean) IS
'Hold p_quantity free units of a named key for a checkout until now() + p_ttl, all or nothing; with p_adjacent one block '
'of consecutive positions. Returns their labels in position order (one of the lowest free positions first, spread '
'under load), NULL when not enough are free; a retry by the same checkout returns the same labels. '
'SQLSTATEs: 22004 NULL argument, 22023 quantity or ttl not positive, SP001 unknown key, SP010 counted key, '
'SP007 checkout already holds a different quantity of this key.';
