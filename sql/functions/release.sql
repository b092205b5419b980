-- release: payment failed. The checkout's live holds (expired but unswept
-- ones included) end and their units go back: to the key's ledger row when
-- it has no pool and the row is free, else to its pool (_return_units); a
-- named key's units go back among its free units (_free_labels).
-- Returns the units released by the checkout in total; a retry is a no-op
-- that returns the same number. A checkout whose holds all expired returns 0:
-- their units went back when they expired.
-- Locks: the checkout lock, then the checkout's hold rows FOR UPDATE, then
-- (for a key without a pool) its ledger row SKIP LOCKED, never waiting.
-- Counted (stockpool.metrics()): each line released by _tally_release, once
-- the release's writes are done; a retry is not counted.
-- Raises 22004 (NULL argument), SP003 (unknown checkout), SP006 (the checkout
-- was claimed: paid stock is not given back by release).
-- Touches holds, stock, pool_units, named_free.
CREATE OR REPLACE FUNCTION stockpool.release(
    p_shop_id bigint,
    p_checkout_id uuid
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_hold record;
    v_rows integer := 0;
    v_held integer := 0;
    v_claimed integer := 0;
    v_released integer := 0;
    v_ended integer := 0;
BEGIN
    IF p_shop_id IS NULL OR p_checkout_id IS NULL THEN
        RAISE EXCEPTION 'stockpool.release: % must not be NULL',
            stockpool._null_args(ARRAY['p_shop_id', 'p_checkout_id'],
                                 ARRAY[p_shop_id IS NULL, p_checkout_id IS NULL])
            USING ERRCODE = '22004';
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    FOR v_hold IN
        SELECT h.status, h.quantity
        FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = p_checkout_id
        ORDER BY h.item_id, h.location_id
        FOR UPDATE
    LOOP
        v_rows := v_rows + 1;
        CASE v_hold.status
            WHEN 'held' THEN v_held := v_held + 1;
            WHEN 'claimed' THEN v_claimed := v_claimed + 1;
            WHEN 'released' THEN v_released := v_released + v_hold.quantity;
            ELSE NULL;
        END CASE;
    END LOOP;

    IF v_rows = 0 THEN
        RAISE EXCEPTION 'stockpool.release: checkout % holds nothing in shop %', p_checkout_id, p_shop_id
            USING ERRCODE = 'SP003';
    END IF;
    IF v_held = 0 AND v_released = 0 AND v_claimed > 0 THEN
        RAISE EXCEPTION 'stockpool.release: checkout % was claimed; claimed stock is not released', p_checkout_id
            USING ERRCODE = 'SP006',
                  HINT = 'Return paid stock with stockpool.adjust_stock(), which records a movement.';
    END IF;

    FOR v_hold IN
        WITH ended AS (
            UPDATE stockpool.holds AS h
            SET status = 'released',
                updated_at = pg_catalog.now()
            WHERE h.shop_id = p_shop_id
                AND h.checkout_id = p_checkout_id
                AND h.status = 'held'
            RETURNING h.item_id, h.location_id, h.quantity, h.labels
        )
        SELECT e.item_id, e.location_id, e.quantity, e.labels, s.buckets
        FROM ended AS e
        JOIN stockpool.stock AS s
            ON s.shop_id = p_shop_id
            AND s.item_id = e.item_id
            AND s.location_id = e.location_id
        ORDER BY e.item_id, e.location_id
    LOOP
        IF v_hold.labels IS NULL THEN
            PERFORM stockpool._return_units(p_shop_id, v_hold.item_id, v_hold.location_id,
                                            v_hold.quantity, v_hold.buckets);
        ELSE
            PERFORM stockpool._free_labels(p_shop_id, v_hold.item_id, v_hold.location_id,
                                           v_hold.labels, v_hold.buckets);
        END IF;
        v_released := v_released + v_hold.quantity;
        v_ended := v_ended + 1;
    END LOOP;

    FOR v_i IN 1..v_ended LOOP
        PERFORM stockpool._tally_release();
    END LOOP;
    RETURN v_released;
END;
$function$;

COMMENT ON FUNCTION stockpool.release(bigint, uuid) IS
'Payment failed: end the checkout''s live holds and give their units back (ledger row or pool). '
'Returns the units released by the checkout; a retry is a no-op returning the same number. '
'SQLSTATEs: 22004 NULL argument, SP003 unknown checkout, SP006 checkout was claimed.';
