-- stockpool.hot_keys(p_limit): pooled keys first, by pool_target, then keys
-- by live holds; a key with neither (nothing held, or only an overdue hold)
-- is not listed; the levels are stock_levels'; p_limit cuts the list; bad
-- limits raise 22004 / 22023. The monitor role may call it, the app and the
-- worker may not.
BEGIN;
SELECT plan(22);

SELECT is(stockpool.set_stock(1, k, 1, 100), 100, format('key %s at 100', k))
FROM generate_series(1310, 1315) AS k;
SELECT is(stockpool.replenish_pool(1, 1310, 1, 64), 64, 'key 1310: a pool of 64, nothing held');
SELECT is(stockpool.replenish_pool(1, 1311, 1, 16), 16, 'key 1311: a pool of 16 ...');
SELECT ok(bool_and(stockpool.reserve_units(1, 1311, 1, 1, format('00000000-0000-0000-0000-0000000131%s', n)::uuid)),
    '... three live holds of one unit')
FROM generate_series(10, 12) AS n;
SELECT ok(bool_and(stockpool.reserve_units(1, 1312, 1, 1, format('00000000-0000-0000-0000-0000000132%s', n)::uuid)),
    'key 1312: no pool, five holds ...')
FROM generate_series(10, 14) AS n;
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000013210'), 1, '... one of them claimed: four live');
SELECT ok(stockpool.reserve_units(1, 1313, 1, 2, '00000000-0000-0000-0000-000000013310'),
    'key 1313: no pool, one live hold of 2');
SELECT ok(stockpool.reserve_units(1, 1314, 1, 1, '00000000-0000-0000-0000-000000013410'),
    'key 1314: one hold ...');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE checkout_id = '00000000-0000-0000-0000-000000013410';

SELECT results_eq(
    $$SELECT shop_id, item_id, location_id, on_hand, pooled, held, free, unsettled, pool_target,
             refilled_at IS NOT NULL, live_holds
      FROM stockpool.hot_keys()$$,
    $$VALUES (1::bigint, 1310::bigint, 1::bigint, 100, 64, 0, 36, 0, 64, true, 0),
             (1, 1311, 1, 100, 13, 3, 84, 0, 16, true, 3),
             (1, 1312, 1, 99, 0, 4, 95, 0, 0, false, 4),
             (1, 1313, 1, 100, 0, 2, 98, 0, 0, false, 1)$$,
    'pooled keys by pool_target, then keys by live holds; 1314 (only overdue) and 1315 (idle) are not listed');
SELECT is_empty(
    $$SELECT h.item_id FROM stockpool.hot_keys() AS h
      JOIN stockpool.stock_levels AS l USING (shop_id, item_id, location_id)
      WHERE (h.on_hand, h.pooled, h.held, h.free, h.unsettled) <> (l.on_hand, l.pooled, l.held, l.free, l.unsettled)$$,
    'every level is the one stock_levels shows');
SELECT results_eq('SELECT item_id FROM stockpool.hot_keys(2)', ARRAY[1310, 1311]::bigint[],
    'p_limit 2: the two busiest');

SELECT throws_ok('SELECT * FROM stockpool.hot_keys(NULL)', '22004', NULL, 'p_limit NULL: 22004');
SELECT throws_ok('SELECT * FROM stockpool.hot_keys(0)', '22023', NULL, 'p_limit 0: 22023');
SELECT throws_ok('SELECT * FROM stockpool.hot_keys(-5)', '22023', NULL, 'p_limit -5: 22023');

SET LOCAL ROLE stockpool_monitor;
SELECT results_eq('SELECT item_id FROM stockpool.hot_keys(1)', ARRAY[1310]::bigint[], 'monitor: hot_keys works');
RESET ROLE;
SET LOCAL ROLE stockpool_app;
SELECT throws_ok('SELECT * FROM stockpool.hot_keys()', '42501', NULL, 'app: hot_keys: 42501');
RESET ROLE;
SET LOCAL ROLE stockpool_worker;
SELECT throws_ok('SELECT * FROM stockpool.hot_keys()', '42501', NULL, 'worker: hot_keys: 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
