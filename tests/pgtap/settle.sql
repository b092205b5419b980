-- Settling (stockpool._settle): claims recorded while their key's ledger row
-- was busy are pending; on hand as read stays exact while they are, and the
-- next transaction that finds the row free folds them: a later claimer, a
-- sweep, set_stock, adjust_stock, a refill. Their movements are written in
-- claim order, so the history replays to the ledger in movement_id order.
--
-- One session cannot hold a ledger row against itself, so a claim that met a
-- busy row is produced here by pg_temp.claim_while_busy, which writes exactly
-- what claim writes on that branch (the holds claimed, one pending row per
-- key). tests/isolation/specs/claims-do-not-queue.spec and
-- tests/python/test_settle.py make real claims meet a busy row.
BEGIN;
SELECT plan(71);

CREATE FUNCTION pg_temp.claim_while_busy(p_shop_id bigint, p_checkout_id uuid)
RETURNS integer
LANGUAGE sql
AS $$
    WITH claimed AS (
        UPDATE stockpool.holds AS h
        SET status = 'claimed', updated_at = clock_timestamp()
        WHERE h.shop_id = p_shop_id AND h.checkout_id = p_checkout_id AND h.status = 'held'
        RETURNING h.item_id, h.location_id, h.quantity
    ),
    pending AS (
        INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity)
        SELECT p_shop_id, c.item_id, c.location_id, p_checkout_id, c.quantity
        FROM claimed AS c
        RETURNING quantity
    )
    SELECT sum(quantity)::integer FROM pending;
$$;

-- The history of a key replayed in movement_id order: rows where a movement's
-- on_hand_after is not the running sum, and the ledger when it is not the sum.
CREATE FUNCTION pg_temp.replay_errors(p_item_id bigint)
RETURNS SETOF text
LANGUAGE sql
AS $$
    WITH chain AS (
        SELECT m.movement_id, m.on_hand_after,
               sum(m.delta) OVER (ORDER BY m.movement_id) AS replayed
        FROM stockpool.movements AS m
        WHERE (m.shop_id, m.item_id, m.location_id) = (1, p_item_id, 1)
    )
    SELECT format('movement %s: on_hand_after %s, replayed %s', c.movement_id, c.on_hand_after, c.replayed)
    FROM chain AS c
    WHERE c.on_hand_after <> c.replayed
    UNION ALL
    SELECT format('ledger %s, history %s', s.on_hand, coalesce(h.total, 0))
    FROM stockpool.stock AS s
    CROSS JOIN (SELECT sum(m.delta) AS total FROM stockpool.movements AS m
                WHERE (m.shop_id, m.item_id, m.location_id) = (1, p_item_id, 1)) AS h
    WHERE (s.shop_id, s.item_id, s.location_id) = (1, p_item_id, 1)
        AND s.on_hand <> coalesce(h.total, 0)
$$;

SELECT has_function('stockpool', '_settle', ARRAY['bigint', 'bigint', 'bigint', 'boolean', 'uuid', 'integer'],
    '_settle(bigint, bigint, bigint, boolean, uuid, integer) exists');
SELECT is(stockpool._settle(1, 1399, 1, false), NULL, 'an unknown key: NULL, nothing to fold');

-- Key 1300 at 10; checkouts 801..804 hold 1, 2, 3 and 1 unit.
SELECT is(stockpool.set_stock(1, 1300, 1, 10), 10, 'key 1300 at 10');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 1, '00000000-0000-0000-0000-000000000801'), '801 holds 1');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 2, '00000000-0000-0000-0000-000000000802'), '802 holds 2');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 3, '00000000-0000-0000-0000-000000000803'), '803 holds 3');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 1, '00000000-0000-0000-0000-000000000804'), '804 holds 1');

-- A free row: the claim folds its own units at once, nothing stays pending.
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000801'), 1, '801 claims 1 with the row free');
SELECT is_empty($$SELECT * FROM stockpool.pending_claims WHERE item_id = 1300$$,
    'a claim that found the row free leaves no pending claim');
SELECT results_eq(
    $$SELECT on_hand, allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1300, 1)$$,
    $$VALUES (9, 6)$$, 'the ledger row itself fell by 1 (on hand and allocated; 6 units still held)');

-- Two claims meet a busy row: pending.
SELECT is(pg_temp.claim_while_busy(1, '00000000-0000-0000-0000-000000000802'), 2, '802 claims 2 while the row is busy');
SELECT is(pg_temp.claim_while_busy(1, '00000000-0000-0000-0000-000000000803'), 3, '803 claims 3 while the row is busy');
SELECT results_eq(
    $$SELECT on_hand, allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1300, 1)$$,
    $$VALUES (9, 6)$$, 'the ledger row is untouched by the pending claims');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free, unsettled FROM stockpool.stock_levels
      WHERE (shop_id, item_id, location_id) = (1, 1300, 1)$$,
    $$SELECT 4, pooled, 1, 4 - pooled - 1, 5 FROM stockpool.stock_levels
      WHERE (shop_id, item_id, location_id) = (1, 1300, 1)$$,
    'stock_levels: on hand 10 - 1 - 2 - 3 = 4 while 5 units are pending; 1 held');
SELECT is((SELECT free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1300, 1)),
    (SELECT on_hand - allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1300, 1)),
    'free stock is the ledger''s on_hand - allocated, pending or not');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id = 1300$$,
    'invariants hold with claims pending');
SELECT is_empty($$SELECT * FROM pg_temp.replay_errors(1300)$$,
    'the history replays to the ledger row with claims pending');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000802'), 2, 'a retry of a pending claim returns 2');
SELECT is((SELECT count(*)::integer FROM stockpool.pending_claims WHERE item_id = 1300), 2,
    'and records nothing twice');
SELECT throws_ok($$SELECT stockpool.release(1, '00000000-0000-0000-0000-000000000803')$$,
    'SP006', NULL, 'a pending claim is claimed: release refuses it (SP006)');
SELECT ok(NOT stockpool.reserve_units(1, 1300, 1, 4, '00000000-0000-0000-0000-000000000805'),
    'on hand 4 with 1 held: a reservation of 4 is refused');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 3, '00000000-0000-0000-0000-000000000805'),
    'and one of 3 is held (no undersell: pending units are sold, the rest is free)');

-- A later claimer folds them with its own, in claim order.
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000804'), 1, '804 claims 1 with the row free');
SELECT is_empty($$SELECT * FROM stockpool.pending_claims WHERE item_id = 1300$$,
    'the later claimer folded every pending claim of the key');
SELECT results_eq(
    $$SELECT delta, on_hand_after, checkout_id FROM stockpool.movements
      WHERE (shop_id, item_id, location_id) = (1, 1300, 1) AND reason = 'claim' ORDER BY movement_id$$,
    $$VALUES (-1, 9, '00000000-0000-0000-0000-000000000801'::uuid),
             (-2, 7, '00000000-0000-0000-0000-000000000802'),
             (-3, 4, '00000000-0000-0000-0000-000000000803'),
             (-1, 3, '00000000-0000-0000-0000-000000000804')$$,
    'one movement per claim, in claim order, each with the on hand after it');
SELECT results_eq(
    $$SELECT on_hand, allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1300, 1)$$,
    $$VALUES (3, 3)$$, 'the ledger row absorbed 1 + 2 + 3 + 1 in all: on hand 3, the 3 held');
SELECT results_eq(
    $$SELECT on_hand, held, unsettled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1300, 1)$$,
    $$VALUES (3, 3, 0)$$, 'stock_levels agrees, nothing unsettled');
SELECT is_empty($$SELECT * FROM pg_temp.replay_errors(1300)$$, 'the history replays in movement_id order');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id = 1300$$, 'invariants hold after the fold');

-- After N claims and no settling at all, on hand is the initial figure minus N.
SELECT is(stockpool.set_stock(1, 1301, 1, 100), 100, 'key 1301 at 100');
SELECT is(
    (SELECT count(*)::integer FROM generate_series(1, 30) AS g (n)
     WHERE stockpool.reserve_units(1, 1301, 1, 1, format('00000000-0000-0000-0001-%s', lpad(g.n::text, 12, '0'))::uuid)),
    30, '30 checkouts hold 1 unit each');
SELECT is(
    (SELECT sum(pg_temp.claim_while_busy(1, format('00000000-0000-0000-0001-%s', lpad(g.n::text, 12, '0'))::uuid))::integer
     FROM generate_series(1, 30) AS g (n)),
    30, 'all 30 claim while the row is busy');
SELECT results_eq(
    $$SELECT on_hand, held, unsettled FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1301, 1)$$,
    $$VALUES (70, 0, 30)$$, 'stock_levels: on hand 100 - 30 with nothing folded');
SELECT is((SELECT on_hand FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1301, 1)), 100,
    'the ledger row still says 100');

-- A sweep folds them (it finds the row free).
SELECT is(stockpool.sweep(), 0, 'a sweep with no overdue hold expires nothing');
SELECT is_empty($$SELECT * FROM stockpool.pending_claims WHERE item_id = 1301$$, 'and folds every pending claim');
SELECT results_eq(
    $$SELECT on_hand, allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1301, 1)$$,
    $$VALUES (70, 0)$$, 'the ledger row now says 70, nothing allocated');
SELECT is((SELECT count(*)::integer FROM stockpool.movements
           WHERE (shop_id, item_id, location_id) = (1, 1301, 1) AND reason = 'claim'), 30,
    'thirty claim movements');
SELECT is_empty($$SELECT * FROM pg_temp.replay_errors(1301)$$, 'replaying to 70');

-- set_stock folds first: the cycle count is of the true figure.
SELECT is(stockpool.set_stock(1, 1302, 1, 20), 20, 'key 1302 at 20');
SELECT ok(stockpool.reserve_units(1, 1302, 1, 5, '00000000-0000-0000-0000-000000000811'), '811 holds 5');
SELECT is(pg_temp.claim_while_busy(1, '00000000-0000-0000-0000-000000000811'), 5, '811 claims while the row is busy');
SELECT is(stockpool.set_stock(1, 1302, 1, 12), 12, 'a cycle count finds 12');
SELECT results_eq(
    $$SELECT delta, on_hand_after, reason FROM stockpool.movements
      WHERE (shop_id, item_id, location_id) = (1, 1302, 1) ORDER BY movement_id$$,
    $$VALUES (20, 20, 'set'::text), (-5, 15, 'claim'), (-3, 12, 'set')$$,
    'the pending claim is folded first (on hand 15), then the count records -3, not -8');
SELECT is_empty($$SELECT * FROM stockpool.pending_claims WHERE item_id = 1302$$, 'nothing pending after set_stock');

-- adjust_stock folds first, relative to the true figure.
SELECT ok(stockpool.reserve_units(1, 1302, 1, 2, '00000000-0000-0000-0000-000000000812'), '812 holds 2');
SELECT is(pg_temp.claim_while_busy(1, '00000000-0000-0000-0000-000000000812'), 2, '812 claims while the row is busy');
SELECT is(stockpool.adjust_stock(1, 1302, 1, 1), 11, 'adjust_stock +1 answers 12 - 2 + 1 = 11');
SELECT is_empty($$SELECT * FROM pg_temp.replay_errors(1302)$$, 'the history replays to 11');

-- A refill folds while it holds the row.
SELECT is(stockpool.set_stock(1, 1303, 1, 10), 10, 'key 1303 at 10');
SELECT lives_ok($$SELECT stockpool.configure_pool(1, 1303, 1, p_pool_cap => 2, p_low_water => 1)$$,
    'with a pool of 2');
SELECT ok(stockpool.reserve_units(1, 1303, 1, 1, '00000000-0000-0000-0000-000000000821'), '821 holds 1');
SELECT is(pg_temp.claim_while_busy(1, '00000000-0000-0000-0000-000000000821'), 1, '821 claims while the row is busy');
SELECT is(stockpool.replenish_pool(1, 1303, 1), 2, 'replenish_pool fills the pool of 2 (821''s unit came from the ledger row)');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free, unsettled FROM stockpool.stock_levels
      WHERE (shop_id, item_id, location_id) = (1, 1303, 1)$$,
    $$VALUES (9, 2, 0, 7, 0)$$, 'and folded the pending claim: on hand 9, nothing unsettled');
SELECT is((SELECT on_hand FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 1303, 1)), 9,
    'the ledger row says 9');

-- A pooled key (a hot one): its claims are pending even while the row is
-- free, and one claim in 16 (its checkout id's uuid_hash a multiple of 16)
-- folds the key's pending claims, so the ledger row takes about one update
-- per 16 claims. pg_temp.buyers: 15 checkouts that do not fold, then one
-- that does, then one more that does not, in that order.
CREATE TEMPORARY TABLE buyers AS
WITH ids AS (
    SELECT n, ('00000000-0000-0000-0000-' || lpad(to_hex(5120 + n), 12, '0'))::uuid AS checkout_id
    FROM generate_series(1, 400) AS n
),
plain AS (
    SELECT checkout_id, row_number() OVER (ORDER BY n) AS k FROM ids WHERE uuid_hash(checkout_id) % 16 <> 0
),
folder AS (
    SELECT checkout_id FROM ids WHERE uuid_hash(checkout_id) % 16 = 0 ORDER BY n LIMIT 1
)
SELECT k AS turn, checkout_id FROM plain WHERE k <= 15
UNION ALL SELECT 16, checkout_id FROM folder
UNION ALL SELECT 17, checkout_id FROM plain WHERE k = 16;
SELECT is((SELECT count(*)::integer FROM pg_temp.buyers), 17, '17 buyers, one of them a folder');

SELECT is(stockpool.set_stock(1, 1304, 1, 100), 100, 'key 1304 at 100');
SELECT is(stockpool.replenish_pool(1, 1304, 1, 40), 40, 'a pool of 40: a pooled key');
SELECT ok(bool_and(stockpool.reserve_units(1, 1304, 1, 1, checkout_id)), 'the 17 hold one unit each')
FROM pg_temp.buyers;
SELECT is(sum(stockpool.claim(1, checkout_id))::integer, 15, 'the first 15 claim with the row free')
FROM (SELECT checkout_id FROM pg_temp.buyers WHERE turn <= 15 ORDER BY turn) AS b;
SELECT is((SELECT count(*)::integer FROM stockpool.pending_claims WHERE item_id = 1304), 15,
    'all 15 are pending: a pooled key''s claim does not fold at once');
SELECT results_eq(
    $$SELECT s.on_hand, l.on_hand, l.unsettled
      FROM stockpool.stock AS s JOIN stockpool.stock_levels AS l USING (shop_id, item_id, location_id)
      WHERE (s.shop_id, s.item_id, s.location_id) = (1, 1304, 1)$$,
    $$VALUES (100, 85, 15)$$, 'the ledger row still says 100; on hand as read is 85');
SELECT is(stockpool.claim(1, (SELECT checkout_id FROM pg_temp.buyers WHERE turn = 16)), 1,
    'the folder claims');
SELECT is_empty($$SELECT * FROM stockpool.pending_claims WHERE item_id = 1304$$,
    'it folded the 15 pending claims with its own');
SELECT results_eq(
    $$SELECT s.on_hand, l.on_hand, l.unsettled
      FROM stockpool.stock AS s JOIN stockpool.stock_levels AS l USING (shop_id, item_id, location_id)
      WHERE (s.shop_id, s.item_id, s.location_id) = (1, 1304, 1)$$,
    $$VALUES (84, 84, 0)$$, 'the ledger row fell by 16 in one fold');
SELECT results_eq(
    $$SELECT checkout_id FROM stockpool.movements WHERE item_id = 1304 AND reason = 'claim' ORDER BY movement_id$$,
    $$SELECT checkout_id FROM pg_temp.buyers WHERE turn <= 16 ORDER BY turn$$,
    'one movement per claim, in claim order');
SELECT is_empty($$SELECT * FROM pg_temp.replay_errors(1304)$$, 'the history replays to 84');
SELECT is(stockpool.claim(1, (SELECT checkout_id FROM pg_temp.buyers WHERE turn = 17)), 1,
    'one more claims: pending again');
SELECT is((SELECT count(*)::integer FROM stockpool.pending_claims WHERE item_id = 1304), 1, 'one pending');

SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id BETWEEN 1300 AND 1304$$,
    'invariants hold for every key of this file');

SELECT * FROM finish();
ROLLBACK;
