-- wait_events: what this database's active sessions are waiting on now, by
-- application: one row per (application_name, wait event) with the number
-- of backends; for `stockpool top`, which samples it several times a frame.
-- The event is 'wait_event_type:wait_event', or 'CPU' for an active session
-- waiting for nothing. Only client backends count (no autovacuum, parallel
-- or other background workers), and never the caller's own backend (its
-- sample would always show it running this query).
-- Sessions are read as the owner role, which the deployer makes a member of
-- pg_read_all_stats: PostgreSQL hides another role's state and wait event
-- from a role that is not, so a plain monitor role reading pg_stat_activity
-- itself sees no other role's waits. That is why this function exists.
-- Locks: none (a plain read of pg_stat_activity; STABLE, so it cannot
-- write). Returns (application_name, wait_event, backends), busiest first;
-- application_name '' for a session without one.
-- Raises nothing of its own. Touches no stockpool table.
CREATE OR REPLACE FUNCTION stockpool.wait_events()
RETURNS TABLE (
    application_name text,
    wait_event text,
    backends integer
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
    SELECT coalesce(a.application_name, '') AS application_name,
           coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') AS wait_event,
           pg_catalog.count(*)::integer AS backends
    FROM pg_catalog.pg_stat_activity AS a
    WHERE a.datid = (SELECT d.oid FROM pg_catalog.pg_database AS d WHERE d.datname = pg_catalog.current_database())
        AND a.pid <> pg_catalog.pg_backend_pid()
        AND a.backend_type = 'client backend'
        AND a.state = 'active'
    GROUP BY 1, 2
    ORDER BY backends DESC, application_name, wait_event;
$function$;

COMMENT ON FUNCTION stockpool.wait_events() IS
'This database''s active client sessions now, other than the caller''s, by (application_name, wait_event): '
'wait_event is wait_event_type:wait_event, or CPU when waiting for nothing; backends is how many. '
'Sees every role''s sessions (runs as the owner, a member of pg_read_all_stats). '
'Reads only, takes no lock. SQLSTATEs: none of its own.';
