-- stockpool.release: a checkout's live holds end and their units go back to
-- the ledger row of a key without a pool, else to the pool; a retry returns the same number. Unknown SP003, claimed SP006,
-- each writing nothing.
BEGIN;
SELECT plan(36);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'release', ARRAY['bigint', 'uuid'], 'release(bigint, uuid) exists');
SELECT function_returns('stockpool', 'release', ARRAY['bigint', 'uuid'], 'integer', 'release returns integer');

SELECT is(stockpool.set_stock(1, 600, 1, 10), 10, 'key 600 at 10');
SELECT is(stockpool.set_stock(1, 601, 1, 10), 10, 'key 601 at 10');
SELECT is(stockpool.replenish_pool(1, 601, 1), 10, 'key 601 pooled (key 600 is not)');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000201', '{600,601}', '{1,1}', '{3,4}'),
    'checkout 201 holds 3 of key 600 and 4 of key 601');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Bad input and unknown checkouts.
SELECT throws_ok($$SELECT stockpool.release(NULL, '00000000-0000-0000-0000-000000000201')$$,
    '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok($$SELECT stockpool.release(1, NULL)$$,
    '22004', NULL, 'NULL p_checkout_id: 22004');
SELECT throws_ok($$SELECT stockpool.release(1, '00000000-0000-0000-0000-000000000299')$$,
    'SP003', NULL, 'a checkout that never reserved: SP003');
SELECT throws_ok($$SELECT stockpool.release(2, '00000000-0000-0000-0000-000000000201')$$,
    'SP003', NULL, 'a known checkout released in another shop: SP003');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'bad input and unknown checkouts write nothing');

-- The release.
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000201'), 7, 'release returns the 7 units held');
SELECT results_eq(
    $$SELECT item_id, status FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000201' ORDER BY item_id$$,
    $$VALUES (600::bigint, 'released'::text), (601, 'released')$$,
    'both holds are released');
SELECT results_eq(
    $$SELECT item_id, on_hand, pooled, held, free FROM stockpool.stock_levels
      WHERE shop_id = 1 AND item_id IN (600, 601) ORDER BY item_id$$,
    $$VALUES (600::bigint, 10, 0, 0, 10), (601, 10, 10, 0, 0)$$,
    'the units are back: key 600''s on its ledger row (no pool), key 601''s in its pool; on hand unchanged');
SELECT results_eq(
    $$SELECT item_id, allocated FROM stockpool.stock WHERE shop_id = 1 AND item_id IN (600, 601) ORDER BY item_id$$,
    $$VALUES (600::bigint, 0), (601, 10)$$,
    'allocated: key 600''s went down (units free on the ledger row), key 601''s unchanged (hold to pool)');
SELECT is((SELECT count(*)::integer FROM stockpool.movements WHERE shop_id = 1 AND item_id IN (600, 601)),
    2, 'a release records no movement');

-- A retry returns the same number and releases nothing twice.
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000201'), 7, 'retry: the same 7');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000201'), 7, 'second retry: the same 7');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'retries write nothing (no units added to the pool twice)');

-- Release after claim: SP006.
SELECT ok(stockpool.reserve_units(1, 600, 1, 2, '00000000-0000-0000-0000-000000000202'),
    'checkout 202 holds 2');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000202'), 2, 'and claims them');
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.release(1, '00000000-0000-0000-0000-000000000202')$$,
    'SP006', NULL, 'release after claim: SP006');
SELECT throws_ok($$SELECT stockpool.release(1, '00000000-0000-0000-0000-000000000202')$$,
    'SP006', NULL, 'and again: SP006');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'SP006 writes nothing: claimed stock stays claimed');

-- An expired but unswept hold is released like a live one.
SELECT ok(stockpool.reserve_units(1, 601, 1, 5, '00000000-0000-0000-0000-000000000203'),
    'checkout 203 holds 5');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000203';
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000203'), 5,
    'release of an overdue, unswept hold returns its 5 units');
SELECT is(stockpool.sweep(), 0, 'nothing left for the sweeper');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 601, 1)$$,
    $$VALUES (10, 10, 0, 0)$$,
    'key 601: all 10 units back in the pool, once');

-- A checkout whose holds all expired and were swept: 0, nothing to give back.
SELECT ok(stockpool.reserve_units(1, 601, 1, 4, '00000000-0000-0000-0000-000000000204'),
    'checkout 204 holds 4');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000204';
SELECT is(stockpool.sweep(), 1, 'its hold is swept');
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000204'), 0,
    'release after the sweep returns 0: the units went back at expiry');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'and adds no unit to the pool a second time');

-- A claimed checkout holding a new key releases the new key only.
SELECT ok(stockpool.reserve_units(1, 601, 1, 1, '00000000-0000-0000-0000-000000000202'),
    'claimed checkout 202 holds 1 of another key');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000202'), 1,
    'release gives back the 1 held unit, not the claimed ones');
SELECT results_eq(
    $$SELECT item_id, status FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000202' ORDER BY item_id$$,
    $$VALUES (600::bigint, 'claimed'::text), (601, 'released')$$,
    'the claimed hold stays claimed');

SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold at the end');

SELECT * FROM finish();
ROLLBACK;
