-- stockpool.wait_events(): its shape (result columns, STABLE, SECURITY
-- DEFINER, owner-owned), that it never lists the caller's own backend (which
-- pg_stat_activity does show, active: the control), that it agrees with what
-- the superuser reads from pg_stat_activity in the same snapshot, and that
-- the monitor role may call it and the app and the worker may not. A session
-- waiting on another's lock cannot be made inside one transaction:
-- tests/python/test_wait_events.py shows a monitor-only role seeing one.
BEGIN;
-- Before anything reads pg_stat_activity: the backend status snapshot is
-- taken once per transaction, on first read.
SET LOCAL application_name = 'pgtap wait_events self';
SELECT plan(15);

SELECT has_function('stockpool', 'wait_events', ARRAY[]::name[], 'wait_events() exists');
SELECT is(pg_get_function_result('stockpool.wait_events()'::regprocedure),
    'TABLE(application_name text, wait_event text, backends integer)',
    'its result: (application_name text, wait_event text, backends integer)');
SELECT volatility_is('stockpool', 'wait_events', ARRAY[]::name[], 'stable', 'it is STABLE');
SELECT is_definer('stockpool', 'wait_events', ARRAY[]::name[], 'it is SECURITY DEFINER');
SELECT function_owner_is('stockpool', 'wait_events', ARRAY[]::name[], 'stockpool_owner',
    'stockpool_owner owns it');
SELECT ok(obj_description('stockpool.wait_events()'::regprocedure, 'pg_proc') ~ 'SQLSTATEs:',
    'its comment explains it and names its SQLSTATEs');

-- The caller's own backend: in pg_stat_activity, active, under its name ...
SELECT ok(EXISTS (SELECT FROM pg_catalog.pg_stat_activity
                  WHERE pid = pg_backend_pid() AND state = 'active'
                      AND application_name = 'pgtap wait_events self'),
    'control: pg_stat_activity shows this backend active under its application_name');
-- ... and not in wait_events().
SELECT is_empty(
    $$SELECT * FROM stockpool.wait_events() WHERE application_name = 'pgtap wait_events self'$$,
    'wait_events() leaves out the caller''s own backend');
-- The same snapshot as the superuser reads it, without this backend.
SELECT set_eq(
    $$SELECT application_name, wait_event, backends FROM stockpool.wait_events()$$,
    $$SELECT coalesce(a.application_name, '') AS application_name,
             coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') AS wait_event,
             count(*)::integer AS backends
      FROM pg_catalog.pg_stat_activity AS a
      WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
          AND a.backend_type = 'client backend' AND a.state = 'active'
      GROUP BY 1, 2$$,
    'every other active client backend of this database, by application and wait event');
SELECT is_empty($$SELECT * FROM stockpool.wait_events() WHERE backends < 1 OR wait_event IS NULL
                    OR application_name IS NULL$$,
    'no row without backends, event or application (a session without a name is '''')');

SET LOCAL ROLE stockpool_monitor;
SELECT lives_ok('SELECT * FROM stockpool.wait_events()', 'monitor: wait_events works');
SELECT is_empty(
    $$SELECT * FROM stockpool.wait_events() WHERE application_name = 'pgtap wait_events self'$$,
    'monitor: its own backend is left out too');
RESET ROLE;
SET LOCAL ROLE stockpool_app;
SELECT throws_ok('SELECT * FROM stockpool.wait_events()', '42501', NULL, 'app: wait_events: 42501');
RESET ROLE;
SET LOCAL ROLE stockpool_worker;
SELECT throws_ok('SELECT * FROM stockpool.wait_events()', '42501', NULL, 'worker: wait_events: 42501');
RESET ROLE;
CREATE ROLE stockpool_test_we_nobody NOLOGIN;
SET LOCAL ROLE stockpool_test_we_nobody;
SELECT throws_ok('SELECT * FROM stockpool.wait_events()', '42501', NULL, 'PUBLIC: wait_events: 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
