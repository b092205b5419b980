-- _tally_release: counts hold lines released, without a write.
-- The body is empty: the count is PostgreSQL's own, the calls of this
-- function in pg_stat_user_functions (kept when track_functions is 'pl' or
-- 'all'), which stockpool.metrics() reports as releases_total. No row is
-- written and no lock taken: the event's path pays one PL/pgSQL call.
-- Called by release once per line, after its last write.
-- A call is counted even when its transaction, or a subtransaction around
-- it, rolls back later (function statistics are not transactional): callers
-- call it only where the event stands. PL/pgSQL and VOLATILE on purpose: a
-- SQL function would be inlined and go uncounted. Returns nothing; touches
-- nothing.
CREATE OR REPLACE FUNCTION stockpool._tally_release()
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $function$
BEGIN
    NULL;
END;
$function$;

COMMENT ON FUNCTION stockpool._tally_release() IS
'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s releases_total.';
