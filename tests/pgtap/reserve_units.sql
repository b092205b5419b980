-- stockpool.reserve_units: an all-or-nothing hold of one key for a checkout.
-- true = held (a retry is a no-op), false = not enough stock; errors carry
-- their documented SQLSTATE and write nothing.
-- now() is fixed inside this one transaction, so a hold cannot expire by
-- waiting (pg_sleep does not move now()): expiry is simulated by moving
-- holds.expires_at into the past as superuser.
BEGIN;
SELECT plan(77);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'reserve_units',
    ARRAY['bigint', 'bigint', 'bigint', 'integer', 'uuid', 'interval'],
    'reserve_units(bigint, bigint, bigint, integer, uuid, interval) exists');
SELECT function_returns('stockpool', 'reserve_units',
    ARRAY['bigint', 'bigint', 'bigint', 'integer', 'uuid', 'interval'], 'boolean',
    'reserve_units returns boolean');

SELECT is(stockpool.set_stock(1, 300, 1, 10), 10, 'key 300 at 10');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Bad input.
SELECT throws_ok($$SELECT stockpool.reserve_units(NULL, 300, 1, 1, '00000000-0000-0000-0000-0000000000c1')$$,
    '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, NULL, 1, 1, '00000000-0000-0000-0000-0000000000c1')$$,
    '22004', NULL, 'NULL p_item_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, NULL, 1, '00000000-0000-0000-0000-0000000000c1')$$,
    '22004', NULL, 'NULL p_location_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, NULL, '00000000-0000-0000-0000-0000000000c1')$$,
    '22004', NULL, 'NULL p_quantity: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, 1, NULL)$$,
    '22004', NULL, 'NULL p_checkout_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, 1, '00000000-0000-0000-0000-0000000000c1', NULL)$$,
    '22004', NULL, 'NULL p_ttl: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, 0, '00000000-0000-0000-0000-0000000000c1')$$,
    '22023', NULL, 'quantity 0: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, -1, '00000000-0000-0000-0000-0000000000c1')$$,
    '22023', NULL, 'negative quantity: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, 1, '00000000-0000-0000-0000-0000000000c1', '0 seconds')$$,
    '22023', NULL, 'ttl 0: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, 1, '00000000-0000-0000-0000-0000000000c1', '-1 minute')$$,
    '22023', NULL, 'negative ttl: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, 1, '00000000-0000-0000-0000-0000000000c1', '300000 years')$$,
    '22008', NULL, 'ttl beyond the timestamp range: 22008');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 399, 1, 1, '00000000-0000-0000-0000-0000000000c1')$$,
    'SP001', NULL, 'unknown item: SP001');
SELECT throws_ok($$SELECT stockpool.reserve_units(2, 300, 1, 1, '00000000-0000-0000-0000-0000000000c1')$$,
    'SP001', NULL, 'known item in another shop: SP001');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 2, 1, '00000000-0000-0000-0000-0000000000c1')$$,
    'SP001', NULL, 'known item at another location: SP001');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'bad input and unknown keys write nothing');

-- A hold.
SELECT ok(stockpool.reserve_units(1, 300, 1, 3, '00000000-0000-0000-0000-0000000000c1'),
    'hold 3 of 10: true');
SELECT results_eq(
    $$SELECT item_id, location_id, quantity, status, expires_at FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000c1'$$,
    $$VALUES (300::bigint, 1::bigint, 3, 'held'::text, now() + interval '15 minutes')$$,
    'one held row, quantity 3, expiring after the default 15 minutes');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 300, 1)',
    $$VALUES (10, 0, 3, 7)$$,
    'a key nobody contends: the 3 units came straight from its ledger row, no pool');
SELECT is((SELECT on_hand FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 300, 1)),
    10, 'a hold does not change on hand');
SELECT is((SELECT count(*)::integer FROM stockpool.movements WHERE (shop_id, item_id, location_id) = (1, 300, 1)),
    1, 'a hold records no movement');

-- A retry is a true no-op (not even the expiry moves, whatever the ttl).
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT ok(stockpool.reserve_units(1, 300, 1, 3, '00000000-0000-0000-0000-0000000000c1'),
    'retry of the same reservation: true');
SELECT ok(stockpool.reserve_units(1, 300, 1, 3, '00000000-0000-0000-0000-0000000000c1', '1 hour'),
    'retry with another ttl: true');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'retries change nothing: same pool rows, same hold, same expiry');

-- Another quantity for the same checkout and key: SP007, nothing written.
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, 4, '00000000-0000-0000-0000-0000000000c1')$$,
    'SP007', NULL, 'same checkout, same key, another quantity: SP007');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 300, 1, 1, '00000000-0000-0000-0000-0000000000c1')$$,
    'SP007', NULL, 'same checkout, smaller quantity: SP007');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'SP007 writes nothing');

-- The same checkout in another shop is another checkout.
SELECT is(stockpool.set_stock(2, 300, 1, 1), 1, 'key 300 in shop 2 at 1');
SELECT ok(stockpool.reserve_units(2, 300, 1, 1, '00000000-0000-0000-0000-0000000000c1'),
    'same checkout id in shop 2 holds its own unit');

-- A single unit (the path without a subtransaction), then sellout.
SELECT ok(stockpool.reserve_units(1, 300, 1, 1, '00000000-0000-0000-0000-0000000000c2'),
    'a single unit: true');
SELECT ok(stockpool.reserve_units(1, 300, 1, 6, '00000000-0000-0000-0000-0000000000c3'),
    'the last 6 units: true');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 300, 1)',
    $$VALUES (10, 0, 10, 0)$$,
    'sold out: everything held, nothing pooled');

TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT ok(NOT stockpool.reserve_units(1, 300, 1, 1, '00000000-0000-0000-0000-0000000000c4'),
    'one more unit after sellout: false');
SELECT ok(NOT stockpool.reserve_units(1, 300, 1, 11, '00000000-0000-0000-0000-0000000000c4'),
    'more than on hand: false');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'false writes nothing: no hold row, pool unchanged');
SELECT is((SELECT count(*)::integer FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-0000000000c4'),
    0, 'a refused checkout has no hold row');

-- Partly available: false, all or nothing.
SELECT is(stockpool.set_stock(1, 301, 1, 5), 5, 'key 301 at 5');
SELECT ok(stockpool.reserve_units(1, 301, 1, 2, '00000000-0000-0000-0000-0000000000c5'),
    'hold 2 of key 301');
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT ok(NOT stockpool.reserve_units(1, 301, 1, 4, '00000000-0000-0000-0000-0000000000c6'),
    '4 when only 3 are free: false');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'false takes no unit: the 3 pooled units are still there');
SELECT ok(stockpool.reserve_units(1, 301, 1, 3, '00000000-0000-0000-0000-0000000000c6'),
    'the 3 that are free: true');

-- Zero stock.
SELECT is(stockpool.set_stock(1, 302, 1, 0), 0, 'key 302 at 0');
SELECT ok(NOT stockpool.reserve_units(1, 302, 1, 1, '00000000-0000-0000-0000-0000000000c7'),
    'a key with nothing on hand: false');

-- A pool smaller than the request is refilled by at least the shortfall.
SELECT is(stockpool.set_stock(1, 303, 1, 50), 50, 'key 303 at 50');
SELECT lives_ok('SELECT stockpool.configure_pool(1, 303, 1, p_pool_cap => 2, p_low_water => 0)',
    'key 303 pool cap 2');
SELECT ok(stockpool.reserve_units(1, 303, 1, 20, '00000000-0000-0000-0000-0000000000c8'),
    '20 units through a pool capped at 2: true');
SELECT results_eq(
    'SELECT on_hand, held FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 303, 1)',
    $$VALUES (50, 20)$$,
    '20 held');
SELECT cmp_ok((SELECT pooled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 303, 1)),
    '<=', 2, 'the pool stays within its cap');

-- No undersell: an expired but unswept hold of another checkout does not refuse.
SELECT is(stockpool.set_stock(1, 304, 1, 5), 5, 'key 304 at 5');
SELECT ok(stockpool.reserve_units(1, 304, 1, 5, '00000000-0000-0000-0000-0000000000d1'),
    'checkout d1 holds all 5');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000d1';
SELECT ok(stockpool.reserve_units(1, 304, 1, 5, '00000000-0000-0000-0000-0000000000d2'),
    'd1''s hold expired unswept: d2 gets all 5 (no undersell)');
SELECT is((SELECT status FROM stockpool.holds WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000d1'),
    'expired', 'd1''s hold was expired on the way');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 304, 1)',
    $$VALUES (5, 0, 5, 0)$$,
    'key 304: 5 held by d2, never more than on hand');

-- A refused reservation leaves an expired hold it looked at untouched.
SELECT is(stockpool.set_stock(1, 305, 1, 5), 5, 'key 305 at 5');
SELECT ok(stockpool.reserve_units(1, 305, 1, 3, '00000000-0000-0000-0000-0000000000d3'),
    'd3 holds 3 of key 305');
SELECT ok(stockpool.reserve_units(1, 305, 1, 2, '00000000-0000-0000-0000-0000000000d4'),
    'd4 holds 2 of key 305');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000d3';
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT ok(NOT stockpool.reserve_units(1, 305, 1, 4, '00000000-0000-0000-0000-0000000000d5'),
    '4 when 3 are expired and 2 live: false');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'false writes nothing: d3''s hold was not expired by the refused call');

-- An expired but unswept hold of the same checkout is renewed by a retry.
SELECT is(stockpool.set_stock(1, 306, 1, 4), 4, 'key 306 at 4');
SELECT ok(stockpool.reserve_units(1, 306, 1, 2, '00000000-0000-0000-0000-0000000000e1', '5 minutes'),
    'e1 holds 2 of key 306');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000e1';
SELECT ok(stockpool.reserve_units(1, 306, 1, 2, '00000000-0000-0000-0000-0000000000e1', '10 minutes'),
    'e1 retries after its hold expired unswept: true');
SELECT results_eq(
    $$SELECT status, quantity, expires_at FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000e1'$$,
    $$VALUES ('held'::text, 2, now() + interval '10 minutes')$$,
    'the same hold row, renewed with the new ttl');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 306, 1)',
    $$VALUES (4, 0, 2, 2)$$,
    'the renewal took no new units');

-- Expired and swept: a retry takes units again and re-opens the row.
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000e1';
SELECT is(stockpool.sweep(), 2, 'sweep expires the two overdue holds (d3 and e1)');
SELECT ok(stockpool.reserve_units(1, 306, 1, 2, '00000000-0000-0000-0000-0000000000e1'),
    'e1 reserves again after its hold was swept: true');
SELECT results_eq(
    $$SELECT status, quantity FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000e1'$$,
    $$VALUES ('held'::text, 2)$$,
    'one hold row, held again');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 306, 1)',
    $$VALUES (4, 0, 2, 2)$$,
    'units were taken once more, not twice');

-- Released: a new reservation of the same checkout takes units again.
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-0000000000e1'), 2, 'e1 releases');
SELECT ok(stockpool.reserve_units(1, 306, 1, 3, '00000000-0000-0000-0000-0000000000e1'),
    'after a release the checkout may reserve another quantity');
SELECT results_eq(
    'SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 306, 1)',
    $$VALUES (4, 0, 3, 1)$$,
    'key 306: 3 held by e1');

-- Claimed: a retry of the same reservation is a no-op, another quantity SP007.
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-0000000000e1'), 3, 'e1 claims 3');
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT ok(stockpool.reserve_units(1, 306, 1, 3, '00000000-0000-0000-0000-0000000000e1'),
    'a retry of the claimed reservation: true');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 306, 1, 1, '00000000-0000-0000-0000-0000000000e1')$$,
    'SP007', NULL, 'another quantity after the claim: SP007');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'neither takes units nor touches the claimed hold');

SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold at the end');

SELECT * FROM finish();
ROLLBACK;
