-- stockpool.metrics(): every documented row with its kind and labels; after
-- a scripted sequence (stock set, reservations with retries and refusals, a
-- cart, claims, releases, an overdue hold, a sweep, a refill) the counters
-- have moved by exactly the events made and no more (retries, and a refill
-- that a refusal rolled back, are not counted); the gauges show the state
-- left behind. Negative controls: an allocation broken by hand, a pooled key
-- left dry, a pending claim and an overdue hold each show up; counting
-- switched off stops the counters and says so; the owner role without
-- pg_read_all_stats no longer sees this session's state. The monitor role
-- may call metrics(), the app and the worker may not.
-- Counters are function call counts: this transaction turns track_functions
-- on, and metrics() adds the calls not flushed yet, so they are exact here.
BEGIN;
SELECT plan(70);
SET LOCAL application_name = 'stockpool-pgtap-metrics';
SET LOCAL track_functions = 'pl';

-- A figure without labels.
CREATE FUNCTION pg_temp.m(p_metric text) RETURNS double precision
LANGUAGE sql AS $$
    SELECT m.value FROM stockpool.metrics() AS m
    WHERE m.metric = p_metric AND m.relation = '' AND m.application_name = '' AND m.state = ''
$$;
-- How far each label-less figure moved since the snapshot in baseline.
CREATE TEMPORARY TABLE baseline AS
SELECT m.metric, m.value FROM stockpool.metrics() AS m
WHERE m.relation = '' AND m.application_name = '' AND m.state = '';
GRANT SELECT ON baseline TO PUBLIC;
CREATE FUNCTION pg_temp.moved(p_metric text) RETURNS double precision
LANGUAGE sql AS $$
    SELECT pg_temp.m(p_metric) - b.value FROM baseline AS b WHERE b.metric = p_metric
$$;

-- The documented rows: every name, its kind, its labels.
SELECT set_eq(
    $$SELECT DISTINCT metric, kind FROM stockpool.metrics()$$,
    $$VALUES ('stock_keys', 'gauge'), ('stock_on_hand_units', 'gauge'), ('stock_pooled_units', 'gauge'),
             ('stock_held_units', 'gauge'), ('stock_unsettled_units', 'gauge'), ('pools_active', 'gauge'),
             ('pools_dry_with_free_stock', 'gauge'), ('holds_live', 'gauge'), ('holds_overdue', 'gauge'),
             ('holds_oldest_overdue_seconds', 'gauge'), ('pending_claims', 'gauge'),
             ('pending_claims_oldest_seconds', 'gauge'), ('invariant_violations', 'gauge'),
             ('reservations_total', 'counter'), ('refusals_total', 'counter'), ('claims_total', 'counter'),
             ('releases_total', 'counter'), ('expiries_total', 'counter'), ('refills_total', 'counter'),
             ('maintenance_yields_total', 'counter'),
             ('track_functions_enabled', 'gauge'), ('pool_dead_ratio', 'gauge'),
             ('pool_last_vacuum_seconds', 'gauge'), ('table_xid_age', 'gauge'), ('sessions', 'gauge'),
             ('longest_transaction_seconds', 'gauge'), ('longest_idle_in_transaction_seconds', 'gauge')$$,
    'every documented metric, with its kind, and no other');
SELECT is_empty(
    $$SELECT metric FROM stockpool.metrics()
      WHERE metric NOT IN ('pool_dead_ratio', 'pool_last_vacuum_seconds', 'table_xid_age', 'sessions',
                           'longest_transaction_seconds', 'longest_idle_in_transaction_seconds')
      GROUP BY metric
      HAVING count(*) <> 1 OR bool_or(relation <> '' OR application_name <> '' OR state <> '')$$,
    'a figure without labels is one row with every label empty');
SELECT is_empty(
    $$SELECT * FROM stockpool.metrics()
      WHERE metric IS NULL OR kind IS NULL OR relation IS NULL OR application_name IS NULL OR state IS NULL
          OR value IS NULL OR value = 'NaN'::double precision$$,
    'no NULL or NaN anywhere');
SELECT set_eq(
    $$SELECT relation FROM stockpool.metrics() WHERE metric = 'pool_dead_ratio'$$,
    $$SELECT format('pool_units_p%s', r) FROM generate_series(0, 7) AS r$$,
    'pool_dead_ratio: one row per pool leaf, labelled with its name');
SELECT set_eq(
    $$SELECT relation FROM stockpool.metrics() WHERE metric = 'pool_last_vacuum_seconds'$$,
    $$SELECT format('pool_units_p%s', r) FROM generate_series(0, 7) AS r$$,
    'pool_last_vacuum_seconds: one row per pool leaf');
SELECT is_empty(
    $$SELECT * FROM stockpool.metrics()
      WHERE (metric = 'pool_dead_ratio' AND NOT value BETWEEN 0 AND 1)
          OR (metric = 'pool_last_vacuum_seconds' AND value < 0 AND value <> -1)
          OR (metric = 'table_xid_age' AND value < 0)$$,
    'dead ratios within 0..1, vacuum ages -1 (never) or positive, xid ages not negative');
SELECT set_eq(
    $$SELECT relation FROM stockpool.metrics() WHERE metric = 'table_xid_age'$$,
    $$SELECT relname::text FROM pg_catalog.pg_class
      WHERE relnamespace = 'stockpool'::regnamespace AND relkind = 'r'$$,
    'table_xid_age: one row per stockpool table and pool leaf');
SELECT is(
    (SELECT value FROM stockpool.metrics()
     WHERE metric = 'sessions' AND application_name = 'stockpool-pgtap-metrics' AND state = 'active'),
    1::double precision, 'sessions: this session, by its application_name and state');
SELECT cmp_ok(
    (SELECT value FROM stockpool.metrics()
     WHERE metric = 'longest_transaction_seconds' AND application_name = 'stockpool-pgtap-metrics'),
    '>', 0::double precision, 'longest_transaction_seconds: this transaction, open for a while already');
SELECT is(
    (SELECT value FROM stockpool.metrics()
     WHERE metric = 'longest_idle_in_transaction_seconds' AND application_name = 'stockpool-pgtap-metrics'),
    0::double precision, 'longest_idle_in_transaction_seconds: 0, this session is never idle in it here');
SELECT is_empty(
    $$SELECT * FROM stockpool.metrics() AS m
      WHERE m.metric IN ('longest_transaction_seconds', 'longest_idle_in_transaction_seconds')
          AND (m.relation <> '' OR m.state <> '' OR m.application_name NOT IN (
                   SELECT s.application_name FROM stockpool.metrics() AS s WHERE s.metric = 'sessions'))$$,
    'transaction times: one row per application_name that has sessions, labelled by it alone');
SELECT is(pg_temp.m('track_functions_enabled'), 1::double precision, 'track_functions_enabled: 1 with pl');

-- The scripted sequence.
SELECT is(stockpool.set_stock(1, 1300, 1, 10), 10, 'key 1300 at 10');
SELECT is(stockpool.set_stock(1, 1301, 1, 5), 5, 'key 1301 at 5');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 2, '00000000-0000-0000-0000-000000013001'),
    'A: 2 of key 1300 held (1 reservation)');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 2, '00000000-0000-0000-0000-000000013001'),
    'A again: a retry, no new hold');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 1300, 1, 3, '00000000-0000-0000-0000-000000013001')$$,
    'SP007', NULL, 'A with another quantity raises: no new hold');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 1399, 1, 1, '00000000-0000-0000-0000-000000013009')$$,
    'SP001', NULL, 'an unknown key raises: no new hold (reserve_units'' calls count only when it returns)');
SELECT ok(NOT stockpool.reserve_units(1, 1300, 1, 20, '00000000-0000-0000-0000-000000013002'),
    'B: 20 of 10 refused (1 refusal)');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000013003', '{1301,1300}', '{1,1}', '{1,3}'),
    'C: a cart of two lines held (2 reservations)');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000013003', '{1301,1300}', '{1,1}', '{1,3}'),
    'C again: a retry, nothing new');
SELECT ok(NOT stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000013004', '{1301}', '{1}', '{9}'),
    'D: a cart asking 9 of 5 refused (1 refusal)');
SELECT ok(NOT stockpool.reserve_units(1, 1301, 1, 5, '00000000-0000-0000-0000-000000013005'),
    'E: 5 of the 4 free refused (1 refusal), after refills that the refusal rolled back');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000013001'), 2, 'A claimed (1 line)');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000013001'), 2, 'A claimed again: a retry');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000013003'), 4, 'C released (2 lines)');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000013003'), 4, 'C released again: a retry');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 1, '00000000-0000-0000-0000-000000013006'),
    'F: 1 of key 1300 held (1 reservation)');
UPDATE stockpool.holds SET expires_at = now() - interval '30 seconds'
WHERE checkout_id = '00000000-0000-0000-0000-000000013006';
SELECT is(pg_temp.moved('holds_overdue'), 1::double precision, 'F made overdue: holds_overdue moved by 1');
SELECT cmp_ok(pg_temp.m('holds_oldest_overdue_seconds'), '>=', 30::double precision,
    'and the oldest overdue hold is 30 s past its expiry');
SELECT is(pg_temp.moved('holds_live'), 0::double precision, 'holds_live: not F any more');
SELECT is(stockpool.sweep(), 1, 'a sweep expires F (1 expiry)');
SELECT is(stockpool.replenish_pool(1, 1301, 1, 3), 3, 'key 1301: 3 units pooled (1 refill)');

SELECT results_eq(
    $$SELECT metric, pg_temp.moved(metric) FROM (VALUES ('reservations_total', 1), ('refusals_total', 2),
          ('claims_total', 3), ('releases_total', 4), ('expiries_total', 5), ('refills_total', 6)) AS c (metric, n)
      ORDER BY n$$,
    $$VALUES ('reservations_total', 4::double precision), ('refusals_total', 3::double precision),
             ('claims_total', 1::double precision), ('releases_total', 2::double precision),
             ('expiries_total', 1::double precision), ('refills_total', 1::double precision)$$,
    'every counter moved by exactly the events made: no retry, and no rolled-back refill, counted');
SELECT is(
    pg_temp.moved('reservations_total') - pg_temp.moved('claims_total') - pg_temp.moved('releases_total')
        - pg_temp.moved('expiries_total'),
    pg_temp.moved('holds_live') + pg_temp.moved('holds_overdue'),
    'reservations - claims - releases - expiries = the change in holds held');
SELECT results_eq(
    $$SELECT metric, pg_temp.moved(metric) FROM (VALUES ('stock_keys', 1), ('stock_on_hand_units', 2),
          ('stock_pooled_units', 3), ('stock_held_units', 4), ('stock_unsettled_units', 5),
          ('pools_active', 6), ('pools_dry_with_free_stock', 7), ('holds_overdue', 8),
          ('pending_claims', 9), ('invariant_violations', 10)) AS c (metric, n)
      ORDER BY n$$,
    $$VALUES ('stock_keys', 2::double precision), ('stock_on_hand_units', 13::double precision),
             ('stock_pooled_units', 3::double precision), ('stock_held_units', 0::double precision),
             ('stock_unsettled_units', 0::double precision), ('pools_active', 1::double precision),
             ('pools_dry_with_free_stock', 0::double precision), ('holds_overdue', 0::double precision),
             ('pending_claims', 0::double precision), ('invariant_violations', 0::double precision)$$,
    'the gauges: two keys, 15 - 2 claimed on hand, 3 pooled, nothing held, one pool, no violation');
SELECT is(pg_temp.m('holds_oldest_overdue_seconds'), 0::double precision, 'no overdue hold left: 0');

-- Every other place an event is counted.
CREATE TEMPORARY TABLE before_more AS
SELECT c.metric, pg_temp.m(c.metric) AS value
FROM unnest(ARRAY['reservations_total', 'refusals_total', 'expiries_total', 'refills_total']) AS c (metric);
GRANT SELECT ON before_more TO PUBLIC;
CREATE FUNCTION pg_temp.since(p_metric text) RETURNS double precision
LANGUAGE sql AS $$
    SELECT pg_temp.m(p_metric) - b.value FROM before_more AS b WHERE b.metric = p_metric
$$;
SELECT is(stockpool.set_stock(1, 1303, 1, 2), 2, 'key 1303 at 2');
SELECT ok(stockpool.reserve_units(1, 1303, 1, 2, '00000000-0000-0000-0000-000000013031'),
    'G holds both (1 reservation)');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE checkout_id = '00000000-0000-0000-0000-000000013031';
SELECT ok(stockpool.reserve_units(1, 1303, 1, 2, '00000000-0000-0000-0000-000000013032'),
    'H gets them: near sellout the reservation expires G itself (1 expiry, 1 reservation)');
SELECT is(stockpool.set_stock(1, 1307, 1, 3), 3, 'key 1307 at 3');
SELECT ok(stockpool.reserve_units(1, 1307, 1, 1, '00000000-0000-0000-0000-000000013071')
          AND stockpool.reserve_units(1, 1307, 1, 2, '00000000-0000-0000-0000-000000013072'),
    'J holds 1, K holds 2 (2 reservations)');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE checkout_id = '00000000-0000-0000-0000-000000013071';
SELECT ok(NOT stockpool.reserve_units(1, 1307, 1, 2, '00000000-0000-0000-0000-000000013073'),
    'L: 2 refused (1 refusal): expiring J frees 1, not 2, and the refusal rolls that expiry back (none)');
SELECT is((SELECT status FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000013071'), 'held',
    'J is still held, overdue, for a sweep');
SELECT is(stockpool.set_stock(1, 1304, 1, 3), 3, 'key 1304 at 3');
SELECT ok(stockpool.reserve_units(1, 1304, 1, 3, '00000000-0000-0000-0000-000000013041'),
    'I holds all three (1 reservation)');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE checkout_id = '00000000-0000-0000-0000-000000013041';
SELECT is(stockpool.set_stock(1, 1304, 1, 1), 1, 'a cycle count finds 1: it expires I (1 expiry)');
SELECT is(stockpool.set_stock(1, 1305, 1, 100), 100, 'key 1305 at 100');
SELECT is(stockpool.replenish_pool(1, 1305, 1, 16), 16, 'a pool of 16 (1 refill), mark 12');
-- The session's note of pooled keys is cleared before each call: the careful
-- path looks at the low water after every take of a pool this small, the
-- pool's path in one call out of 8.
SELECT ok(bool_and(r.held),
    'four one-unit reservations (4 reservations): the fourth finds 12 left and refills (1 refill)')
FROM (
    SELECT pg_catalog.set_config('stockpool.pooled_keys', '', true) AS cleared,
           stockpool.reserve_units(1, 1305, 1, 1, format('00000000-0000-0000-0000-0000000130%s', n)::uuid) AS held
    FROM generate_series(51, 54) AS n
    ORDER BY n
) AS r;
SELECT is(stockpool.set_stock(1, 1306, 1, 100), 100, 'key 1306 at 100');
SELECT is(stockpool.replenish_pool(1, 1306, 1, 16), 16, 'a pool of 16 (1 refill)');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000013061', '{1306}', '{1}', '{5}'),
    'a cart takes 5 of them (1 reservation) and leaves 11, below the mark, without a look');
SELECT results_eq($$SELECT expired, refilled FROM stockpool.maintain('1 hour')$$, $$VALUES (1, 7)$$,
    'a maintenance cycle expires J (1 expiry), tops this pool up by 5 and key 1301''s pool of 3 by the 2 it '
    'has free (2 refills)');
SELECT results_eq(
    $$SELECT metric, pg_temp.since(metric) FROM (VALUES ('reservations_total', 1), ('refusals_total', 2),
          ('expiries_total', 3), ('refills_total', 4)) AS c (metric, n)
      ORDER BY n$$,
    $$VALUES ('reservations_total', 10::double precision), ('refusals_total', 1::double precision),
             ('expiries_total', 3::double precision), ('refills_total', 5::double precision)$$,
    'each of these places counted its events once');

-- Negative controls.
SAVEPOINT control;
UPDATE stockpool.stock SET allocated = allocated + 1 WHERE (shop_id, item_id, location_id) = (1, 1300, 1);
SELECT is(pg_temp.m('invariant_violations'), 1::double precision,
    'control: an allocation broken by hand is 1 invariant violation');
ROLLBACK TO SAVEPOINT control;
SELECT is(pg_temp.m('invariant_violations'), 0::double precision, 'and 0 again once undone');
SELECT is(stockpool.set_stock(1, 1302, 1, 7), 7, 'key 1302 at 7, served from its ledger row');
UPDATE stockpool.stock SET pool_target = 16 WHERE (shop_id, item_id, location_id) = (1, 1302, 1);
SELECT is(pg_temp.m('pools_dry_with_free_stock'), 1::double precision,
    'control: key 1302 marked pooled with an empty pool and 7 free: one dry pool');
SELECT is(pg_temp.moved('pools_active'), 4::double precision,
    'and it counts as a pool (with 1301, 1305 and 1306)');
INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity, claimed_at)
VALUES (1, 1302, 1, '00000000-0000-0000-0000-000000013007', 2, clock_timestamp() - interval '90 seconds');
SELECT results_eq(
    $$SELECT pg_temp.moved('pending_claims'), pg_temp.m('pending_claims_oldest_seconds') >= 90,
             pg_temp.moved('stock_unsettled_units')$$,
    $$VALUES (1::double precision, true, 2::double precision)$$,
    'control: a pending claim 90 s old: 1 pending, the oldest 90 s or more, 2 units unsettled');
ROLLBACK TO SAVEPOINT control;

-- Counting switched off: the counters stay put, and say why.
CREATE TEMPORARY TABLE before_none AS SELECT pg_temp.m('reservations_total') AS value;
SET LOCAL track_functions = 'none';
SELECT is(pg_temp.m('track_functions_enabled'), 0::double precision, 'track_functions none: enabled is 0');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 1, '00000000-0000-0000-0000-000000013008'),
    'a reservation while nothing is counted');
SELECT is(pg_temp.m('reservations_total'), (SELECT value FROM before_none), 'reservations_total did not move');
SET LOCAL track_functions = 'pl';

-- Sessions are read as the owner: without pg_read_all_stats it cannot see
-- this (superuser) session's state.
SAVEPOINT control;
REVOKE pg_read_all_stats FROM stockpool_owner;
SELECT is(
    (SELECT state FROM stockpool.metrics()
     WHERE metric = 'sessions' AND application_name = 'stockpool-pgtap-metrics'),
    'unknown', 'control: the owner without pg_read_all_stats sees this session''s state as unknown');
ROLLBACK TO SAVEPOINT control;

-- Who may call it.
SET LOCAL ROLE stockpool_monitor;
SELECT is(
    (SELECT value FROM stockpool.metrics()
     WHERE metric = 'sessions' AND application_name = 'stockpool-pgtap-metrics' AND state = 'active'),
    1::double precision, 'monitor: metrics() works, and sees other roles'' sessions with their state');
SELECT is(pg_temp.moved('stock_keys'), 7::double precision,
    'monitor: the same figures (keys 1300, 1301, 1303 to 1307)');
RESET ROLE;
SET LOCAL ROLE stockpool_app;
SELECT throws_ok('SELECT * FROM stockpool.metrics()', '42501', NULL, 'app: metrics(): 42501');
RESET ROLE;
SET LOCAL ROLE stockpool_worker;
SELECT throws_ok('SELECT * FROM stockpool.metrics()', '42501', NULL, 'worker: metrics(): 42501');
RESET ROLE;
SELECT is(
    (SELECT p.provolatile FROM pg_catalog.pg_proc AS p WHERE p.oid = 'stockpool.metrics()'::regprocedure),
    's', 'metrics() is STABLE: it cannot write');

SELECT * FROM finish();
ROLLBACK;
