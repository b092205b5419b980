-- sweep: expire up to p_batch overdue holds in one short transaction and put
-- their units back (_return_units: the ledger row of a key without a pool,
-- else its pool), then settle the pending claims of
-- up to p_batch keys whose ledger row is free (stockpool._settle; a busy row
-- is skipped: its holder or a later sweep folds it). A quiet key that nobody
-- claims, refills or restocks again gets its pending claims folded here.
-- Last, the pools of up to p_batch keys that cooled down (not refilled for
-- 60 seconds) go back to their ledger rows (stockpool._cool).
-- Returns the number of holds expired. Several sweepers can run at once: each
-- locks its batch FOR UPDATE SKIP LOCKED and ledger rows SKIP LOCKED, so they
-- take disjoint batches and never wait on each other or on a checkout being
-- claimed or released. In a REPEATABLE READ or SERIALIZABLE transaction it
-- only expires.
-- Raises 22004 (NULL p_batch), 22023 (p_batch <= 0).
-- Touches holds, pool_units, pending_claims, stock, movements.
CREATE OR REPLACE FUNCTION stockpool.sweep(
    p_batch integer DEFAULT 500
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    -- A pool not refilled for this long goes back to its ledger row.
    c_quiet constant interval := '60 seconds';
    v_key record;
    v_holds integer := 0;
BEGIN
    IF p_batch IS NULL THEN
        RAISE EXCEPTION 'stockpool.sweep: p_batch must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_batch <= 0 THEN
        RAISE EXCEPTION 'stockpool.sweep: p_batch must be positive, got %', p_batch
            USING ERRCODE = '22023';
    END IF;

    FOR v_key IN
        WITH due AS (
            SELECT h.shop_id, h.checkout_id, h.item_id, h.location_id
            FROM stockpool.holds AS h
            WHERE h.status = 'held'
                AND h.expires_at <= pg_catalog.now()
            ORDER BY h.expires_at
            LIMIT p_batch
            FOR UPDATE SKIP LOCKED
        ),
        expired AS (
            UPDATE stockpool.holds AS h
            SET status = 'expired',
                updated_at = pg_catalog.now()
            FROM due
            WHERE h.shop_id = due.shop_id
                AND h.checkout_id = due.checkout_id
                AND h.item_id = due.item_id
                AND h.location_id = due.location_id
            RETURNING h.shop_id, h.item_id, h.location_id, h.quantity
        )
        SELECT e.shop_id, e.item_id, e.location_id,
               pg_catalog.sum(e.quantity)::integer AS units,
               pg_catalog.count(*)::integer AS holds,
               pg_catalog.min(s.buckets) AS buckets
        FROM expired AS e
        JOIN stockpool.stock AS s
            ON s.shop_id = e.shop_id
            AND s.item_id = e.item_id
            AND s.location_id = e.location_id
        GROUP BY e.shop_id, e.item_id, e.location_id
        ORDER BY e.shop_id, e.item_id, e.location_id
    LOOP
        PERFORM stockpool._return_units(v_key.shop_id, v_key.item_id, v_key.location_id,
                                        v_key.units, v_key.buckets);
        v_holds := v_holds + v_key.holds;
    END LOOP;

    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        FOR v_key IN
            SELECT DISTINCT c.shop_id, c.item_id, c.location_id
            FROM stockpool.pending_claims AS c
            ORDER BY c.shop_id, c.item_id, c.location_id
            LIMIT p_batch
        LOOP
            PERFORM stockpool._settle(v_key.shop_id, v_key.item_id, v_key.location_id, false);
        END LOOP;
        FOR v_key IN
            SELECT s.shop_id, s.item_id, s.location_id
            FROM stockpool.stock AS s
            WHERE s.pool_target > 0
                AND s.refilled_at < pg_catalog.now() - c_quiet
            ORDER BY s.refilled_at
            LIMIT p_batch
        LOOP
            PERFORM stockpool._cool(v_key.shop_id, v_key.item_id, v_key.location_id, c_quiet);
        END LOOP;
    END IF;

    RETURN v_holds;
END;
$function$;

COMMENT ON FUNCTION stockpool.sweep(integer) IS
'Expire up to p_batch overdue holds in one short transaction and return their units to the pool; '
'then fold the pending claims of up to p_batch keys whose ledger row is free, '
'and hand the pools of up to p_batch keys quiet for 60 s back to their ledger rows. '
'Returns holds expired. Concurrent sweepers take disjoint batches (SKIP LOCKED). '
'SQLSTATEs: 22004 NULL p_batch, 22023 p_batch not positive.';
