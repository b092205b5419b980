-- Least privilege, exhaustively: every statement a role could try against
-- stockpool's objects is generated from the catalog (SELECT, INSERT, UPDATE,
-- DELETE and TRUNCATE on every table, partition and view, nextval and SELECT
-- on every sequence, a call of every function, CREATE in the schema), run as
-- the role in a subtransaction that is always rolled back, and reported when
-- it is not refused with 42501. The app may call the public API, the monitor
-- check_invariants, metrics, hot_keys and wait_events and read stock_levels and unit_status, a role
-- nobody granted anything may do nothing. Negative controls: leaked grants that the finder must report.
BEGIN;
SELECT plan(14);

-- Every attempt: (label, statement).
CREATE FUNCTION pg_temp.attempts() RETURNS TABLE (label text, stmt text)
LANGUAGE sql AS $$
    SELECT format('%s %s', a.verb, c.oid::regclass),
           format(a.template, c.oid::regclass, (
               SELECT quote_ident(t.attname) FROM pg_catalog.pg_attribute AS t
               WHERE t.attrelid = c.oid AND t.attnum > 0 AND NOT t.attisdropped
               ORDER BY t.attnum LIMIT 1))
    FROM pg_catalog.pg_class AS c
    CROSS JOIN (VALUES ('select', 'SELECT * FROM %s LIMIT 1', '{r,p,v}'::text[]),
                       ('insert', 'INSERT INTO %s DEFAULT VALUES', '{r,p}'),
                       ('update', 'UPDATE %1$s SET %2$s = %2$s', '{r,p}'),
                       ('delete', 'DELETE FROM %s', '{r,p}'),
                       ('truncate', 'TRUNCATE %s', '{r,p}'),
                       ('nextval', 'SELECT pg_catalog.nextval(''%s'')', '{S}'),
                       ('select', 'SELECT * FROM %s', '{S}')) AS a (verb, template, kinds)
    WHERE c.relnamespace = 'stockpool'::regnamespace AND c.relkind::text = ANY (a.kinds)
    UNION ALL
    SELECT format('call %s', p.proname),
           format('SELECT stockpool.%I(%s)', p.proname,
                  (SELECT coalesce(string_agg(format('NULL::%s', format_type(t, NULL)), ', '), '')
                   FROM unnest(p.proargtypes::oid[]) AS t))
    FROM pg_catalog.pg_proc AS p
    WHERE p.pronamespace = 'stockpool'::regnamespace AND p.prorettype <> 'trigger'::regtype
    UNION ALL
    VALUES ('create table', 'CREATE TABLE stockpool.planted (x integer)'),
           ('create function', 'CREATE FUNCTION stockpool.now() RETURNS integer LANGUAGE sql AS ''SELECT 1''')
$$;

-- What ``p_role`` got through: every attempt not in p_allowed that was not
-- refused with 42501 ('succeeded' or its SQLSTATE), and EXECUTE on a trigger
-- function (which cannot be called, only checked).
CREATE FUNCTION pg_temp.leaks(p_role name, p_allowed text[]) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    v_attempt record;
    v_state text;
BEGIN
    FOR v_attempt IN SELECT * FROM pg_temp.attempts() ORDER BY 1 LOOP
        CONTINUE WHEN v_attempt.label = ANY (p_allowed);
        BEGIN
            EXECUTE format('SET LOCAL ROLE %I', p_role);
            EXECUTE v_attempt.stmt;
            RAISE EXCEPTION USING ERRCODE = 'SPT01';  -- it ran: undo it, report it
        EXCEPTION
            WHEN SQLSTATE 'SPT01' THEN v_state := 'succeeded';
            WHEN OTHERS THEN v_state := SQLSTATE;
        END;
        IF v_state <> '42501' THEN
            RETURN NEXT format('%s: %s', v_attempt.label, v_state);
        END IF;
    END LOOP;
    RETURN QUERY
        SELECT format('execute %s', p.oid::regprocedure)
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'stockpool'::regnamespace AND p.prorettype = 'trigger'::regtype
            AND pg_catalog.has_function_privilege(p_role, p.oid, 'EXECUTE');
END;
$$;

CREATE TEMPORARY TABLE api_calls AS
SELECT ARRAY(SELECT format('call %s', name) FROM unnest(ARRAY[
    'set_stock', 'adjust_stock', 'reserve_units', 'reserve_cart', 'claim', 'release', 'sweep',
    'replenish_pool', 'take_units', 'configure_pool', 'check_invariants', 'set_named_units',
    'retire_named_units', 'reserve_named', 'reserve_labels']) AS name) AS app,
    ARRAY['call check_invariants', 'call metrics', 'call hot_keys', 'call wait_events',
          'select stockpool.stock_levels', 'select stockpool.unit_status'] AS monitor,
    ARRAY['call maintain', 'call sweep'] AS worker;
CREATE ROLE stockpool_test_fresh NOLOGIN;

SELECT is(stockpool.set_stock(1, 1600, 1, 10), 10, 'key 1600 at 10');
SELECT ok(stockpool.reserve_units(1, 1600, 1, 2, '00000000-0000-0000-0000-000000001600'), 'a hold on it');
CREATE TEMPORARY TABLE before_attempts AS
SELECT (SELECT array_agg(s::text ORDER BY s::text) FROM stockpool.stock AS s) AS stock,
       (SELECT array_agg(h::text ORDER BY h::text) FROM stockpool.holds AS h) AS holds,
       (SELECT count(*) FROM stockpool.movements) AS movements;

SELECT cmp_ok((SELECT count(*)::integer FROM pg_temp.attempts()), '>', 60,
    'every object gives attempts (tables, partitions, the view, sequences, functions)');
SELECT is_empty($$SELECT * FROM pg_temp.leaks('stockpool_app', (SELECT app FROM api_calls))$$,
    'app: everything but the public API is refused with 42501');
SELECT is_empty($$SELECT * FROM pg_temp.leaks('stockpool_monitor', (SELECT monitor FROM api_calls))$$,
    'monitor: everything but check_invariants, metrics, hot_keys, wait_events, stock_levels and unit_status is refused with 42501');
SELECT is_empty($$SELECT * FROM pg_temp.leaks('stockpool_worker', (SELECT worker FROM api_calls))$$,
    'worker: everything but maintain and sweep is refused with 42501');
SELECT is_empty($$SELECT * FROM pg_temp.leaks('stockpool_test_fresh', '{}')$$,
    'a role nobody granted anything: everything is refused (PUBLIC has nothing)');
SELECT results_eq(
    $$SELECT (SELECT array_agg(s::text ORDER BY s::text) FROM stockpool.stock AS s),
             (SELECT array_agg(h::text ORDER BY h::text) FROM stockpool.holds AS h),
             (SELECT count(*) FROM stockpool.movements)$$,
    $$SELECT stock, holds, movements FROM before_attempts$$,
    'and the attempts changed nothing');
SELECT is_empty(
    $$SELECT m.roleid::regrole, m.member::regrole FROM pg_catalog.pg_auth_members AS m
      WHERE m.roleid::regrole::text IN ('stockpool_owner', 'stockpool_app', 'stockpool_monitor', 'stockpool_worker')
          AND m.member::regrole::text IN ('stockpool_owner', 'stockpool_app', 'stockpool_monitor', 'stockpool_worker')$$,
    'no stockpool role is a member of another');

-- Negative controls: a leaked grant is reported, by name.
GRANT SELECT ON stockpool.holds TO stockpool_app;
SELECT results_eq($$SELECT l COLLATE "default" FROM pg_temp.leaks('stockpool_app', (SELECT app FROM api_calls)) AS l$$,
    ARRAY['select stockpool.holds: succeeded']::text[], 'control: SELECT on holds leaked to the app is reported');
REVOKE SELECT ON stockpool.holds FROM stockpool_app;
GRANT EXECUTE ON FUNCTION stockpool._key_lock_id(bigint, bigint, bigint) TO stockpool_monitor;
SELECT results_eq($$SELECT l COLLATE "default" FROM pg_temp.leaks('stockpool_monitor', (SELECT monitor FROM api_calls)) AS l$$,
    ARRAY['call _key_lock_id: succeeded']::text[], 'control: a helper leaked to the monitor is reported');
REVOKE EXECUTE ON FUNCTION stockpool._key_lock_id(bigint, bigint, bigint) FROM stockpool_monitor;
GRANT USAGE ON SCHEMA stockpool TO PUBLIC;
GRANT EXECUTE ON FUNCTION stockpool._null_args(text[], boolean[]) TO PUBLIC;
SELECT results_eq($$SELECT l COLLATE "default" FROM pg_temp.leaks('stockpool_test_fresh', '{}') AS l$$,
    ARRAY['call _null_args: succeeded']::text[], 'control: the schema and a helper granted to PUBLIC are reported');
REVOKE EXECUTE ON FUNCTION stockpool._null_args(text[], boolean[]) FROM PUBLIC;
REVOKE USAGE ON SCHEMA stockpool FROM PUBLIC;
GRANT TRUNCATE ON stockpool.pool_units_p3 TO stockpool_app;
SELECT results_eq($$SELECT l COLLATE "default" FROM pg_temp.leaks('stockpool_app', (SELECT app FROM api_calls)) AS l$$,
    ARRAY['truncate stockpool.pool_units_p3: succeeded']::text[],
    'control: TRUNCATE on a pool partition leaked to the app is reported');
REVOKE TRUNCATE ON stockpool.pool_units_p3 FROM stockpool_app;
SELECT is_empty($$SELECT * FROM pg_temp.leaks('stockpool_app', (SELECT app FROM api_calls))$$,
    'and once revoked, nothing leaks again');

SELECT * FROM finish();
ROLLBACK;
