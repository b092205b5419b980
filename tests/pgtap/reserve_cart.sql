-- stockpool.reserve_cart: every line of a cart or none, lines in any order,
-- repeated keys summed. Errors carry their documented SQLSTATE and write
-- nothing; false writes nothing either.
BEGIN;
SELECT plan(64);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'reserve_cart',
    ARRAY['bigint', 'uuid', 'bigint[]', 'bigint[]', 'integer[]', 'interval'],
    'reserve_cart(bigint, uuid, bigint[], bigint[], integer[], interval) exists');
SELECT function_returns('stockpool', 'reserve_cart',
    ARRAY['bigint', 'uuid', 'bigint[]', 'bigint[]', 'integer[]', 'interval'], 'boolean',
    'reserve_cart returns boolean');

SELECT is(stockpool.set_stock(1, 400, 1, 10), 10, 'key 400 at 10');
SELECT is(stockpool.set_stock(1, 401, 1, 10), 10, 'key 401 at 10');
SELECT is(stockpool.set_stock(1, 401, 2, 10) + stockpool.replenish_pool(1, 401, 2), 20,
    'key 401 at location 2 at 10, all pooled');
SELECT is(stockpool.set_stock(1, 402, 1, 2), 2, 'key 402 at 2');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- NULLs.
SELECT throws_ok($$SELECT stockpool.reserve_cart(NULL, '00000000-0000-0000-0000-0000000000f1', '{400}', '{1}', '{1}')$$,
    '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, NULL, '{400}', '{1}', '{1}')$$,
    '22004', NULL, 'NULL p_checkout_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', NULL, '{1}', '{1}')$$,
    '22004', NULL, 'NULL p_item_ids: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400}', NULL, '{1}')$$,
    '22004', NULL, 'NULL p_location_ids: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400}', '{1}', NULL)$$,
    '22004', NULL, 'NULL p_quantities: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400}', '{1}', '{1}', NULL)$$,
    '22004', NULL, 'NULL p_ttl: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,NULL}', '{1,1}', '{1,1}')$$,
    '22004', NULL, 'NULL item id element: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{1,NULL}', '{1,1}')$$,
    '22004', NULL, 'NULL location id element: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{1,1}', '{NULL,1}')$$,
    '22004', NULL, 'NULL quantity element: 22004');

-- Shapes and values.
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{}', '{}', '{}')$$,
    '22023', NULL, 'empty cart: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{1}', '{1,1}')$$,
    '22023', NULL, 'fewer location ids than item ids: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{1,1}', '{1,1,1}')$$,
    '22023', NULL, 'more quantities than item ids: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400}', '{}', '{1}')$$,
    '22023', NULL, 'empty location ids with one item id: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{{400,401},{401,402}}', '{1,1,2,1}', '{1,1,1,1}')$$,
    '22023', NULL, 'two-dimensional item ids: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{{1},{1}}', '{1,1}')$$,
    '22023', NULL, 'two-dimensional location ids of equal cardinality: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{1,1}', '{{1,1}}')$$,
    '22023', NULL, 'two-dimensional quantities of equal cardinality: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{1,1}', '{1,0}')$$,
    '22023', NULL, 'a zero quantity: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{1,1}', '{-1,2}')$$,
    '22023', NULL, 'a negative quantity: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400}', '{1}', '{1}', '0 seconds')$$,
    '22023', NULL, 'ttl 0: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400}', '{1}', '{1}', '-1 second')$$,
    '22023', NULL, 'negative ttl: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,400}', '{1,1}', '{2147483647,1}')$$,
    '22003', NULL, 'a key whose lines sum beyond integer: 22003');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,499}', '{1,1}', '{1,1}')$$,
    'SP001', NULL, 'one known and one unknown key: SP001');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401}', '{1,3}', '{1,1}')$$,
    'SP001', NULL, 'a known item at an unknown location: SP001');
SELECT throws_ok($$SELECT stockpool.reserve_cart(2, '00000000-0000-0000-0000-0000000000f1', '{400}', '{1}', '{1}')$$,
    'SP001', NULL, 'a known key in another shop: SP001');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'bad input and unknown keys write nothing (not even the known line)');

-- A cart.
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1',
        '{401,400,401}', '{2,1,1}', '{3,2,4}'),
    'a three-line cart in no particular order: true');
SELECT results_eq(
    $$SELECT item_id, location_id, quantity, status, expires_at FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000f1'
      ORDER BY item_id, location_id$$,
    $$VALUES (400::bigint, 1::bigint, 2, 'held'::text, now() + interval '15 minutes'),
             (401, 1, 4, 'held', now() + interval '15 minutes'),
             (401, 2, 3, 'held', now() + interval '15 minutes')$$,
    'one hold per line, default ttl 15 minutes');
SELECT results_eq(
    $$SELECT item_id, location_id, pooled, held FROM stockpool.stock_levels
      WHERE shop_id = 1 AND item_id IN (400, 401) ORDER BY item_id, location_id$$,
    $$VALUES (400::bigint, 1::bigint, 0, 2), (401, 1, 0, 4), (401, 2, 7, 3)$$,
    'each line''s units came from its ledger row, or from its pool for the pooled key (401 at 2)');

-- Retries: the same cart, in any order or split, is a no-op.
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1',
        '{401,400,401}', '{2,1,1}', '{3,2,4}'),
    'the same cart again: true');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1',
        '{400,401,401,400}', '{1,1,2,1}', '{1,4,3,1}', '1 hour'),
    'the same cart, reordered and with a line split in two: true');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'retries change nothing (no units, no expiry)');

-- SP007: the checkout holds other quantities, or some but not all lines.
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,401,401}', '{1,1,2}', '{2,4,2}')$$,
    'SP007', NULL, 'one line with another quantity: SP007');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,402}', '{1,1}', '{2,1}')$$,
    'SP007', NULL, 'one held line plus a new line: SP007');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'SP007 writes nothing');
-- Every line of this cart is held already (the checkout holds more): a no-op, as
-- reserve_units of one of the checkout's keys is.
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400}', '{1}', '{2}'),
    'a cart of one of the held lines: true');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'and a no-op');

-- A partly expired cart: a retry renews it; SP007 renews nothing.
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000f1' AND item_id = 400;
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1', '{400,402}', '{1,1}', '{2,1}')$$,
    'SP007', NULL, 'expired held line plus a new line: SP007');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'SP007 does not renew the expired line either');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f1',
        '{401,400,401}', '{2,1,1}', '{3,2,4}', '20 minutes'),
    'the same cart after one line expired unswept: true');
SELECT results_eq(
    $$SELECT item_id, location_id, status, expires_at FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000f1'
      ORDER BY item_id, location_id$$,
    $$VALUES (400::bigint, 1::bigint, 'held'::text, now() + interval '20 minutes'),
             (401, 1, 'held', now() + interval '15 minutes'),
             (401, 2, 'held', now() + interval '15 minutes')$$,
    'the expired line was renewed, the live ones kept their expiry');

-- All or nothing: one short line refuses the whole cart.
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT ok(NOT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f2',
        '{400,402}', '{1,1}', '{1,3}'),
    'a cart whose second line wants 3 of 2: false');
SELECT ok(NOT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f2',
        '{402,400}', '{1,1}', '{3,1}'),
    'the same cart with the short line first: false');
SELECT ok(NOT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f2',
        '{400,401}', '{1,1}', '{1,7}'),
    'a line wanting more than is free (6 of 10 free): false');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'false writes nothing: no hold row, every pool unchanged');

-- Repeated lines are summed, not each checked against the same availability.
SELECT ok(NOT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f3',
        '{402,402}', '{1,1}', '{2,1}'),
    'two lines of key 402 summing to 3 of 2: false');
SELECT ok(NOT stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f3',
        '{402,402,402}', '{1,1,1}', '{1,1,1}'),
    'three lines of 1 of key 402 (2 on hand): false');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'summed refusals write nothing');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f3',
        '{402,402}', '{1,1}', '{1,1}'),
    'two lines of 1 of key 402: true');
SELECT results_eq(
    $$SELECT item_id, quantity FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000f3'$$,
    $$VALUES (402::bigint, 2)$$,
    'repeated lines make one hold of the summed quantity');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f3', '{402}', '{1}', '{2}'),
    'retry as one line of 2: true (the same cart)');

-- A single line cart behaves as reserve_units; an expired unswept hold never refuses.
SELECT is(stockpool.set_stock(1, 403, 1, 3), 3, 'key 403 at 3');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f4', '{403}', '{1}', '{3}'),
    'f4 holds all 3 of key 403');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000f4';
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f5', '{403,400}', '{1,1}', '{3,1}'),
    'f4 expired unswept: f5''s cart gets all 3 (no undersell)');
SELECT is((SELECT status FROM stockpool.holds WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000f4'),
    'expired', 'f4''s hold was expired on the way');

-- A cart after a release takes units again.
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-0000000000f5'), 4, 'f5 releases its cart');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-0000000000f5', '{403}', '{1}', '{2}'),
    'and reserves another cart under the same checkout');
SELECT results_eq(
    $$SELECT item_id, quantity, status FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-0000000000f5' ORDER BY item_id$$,
    $$VALUES (400::bigint, 1, 'released'::text), (403, 2, 'held')$$,
    'the new line is held, the old one stays released');

SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold at the end');

SELECT * FROM finish();
ROLLBACK;
