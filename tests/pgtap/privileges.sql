-- Roles and grants as the deployer leaves them (src/stockpool/install/deploy.py):
-- stockpool_owner owns everything; stockpool_app may EXECUTE the public API
-- and touch no table; stockpool_monitor may read stock_levels and unit_status and run
-- check_invariants, metrics, hot_keys and wait_events; PUBLIC gets nothing.
-- The owner is a member of pg_read_all_stats (metrics() and wait_events()
-- read every session's state as the owner), the other roles of nothing. Then the same, shown by acting as
-- each role.
BEGIN;
SELECT plan(210);

-- The public API: name -> identity arguments (deploy.PUBLIC_FUNCTIONS).
CREATE TEMPORARY TABLE api (name name, args name[]);
INSERT INTO api VALUES
    ('set_stock', ARRAY['bigint', 'bigint', 'bigint', 'integer']),
    ('adjust_stock', ARRAY['bigint', 'bigint', 'bigint', 'integer']),
    ('reserve_units', ARRAY['bigint', 'bigint', 'bigint', 'integer', 'uuid', 'interval']),
    ('reserve_cart', ARRAY['bigint', 'uuid', 'bigint[]', 'bigint[]', 'integer[]', 'interval']),
    ('claim', ARRAY['bigint', 'uuid']),
    ('release', ARRAY['bigint', 'uuid']),
    ('sweep', ARRAY['integer']),
    ('maintain', ARRAY['interval', 'integer']),
    ('replenish_pool', ARRAY['bigint', 'bigint', 'bigint', 'integer']),
    ('take_units', ARRAY['bigint', 'bigint', 'bigint', 'integer']),
    ('configure_pool', ARRAY['bigint', 'bigint', 'bigint', 'integer', 'integer', 'integer']),
    ('check_invariants', ARRAY[]::name[]),
    ('metrics', ARRAY[]::name[]),
    ('hot_keys', ARRAY['integer']::name[]),
    ('wait_events', ARRAY[]::name[]),
    ('set_named_units', ARRAY['bigint', 'bigint', 'bigint', 'text[]', 'integer[]']),
    ('retire_named_units', ARRAY['bigint', 'bigint', 'bigint', 'text[]']),
    ('reserve_named', ARRAY['bigint', 'bigint', 'bigint', 'integer', 'uuid', 'interval', 'boolean']),
    ('reserve_labels', ARRAY['bigint', 'bigint', 'bigint', 'text[]', 'uuid', 'interval']);
GRANT SELECT ON api TO PUBLIC;
CREATE TEMPORARY TABLE monitor_api AS
SELECT unnest(ARRAY['check_invariants', 'metrics', 'hot_keys', 'wait_events']::name[]) AS name;
GRANT SELECT ON monitor_api TO PUBLIC;

-- Roles.
SELECT has_role(r, format('role %s exists', r))
FROM unnest(ARRAY['stockpool_owner', 'stockpool_app', 'stockpool_monitor', 'stockpool_worker']::name[]) AS r;
SELECT is_empty(
    $$SELECT rolname FROM pg_catalog.pg_roles
      WHERE rolname IN ('stockpool_owner', 'stockpool_app', 'stockpool_monitor', 'stockpool_worker')
          AND (rolcanlogin OR rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls)$$,
    'the four roles are NOLOGIN with no special attributes (members log in)');
SELECT set_eq(
    $$SELECT m.roleid::regrole::text COLLATE "default", m.member::regrole::text COLLATE "default"
      FROM pg_catalog.pg_auth_members AS m
      WHERE m.member::regrole::text IN ('stockpool_owner', 'stockpool_app', 'stockpool_monitor', 'stockpool_worker')$$,
    $$VALUES ('pg_read_all_stats', 'stockpool_owner')$$,
    'the owner is a member of pg_read_all_stats (for metrics()), and no stockpool role of anything else');

-- Ownership.
SELECT schema_owner_is('stockpool', 'stockpool_owner', 'the owner owns the schema');
SELECT table_owner_is('stockpool', t, 'stockpool_owner', format('the owner owns table %s', t))
FROM unnest(ARRAY['stock', 'pool_units', 'holds', 'movements', 'migrations']::name[]) AS t;
SELECT view_owner_is('stockpool', 'stock_levels', 'stockpool_owner', 'the owner owns view stock_levels');
SELECT is_empty(
    $$SELECT c.oid::regclass FROM pg_catalog.pg_class AS c
      WHERE c.relnamespace = 'stockpool'::regnamespace AND pg_get_userbyid(c.relowner) <> 'stockpool_owner'$$,
    'the owner owns every relation, partitions, indexes and sequences included');
SELECT function_owner_is('stockpool', a.name, a.args, 'stockpool_owner',
    format('the owner owns %s()', a.name))
FROM api AS a;
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc AS p
      WHERE p.pronamespace = 'stockpool'::regnamespace AND pg_get_userbyid(p.proowner) <> 'stockpool_owner'$$,
    'the owner owns every function, internal helpers included');

-- Schema.
SELECT schema_privs_are('stockpool', 'stockpool_app', ARRAY['USAGE'], 'app: USAGE on the schema, no CREATE');
SELECT schema_privs_are('stockpool', 'stockpool_monitor', ARRAY['USAGE'], 'monitor: USAGE on the schema, no CREATE');
SELECT schema_privs_are('stockpool', 'stockpool_worker', ARRAY['USAGE'], 'worker: USAGE on the schema, no CREATE');
SELECT schema_privs_are('stockpool', 'public', ARRAY[]::text[], 'PUBLIC: nothing on the schema');

-- Tables: nothing for anyone but the owner.
SELECT table_privs_are('stockpool', t, 'stockpool_app', ARRAY[]::text[], format('app: no privilege on %s', t))
FROM unnest(ARRAY['stock', 'pool_units', 'pool_units_p0', 'pool_units_p1', 'pool_units_p2', 'pool_units_p3',
                  'pool_units_p4', 'pool_units_p5', 'pool_units_p6', 'pool_units_p7',
                  'holds', 'movements', 'migrations', 'named_units', 'named_free']::name[]) AS t;
SELECT table_privs_are('stockpool', t, 'stockpool_monitor', ARRAY[]::text[], format('monitor: no privilege on %s', t))
FROM unnest(ARRAY['stock', 'pool_units', 'holds', 'movements', 'migrations', 'named_units', 'named_free']::name[]) AS t;
SELECT table_privs_are('stockpool', t, 'public', ARRAY[]::text[], format('PUBLIC: no privilege on %s', t))
FROM unnest(ARRAY['stock', 'pool_units', 'holds', 'movements', 'migrations', 'named_units', 'named_free']::name[]) AS t;
SELECT is_empty(
    $$SELECT a.attrelid::regclass, a.attname FROM pg_catalog.pg_attribute AS a
      JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid
      WHERE c.relnamespace = 'stockpool'::regnamespace AND a.attacl IS NOT NULL$$,
    'no column-level grants either');
SELECT sequence_privs_are('stockpool', s, r, ARRAY[]::text[], format('%s: no privilege on sequence %s', r, s))
FROM unnest(ARRAY['pool_units_unit_id_seq', 'movements_movement_id_seq']::name[]) AS s,
     unnest(ARRAY['stockpool_app', 'stockpool_monitor', 'public']::name[]) AS r;

-- The view: the monitor reads it, nobody else.
SELECT table_privs_are('stockpool', 'stock_levels', 'stockpool_monitor', ARRAY['SELECT'],
    'monitor: SELECT on stock_levels, nothing more');
SELECT table_privs_are('stockpool', 'stock_levels', 'stockpool_app', ARRAY[]::text[],
    'app: no privilege on stock_levels');
SELECT table_privs_are('stockpool', 'stock_levels', 'public', ARRAY[]::text[],
    'PUBLIC: no privilege on stock_levels');
SELECT table_privs_are('stockpool', 'unit_status', 'stockpool_monitor', ARRAY['SELECT'],
    'monitor: SELECT on unit_status, nothing more');
SELECT table_privs_are('stockpool', 'unit_status', 'stockpool_app', ARRAY[]::text[],
    'app: no privilege on unit_status');
SELECT table_privs_are('stockpool', 'unit_status', 'public', ARRAY[]::text[],
    'PUBLIC: no privilege on unit_status');

-- Functions.
SELECT function_privs_are('stockpool', a.name, a.args, 'stockpool_app',
    CASE WHEN a.name IN ('maintain', 'metrics', 'hot_keys', 'wait_events') THEN ARRAY[]::text[] ELSE ARRAY['EXECUTE'] END,
    format('app: %s on %s()',
           CASE WHEN a.name IN ('maintain', 'metrics', 'hot_keys', 'wait_events') THEN 'nothing' ELSE 'EXECUTE' END, a.name))
FROM api AS a;
SELECT function_privs_are('stockpool', a.name, a.args, 'stockpool_monitor',
    CASE WHEN a.name IN (SELECT name FROM monitor_api) THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END,
    format('monitor: %s on %s()',
           CASE WHEN a.name IN (SELECT name FROM monitor_api) THEN 'EXECUTE' ELSE 'nothing' END, a.name))
FROM api AS a;
SELECT function_privs_are('stockpool', a.name, a.args, 'stockpool_worker',
    CASE WHEN a.name IN ('maintain', 'sweep') THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END,
    format('worker: %s on %s()', CASE WHEN a.name IN ('maintain', 'sweep') THEN 'EXECUTE' ELSE 'nothing' END, a.name))
FROM api AS a;
SELECT function_privs_are('stockpool', a.name, a.args, 'public', ARRAY[]::text[],
    format('PUBLIC: nothing on %s()', a.name))
FROM api AS a;
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc AS p
      WHERE p.pronamespace = 'stockpool'::regnamespace
          AND p.proname NOT IN (SELECT name FROM api)
          AND (has_function_privilege('stockpool_app', p.oid, 'EXECUTE')
               OR has_function_privilege('stockpool_monitor', p.oid, 'EXECUTE')
               OR has_function_privilege('stockpool_worker', p.oid, 'EXECUTE'))$$,
    'no internal helper is executable by app, monitor or worker');
-- A NULL ACL means the built-in default, which for functions is EXECUTE to PUBLIC.
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc AS p
      WHERE p.pronamespace = 'stockpool'::regnamespace
          AND EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS x
                      WHERE x.grantee = 0)$$,
    'no function grants anything to PUBLIC, explicitly or by default ACL');
SELECT is_empty(
    $$SELECT c.oid::regclass FROM pg_catalog.pg_class AS c
      WHERE c.relnamespace = 'stockpool'::regnamespace
          AND EXISTS (SELECT FROM aclexplode(coalesce(c.relacl,
                          acldefault(CASE c.relkind WHEN 'S' THEN 's'::"char" ELSE 'r'::"char" END, c.relowner))) AS x
                      WHERE x.grantee = 0)$$,
    'no relation grants anything to PUBLIC');
SELECT is_empty(
    $$SELECT n.nspname FROM pg_catalog.pg_namespace AS n
      WHERE n.nspname = 'stockpool'
          AND EXISTS (SELECT FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) AS x
                      WHERE x.grantee = 0)$$,
    'the schema grants nothing to PUBLIC');
SELECT set_eq(
    $$SELECT DISTINCT pg_get_userbyid(x.grantee)::text COLLATE "default"
      FROM pg_catalog.pg_proc AS p, aclexplode(p.proacl) AS x
      WHERE p.pronamespace = 'stockpool'::regnamespace$$,
    ARRAY['stockpool_owner', 'stockpool_app', 'stockpool_monitor', 'stockpool_worker'],
    'functions are granted to the four stockpool roles only');

-- Acting as the app: the API works, the tables do not.
SELECT is(stockpool.set_stock(1, 1400, 1, 5), 5, 'key 1400 at 5 (as superuser)');
SET LOCAL ROLE stockpool_app;
SELECT is(current_user::text, 'stockpool_app', 'now acting as stockpool_app');
SELECT ok(stockpool.reserve_units(1, 1400, 1, 2, '00000000-0000-0000-0000-000000000901'),
    'app: reserve_units works');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000902', '{1400}', '{1}', '{1}'),
    'app: reserve_cart works');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000901'), 2, 'app: claim works');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000902'), 1, 'app: release works');
SELECT is(stockpool.adjust_stock(1, 1400, 1, 1), 4, 'app: adjust_stock works');
SELECT lives_ok('SELECT stockpool.sweep(), stockpool.replenish_pool(1, 1400, 1), stockpool.take_units(1, 1400, 1, 1),
                        stockpool.configure_pool(1, 1400, 1, 10), stockpool.set_stock(1, 1401, 1, 1)',
    'app: sweep, replenish_pool, take_units, configure_pool, set_stock work');
SELECT lives_ok('SELECT count(*) FROM stockpool.check_invariants()', 'app: check_invariants works');
SELECT results_eq(
    $$SELECT stockpool.set_named_units(1, 1402, 1, '{A,B,C}'),
             stockpool.reserve_labels(1, 1402, 1, '{C}', '00000000-0000-0000-0000-000000000907'),
             stockpool.reserve_named(1, 1402, 1, 2, '00000000-0000-0000-0000-000000000906', p_adjacent => true),
             stockpool.release(1, '00000000-0000-0000-0000-000000000906'),
             stockpool.release(1, '00000000-0000-0000-0000-000000000907'),
             stockpool.retire_named_units(1, 1402, 1, '{B}')$$,
    $$VALUES (3, true, '{A,B}'::text[], 2, 1, 2)$$,
    'app: set_named_units, reserve_named, reserve_labels, retire_named_units work');
SELECT throws_ok('SELECT FROM stockpool.unit_status', '42501', NULL, 'app: SELECT FROM unit_status: 42501');
SELECT throws_ok('SELECT FROM stockpool.named_free', '42501', NULL, 'app: SELECT FROM named_free: 42501');
SELECT throws_ok('SELECT FROM stockpool.stock', '42501', NULL, 'app: SELECT FROM stock: 42501');
SELECT throws_ok('SELECT FROM stockpool.holds', '42501', NULL, 'app: SELECT FROM holds: 42501');
SELECT throws_ok('SELECT FROM stockpool.pool_units_p0', '42501', NULL, 'app: SELECT FROM a pool partition: 42501');
SELECT throws_ok('INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket) VALUES (1, 1400, 1, 0)',
    '42501', NULL, 'app: INSERT INTO pool_units: 42501');
SELECT throws_ok('UPDATE stockpool.stock SET on_hand = 1000', '42501', NULL, 'app: UPDATE stock: 42501');
SELECT throws_ok('DELETE FROM stockpool.holds', '42501', NULL, 'app: DELETE FROM holds: 42501');
SELECT throws_ok($$INSERT INTO stockpool.movements (shop_id, item_id, location_id, delta, on_hand_after, reason)
                   VALUES (1, 1400, 1, 1, 6, 'adjust')$$,
    '42501', NULL, 'app: INSERT INTO movements: 42501');
SELECT throws_ok('SELECT FROM stockpool.stock_levels', '42501', NULL, 'app: SELECT FROM stock_levels: 42501');
SELECT throws_ok('SELECT stockpool._take(1, 1400, 1, 1, 64)', '42501', NULL, 'app: an internal helper: 42501');
SELECT throws_ok('SELECT stockpool._apply_on_hand(1, 1400, 1, 100, false)', '42501', NULL,
    'app: the on-hand helper behind set_stock: 42501');
SELECT throws_ok('SELECT stockpool.metrics()', '42501', NULL, 'app: metrics: 42501');
SELECT throws_ok('SELECT stockpool.hot_keys()', '42501', NULL, 'app: hot_keys: 42501');
SELECT throws_ok('SELECT stockpool.wait_events()', '42501', NULL, 'app: wait_events: 42501');
SELECT throws_ok('SELECT stockpool._tally_reservation()', '42501', NULL, 'app: a tally: 42501');
SELECT throws_ok('SELECT nextval(''stockpool.movements_movement_id_seq'')', '42501', NULL,
    'app: a sequence: 42501');
SELECT throws_ok('CREATE TABLE stockpool.mine (x integer)', '42501', NULL, 'app: CREATE in the schema: 42501');
RESET ROLE;

-- Acting as the monitor: the view and the checker, nothing else.
SET LOCAL ROLE stockpool_monitor;
SELECT results_eq(
    $$SELECT on_hand, held FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1400, 1)$$,
    $$VALUES (4, 0)$$, 'monitor: reads stock_levels');
SELECT is_empty('SELECT * FROM stockpool.check_invariants() WHERE item_id <> 1400',
    'monitor: runs check_invariants');
SELECT results_eq(
    $$SELECT label, status FROM stockpool.unit_status WHERE (shop_id, item_id, location_id) = (1, 1402, 1) ORDER BY 1$$,
    $$VALUES ('A', 'free'), ('C', 'free')$$, 'monitor: reads unit_status');
SELECT is((SELECT value FROM stockpool.metrics() WHERE metric = 'stock_keys'), 3::double precision,
    'monitor: runs metrics');
SELECT results_eq('SELECT item_id FROM stockpool.hot_keys()', ARRAY[1400]::bigint[], 'monitor: runs hot_keys');
SELECT lives_ok('SELECT count(*) FROM stockpool.wait_events()', 'monitor: runs wait_events');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 1400, 1, 1, '00000000-0000-0000-0000-000000000903')$$,
    '42501', NULL, 'monitor: reserve_units: 42501');
SELECT throws_ok('SELECT stockpool.sweep()', '42501', NULL, 'monitor: sweep: 42501');
SELECT throws_ok('SELECT FROM stockpool.stock', '42501', NULL, 'monitor: SELECT FROM stock: 42501');
SELECT throws_ok('SELECT FROM stockpool.pool_units', '42501', NULL, 'monitor: SELECT FROM pool_units: 42501');
RESET ROLE;

-- Acting as the worker: maintenance, nothing else.
SET LOCAL ROLE stockpool_worker;
SELECT lives_ok('SELECT * FROM stockpool.maintain()', 'worker: maintain works');
SELECT lives_ok('SELECT stockpool.sweep()', 'worker: sweep works');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 1400, 1, 1, '00000000-0000-0000-0000-000000000905')$$,
    '42501', NULL, 'worker: reserve_units: 42501');
SELECT throws_ok('SELECT FROM stockpool.stock_levels', '42501', NULL, 'worker: stock_levels: 42501');
SELECT throws_ok('SELECT stockpool.metrics()', '42501', NULL, 'worker: metrics: 42501');
SELECT throws_ok('SELECT stockpool.wait_events()', '42501', NULL, 'worker: wait_events: 42501');
RESET ROLE;

-- A role with only what PUBLIC has can do nothing at all.
CREATE ROLE stockpool_test_nobody NOLOGIN;
SET LOCAL ROLE stockpool_test_nobody;
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 1400, 1, 1, '00000000-0000-0000-0000-000000000904')$$,
    '42501', NULL, 'PUBLIC: reserve_units: 42501');
SELECT throws_ok('SELECT stockpool.check_invariants()', '42501', NULL, 'PUBLIC: check_invariants: 42501');
SELECT throws_ok('SELECT FROM stockpool.stock_levels', '42501', NULL, 'PUBLIC: stock_levels: 42501');
SELECT throws_ok('SELECT FROM stockpool.unit_status', '42501', NULL, 'PUBLIC: unit_status: 42501');
RESET ROLE;

SELECT results_eq(
    $$SELECT on_hand, pooled, held FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1400, 1)$$,
    $$VALUES (4, 3, 0)$$, 'only the calls that were allowed changed anything');

SELECT * FROM finish();
ROLLBACK;
