-- stockpool.sweep: expire up to p_batch overdue holds, oldest first, and put
-- their units back into their pools; NULL 22004, p_batch <= 0 22023.
BEGIN;
SELECT plan(26);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'sweep', ARRAY['integer'], 'sweep(integer) exists');
SELECT function_returns('stockpool', 'sweep', ARRAY['integer'], 'integer', 'sweep returns integer');
SELECT is(pg_catalog.pg_get_function_arguments('stockpool.sweep(integer)'::regprocedure),
    'p_batch integer DEFAULT 500', 'p_batch defaults to 500');

SELECT is(stockpool.set_stock(1, 700, 1, 10), 10, 'key 700 at 10');
SELECT is(stockpool.set_stock(1, 701, 1, 10) + stockpool.replenish_pool(1, 701, 1), 20,
    'key 701 at 10, all pooled (700 has no pool)');
SELECT ok(stockpool.reserve_units(1, 700, 1, 1, '00000000-0000-0000-0000-000000000301'), '301 holds 1 of key 700');
SELECT ok(stockpool.reserve_units(1, 700, 1, 2, '00000000-0000-0000-0000-000000000302'), '302 holds 2 of key 700');
SELECT ok(stockpool.reserve_units(1, 701, 1, 3, '00000000-0000-0000-0000-000000000303'), '303 holds 3 of key 701');
SELECT ok(stockpool.reserve_units(1, 701, 1, 4, '00000000-0000-0000-0000-000000000304'), '304 holds 4 of key 701');
SELECT ok(stockpool.reserve_units(1, 700, 1, 1, '00000000-0000-0000-0000-000000000305'), '305 holds 1 of key 700');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000305'), 1, '305 claims');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Bad input.
SELECT throws_ok('SELECT stockpool.sweep(NULL)', '22004', NULL, 'NULL p_batch: 22004');
SELECT throws_ok('SELECT stockpool.sweep(0)', '22023', NULL, 'p_batch 0: 22023');
SELECT throws_ok('SELECT stockpool.sweep(-5)', '22023', NULL, 'negative p_batch: 22023');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'bad input writes nothing');

-- Nothing due.
SELECT is(stockpool.sweep(), 0, 'no hold is overdue: 0');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'a sweep with nothing due writes nothing');

-- Three overdue (one exactly at now()), one live, one claimed long ago.
UPDATE stockpool.holds SET expires_at = now() - interval '3 minutes'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000303';
UPDATE stockpool.holds SET expires_at = now() - interval '2 minutes'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000301';
UPDATE stockpool.holds SET expires_at = now()
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000302';
UPDATE stockpool.holds SET expires_at = now() - interval '1 hour'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000305';

SELECT is(stockpool.sweep(2), 2, 'sweep(2) expires 2 holds');
SELECT results_eq(
    $$SELECT checkout_id, status FROM stockpool.holds WHERE shop_id = 1 AND item_id IN (700, 701) ORDER BY checkout_id$$,
    $$VALUES ('00000000-0000-0000-0000-000000000301'::uuid, 'expired'::text),
             ('00000000-0000-0000-0000-000000000302', 'held'),
             ('00000000-0000-0000-0000-000000000303', 'expired'),
             ('00000000-0000-0000-0000-000000000304', 'held'),
             ('00000000-0000-0000-0000-000000000305', 'claimed')$$,
    'the two that expired first went first; claimed holds are never swept');
SELECT is(stockpool.sweep(2), 1, 'the next sweep expires the last overdue hold (expires_at = now())');
SELECT is(stockpool.sweep(2), 0, 'then nothing is due');
SELECT results_eq(
    $$SELECT checkout_id, status FROM stockpool.holds WHERE shop_id = 1 AND item_id IN (700, 701) ORDER BY checkout_id$$,
    $$VALUES ('00000000-0000-0000-0000-000000000301'::uuid, 'expired'::text),
             ('00000000-0000-0000-0000-000000000302', 'expired'),
             ('00000000-0000-0000-0000-000000000303', 'expired'),
             ('00000000-0000-0000-0000-000000000304', 'held'),
             ('00000000-0000-0000-0000-000000000305', 'claimed')$$,
    'only the live hold and the claimed one are left as they were');
SELECT results_eq(
    $$SELECT item_id, on_hand, pooled, held, free FROM stockpool.stock_levels
      WHERE shop_id = 1 AND item_id IN (700, 701) ORDER BY item_id$$,
    $$VALUES (700::bigint, 9, 0, 0, 9), (701, 10, 6, 4, 0)$$,
    'expired units went back: key 700''s to its ledger row (no pool), key 701''s to its own pool');
SELECT results_eq(
    $$SELECT item_id, on_hand, allocated FROM stockpool.stock WHERE shop_id = 1 AND item_id IN (700, 701) ORDER BY item_id$$,
    $$VALUES (700::bigint, 9, 0), (701, 10, 10)$$,
    'on hand is untouched by a sweep; only key 700''s allocated fell (its units are free again)');
SELECT is((SELECT count(*)::integer FROM stockpool.movements WHERE shop_id = 1 AND item_id IN (700, 701)),
    3, 'a sweep records no movement');
SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold after sweeping');

SELECT * FROM finish();
ROLLBACK;
