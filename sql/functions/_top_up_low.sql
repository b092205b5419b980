-- _top_up_low: top up the pools of up to p_batch pooled keys with free stock
-- that are at or below their low-water mark (stockpool._refill with
-- p_low_water_only: it counts the pool against stockpool._refill_mark), so
-- that buyers find units without refilling themselves. Only keys with a pool
-- are looked at (a key gets one when its buyers meet and gives it back when
-- it cools down, so they are few); in random order, so that with more than
-- p_batch of them every one is looked at in turn.
-- A pool not refilled for p_quiet is left alone: it is about to go back to
-- its ledger row (stockpool._cool_quiet). The pool is counted first without
-- any lock (stockpool._pooled_upto): only a key at or below its mark is locked.
-- Locks, per key and only by trying: the key's refill lock, then its ledger
-- row SKIP LOCKED (the order _refill takes them in; _refill then finds both
-- held and waits for neither). A key whose locks are busy is skipped: its
-- holder is refilling or using it. Never waits: two maintainers that each
-- settled one key's row and then waited for the other's would deadlock (a
-- wait PostgreSQL's SKIP LOCKED makes anyway gives the step up: it runs in
-- _maintain_step, docs/locking.md, "SKIP LOCKED can wait").
-- Each refill that moved units is counted (_tally_refill), after the last
-- key: a step given up later in the loop rolls back the refills before it,
-- and a count, once made, is not rolled back.
-- Returns units added. Touches stock, pool_units, pending_claims, movements.
CREATE OR REPLACE FUNCTION stockpool._top_up_low(
    p_batch integer,
    p_quiet interval
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_key record;
    v_added integer := 0;
    v_refilled integer;
    v_refills integer := 0;
BEGIN
    FOR v_key IN
        SELECT s.shop_id, s.item_id, s.location_id,
               stockpool._refill_mark(stockpool._pool_level(s.pool_target), s.low_water, s.pool_cap) AS mark,
               s.buckets
        FROM stockpool.stock AS s
        WHERE s.pool_target > 0
            AND s.on_hand > s.allocated
            AND s.refilled_at >= pg_catalog.now() - p_quiet
        ORDER BY pg_catalog.random()
        LIMIT p_batch
    LOOP
        -- Counted without a lock first: a pool above its mark costs no lock.
        CONTINUE WHEN stockpool._pooled_upto(v_key.shop_id, v_key.item_id, v_key.location_id,
                                             v_key.mark, v_key.buckets) > v_key.mark;
        CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(
            stockpool._key_lock_id(v_key.shop_id, v_key.item_id, v_key.location_id));
        PERFORM
        FROM stockpool.stock AS s
        WHERE s.shop_id = v_key.shop_id
            AND s.item_id = v_key.item_id
            AND s.location_id = v_key.location_id
        FOR NO KEY UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        v_refilled := stockpool._refill(v_key.shop_id, v_key.item_id, v_key.location_id,
                                        p_min_extra => 0, p_wait => false, p_low_water_only => true);
        IF v_refilled > 0 THEN
            v_refills := v_refills + 1;
            v_added := v_added + v_refilled;
        END IF;
    END LOOP;
    FOR v_i IN 1..v_refills LOOP
        PERFORM stockpool._tally_refill();
    END LOOP;
    RETURN v_added;
END;
$function$;

COMMENT ON FUNCTION stockpool._top_up_low(integer, interval) IS
'Internal: top up the pools of up to p_batch keys at or below their low-water mark, by try-locks only; returns units.';
