-- A whole catalogue (migration 0006): a key nobody contends is served from its
-- ledger row like a counter and keeps no pool; a key gets a small pool once
-- its buyers meet (a refill), sized by demand afterwards; a pool not refilled
-- for 60 seconds goes back to the ledger row at the next sweep.
-- tests/isolation/specs/ledger-or-pool.spec shows two buyers meeting.
BEGIN;
SELECT plan(34);

SELECT has_function('stockpool', '_take_ledger', ARRAY['bigint', 'bigint', 'bigint', 'integer'],
    '_take_ledger(bigint, bigint, bigint, integer) exists');
SELECT has_function('stockpool', '_cool', ARRAY['bigint', 'bigint', 'bigint', 'interval'],
    '_cool(bigint, bigint, bigint, interval) exists');

-- Quiet keys: units straight from the ledger row, no pool rows at all.
SELECT is(
    (SELECT sum(stockpool.set_stock(1, g.n, 1, 500))::integer FROM generate_series(1400, 1449) AS g (n)),
    50 * 500, 'fifty keys of 500 units (items 1400..1449)');
SELECT is(
    (SELECT count(*)::integer FROM generate_series(1400, 1449) AS g (n), generate_series(1, 3) AS r (n)
     WHERE stockpool.reserve_units(1, g.n, 1, r.n, gen_random_uuid())),
    150, 'three reservations of each key (1, 2 and 3 units): all held');
SELECT is((SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id BETWEEN 1400 AND 1449), 0,
    'and not one pool row: every unit came from a ledger row');
SELECT results_eq(
    $$SELECT DISTINCT on_hand, pooled, held, free FROM stockpool.stock_levels
      WHERE shop_id = 1 AND item_id BETWEEN 1400 AND 1449$$,
    $$VALUES (500, 0, 6, 494)$$, 'each key: 6 held, 494 free, nothing pooled');
SELECT results_eq(
    $$SELECT DISTINCT allocated, pool_target FROM stockpool.stock WHERE shop_id = 1 AND item_id BETWEEN 1400 AND 1449$$,
    $$VALUES (6, 0)$$, 'the ledger rows count the held units as allocated; no key is pooled');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id BETWEEN 1400 AND 1449$$,
    'invariants hold');
SELECT ok(stockpool.reserve_units(1, 1400, 1, 494, '00000000-0000-0000-0003-000000000009'),
    'a reservation of all that is free');
SELECT ok(NOT stockpool._take_ledger(1, 1400, 1, 1), '_take_ledger: nothing free, nothing taken');
SELECT is((SELECT allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1400, 1)), 500,
    'allocated 500 of 500, still no pool');
SELECT is((SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id = 1400), 0, 'no pool row for it');

-- A first refill (buyers met) makes a small pool, not pool_cap.
SELECT is((SELECT pool_cap FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1401, 1)), 1000,
    'the key''s pool_cap is the default 1000');
SELECT is(stockpool._refill(1, 1401, 1, p_min_extra => 1, p_wait => true, p_low_water_only => false), 16, 'its first refill adds 16 units');
SELECT results_eq(
    $$SELECT pool_target, allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1401, 1)$$,
    $$VALUES (16, 22)$$, 'pool_target 16; allocated 6 held + 16 pooled');
SELECT ok(stockpool.reserve_units(1, 1401, 1, 1, '00000000-0000-0000-0003-000000000001'),
    'a reservation of a pooled key');
SELECT results_eq(
    $$SELECT pooled, held FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1401, 1)$$,
    $$VALUES (15, 7)$$, 'came from the pool, not the ledger row');
SELECT is(stockpool._take_ledger(1, 1401, 1, 1), false, '_take_ledger leaves a pooled key alone');
-- The next refill follows demand: 16 given out in the 5 seconds since the last.
UPDATE stockpool.stock SET refilled_at = now() - interval '5 seconds'
WHERE (shop_id, item_id, location_id) = (1, 1401, 1);
DELETE FROM stockpool.pool_units WHERE (shop_id, item_id, location_id) = (1, 1401, 1) AND shop_id = 1;
UPDATE stockpool.stock SET allocated = allocated - 15 WHERE (shop_id, item_id, location_id) = (1, 1401, 1);
SELECT is(stockpool._refill(1, 1401, 1, p_min_extra => 0, p_wait => true, p_low_water_only => false), 32,
    'a pool emptied in 5 s is refilled to twice its level at most (64 would be 20 s of that demand)');

-- A pool quiet for 60 s goes back to the ledger row at the next sweep.
SELECT is(stockpool.set_stock(1, 1450, 1, 100), 100, 'key 1450 at 100');
SELECT is(stockpool.replenish_pool(1, 1450, 1, 40), 40, 'pre-filled with 40 units');
SELECT ok(stockpool.reserve_units(1, 1450, 1, 2, '00000000-0000-0000-0003-000000000002'), '2 held from the pool');
SELECT is(stockpool.sweep(), 0, 'a sweep right away');
SELECT is((SELECT pooled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1450, 1)), 38,
    'leaves a pool refilled moments ago alone');
UPDATE stockpool.stock SET refilled_at = now() - interval '61 seconds'
WHERE (shop_id, item_id, location_id) = (1, 1450, 1);
SELECT is(stockpool.sweep(), 0, 'a sweep after 61 quiet seconds');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1450, 1)$$,
    $$VALUES (100, 0, 2, 98)$$, 'hands the 38 pooled units back to the ledger row; the hold stays');
SELECT results_eq(
    $$SELECT allocated, pool_target FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1450, 1)$$,
    $$VALUES (2, 0)$$, 'allocated is the hold alone; the key is no longer pooled');
SELECT ok(stockpool.reserve_units(1, 1450, 1, 1, '00000000-0000-0000-0003-000000000003'), 'the next reservation');
SELECT results_eq(
    $$SELECT pooled, held FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1450, 1)$$,
    $$VALUES (0, 3)$$, 'comes from the ledger row again');
SELECT is(stockpool.release(1, '00000000-0000-0000-0003-000000000002'), 2, 'a release of the key without a pool');
SELECT results_eq(
    $$SELECT s.allocated, l.pooled, l.held FROM stockpool.stock AS s
      JOIN stockpool.stock_levels AS l USING (shop_id, item_id, location_id)
      WHERE (s.shop_id, s.item_id, s.location_id) = (1, 1450, 1)$$,
    $$VALUES (1, 0, 1)$$, 'gives its units back to the ledger row, not to a pool');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0003-000000000003';
SELECT is(stockpool.sweep(), 1, 'the last hold expires');
SELECT results_eq(
    $$SELECT s.allocated, l.pooled, l.held FROM stockpool.stock AS s
      JOIN stockpool.stock_levels AS l USING (shop_id, item_id, location_id)
      WHERE (s.shop_id, s.item_id, s.location_id) = (1, 1450, 1)$$,
    $$VALUES (0, 0, 0)$$, 'and its unit too goes back to the ledger row');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id BETWEEN 1400 AND 1450$$,
    'invariants hold for every key of this file');

SELECT * FROM finish();
ROLLBACK;
