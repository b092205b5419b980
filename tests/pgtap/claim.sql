-- stockpool.claim: a checkout's live holds become deductions of on hand with
-- claim movements, all or nothing; a retry returns the same number. Unknown
-- SP003, expired SP004, released SP005, each writing nothing.
BEGIN;
SELECT plan(69);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'pool', u::text FROM stockpool.pool_units AS u
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'claim', ARRAY['bigint', 'uuid'], 'claim(bigint, uuid) exists');
SELECT function_returns('stockpool', 'claim', ARRAY['bigint', 'uuid'], 'integer', 'claim returns integer');

SELECT is(stockpool.set_stock(1, 500, 1, 10), 10, 'key 500 at 10');
SELECT is(stockpool.set_stock(1, 501, 1, 10), 10, 'key 501 at 10');
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000101', '{501,500}', '{1,1}', '{4,3}'),
    'checkout 101 holds 3 of key 500 and 4 of key 501');
CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Bad input and unknown checkouts.
SELECT throws_ok($$SELECT stockpool.claim(NULL, '00000000-0000-0000-0000-000000000101')$$,
    '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok($$SELECT stockpool.claim(1, NULL)$$,
    '22004', NULL, 'NULL p_checkout_id: 22004');
SELECT throws_ok($$SELECT stockpool.claim(1, '00000000-0000-0000-0000-000000000199')$$,
    'SP003', NULL, 'a checkout that never reserved: SP003');
SELECT throws_ok($$SELECT stockpool.claim(2, '00000000-0000-0000-0000-000000000101')$$,
    'SP003', NULL, 'a known checkout claimed in another shop: SP003');
SELECT ok(NOT stockpool.reserve_units(1, 500, 1, 11, '00000000-0000-0000-0000-000000000102'),
    'checkout 102 is refused (11 of 10)');
SELECT throws_ok($$SELECT stockpool.claim(1, '00000000-0000-0000-0000-000000000102')$$,
    'SP003', NULL, 'a checkout whose reservation was refused holds nothing: SP003');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'bad input and unknown checkouts write nothing');

-- The claim.
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000101'), 7, 'claim returns the 7 units held');
SELECT results_eq(
    $$SELECT item_id, on_hand, allocated FROM stockpool.stock
      WHERE shop_id = 1 AND item_id IN (500, 501) ORDER BY item_id$$,
    $$VALUES (500::bigint, 7, 0), (501, 6, 0)$$,
    'on hand and allocated both fall by the claimed units (allocated was the 3 and 4 held)');
SELECT results_eq(
    $$SELECT item_id, delta, on_hand_after, reason, checkout_id FROM stockpool.movements
      WHERE shop_id = 1 AND reason = 'claim' ORDER BY movement_id$$,
    $$VALUES (500::bigint, -3, 7, 'claim'::text, '00000000-0000-0000-0000-000000000101'::uuid),
             (501, -4, 6, 'claim', '00000000-0000-0000-0000-000000000101')$$,
    'one claim movement per key, in key order, naming the checkout');
SELECT results_eq(
    $$SELECT item_id, status FROM stockpool.holds
      WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000101' ORDER BY item_id$$,
    $$VALUES (500::bigint, 'claimed'::text), (501, 'claimed')$$,
    'both holds are claimed');
SELECT results_eq(
    $$SELECT item_id, on_hand, pooled, held, free FROM stockpool.stock_levels
      WHERE shop_id = 1 AND item_id IN (500, 501) ORDER BY item_id$$,
    $$VALUES (500::bigint, 7, 0, 0, 7), (501, 6, 0, 0, 6)$$,
    'nothing held any more, no pool: the rest is free on the ledger rows');

-- A retry returns the same number and claims nothing twice.
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000101'), 7, 'retry: the same 7');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000101'), 7, 'second retry: the same 7');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'retries write nothing (no second movement)');

-- Claim after release: SP005.
SELECT ok(stockpool.reserve_units(1, 500, 1, 2, '00000000-0000-0000-0000-000000000103'),
    'checkout 103 holds 2');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000103'), 2, 'and releases them');
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.claim(1, '00000000-0000-0000-0000-000000000103')$$,
    'SP005', NULL, 'claim after release: SP005');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'SP005 writes nothing');

-- Claim after expiry, unswept and swept: SP004.
SELECT ok(stockpool.reserve_units(1, 500, 1, 2, '00000000-0000-0000-0000-000000000104'),
    'checkout 104 holds 2');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000104';
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.claim(1, '00000000-0000-0000-0000-000000000104')$$,
    'SP004', NULL, 'claim after the hold expired (unswept): SP004');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'SP004 writes nothing: on hand and the hold as they were');
SELECT ok(stockpool.reserve_units(1, 500, 1, 2, '00000000-0000-0000-0000-000000000104'),
    'after SP004 the checkout reserves again: its overdue hold is renewed');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000104'), 2, 'and the claim now succeeds');
SELECT ok(stockpool.reserve_units(1, 500, 1, 2, '00000000-0000-0000-0000-000000000107'),
    'checkout 107 holds 2');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000107';
SELECT is(stockpool.sweep(), 1, 'its hold expires and is swept');
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.claim(1, '00000000-0000-0000-0000-000000000107')$$,
    'SP004', NULL, 'claim after the hold expired and was swept: SP004');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'SP004 after the sweep writes nothing');

-- One expired line of a cart: nothing is claimed, the live line neither.
SELECT ok(stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000105', '{500,501}', '{1,1}', '{1,1}'),
    'checkout 105 holds one unit of each key');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000105' AND item_id = 501;
TRUNCATE before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.claim(1, '00000000-0000-0000-0000-000000000105')$$,
    'SP004', NULL, 'one of two lines expired: SP004');
SELECT bag_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error',
    'all or nothing: the live line was not claimed');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000105'), 2,
    'the checkout can still release both lines (the overdue one included)');

-- A checkout that released one key and holds another claims what it holds.
SELECT ok(stockpool.reserve_units(1, 500, 1, 1, '00000000-0000-0000-0000-000000000106'),
    'checkout 106 holds 1 of key 500');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000000106'), 1, 'releases it');
SELECT ok(stockpool.reserve_units(1, 501, 1, 2, '00000000-0000-0000-0000-000000000106'),
    'and then holds 2 of key 501');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000106'), 2, 'claim takes the 2 held units only');

-- A checkout that claimed, then held more: claim adds the new units to its total.
SELECT is(stockpool.set_stock(1, 502, 1, 5), 5, 'key 502 at 5');
SELECT ok(stockpool.reserve_units(1, 502, 1, 1, '00000000-0000-0000-0000-000000000101'),
    'claimed checkout 101 holds 1 of a new key');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000101'), 8,
    'claim returns all the checkout''s claimed units: 7 + 1');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000101'), 8, 'and a retry the same 8');

-- Lines reserved after a claim that then expired or were released are a new
-- purchase that failed, not a retry of the claim: SP005 / SP004, not the old
-- total. (Everything here runs in one transaction, where now() does not move:
-- the claims are moved a minute into the past by hand; the last case shows
-- the clock alone is enough.)
SELECT is(stockpool.set_stock(2, 600, 1, 10), 10, 'shop 2: key 600 at 10');
SELECT is(stockpool.set_stock(2, 601, 1, 10), 10, 'shop 2: key 601 at 10');
SELECT ok(stockpool.reserve_units(2, 600, 1, 2, '00000000-0000-0000-0000-000000000201'),
    'checkout 201 holds 2 of key 600');
SELECT is(stockpool.claim(2, '00000000-0000-0000-0000-000000000201'), 2, 'and claims them');
UPDATE stockpool.holds SET updated_at = updated_at - interval '1 minute'
WHERE shop_id = 2 AND checkout_id = '00000000-0000-0000-0000-000000000201';
SELECT is(stockpool.claim(2, '00000000-0000-0000-0000-000000000201'), 2,
    'a retry a minute later: the same 2');
SELECT ok(stockpool.reserve_units(2, 601, 1, 1, '00000000-0000-0000-0000-000000000201'),
    'then checkout 201 holds 1 of key 601');
SELECT is(stockpool.release(2, '00000000-0000-0000-0000-000000000201'), 1, 'and releases it');
SELECT throws_ok($$SELECT stockpool.claim(2, '00000000-0000-0000-0000-000000000201')$$,
    'SP005', NULL, 'claim of a line released after the last claim: SP005, not the old total');

SELECT ok(stockpool.reserve_units(2, 600, 1, 1, '00000000-0000-0000-0000-000000000202'),
    'checkout 202 holds 1 of key 600');
SELECT is(stockpool.claim(2, '00000000-0000-0000-0000-000000000202'), 1, 'and claims it');
UPDATE stockpool.holds SET updated_at = updated_at - interval '1 minute'
WHERE shop_id = 2 AND checkout_id = '00000000-0000-0000-0000-000000000202';
SELECT ok(stockpool.reserve_units(2, 601, 1, 3, '00000000-0000-0000-0000-000000000202'),
    'then checkout 202 holds 3 of key 601');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 2 AND checkout_id = '00000000-0000-0000-0000-000000000202' AND status = 'held';
SELECT throws_ok($$SELECT stockpool.claim(2, '00000000-0000-0000-0000-000000000202')$$,
    'SP004', NULL, 'claim of a line that expired after the last claim: SP004, not the old total');

-- The same order without moving anything by hand: the calls are stamped with
-- the clock under the checkout lock, not with the transaction's start.
SELECT ok(stockpool.reserve_units(2, 600, 1, 1, '00000000-0000-0000-0000-000000000204'),
    'checkout 204 holds 1 of key 600');
SELECT is(stockpool.claim(2, '00000000-0000-0000-0000-000000000204'), 1, 'and claims it');
SELECT ok(stockpool.reserve_units(2, 601, 1, 1, '00000000-0000-0000-0000-000000000204'),
    'then, in the same transaction, holds 1 of key 601');
SELECT is(stockpool.release(2, '00000000-0000-0000-0000-000000000204'), 1, 'and releases it');
SELECT throws_ok($$SELECT stockpool.claim(2, '00000000-0000-0000-0000-000000000204')$$,
    'SP005', NULL, 'claim: SP005 though every call ran in one transaction (one now())');

-- Control: a line released before the claim is not a new purchase.
SELECT ok(stockpool.reserve_units(2, 600, 1, 1, '00000000-0000-0000-0000-000000000203'),
    'checkout 203 holds 1 of key 600');
SELECT is(stockpool.release(2, '00000000-0000-0000-0000-000000000203'), 1, 'releases it');
SELECT ok(stockpool.reserve_units(2, 601, 1, 1, '00000000-0000-0000-0000-000000000203'),
    'then holds 1 of key 601');
SELECT is(stockpool.claim(2, '00000000-0000-0000-0000-000000000203'), 1, 'and claims that one');
UPDATE stockpool.holds SET created_at = created_at - interval '2 minutes',
                           updated_at = updated_at - interval '2 minutes'
WHERE shop_id = 2 AND checkout_id = '00000000-0000-0000-0000-000000000203' AND status = 'released';
UPDATE stockpool.holds SET updated_at = updated_at - interval '1 minute'
WHERE shop_id = 2 AND checkout_id = '00000000-0000-0000-0000-000000000203' AND status = 'claimed';
SELECT is(stockpool.claim(2, '00000000-0000-0000-0000-000000000203'), 1,
    'a retry returns the same 1: the released line is older than the claim');

-- The ledger still matches its history.
SELECT results_eq(
    $$SELECT s.item_id, s.on_hand, (SELECT sum(m.delta)::integer FROM stockpool.movements AS m
                                    WHERE (m.shop_id, m.item_id, m.location_id) = (s.shop_id, s.item_id, s.location_id))
      FROM stockpool.stock AS s WHERE s.shop_id = 1 ORDER BY s.item_id$$,
    $$VALUES (500::bigint, 5, 5), (501, 4, 4), (502, 4, 4)$$,
    'on hand equals the sum of its movements for every key');
SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'invariants hold at the end');

SELECT * FROM finish();
ROLLBACK;
