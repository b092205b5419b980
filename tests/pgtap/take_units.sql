-- stockpool.take_units: the low-level SKIP LOCKED claim of up to n pool units,
-- no hold, no refill; NULL 22004, quantity <= 0 22023, unknown key SP001.
BEGIN;
SELECT plan(27);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'take_units', ARRAY['bigint', 'bigint', 'bigint', 'integer'],
    'take_units(bigint, bigint, bigint, integer) exists');
SELECT function_returns('stockpool', 'take_units', ARRAY['bigint', 'bigint', 'bigint', 'integer'], 'integer',
    'take_units returns integer');

SELECT is(stockpool.set_stock(1, 900, 1, 5), 5, 'key 900 at 5');
SELECT is(stockpool.replenish_pool(1, 900, 1), 5, 'its 5 units pooled');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Bad input.
SELECT throws_ok('SELECT stockpool.take_units(NULL, 900, 1, 1)', '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok('SELECT stockpool.take_units(1, NULL, 1, 1)', '22004', NULL, 'NULL p_item_id: 22004');
SELECT throws_ok('SELECT stockpool.take_units(1, 900, NULL, 1)', '22004', NULL, 'NULL p_location_id: 22004');
SELECT throws_ok('SELECT stockpool.take_units(1, 900, 1, NULL)', '22004', NULL, 'NULL p_quantity: 22004');
SELECT throws_ok('SELECT stockpool.take_units(1, 900, 1, 0)', '22023', NULL, 'quantity 0: 22023');
SELECT throws_ok('SELECT stockpool.take_units(1, 900, 1, -3)', '22023', NULL, 'negative quantity: 22023');
SELECT throws_ok('SELECT stockpool.take_units(1, 999, 1, 1)', 'SP001', NULL, 'unknown item: SP001');
SELECT throws_ok('SELECT stockpool.take_units(2, 900, 1, 1)', 'SP001', NULL, 'known item in another shop: SP001');
SELECT throws_ok('SELECT stockpool.take_units(1, 900, 2, 1)', 'SP001', NULL, 'known item at another location: SP001');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'bad input and unknown keys take nothing');

-- Taking.
SELECT is(stockpool.take_units(1, 900, 1, 3), 3, 'take 3 of 5 pooled: 3');
SELECT is((SELECT pooled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 900, 1)),
    2, '2 left in the pool');
SELECT is(stockpool.take_units(1, 900, 1, 10), 2, 'ask 10 of 2 pooled: takes the 2');
SELECT is(stockpool.take_units(1, 900, 1, 1), 0, 'an empty pool: 0, not an error');
SELECT results_eq(
    $$SELECT on_hand, allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 900, 1)$$,
    $$VALUES (5, 5)$$,
    'the ledger is untouched: the units are still allocated');
SELECT is((SELECT count(*)::integer FROM stockpool.holds WHERE shop_id = 1 AND item_id = 900),
    0, 'take_units records no hold');

-- No refill: free stock stays free.
SELECT is(stockpool.set_stock(1, 901, 1, 5), 5, 'key 901 at 5, nothing pooled');
SELECT is(stockpool.take_units(1, 901, 1, 1), 0, 'a key with free stock but an empty pool: 0');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 901, 1)$$,
    $$VALUES (5, 0, 0, 5)$$, 'take_units did not refill');

-- Units left as taken are reported by check_invariants (documented).
SELECT results_eq(
    $$SELECT shop_id, item_id, location_id, invariant FROM stockpool.check_invariants()$$,
    $$VALUES (1::bigint, 900::bigint, 1::bigint, 'allocation'::text)$$,
    'taken units never turned into a hold show up as an allocation violation');

-- Units from any bucket are found, from whatever start bucket.
SELECT is(stockpool.set_stock(1, 902, 1, 300), 300, 'key 902 at 300');
SELECT is(stockpool.replenish_pool(1, 902, 1), 300, '300 units over 64 buckets');
SELECT is(stockpool.take_units(1, 902, 1, 300), 300, 'all 300 can be taken in one call');

SELECT * FROM finish();
ROLLBACK;
