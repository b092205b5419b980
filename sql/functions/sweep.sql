-- sweep: expire up to p_batch overdue holds in one short transaction and put
-- their units back (_expire_due), then settle the pending claims of up to
-- p_batch keys whose ledger row is free (_settle_due), and hand the pools of
-- up to p_batch keys that cooled down (not refilled for 60 seconds) back to
-- their ledger rows (_cool_quiet). stockpool.maintain does the same and more
-- within a time budget, and says what it did.
-- Returns the number of holds expired. Several sweepers can run at once: each
-- locks its batch FOR UPDATE SKIP LOCKED and ledger rows SKIP LOCKED, so they
-- take disjoint batches and never wait on each other or on a checkout being
-- claimed or released. Each step runs in _maintain_step: one that finds
-- itself waiting all the same (PostgreSQL's SKIP LOCKED race, or a table
-- lock) gives its work up after 50 ms instead of keeping a buyer waiting.
-- In a REPEATABLE READ or SERIALIZABLE transaction it only expires.
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
    v_holds integer;
BEGIN
    IF p_batch IS NULL THEN
        RAISE EXCEPTION 'stockpool.sweep: p_batch must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_batch <= 0 THEN
        RAISE EXCEPTION 'stockpool.sweep: p_batch must be positive, got %', p_batch
            USING ERRCODE = '22023';
    END IF;

    v_holds := stockpool._maintain_step('expire', p_batch, c_quiet);
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM stockpool._maintain_step('settle', p_batch, c_quiet);
        PERFORM stockpool._maintain_step('cool', p_batch, c_quiet);
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
