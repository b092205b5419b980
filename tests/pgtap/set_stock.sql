-- stockpool.set_stock: create a key or set its on hand, with a movement for
-- the difference; pool units above the new bound are taken back; lowering
-- below live holds is refused (SP002) without writing anything.
BEGIN;
SELECT plan(67);

-- Every row of every table, to show that a refused call wrote nothing.
CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

SELECT has_function('stockpool', 'set_stock', ARRAY['bigint', 'bigint', 'bigint', 'integer'],
    'set_stock(bigint, bigint, bigint, integer) exists');
SELECT function_returns('stockpool', 'set_stock', ARRAY['bigint', 'bigint', 'bigint', 'integer'], 'integer',
    'set_stock returns integer');

-- Bad input.
SELECT throws_ok('SELECT stockpool.set_stock(NULL, 100, 1, 5)', '22004', NULL,
    'NULL p_shop_id: 22004');
SELECT throws_ok('SELECT stockpool.set_stock(1, NULL, 1, 5)', '22004', NULL,
    'NULL p_item_id: 22004');
SELECT throws_ok('SELECT stockpool.set_stock(1, 100, NULL, 5)', '22004', NULL,
    'NULL p_location_id: 22004');
SELECT throws_ok('SELECT stockpool.set_stock(1, 100, 1, NULL)', '22004', NULL,
    'NULL p_on_hand: 22004');
SELECT throws_ok('SELECT stockpool.set_stock(1, 100, 1, -1)', '22023', NULL,
    'negative p_on_hand: 22023');
SELECT throws_ok('SELECT stockpool.set_stock(1, 100, 1, -2147483648)', '22023', NULL,
    'most negative p_on_hand: 22023');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'bad input writes nothing (no key, no movement)');

-- A new key.
SELECT is(stockpool.set_stock(1, 100, 1, 10), 10, 'a new key: returns the new on hand');
SELECT results_eq(
    'SELECT on_hand, allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 100, 1)',
    $$VALUES (10, 0)$$,
    'a new key: ledger row with on_hand 10, nothing allocated');
SELECT results_eq(
    'SELECT delta, on_hand_after, reason, checkout_id FROM stockpool.movements
     WHERE (shop_id, item_id, location_id) = (1, 100, 1) ORDER BY movement_id',
    $$VALUES (10, 10, 'set'::text, NULL::uuid)$$,
    'a new key: one set movement for the whole on hand');
SELECT results_eq(
    'SELECT pool_cap, low_water, buckets FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 100, 1)',
    $$VALUES (1000, 250, 64)$$,
    'a new key gets the default pool settings');

-- Same value: nothing to record.
SELECT is(stockpool.set_stock(1, 100, 1, 10), 10, 'same on hand again: returns it');
SELECT is((SELECT count(*)::integer FROM stockpool.movements WHERE (shop_id, item_id, location_id) = (1, 100, 1)),
    1, 'same on hand again: no new movement');

-- Up and down.
SELECT is(stockpool.set_stock(1, 100, 1, 15), 15, 'raise to 15: returns 15');
SELECT is(stockpool.set_stock(1, 100, 1, 12), 12, 'lower to 12: returns 12');
SELECT results_eq(
    'SELECT delta, on_hand_after, reason FROM stockpool.movements
     WHERE (shop_id, item_id, location_id) = (1, 100, 1) ORDER BY movement_id',
    $$VALUES (10, 10, 'set'::text), (5, 15, 'set'), (-3, 12, 'set')$$,
    'raise and lower: one movement each, for the difference');
SELECT is((SELECT on_hand FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 100, 1)),
    12, 'ledger holds the last value');

-- Zero stock key: created, no zero-delta movement.
SELECT is(stockpool.set_stock(1, 101, 1, 0), 0, 'a new key at 0: returns 0');
SELECT ok(EXISTS (SELECT FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 101, 1)),
    'a new key at 0 exists in the ledger');
SELECT is((SELECT count(*)::integer FROM stockpool.movements WHERE (shop_id, item_id, location_id) = (1, 101, 1)),
    0, 'a new key at 0 records no movement');
SELECT is(stockpool.set_stock(1, 101, 1, 7), 7, 'a zero key can be raised');
SELECT is(stockpool.set_stock(1, 101, 1, 0), 0, 'and lowered back to 0 (nothing held)');

-- Keys are per shop and location.
SELECT is(stockpool.set_stock(2, 100, 1, 3), 3, 'same item in another shop is its own key');
SELECT is(stockpool.set_stock(1, 100, 2, 4), 4, 'same item at another location is its own key');
SELECT results_eq(
    'SELECT shop_id, location_id, on_hand FROM stockpool.stock WHERE item_id = 100 ORDER BY 1, 2',
    $$VALUES (1::bigint, 1::bigint, 12), (1, 2, 4), (2, 1, 3)$$,
    'three independent keys of item 100');

-- Pool units above the new bound are taken back.
SELECT is(stockpool.set_stock(1, 102, 1, 20), 20, 'key 102 at 20');
SELECT is(stockpool.replenish_pool(1, 102, 1), 20, 'its pool is filled with all 20 units');
SELECT ok(stockpool.reserve_units(1, 102, 1, 5, '00000000-0000-0000-0000-0000000000a1'),
    'a checkout holds 5 of key 102');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 102, 1)',
    $$VALUES (20, 15, 5, 0)$$,
    'before lowering: 15 pooled, 5 held');
SELECT is(stockpool.set_stock(1, 102, 1, 8), 8, 'lower key 102 to 8 while 5 are held');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 102, 1)',
    $$VALUES (8, 3, 5, 0)$$,
    'pool units above the new bound were taken back: 3 pooled, 5 still held');
SELECT is((SELECT allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 102, 1)),
    8, 'allocated follows the units taken back');
SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold after taking units back');

-- Below live holds: SP002, nothing written (the pool units it took back first are restored).
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok('SELECT stockpool.set_stock(1, 102, 1, 4)', 'SP002', NULL,
    'lower below the 5 units of a live hold: SP002');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'SP002 writes nothing: ledger, pool and movements unchanged');
SELECT throws_ok('SELECT stockpool.set_stock(1, 102, 1, 0)', 'SP002', NULL,
    'lower to 0 under a live hold: SP002');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'SP002 to 0 writes nothing');

-- Exactly down to what is held: allowed, the whole pool goes back.
SELECT is(stockpool.set_stock(1, 102, 1, 5), 5, 'lower to exactly the held 5');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 102, 1)',
    $$VALUES (5, 0, 5, 0)$$,
    'nothing pooled, 5 held');

-- Claimed units are gone from on hand; they do not block lowering.
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-0000000000a1'), 5, 'the hold is claimed');
SELECT is(stockpool.set_stock(1, 102, 1, 0), 0, 'on hand 0 after the claim: nothing left to protect');

-- A released hold's units are in the pool again and can be taken back.
SELECT is(stockpool.set_stock(1, 103, 1, 6) + stockpool.replenish_pool(1, 103, 1), 12, 'key 103 at 6, all pooled');
SELECT ok(stockpool.reserve_units(1, 103, 1, 6, '00000000-0000-0000-0000-0000000000a2'),
    'a checkout holds all 6 of key 103');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-0000000000a2'), 6, 'and releases them');
SELECT is(stockpool.set_stock(1, 103, 1, 2), 2, 'lowering after the release is allowed');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 103, 1)',
    $$VALUES (2, 2, 0, 0)$$,
    'released units beyond the new bound were taken back from the pool');

-- A hold past its expiry is not live, swept or not: it does not block lowering.
SELECT is(stockpool.set_stock(1, 104, 1, 5), 5, 'key 104 at 5');
SELECT ok(stockpool.reserve_units(1, 104, 1, 3, '00000000-0000-0000-0000-0000000000a3'),
    'a3 holds 3 of key 104');
SELECT ok(stockpool.reserve_units(1, 104, 1, 1, '00000000-0000-0000-0000-0000000000a4'),
    'a4 holds 1 of key 104');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000a3';
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok('SELECT stockpool.set_stock(1, 104, 1, 0)', 'SP002', NULL,
    'below the live hold of a4: SP002 even though a3 expired');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'SP002 writes nothing: a3''s overdue hold is not expired by the refused call');
SELECT is(stockpool.set_stock(1, 104, 1, 1), 1,
    'down to the 1 unit of a4''s live hold: allowed although a3''s overdue hold was never swept');
SELECT results_eq(
    $$SELECT checkout_id, status FROM stockpool.holds WHERE shop_id = 1 AND item_id = 104 ORDER BY checkout_id$$,
    $$VALUES ('00000000-0000-0000-0000-0000000000a3'::uuid, 'expired'::text),
             ('00000000-0000-0000-0000-0000000000a4', 'held')$$,
    'a3''s overdue hold was expired on the way, a4''s live hold kept');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 104, 1)',
    $$VALUES (1, 0, 1, 0)$$,
    'key 104: only a4''s unit is left, held');
SELECT throws_ok($$SELECT stockpool.claim(1, '00000000-0000-0000-0000-0000000000a3')$$, 'SP004', NULL,
    'a3 can no longer claim: SP004');

-- Only what the new bound needs leaves allocated; the rest of an overdue hold's units go back to the pool.
SELECT is(stockpool.set_stock(1, 105, 1, 6) + stockpool.replenish_pool(1, 105, 1), 12, 'key 105 at 6, all pooled');
SELECT ok(stockpool.reserve_units(1, 105, 1, 4, '00000000-0000-0000-0000-0000000000a5'),
    'a5 holds 4 of key 105, 2 stay pooled');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000a5';
SELECT is(stockpool.set_stock(1, 105, 1, 3), 3, 'lower key 105 to 3: 2 pooled units and 1 overdue unit go');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 105, 1)',
    $$VALUES (3, 3, 0, 0)$$,
    'the other 3 units of the overdue hold are pooled again');
SELECT is((SELECT allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 105, 1)),
    3, 'allocated counts exactly the pooled units');

-- A key without a pool: the rest of the overdue hold's units stay free on the ledger row.
SELECT is(stockpool.set_stock(1, 106, 1, 6), 6, 'key 106 at 6 (no pool)');
SELECT ok(stockpool.reserve_units(1, 106, 1, 4, '00000000-0000-0000-0000-0000000000a6'),
    'a6 holds 4 of key 106, from the ledger row');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000a6';
SELECT is(stockpool.set_stock(1, 106, 1, 3), 3, 'lower key 106 to 3: the overdue hold is expired on the way');
SELECT results_eq(
    $$SELECT l.on_hand, l.pooled, l.held, l.free, s.allocated FROM stockpool.stock_levels AS l
      JOIN stockpool.stock AS s USING (shop_id, item_id, location_id)
      WHERE (l.shop_id, l.item_id, l.location_id) = (1, 106, 1)$$,
    $$VALUES (3, 0, 0, 3, 0)$$,
    'all 3 left are free on the ledger row: no pool rows for a key without a pool');

SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold at the end');

SELECT * FROM finish();
ROLLBACK;
