-- maintain: one maintenance cycle, in one call and one transaction, within
-- about p_budget: expire overdue holds in batches of p_batch (until none is
-- due or the budget is spent), then fold the pending claims of up to p_batch
-- keys, hand the pools of keys quiet for 60 seconds back to their ledger
-- rows, and top up the pools of up to p_batch other keys at or below their
-- low-water mark (only those are locked, and only by trying). Returns one row: what it did (holds expired, claimed units folded,
-- units added to pools, units handed back).
-- For a scheduler: `stockpool worker` calls it every second, pg_cron at most
-- once a minute (docs/operations.md). Several maintainers at once collide on
-- nothing: every lock is taken SKIP LOCKED or tried (_expire_due,
-- _settle_due, _top_up_low, _cool_quiet), so they take disjoint work and
-- never wait, on each other or on buyers; each step runs in _maintain_step,
-- so one that waits all the same (PostgreSQL's SKIP LOCKED race, or a table
-- lock) gives its work up after 50 ms. The budget is checked between
-- batches; one batch is not interrupted. In a REPEATABLE READ or
-- SERIALIZABLE transaction it only expires (as sweep does).
-- Raises 22004 (NULL argument), 22023 (p_budget or p_batch not positive).
-- Touches holds, pool_units, pending_claims, stock, movements.
CREATE OR REPLACE FUNCTION stockpool.maintain(
    p_budget interval DEFAULT '250 milliseconds',
    p_batch integer DEFAULT 500
)
RETURNS TABLE (expired integer, settled integer, refilled integer, cooled integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    -- A pool not refilled for this long goes back to its ledger row.
    c_quiet constant interval := '60 seconds';
    v_until timestamptz := pg_catalog.clock_timestamp() + p_budget;
BEGIN
    IF p_budget IS NULL OR p_batch IS NULL THEN
        RAISE EXCEPTION 'stockpool.maintain: % must not be NULL',
            stockpool._null_args(ARRAY['p_budget', 'p_batch'], ARRAY[p_budget IS NULL, p_batch IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_budget <= interval '0' OR p_batch <= 0 THEN
        RAISE EXCEPTION 'stockpool.maintain: p_budget and p_batch must be positive, got % and %',
            p_budget, p_batch
            USING ERRCODE = '22023';
    END IF;

    expired := 0;
    settled := 0;
    refilled := 0;
    cooled := 0;
    expired := stockpool._maintain_step('expire', p_batch, c_quiet, v_until);
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        settled := stockpool._maintain_step('settle', p_batch, c_quiet);
        cooled := stockpool._maintain_step('cool', p_batch, c_quiet);
        IF pg_catalog.clock_timestamp() < v_until THEN
            refilled := stockpool._maintain_step('top_up', p_batch, c_quiet);
        END IF;
    END IF;
    RETURN NEXT;
END;
$function$;

COMMENT ON FUNCTION stockpool.maintain(interval, integer) IS
'One maintenance cycle within about p_budget: expire overdue holds in batches, fold pending claims, '
'top up pools at their low-water mark, hand quiet pools back. Returns (expired, settled, refilled, cooled). '
'Never waits; concurrent maintainers take disjoint work. SQLSTATEs: 22004 NULL argument, 22023 not positive.';
