-- retyped.sql: functions whose return type changed.
-- Applied on every deploy, first in the transaction that re-applies the
-- functions: CREATE OR REPLACE cannot change a function's return type, so
-- the old function is dropped just before its file creates the new one, and
-- no caller ever sees it gone (callers are PL/pgSQL, whose plans name the
-- function by oid and are planned again when it changes). Only a function
-- that still has its old type is dropped, so a deploy that changes nothing
-- drops nothing (never with CASCADE: nothing may depend on it).

-- The tallies returned void until 2026-12; they return true, so that
-- reserve_units can return the call instead of running a PERFORM. Their
-- counts are PostgreSQL's statistics of each function (by oid): on that
-- upgrade stockpool.metrics()' counters start again from 0, which
-- Prometheus' rate() and increase() take as a counter reset.
DO $retyped$
DECLARE
    v_old regprocedure;
BEGIN
    FOR v_old IN
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'stockpool'::regnamespace
            AND p.proname IN ('_tally_reservation', '_tally_refusal', '_tally_claim', '_tally_release',
                              '_tally_expiry', '_tally_refill')
            AND p.pronargs = 0
            AND p.prorettype = 'pg_catalog.void'::pg_catalog.regtype
    LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', v_old);
    END LOOP;
END;
$retyped$;
