-- stockpool.configure_pool: a key's pool cap, low-water mark and buckets;
-- NULL keeps a setting, a new cap alone sets low water to a quarter of it.
-- NULL key argument 22004, setting out of range 22023, unknown key SP001.
BEGIN;
SELECT plan(39);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

CREATE TEMPORARY VIEW settings AS
SELECT s.pool_cap, s.low_water, s.buckets
FROM stockpool.stock AS s
WHERE (s.shop_id, s.item_id, s.location_id) = (1, 1000, 1);

SELECT has_function('stockpool', 'configure_pool',
    ARRAY['bigint', 'bigint', 'bigint', 'integer', 'integer', 'integer'],
    'configure_pool(bigint, bigint, bigint, integer, integer, integer) exists');
SELECT function_returns('stockpool', 'configure_pool',
    ARRAY['bigint', 'bigint', 'bigint', 'integer', 'integer', 'integer'], 'void',
    'configure_pool returns void');
SELECT is(pg_catalog.pg_get_function_arguments(
        'stockpool.configure_pool(bigint, bigint, bigint, integer, integer, integer)'::regprocedure),
    'p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_pool_cap integer DEFAULT NULL::integer, '
    'p_low_water integer DEFAULT NULL::integer, p_buckets integer DEFAULT NULL::integer',
    'every setting defaults to NULL (keep)');

SELECT is(stockpool.set_stock(1, 1000, 1, 10), 10, 'key 1000 at 10');
SELECT results_eq('SELECT * FROM settings', $$VALUES (1000, 250, 64)$$, 'default settings');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Bad input.
SELECT throws_ok('SELECT stockpool.configure_pool(NULL, 1000, 1, 10)', '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok('SELECT stockpool.configure_pool(1, NULL, 1, 10)', '22004', NULL, 'NULL p_item_id: 22004');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, NULL, 10)', '22004', NULL, 'NULL p_location_id: 22004');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1099, 1, 10)', 'SP001', NULL, 'unknown item: SP001');
SELECT throws_ok('SELECT stockpool.configure_pool(2, 1000, 1)', 'SP001', NULL, 'known item in another shop: SP001');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, 0)', '22023', NULL, 'cap 0: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, -1)', '22023', NULL, 'negative cap: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, 100, 100)', '22023', NULL,
    'low water equal to the cap: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, 100, 101)', '22023', NULL,
    'low water above the cap: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, 100, -1)', '22023', NULL,
    'negative low water: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, p_low_water => 1000)', '22023', NULL,
    'low water alone, equal to the current cap: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, p_buckets => 0)', '22023', NULL, 'buckets 0: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, p_buckets => 1025)', '22023', NULL, 'buckets 1025: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, p_buckets => -1)', '22023', NULL, 'negative buckets: 22023');
SELECT throws_ok('SELECT stockpool.configure_pool(1, 1000, 1, 50, 10, 0)', '22023', NULL,
    'good cap and low water with bad buckets: 22023');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'bad input writes nothing: no setting changed in part');

-- Changes.
SELECT lives_ok('SELECT stockpool.configure_pool(1, 1000, 1)', 'no setting given');
SELECT results_eq('SELECT * FROM settings', $$VALUES (1000, 250, 64)$$, 'no setting given: nothing changes');
SELECT lives_ok('SELECT stockpool.configure_pool(1, 1000, 1, p_pool_cap => 100)', 'cap 100 alone');
SELECT results_eq('SELECT * FROM settings', $$VALUES (100, 25, 64)$$, 'cap alone: low water becomes a quarter of it');
SELECT lives_ok('SELECT stockpool.configure_pool(1, 1000, 1, p_low_water => 99)', 'low water 99 alone');
SELECT results_eq('SELECT * FROM settings', $$VALUES (100, 99, 64)$$, 'low water alone: cap kept');
SELECT lives_ok('SELECT stockpool.configure_pool(1, 1000, 1, p_buckets => 1)', 'buckets 1');
SELECT results_eq('SELECT * FROM settings', $$VALUES (100, 99, 1)$$, 'buckets alone: the rest kept');
SELECT lives_ok('SELECT stockpool.configure_pool(1, 1000, 1, 1, 0, 1024)', 'cap 1, low water 0, buckets 1024');
SELECT results_eq('SELECT * FROM settings', $$VALUES (1, 0, 1024)$$, 'the smallest cap and the most buckets');
SELECT lives_ok('SELECT stockpool.configure_pool(1, 1000, 1, p_pool_cap => 3)', 'cap 3 alone');
SELECT results_eq('SELECT * FROM settings', $$VALUES (3, 0, 1024)$$, 'a quarter of 3 is 0');
SELECT is((SELECT count(*)::integer FROM stockpool.movements WHERE (shop_id, item_id, location_id) = (1, 1000, 1)),
    1, 'configuring records no movement');

-- Settings take effect at the next refill; existing units stay.
SELECT is(stockpool.replenish_pool(1, 1000, 1), 3, 'the next refill honours the new cap of 3');
SELECT lives_ok('SELECT stockpool.configure_pool(1, 1000, 1, 2, 0, 2)', 'cap 2, buckets 2');
SELECT is((SELECT pooled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1000, 1)),
    3, 'a smaller cap does not take pooled units back');
SELECT ok(stockpool.reserve_units(1, 1000, 1, 10, '00000000-0000-0000-0000-000000000501'),
    'all 10 units can be held after the bucket count shrank (pooled units keep their old buckets)');
SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold at the end');

SELECT * FROM finish();
ROLLBACK;
