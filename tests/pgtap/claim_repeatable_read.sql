-- stockpool.claim inside a caller's REPEATABLE READ transaction: it never
-- tries the ledger row (locking a row changed since the snapshot would raise
-- 40001), so every claim here is a real pending claim. On hand as read stays
-- exact while they are pending; set_stock folds them first.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT plan(12);

SELECT is(current_setting('transaction_isolation'), 'repeatable read', 'this file runs in REPEATABLE READ');
SELECT is(stockpool.set_stock(1, 1350, 1, 50), 50, 'key 1350 at 50');
SELECT is(
    (SELECT count(*)::integer FROM generate_series(1, 10) AS g (n)
     WHERE stockpool.reserve_units(1, 1350, 1, g.n, format('00000000-0000-0000-0002-%s', lpad(g.n::text, 12, '0'))::uuid)),
    9, 'checkouts hold 1, 2, ... 9 units; the tenth (55 asked of 50) is refused');
SELECT is(
    (SELECT sum(stockpool.claim(1, format('00000000-0000-0000-0002-%s', lpad(g.n::text, 12, '0'))::uuid))::integer
     FROM generate_series(1, 9) AS g (n)),
    45, 'nine claims return 1 + ... + 9 = 45 units');
SELECT is((SELECT count(*)::integer FROM stockpool.pending_claims WHERE item_id = 1350), 9,
    'each is a pending claim');
SELECT is((SELECT on_hand FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1350, 1)), 50,
    'the ledger row is untouched');
SELECT results_eq(
    $$SELECT on_hand, held, unsettled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1350, 1)$$,
    $$VALUES (5, 0, 45)$$, 'stock_levels: on hand 50 - 45 = 5 with nothing folded');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id = 1350$$,
    'invariants hold with every claim pending');
SELECT ok(NOT stockpool.reserve_units(1, 1350, 1, 6, '00000000-0000-0000-0002-000000000099'),
    '6 of the 5 left are refused');
SELECT is(stockpool.set_stock(1, 1350, 1, 4), 4, 'a cycle count finds 4');
SELECT results_eq(
    $$SELECT count(*)::integer, sum(delta)::integer FROM stockpool.movements
      WHERE (shop_id, item_id, location_id) = (1, 1350, 1)$$,
    $$VALUES (11, 4)$$, 'set, nine claims folded, the count of -1: the history sums to 4');
SELECT results_eq(
    $$SELECT on_hand, unsettled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1350, 1)$$,
    $$VALUES (4, 0)$$, 'nothing pending after set_stock');

SELECT * FROM finish();
ROLLBACK;
