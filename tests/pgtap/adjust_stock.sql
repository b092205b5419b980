-- stockpool.adjust_stock: change a key's on hand by a delta, with an adjust
-- movement; unknown key SP001, beyond integer 22003, negative 22023, below
-- live holds SP002; a refused call writes nothing.
BEGIN;
SELECT plan(43);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'adjust_stock', ARRAY['bigint', 'bigint', 'bigint', 'integer'],
    'adjust_stock(bigint, bigint, bigint, integer) exists');
SELECT function_returns('stockpool', 'adjust_stock', ARRAY['bigint', 'bigint', 'bigint', 'integer'], 'integer',
    'adjust_stock returns integer');

SELECT is(stockpool.set_stock(1, 200, 1, 10), 10, 'key 200 at 10');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Bad input.
SELECT throws_ok('SELECT stockpool.adjust_stock(NULL, 200, 1, 1)', '22004', NULL,
    'NULL p_shop_id: 22004');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, NULL, 1, 1)', '22004', NULL,
    'NULL p_item_id: 22004');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 200, NULL, 1)', '22004', NULL,
    'NULL p_location_id: 22004');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 200, 1, NULL)', '22004', NULL,
    'NULL p_delta: 22004');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 299, 1, 5)', 'SP001', NULL,
    'unknown item: SP001');
SELECT throws_ok('SELECT stockpool.adjust_stock(9, 200, 1, 5)', 'SP001', NULL,
    'known item in an unknown shop: SP001');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 200, 9, 5)', 'SP001', NULL,
    'known item at an unknown location: SP001');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 299, 1, 0)', 'SP001', NULL,
    'unknown key with a zero delta: SP001 all the same');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'bad input and unknown keys write nothing (adjust never creates a key)');

-- Out of range.
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 200, 1, 2147483647)', '22003', NULL,
    '10 + 2147483647 is beyond integer: 22003');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 200, 1, 2147483638)', '22003', NULL,
    '10 + 2147483638 = 2^31, one beyond integer: 22003');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 200, 1, -11)', '22023', NULL,
    '10 - 11 would be negative: 22023');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 200, 1, -2147483648)', '22023', NULL,
    'most negative delta: 22023');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    '22003 and 22023 write nothing');

-- Happy paths.
SELECT is(stockpool.adjust_stock(1, 200, 1, 2147483637), 2147483647,
    '10 + 2147483637 = the largest integer: allowed');
SELECT is(stockpool.adjust_stock(1, 200, 1, -2147483637), 10, 'and back down to 10');
SELECT is(stockpool.adjust_stock(1, 200, 1, 5), 15, '+5: returns 15');
SELECT is(stockpool.adjust_stock(1, 200, 1, -3), 12, '-3: returns 12');
SELECT is(stockpool.adjust_stock(1, 200, 1, 0), 12, 'zero delta: returns the on hand');
SELECT results_eq(
    'SELECT delta, on_hand_after, reason, checkout_id FROM stockpool.movements
     WHERE (shop_id, item_id, location_id) = (1, 200, 1) ORDER BY movement_id',
    $$VALUES (10, 10, 'set'::text, NULL::uuid),
             (2147483637, 2147483647, 'adjust', NULL),
             (-2147483637, 10, 'adjust', NULL),
             (5, 15, 'adjust', NULL),
             (-3, 12, 'adjust', NULL)$$,
    'one adjust movement per non-zero delta, none for zero');
SELECT is(stockpool.adjust_stock(1, 200, 1, -12), 0, 'down to exactly 0');
SELECT is((SELECT on_hand FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 200, 1)),
    0, 'ledger at 0');

-- Live holds: pool units go back first, then SP002.
SELECT is(stockpool.set_stock(1, 201, 1, 10) + stockpool.replenish_pool(1, 201, 1), 20,
    'key 201 at 10, all pooled');
SELECT ok(stockpool.reserve_units(1, 201, 1, 4, '00000000-0000-0000-0000-0000000000b1'),
    'a checkout holds 4 of key 201');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 201, 1)',
    $$VALUES (10, 6, 4, 0)$$,
    'before: 6 pooled, 4 held');
SELECT is(stockpool.adjust_stock(1, 201, 1, -5), 5, '-5 with 4 held: allowed');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 201, 1)',
    $$VALUES (5, 1, 4, 0)$$,
    'pool units above the new bound were taken back');

TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 201, 1, -2)', 'SP002', NULL,
    '5 - 2 = 3 is below the 4 units held: SP002');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'SP002 writes nothing: the pool unit it took back first is restored');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 201, 1, -5)', 'SP002', NULL,
    'down to 0 under a live hold: SP002');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'SP002 to 0 writes nothing');
SELECT is(stockpool.adjust_stock(1, 201, 1, -1), 4, 'down to exactly the units held');
SELECT is(stockpool.adjust_stock(1, 201, 1, 6), 10, 'raising is always allowed');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 201, 1)',
    $$VALUES (10, 0, 4, 6)$$,
    'raised units are free stock until a refill moves them');

-- An overdue hold, swept or not, does not block lowering.
SELECT is(stockpool.set_stock(1, 202, 1, 4), 4, 'key 202 at 4');
SELECT ok(stockpool.reserve_units(1, 202, 1, 4, '00000000-0000-0000-0000-0000000000b2'),
    'b2 holds all 4 of key 202');
SELECT throws_ok('SELECT stockpool.adjust_stock(1, 202, 1, -1)', 'SP002', NULL,
    'while b2''s hold is live: SP002');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000b2';
SELECT is(stockpool.adjust_stock(1, 202, 1, -4), 0, 'once it is overdue (unswept): down to 0 is allowed');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 202, 1)',
    $$VALUES (0, 0, 0, 0)$$,
    'key 202: nothing left, the overdue hold expired');

SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold at the end');

SELECT * FROM finish();
ROLLBACK;
