-- stockpool.stock_levels: one row per key with on_hand, pooled, held (live
-- holds, expired but unswept included) and free = on_hand - pooled - held.
BEGIN;
SELECT plan(23);

SELECT has_view('stockpool', 'stock_levels', 'view stockpool.stock_levels exists');
SELECT columns_are('stockpool', 'stock_levels',
    ARRAY['shop_id', 'item_id', 'location_id', 'on_hand', 'pooled', 'held', 'free', 'unsettled'],
    'stock_levels has exactly its documented columns');
SELECT is(
    (SELECT array_agg(pg_catalog.format('%s %s', a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod))
                      ORDER BY a.attnum)
     FROM pg_catalog.pg_attribute AS a
     WHERE a.attrelid = 'stockpool.stock_levels'::regclass AND a.attnum > 0 AND NOT a.attisdropped),
    ARRAY['shop_id bigint', 'item_id bigint', 'location_id bigint', 'on_hand integer',
          'pooled integer', 'held integer', 'free integer', 'unsettled integer'],
    'column order and types');
SELECT ok((SELECT 'security_barrier=true' = ANY (c.reloptions) FROM pg_catalog.pg_class AS c
           WHERE c.oid = 'stockpool.stock_levels'::regclass),
    'stock_levels is a security_barrier view');
SELECT isnt(obj_description('stockpool.stock_levels'::regclass, 'pg_class'), NULL, 'stock_levels has a comment');

SELECT is_empty('SELECT * FROM stockpool.stock_levels WHERE shop_id = 1 AND item_id BETWEEN 1200 AND 1299',
    'no keys, no rows');

SELECT is(stockpool.set_stock(1, 1200, 1, 10), 10, 'key 1200 at 10');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1200, 1)$$,
    $$VALUES (10, 0, 0, 10)$$, 'a fresh key: all free, zeros not NULLs');
SELECT is(stockpool.replenish_pool(1, 1200, 1, 6), 6, '6 units pooled');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1200, 1)$$,
    $$VALUES (10, 6, 0, 4)$$, 'pooled 6, free 4');

SELECT ok(stockpool.reserve_units(1, 1200, 1, 2, '00000000-0000-0000-0000-000000000701'), '701 holds 2');
SELECT ok(stockpool.reserve_units(1, 1200, 1, 3, '00000000-0000-0000-0000-000000000702'), '702 holds 3');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1200, 1)$$,
    $$VALUES (10, 1, 5, 4)$$, 'two holds: held 5');

UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000702';
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1200, 1)$$,
    $$VALUES (10, 1, 5, 4)$$, 'an expired but unswept hold still counts as held (it owns its units)');
SELECT is(stockpool.sweep(), 1, 'the sweep expires it');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1200, 1)$$,
    $$VALUES (10, 4, 2, 4)$$, 'expired holds do not count; their units are pooled');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000701'), 2, '701 releases');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1200, 1)$$,
    $$VALUES (10, 6, 0, 4)$$, 'released holds do not count');
SELECT ok(stockpool.reserve_units(1, 1200, 1, 4, '00000000-0000-0000-0000-000000000703'), '703 holds 4');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000703'), 4, '703 claims');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1200, 1)$$,
    $$VALUES (6, 2, 0, 4)$$, 'claimed holds do not count; on hand fell by 4');

-- One row per key; each key only sees its own units.
SELECT lives_ok($$
    SELECT stockpool.set_stock(2, 1200, 1, 3), stockpool.set_stock(1, 1200, 2, 4),
           stockpool.reserve_units(2, 1200, 1, 1, '00000000-0000-0000-0000-000000000704')
$$, 'the same item in shop 2 and at location 2');
SELECT results_eq(
    $$SELECT shop_id, location_id, on_hand, pooled, held, free FROM stockpool.stock_levels
      WHERE item_id = 1200 ORDER BY shop_id, location_id$$,
    $$VALUES (1::bigint, 1::bigint, 6, 2, 0, 4), (1, 2, 4, 0, 0, 4), (2, 1, 3, 0, 1, 2)$$,
    'one row per key, none mixing another key''s units');

SELECT * FROM finish();
ROLLBACK;
