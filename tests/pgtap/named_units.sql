-- Named keys through the unchanged API: claim sells the units (a movement
-- says which went to which checkout, folded at once or pending), release
-- and expiry (sweep, maintain) free them, stock_levels and unit_status show
-- them, and check_invariants catches every broken shape of a named key
-- (negative controls: each corruption below must be reported, by name).
BEGIN;
SELECT plan(38);

SELECT is(stockpool.set_named_units(1, 2400, 1, '{S1,S2,S3,S4,S5,S6}'), 6, 'key 2400: 6 seats');
SELECT is(stockpool.reserve_labels(1, 2400, 1, '{S1,S2}', '00000000-0000-0000-0000-000000002401'), true,
    'checkout 1 holds S1 and S2');
SELECT is(stockpool.reserve_labels(1, 2400, 1, '{S3}', '00000000-0000-0000-0000-000000002402'), true,
    'checkout 2 holds S3');
SELECT is(stockpool.reserve_labels(1, 2400, 1, '{S4}', '00000000-0000-0000-0000-000000002403'), true,
    'checkout 3 holds S4');
SELECT is(stockpool.reserve_labels(1, 2400, 1, '{S5}', '00000000-0000-0000-0000-000000002404'), true,
    'checkout 4 holds S5');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free, unsettled FROM stockpool.stock_levels WHERE item_id = 2400$$,
    $$VALUES (6, 1, 5, 0, 0)$$, 'stock_levels: 6 on hand, 1 free (pooled), 5 held');

-- claim: the units are sold, the ledger row folds them, the movement names them.
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000002401'), 2, 'checkout 1 claims 2');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000002401'), 2, 'a retry: 2 again');
SELECT results_eq(
    $$SELECT delta, on_hand_after, reason, checkout_id, labels FROM stockpool.movements
      WHERE item_id = 2400 AND reason = 'claim'$$,
    $$VALUES (-2, 4, 'claim'::text, '00000000-0000-0000-0000-000000002401'::uuid, '{S1,S2}'::text[])$$,
    'one claim movement: -2, checkout 1, S1 and S2');
SELECT results_eq(
    $$SELECT on_hand, allocated FROM stockpool.stock WHERE item_id = 2400$$,
    $$VALUES (4, 4)$$, 'the ledger row: on hand 4, allocated 4');
-- A pending claim (the ledger row busy, as a REPEATABLE READ claim does it)
-- carries the labels too once folded.
SELECT is(stockpool._settle(1, 2400, 1, false), 0, 'nothing pending yet');
INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity)
VALUES (1, 2400, 1, '00000000-0000-0000-0000-000000002402', 1);
UPDATE stockpool.holds SET status = 'claimed' WHERE checkout_id = '00000000-0000-0000-0000-000000002402';
SELECT results_eq(
    $$SELECT on_hand, pooled, held, unsettled FROM stockpool.stock_levels WHERE item_id = 2400$$,
    $$VALUES (3, 1, 2, 1)$$, 'checkout 2''s claim pending: on hand 3 already, 1 unsettled');
SELECT is(stockpool.sweep(), 0, 'sweep: nothing overdue; the pending claim is folded');
SELECT results_eq(
    $$SELECT delta, on_hand_after, checkout_id, labels FROM stockpool.movements
      WHERE item_id = 2400 AND reason = 'claim' ORDER BY movement_id$$,
    $$VALUES (-2, 4, '00000000-0000-0000-0000-000000002401'::uuid, '{S1,S2}'::text[]),
             (-1, 3, '00000000-0000-0000-0000-000000002402', '{S3}')$$,
    'the folded claim names S3 and checkout 2');

-- release: free again.
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000002403'), 1, 'checkout 3 released: 1');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000002403'), 1, 'a retry: 1 again');
SELECT throws_ok($$SELECT stockpool.release(1, '00000000-0000-0000-0000-000000002401')$$, 'SP006', NULL,
    'a claimed checkout is not released: SP006');
-- expiry: sweep and maintain free overdue holds.
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE checkout_id = '00000000-0000-0000-0000-000000002404';
SELECT is(stockpool.sweep(), 1, 'sweep expires checkout 4''s overdue hold');
SELECT is(stockpool.reserve_labels(1, 2400, 1, '{S5}', '00000000-0000-0000-0000-000000002405'), true,
    'S5 held again, by checkout 5');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE checkout_id = '00000000-0000-0000-0000-000000002405';
SELECT results_eq($$SELECT expired FROM stockpool.maintain()$$, ARRAY[1], 'maintain expires checkout 5''s');
SELECT throws_ok($$SELECT stockpool.claim(1, '00000000-0000-0000-0000-000000002405')$$, 'SP004', NULL,
    'claiming an expired hold: SP004');
SELECT results_eq(
    $$SELECT label, position, status, checkout_id FROM stockpool.unit_status WHERE item_id = 2400 ORDER BY position$$,
    $$VALUES ('S1', 1, 'sold', '00000000-0000-0000-0000-000000002401'::uuid),
             ('S2', 2, 'sold', '00000000-0000-0000-0000-000000002401'),
             ('S3', 3, 'sold', '00000000-0000-0000-0000-000000002402'),
             ('S4', 4, 'free', NULL), ('S5', 5, 'free', NULL), ('S6', 6, 'free', NULL)$$,
    'unit_status: S1-S3 sold to their buyers, S4-S6 free');
SELECT ok((SELECT expires_at IS NULL FROM stockpool.unit_status WHERE label = 'S4' AND item_id = 2400),
    'a free unit has no expiry');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free, unsettled FROM stockpool.stock_levels WHERE item_id = 2400$$,
    $$VALUES (3, 3, 0, 0, 0)$$, 'stock_levels: 3 on hand, all free');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants()$$, 'healthy: check_invariants reports nothing');
SELECT is(stockpool.reserve_named(1, 2400, 1, 3, '00000000-0000-0000-0000-000000002406', p_adjacent => true),
    '{S4,S5,S6}', 'the three freed seats are together again');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000002406'), 3, 'and given back');

-- Negative controls: every corruption is reported.
CREATE FUNCTION pg_temp.found(p_invariant text, p_detail text) RETURNS boolean
LANGUAGE sql AS $$
    SELECT EXISTS (SELECT FROM stockpool.check_invariants() AS c
                   WHERE c.item_id = 2400 AND c.invariant = p_invariant AND c.detail ~ p_detail)
$$;
SAVEPOINT control;
DELETE FROM stockpool.named_free WHERE item_id = 2400 AND label = 'S4';
SELECT ok(pg_temp.found('unit', 'unit S4 \(position 4\) is neither free, held nor sold'),
    'control: a unit lost from the free units is reported (unit)');
SELECT ok(pg_temp.found('allocation', 'allocated 3 <> pooled 2'), 'control: and the ledger no longer adds up');
ROLLBACK TO SAVEPOINT control;
UPDATE stockpool.holds SET labels = '{S2,S3}', quantity = 2 WHERE checkout_id = '00000000-0000-0000-0000-000000002402';
SELECT ok(pg_temp.found('unit', 'unit S2 is held or sold by 2 checkouts'), 'control: a unit sold twice is reported');
ROLLBACK TO SAVEPOINT control;
UPDATE stockpool.holds SET labels = '{S4}' WHERE checkout_id = '00000000-0000-0000-0000-000000002402';
SELECT ok(pg_temp.found('unit', 'unit S4 is free and held or sold'), 'control: a unit both free and sold is reported');
ROLLBACK TO SAVEPOINT control;
UPDATE stockpool.holds SET labels = '{Z9}' WHERE checkout_id = '00000000-0000-0000-0000-000000002402';
SELECT ok(pg_temp.found('unit', 'held or sold unit Z9 is not a unit of the key'),
    'control: a hold of a unit the key does not have is reported');
ROLLBACK TO SAVEPOINT control;
UPDATE stockpool.named_free SET position = 40 WHERE item_id = 2400 AND label = 'S4';
SELECT ok(pg_temp.found('unit', 'unit S4 is free at position 40, its position is 4'),
    'control: a free unit at the wrong position is reported');
ROLLBACK TO SAVEPOINT control;
UPDATE stockpool.stock SET on_hand = on_hand + 1, allocated = allocated + 1 WHERE item_id = 2400;
SELECT ok(pg_temp.found('unit', 'named key with on_hand 4 but 3 free and 0 held'),
    'control: a named key with more on hand than units is reported');
ROLLBACK TO SAVEPOINT control;
INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket) VALUES (1, 2400, 1, 0);
SELECT ok(pg_temp.found('mixed', 'named key with pool units'), 'control: pool units on a named key are reported');
ROLLBACK TO SAVEPOINT control;
UPDATE stockpool.holds SET labels = NULL WHERE checkout_id = '00000000-0000-0000-0000-000000002402';
SELECT ok(pg_temp.found('mixed', 'without labels on a named key'), 'control: a hold without labels is reported');
ROLLBACK TO SAVEPOINT control;
UPDATE stockpool.stock SET named = false WHERE item_id = 2400;
SELECT ok(pg_temp.found('mixed', 'counted key with named units'), 'control: units on a counted key are reported');
ROLLBACK TO SAVEPOINT control;
SELECT is_empty($$SELECT * FROM stockpool.check_invariants()$$, 'and healthy again once each is undone');

SELECT * FROM finish();
ROLLBACK;
