-- stockpool.replenish_pool: top a key's pool up to its cap from free stock;
-- NULL key argument 22004, p_cap <= 0 22023, unknown key SP001.
BEGIN;
SELECT plan(37);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'replenish_pool', ARRAY['bigint', 'bigint', 'bigint', 'integer'],
    'replenish_pool(bigint, bigint, bigint, integer) exists');
SELECT function_returns('stockpool', 'replenish_pool', ARRAY['bigint', 'bigint', 'bigint', 'integer'], 'integer',
    'replenish_pool returns integer');
SELECT is(pg_catalog.pg_get_function_arguments('stockpool.replenish_pool(bigint, bigint, bigint, integer)'::regprocedure),
    'p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_cap integer DEFAULT NULL::integer',
    'p_cap defaults to NULL (the key''s own cap)');

SELECT is(stockpool.set_stock(1, 800, 1, 10), 10, 'key 800 at 10');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Bad input.
SELECT throws_ok('SELECT stockpool.replenish_pool(NULL, 800, 1)', '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok('SELECT stockpool.replenish_pool(1, NULL, 1)', '22004', NULL, 'NULL p_item_id: 22004');
SELECT throws_ok('SELECT stockpool.replenish_pool(1, 800, NULL)', '22004', NULL, 'NULL p_location_id: 22004');
SELECT throws_ok('SELECT stockpool.replenish_pool(1, 800, 1, 0)', '22023', NULL, 'p_cap 0: 22023');
SELECT throws_ok('SELECT stockpool.replenish_pool(1, 800, 1, -1)', '22023', NULL, 'negative p_cap: 22023');
SELECT throws_ok('SELECT stockpool.replenish_pool(1, 899, 1)', 'SP001', NULL, 'unknown item: SP001');
SELECT throws_ok('SELECT stockpool.replenish_pool(2, 800, 1)', 'SP001', NULL, 'known item in another shop: SP001');
SELECT throws_ok('SELECT stockpool.replenish_pool(1, 800, 2, 5)', 'SP001', NULL, 'known item at another location: SP001');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'bad input and unknown keys write nothing');

-- Everything free fits under the default cap.
SELECT is(stockpool.replenish_pool(1, 800, 1), 10, 'all 10 free units move to the pool');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 800, 1)$$,
    $$VALUES (10, 10, 0, 0)$$, 'key 800: 10 pooled, nothing free');
SELECT is((SELECT allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 800, 1)),
    10, 'allocated counts the pooled units');
SELECT is(stockpool.replenish_pool(1, 800, 1), 0, 'nothing free: adds 0');
SELECT is(stockpool.replenish_pool(1, 800, 1, 5), 0, 'a pool above the given cap: adds 0, takes nothing back');
SELECT is((SELECT pooled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 800, 1)),
    10, 'still 10 pooled');

-- The cap bounds the pool.
SELECT is(stockpool.set_stock(1, 801, 1, 2000), 2000, 'key 801 at 2000');
SELECT is(stockpool.replenish_pool(1, 801, 1), 1000, 'default cap: 1000 units pooled');
SELECT is(stockpool.replenish_pool(1, 801, 1), 0, 'a full pool: adds 0');
SELECT is(stockpool.replenish_pool(1, 801, 1, 1500), 500, 'p_cap 1500: 500 more');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 801, 1)$$,
    $$VALUES (2000, 1500, 0, 500)$$, 'key 801: 1500 pooled, 500 free');
SELECT is(stockpool.replenish_pool(1, 801, 1, 3000), 500, 'a cap above free stock: only the 500 free units');

-- The key's own cap, as configured.
SELECT is(stockpool.set_stock(1, 802, 1, 20), 20, 'key 802 at 20');
SELECT lives_ok('SELECT stockpool.configure_pool(1, 802, 1, p_pool_cap => 5, p_buckets => 4)',
    'key 802: cap 5, 4 buckets');
SELECT is(stockpool.replenish_pool(1, 802, 1), 5, 'the key''s cap of 5');
SELECT is(
    (SELECT array_agg(c.n ORDER BY c.n DESC)
     FROM (SELECT count(*)::integer AS n FROM stockpool.pool_units
           WHERE (shop_id, item_id, location_id) = (1, 802, 1) GROUP BY bucket) AS c),
    ARRAY[2, 1, 1, 1],
    '5 units are spread evenly over 4 buckets: 2, 1, 1, 1');
SELECT ok((SELECT bool_and(bucket BETWEEN 0 AND 3) AND count(DISTINCT bucket) = 4
           FROM stockpool.pool_units WHERE (shop_id, item_id, location_id) = (1, 802, 1)),
    'every bucket 0..3 is used, none beyond');

-- Holds and claims: only free stock moves.
SELECT is(stockpool.set_stock(1, 803, 1, 10), 10, 'key 803 at 10');
SELECT ok(stockpool.reserve_units(1, 803, 1, 6, '00000000-0000-0000-0000-000000000401'),
    '401 holds 6 (from the ledger row: no pool yet)');
SELECT is(stockpool.replenish_pool(1, 803, 1), 4, 'the 4 free units move to the pool, the 6 held stay');
SELECT is(stockpool.replenish_pool(1, 803, 1), 0, 'everything is pooled or held: adds 0');
SELECT is(stockpool.adjust_stock(1, 803, 1, 5), 15, 'receive 5 more');
SELECT is(stockpool.replenish_pool(1, 803, 1), 5, 'the 5 received units move to the pool');

SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold at the end');

SELECT * FROM finish();
ROLLBACK;
