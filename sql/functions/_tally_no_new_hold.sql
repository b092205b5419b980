-- _tally_no_new_hold: counts reserve_units calls that returned without a new
-- hold (a refusal, or a retry that found its hold), without a write.
-- The body is empty: the count is PostgreSQL's own (pg_stat_user_functions,
-- kept when track_functions is 'pl' or 'all'). stockpool.metrics() takes
-- reservations_total as reserve_units' calls minus these, plus the calls of
-- _tally_reservation (the other reserving functions' new holds): a
-- reservation on the counter's path then costs no call of its own. A
-- function's call is counted when it returns, so a reserve_units call that
-- raises is in neither count, and this is called just before reserve_units
-- returns: the difference never goes down.
-- Counted even when the transaction rolls back later (function statistics
-- are not transactional), like reserve_units' own call. PL/pgSQL and
-- VOLATILE on purpose: a SQL function would be inlined and go uncounted.
-- Returns nothing; touches nothing.
CREATE OR REPLACE FUNCTION stockpool._tally_no_new_hold()
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $function$
BEGIN
    NULL;
END;
$function$;

COMMENT ON FUNCTION stockpool._tally_no_new_hold() IS
'Internal: does nothing; its calls in pg_stat_user_functions are subtracted from reserve_units'' calls for '
'stockpool.metrics()''s reservations_total.';
