-- _tally_maintenance_yield: counts maintenance steps given up because they
-- waited (see _maintain_step), without a write.
-- The body is empty: the count is PostgreSQL's own, the calls of this
-- function in pg_stat_user_functions (kept when track_functions is 'pl' or
-- 'all'), which stockpool.metrics() reports as maintenance_yields_total.
-- Called by _maintain_step after the step's subtransaction has rolled back,
-- so the yield stands: a call is counted even when its transaction, or a
-- subtransaction around it, rolls back later (function statistics are not
-- transactional). PL/pgSQL and VOLATILE on purpose: a SQL function
-- would be inlined and go uncounted. Returns nothing; touches nothing.
CREATE OR REPLACE FUNCTION stockpool._tally_maintenance_yield()
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $function$
BEGIN
    NULL;
END;
$function$;

COMMENT ON FUNCTION stockpool._tally_maintenance_yield() IS
'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s maintenance_yields_total.';
