-- stockpool.check_invariants: no rows when healthy; one row per violation.
-- Every kind it reports has a negative control here: data broken on purpose
-- as superuser (constraints dropped, the holds_valid and append-only triggers disabled
-- inside this rolled-back transaction), which it must catch. Each control
-- breaks its own key, so each result is checked for that key alone.
BEGIN;
SELECT plan(43);

SELECT has_function('stockpool', 'check_invariants', ARRAY[]::name[], 'check_invariants() exists');
SELECT function_returns('stockpool', 'check_invariants', ARRAY[]::name[], 'setof record',
    'check_invariants returns a set');
SELECT is(pg_catalog.pg_get_function_result('stockpool.check_invariants()'::regprocedure),
    'TABLE(shop_id bigint, item_id bigint, location_id bigint, invariant text, detail text)',
    'one row per violation: key, invariant, detail');
SELECT volatility_is('stockpool', 'check_invariants', ARRAY[]::name[], 'stable', 'check_invariants is STABLE');

-- Healthy: an empty database, then every kind of traffic.
SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'healthy when empty');
SELECT lives_ok($$
    SELECT stockpool.set_stock(1, k.item_id, 1, 20) FROM generate_series(1100, 1109) AS k (item_id)
$$, 'ten keys at 20 (items 1100..1109)');
SELECT lives_ok($$
    SELECT stockpool.replenish_pool(1, 1101, 1),
           stockpool.replenish_pool(1, 1102, 1),
           stockpool.reserve_units(1, 1100, 1, 3, '00000000-0000-0000-0000-000000000601'),
           stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000602', '{1101,1100}', '{1,1}', '{5,2}'),
           stockpool.reserve_units(1, 1102, 1, 1, '00000000-0000-0000-0000-000000000603'),
           stockpool.reserve_units(1, 1103, 1, 20, '00000000-0000-0000-0000-000000000604'),
           stockpool.replenish_pool(1, 1104, 1),
           stockpool.adjust_stock(1, 1105, 1, 7)
$$, 'pre-filled pools (1101, 1102), holds, a cart, a sellout, a refill, an adjustment');
SELECT lives_ok($$
    SELECT stockpool.claim(1, '00000000-0000-0000-0000-000000000601'),
           stockpool.release(1, '00000000-0000-0000-0000-000000000602'),
           stockpool.set_stock(1, 1100, 1, 12)
$$, 'a claim, a release, a lower set');
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000603';
SELECT is_empty('SELECT * FROM stockpool.check_invariants()',
    'healthy after traffic, with an expired but unswept hold');
SELECT is(stockpool.sweep(), 1, 'the overdue hold is swept');
SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'healthy after the sweep');

-- oversell: two extra pool units beyond on hand (item 1101).
SELECT results_eq(
    $$SELECT on_hand, pooled, held FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1101, 1)$$,
    $$VALUES (20, 20, 0)$$, 'item 1101: its whole stock is pooled');
INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket) VALUES (1, 1101, 1, 0), (1, 1101, 1, 1);
SELECT set_eq(
    $$SELECT invariant FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1101, 1)$$,
    ARRAY['oversell', 'allocation'],
    'negative control: extra pool units are reported as oversell (and as an allocation mismatch)');
SELECT is(
    (SELECT detail FROM stockpool.check_invariants()
     WHERE (shop_id, item_id, location_id) = (1, 1101, 1) AND invariant = 'oversell'),
    'pooled 22 + held 0 > on_hand 20', 'the oversell detail gives the numbers');

-- oversell alone: the counter agrees with the rows, both beyond on hand (item 1102).
ALTER TABLE stockpool.stock DROP CONSTRAINT stock_allocated_within_on_hand;
UPDATE stockpool.stock SET on_hand = 10 WHERE (shop_id, item_id, location_id) = (1, 1102, 1);
INSERT INTO stockpool.movements (shop_id, item_id, location_id, delta, on_hand_after, reason)
VALUES (1, 1102, 1, -10, 10, 'adjust');
SELECT set_eq(
    $$SELECT invariant FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1102, 1)$$,
    ARRAY['oversell'],
    'negative control: pooled + held above on hand, counter consistent: oversell only');

-- allocation: a pool unit vanishes behind the counter's back (item 1104).
DELETE FROM stockpool.pool_units
WHERE ctid = (SELECT ctid FROM stockpool.pool_units WHERE (shop_id, item_id, location_id) = (1, 1104, 1) LIMIT 1)
    AND shop_id = 1;
SELECT set_eq(
    $$SELECT invariant FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1104, 1)$$,
    ARRAY['allocation'],
    'negative control: a lost pool unit is an allocation mismatch');
SELECT is(
    (SELECT detail FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1104, 1)),
    'allocated 20 <> pooled 19 + held 0 + pending claims 0', 'the allocation detail gives the numbers');

-- ledger_drift: on hand changed without a movement (item 1105).
UPDATE stockpool.stock SET on_hand = on_hand + 1 WHERE (shop_id, item_id, location_id) = (1, 1105, 1);
SELECT set_eq(
    $$SELECT invariant FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1105, 1)$$,
    ARRAY['ledger_drift'],
    'negative control: on hand edited directly is ledger drift');
SELECT is(
    (SELECT detail FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1105, 1)),
    'on_hand 28 <> sum of movements 27', 'the drift detail gives the numbers');

-- ledger_drift: a movement without a change of on hand (item 1106).
INSERT INTO stockpool.movements (shop_id, item_id, location_id, delta, on_hand_after, reason)
VALUES (1, 1106, 1, 5, 25, 'adjust');
SELECT set_eq(
    $$SELECT invariant FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1106, 1)$$,
    ARRAY['ledger_drift'],
    'negative control: an extra movement is ledger drift');

-- ledger_drift: history rewritten with the append-only trigger disabled (item 1107).
ALTER TABLE stockpool.movements DISABLE TRIGGER movements_immutable;
DELETE FROM stockpool.movements WHERE (shop_id, item_id, location_id) = (1, 1107, 1);
ALTER TABLE stockpool.movements ENABLE TRIGGER movements_immutable;
SELECT set_eq(
    $$SELECT invariant FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1107, 1)$$,
    ARRAY['ledger_drift'],
    'negative control: a deleted movement is ledger drift');
SELECT is(
    (SELECT detail FROM stockpool.check_invariants() WHERE (shop_id, item_id, location_id) = (1, 1107, 1)),
    'on_hand 20 <> sum of movements 0', 'no history at all sums to 0');

-- negative: a hold of zero units (item 1108), negative on hand (1109), negative allocated (1103).
ALTER TABLE stockpool.holds DISABLE TRIGGER holds_valid;
SELECT ok(stockpool.reserve_units(1, 1108, 1, 2, '00000000-0000-0000-0000-000000000605'), 'a hold of 2 on item 1108');
UPDATE stockpool.holds SET quantity = 0 WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000605';
SELECT ok(
    (SELECT array_agg(invariant) FROM stockpool.check_invariants()
     WHERE (shop_id, item_id, location_id) = (1, 1108, 1)) @> ARRAY['negative'],
    'negative control: a hold of zero units is reported as negative');
SELECT is(
    (SELECT detail FROM stockpool.check_invariants()
     WHERE (shop_id, item_id, location_id) = (1, 1108, 1) AND invariant = 'negative'),
    'hold of checkout 00000000-0000-0000-0000-000000000605 has quantity 0', 'naming the checkout');

-- (stock_allocated_within_on_hand, 0 <= allocated <= on_hand, was dropped
-- above: it is the one constraint on these columns.)
UPDATE stockpool.stock SET on_hand = -1 WHERE (shop_id, item_id, location_id) = (1, 1109, 1);
SELECT ok(
    (SELECT array_agg(invariant) FROM stockpool.check_invariants()
     WHERE (shop_id, item_id, location_id) = (1, 1109, 1)) @> ARRAY['negative'],
    'negative control: negative on hand is reported as negative');

UPDATE stockpool.stock SET allocated = -1 WHERE (shop_id, item_id, location_id) = (1, 1103, 1);
SELECT ok(
    (SELECT array_agg(invariant) FROM stockpool.check_invariants()
     WHERE (shop_id, item_id, location_id) = (1, 1103, 1)) @> ARRAY['negative'],
    'negative control: negative allocated is reported as negative');

-- orphan: pool units and a hold of a key the ledger does not know (items 1190, 1191).
INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket) VALUES (1, 1190, 1, 0), (1, 1190, 1, 0);
INSERT INTO stockpool.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)
VALUES (1, '00000000-0000-0000-0000-000000000606', 1191, 1, 1, now() + interval '1 minute');
SELECT results_eq(
    $$SELECT item_id, invariant, detail FROM stockpool.check_invariants() WHERE item_id IN (1190, 1191) ORDER BY item_id$$,
    $$VALUES (1190::bigint, 'orphan'::text, 'pool rows of a key missing from the ledger'::text),
             (1191, 'orphan', 'hold rows of a key missing from the ledger')$$,
    'negative control: pool units and holds of an unknown key are orphans, once per key and source');

-- Pending claims (0005): a claim that met a busy ledger row, written as
-- claim writes it (item 1110), is healthy; then broken three ways.
SELECT is(stockpool.set_stock(1, 1110, 1, 20) + stockpool.replenish_pool(1, 1110, 1), 40,
    'key 1110 at 20, all pooled');
SELECT ok(stockpool.reserve_units(1, 1110, 1, 2, '00000000-0000-0000-0000-000000000607'), '607 holds 2 of item 1110');
UPDATE stockpool.holds SET status = 'claimed'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000607';
INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity)
VALUES (1, 1110, 1, '00000000-0000-0000-0000-000000000607', 2);
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id = 1110$$,
    'positive control: a pending claim backed by its claimed hold and still in allocated is healthy');
UPDATE stockpool.pending_claims SET quantity = 3 WHERE checkout_id = '00000000-0000-0000-0000-000000000607';
SELECT set_eq(
    $$SELECT invariant FROM stockpool.check_invariants() WHERE item_id = 1110$$,
    ARRAY['settlement', 'allocation', 'oversell'],
    'negative control: a pending claim larger than its hold is a settlement mismatch, and counts against on hand');
SELECT is(
    (SELECT detail FROM stockpool.check_invariants() WHERE item_id = 1110 AND invariant = 'settlement'),
    'pending claim of 3 units by checkout 00000000-0000-0000-0000-000000000607, whose hold is claimed (2 units)',
    'the settlement detail names the checkout and its hold');
-- A pending claim whose hold was never claimed (item 1111).
SELECT is(stockpool.set_stock(1, 1111, 1, 20) + stockpool.replenish_pool(1, 1111, 1), 40,
    'key 1111 at 20, all pooled');
SELECT ok(stockpool.reserve_units(1, 1111, 1, 2, '00000000-0000-0000-0000-000000000608'), '608 holds 2 of item 1111');
INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity)
VALUES (1, 1111, 1, '00000000-0000-0000-0000-000000000608', 2);
SELECT ok(
    (SELECT array_agg(invariant) FROM stockpool.check_invariants() WHERE item_id = 1111) @> ARRAY['settlement'],
    'negative control: a pending claim of a hold still held is a settlement mismatch');
-- A pending claim of zero units (item 1112).
ALTER TABLE stockpool.pending_claims DROP CONSTRAINT pending_claims_quantity_positive;
SELECT is(stockpool.set_stock(1, 1112, 1, 20), 20, 'key 1112 at 20');
INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity)
VALUES (1, 1112, 1, '00000000-0000-0000-0000-000000000609', 0);
SELECT ok(
    (SELECT array_agg(invariant) FROM stockpool.check_invariants() WHERE item_id = 1112) @> ARRAY['negative'],
    'negative control: a pending claim of zero units is reported as negative');
-- A pending claim of a key the ledger does not know (item 1192).
INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity)
VALUES (1, 1192, 1, '00000000-0000-0000-0000-000000000610', 1);
SELECT results_eq(
    $$SELECT invariant, detail FROM stockpool.check_invariants() WHERE item_id = 1192 AND invariant = 'orphan'$$,
    $$VALUES ('orphan'::text, 'pending claim rows of a key missing from the ledger'::text)$$,
    'negative control: a pending claim of an unknown key is an orphan');

-- Everything broken above, and nothing else.
SELECT set_eq(
    $$SELECT item_id, invariant FROM stockpool.check_invariants()$$,
    $$VALUES (1101::bigint, 'oversell'::text), (1101, 'allocation'), (1102, 'oversell'),
             (1103, 'negative'), (1103, 'allocation'),
             (1104, 'allocation'), (1105, 'ledger_drift'), (1106, 'ledger_drift'), (1107, 'ledger_drift'),
             (1108, 'negative'), (1108, 'allocation'),
             (1109, 'negative'), (1109, 'oversell'), (1109, 'ledger_drift'),
             (1110, 'settlement'), (1110, 'allocation'), (1110, 'oversell'),
             (1111, 'settlement'), (1111, 'allocation'), (1111, 'oversell'),
             (1112, 'negative'), (1112, 'settlement'),
             (1190, 'orphan'), (1191, 'orphan'), (1192, 'orphan'), (1192, 'settlement')$$,
    'all the damage is reported, the healthy keys are not');
SELECT is_empty(
    $$SELECT * FROM stockpool.check_invariants() WHERE item_id = 1100$$,
    'item 1100 (claimed, released, lowered) stays healthy throughout');
SELECT is(
    (SELECT count(*)::integer FROM stockpool.check_invariants() WHERE shop_id <> 1), 0,
    'no other shop is reported');
SELECT is(
    (SELECT count(*)::integer FROM stockpool.movements WHERE (shop_id, item_id, location_id) = (1, 1107, 1)), 0,
    'the movement was really deleted while the trigger was disabled');

SELECT * FROM finish();
ROLLBACK;
