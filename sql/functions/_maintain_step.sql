-- _maintain_step: one step of sweep or maintain ('expire', 'settle', 'cool'
-- or 'top_up': _expire_due, _settle_due, _cool_quiet, _top_up_low), run so
-- that it never keeps anybody waiting on it while it waits itself.
-- 'expire' runs one batch, or with p_until batches until one is not full or
-- the time is up (maintain's budget): all in this step's one subtransaction,
-- so that a cycle uses four of them, not one per batch (a transaction with
-- over 64 subtransaction ids slows every other session's snapshots).
-- The steps take every row SKIP LOCKED and every refill lock by trying, so
-- by design they wait for nothing. PostgreSQL 15 breaks that in one race:
-- a row lock SKIP LOCKED that finds the row's version being updated by a
-- transaction that commits just before the lock is tried then locks the
-- newer versions too, and waits for their lockers whatever the wait policy
-- (heap_lock_updated_tuple). A sweep that holds its batch of hold rows can
-- so wait for a buyer whose near-sellout path waits for one of those rows:
-- a deadlock, and the buyer was the one PostgreSQL cancelled (docs/locking.md,
-- "SKIP LOCKED can wait"). So a step runs with lock_timeout 50 ms, well
-- under deadlock_timeout (1 s by default; keep it above 50 ms), in a
-- subtransaction: a step that waits that long, or is picked to break a
-- deadlock, is rolled back with every lock it took (the buyer then goes
-- on), counted by _tally_maintenance_yield, and reported as 0. Its work is
-- left for the next cycle. A step that waits for a table lock (a migration
-- holding one) gives up the same way.
-- The holds an 'expire' step expired are counted (_tally_expiry) once its
-- subtransaction has ended: a count, once made, is not rolled back.
-- Returns what the step returns (holds expired, units folded, units handed
-- back, units added), 0 when it gave up. Raises P0001 for an unknown step.
-- Touches what the step touches.
CREATE OR REPLACE FUNCTION stockpool._maintain_step(
    p_step text,
    p_batch integer,
    p_quiet interval,
    p_until timestamptz DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql
SET lock_timeout = '50ms'
AS $function$
DECLARE
    v_done integer := 0;
    v_batch integer;
BEGIN
    BEGIN
        IF p_step = 'expire' THEN
            LOOP
                v_batch := stockpool._expire_due(p_batch);
                v_done := v_done + v_batch;
                EXIT WHEN p_until IS NULL OR v_batch < p_batch OR pg_catalog.clock_timestamp() >= p_until;
            END LOOP;
        ELSIF p_step = 'settle' THEN
            v_done := stockpool._settle_due(p_batch);
        ELSIF p_step = 'cool' THEN
            v_done := stockpool._cool_quiet(p_batch, p_quiet);
        ELSIF p_step = 'top_up' THEN
            v_done := stockpool._top_up_low(p_batch, p_quiet);
        ELSE
            RAISE EXCEPTION 'stockpool._maintain_step: unknown step %', p_step;
        END IF;
    EXCEPTION
        WHEN lock_not_available OR deadlock_detected THEN
            PERFORM stockpool._tally_maintenance_yield();
            RETURN 0;
    END;
    IF p_step = 'expire' THEN
        FOR v_i IN 1..v_done LOOP
            PERFORM stockpool._tally_expiry();
        END LOOP;
    END IF;
    RETURN v_done;
END;
$function$;

COMMENT ON FUNCTION stockpool._maintain_step(text, integer, interval, timestamptz) IS
'Internal: one step of sweep or maintain (expire, settle, cool, top_up) under lock_timeout 50 ms in a '
'subtransaction; a step that waits is rolled back, counted (maintenance_yields_total) and returns 0.';
