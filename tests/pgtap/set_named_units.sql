-- stockpool.set_named_units: labelled units added to a named key (created
-- on first use), free at once, with one movement naming them; positions
-- given or following the key's last one; counted and named never mixed on
-- one key (SP010), a label or a position never twice (SP011); errors write
-- nothing.
BEGIN;
SELECT plan(36);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'unit', u::text FROM stockpool.named_units AS u
UNION ALL
SELECT 'free', f::text FROM stockpool.named_free AS f
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'set_named_units', ARRAY['bigint', 'bigint', 'bigint', 'text[]', 'integer[]'],
    'set_named_units(bigint, bigint, bigint, text[], integer[]) exists');
SELECT function_returns('stockpool', 'set_named_units', ARRAY['bigint', 'bigint', 'bigint', 'text[]', 'integer[]'],
    'integer', 'set_named_units returns integer');

-- A new key: created named, its units free, in the order given.
SELECT is(stockpool.set_named_units(1, 2000, 1, '{A1,A2,A3}'), 3, 'a new key with 3 units: 3 on hand');
SELECT results_eq(
    $$SELECT on_hand, allocated, named, pool_target FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2000, 1)$$,
    $$VALUES (3, 3, true, 0)$$,
    'the ledger row: named, on hand 3, all 3 allocated (its free units are its pool), no counted pool');
SELECT results_eq(
    $$SELECT label, position FROM stockpool.named_units WHERE item_id = 2000 ORDER BY position$$,
    $$VALUES ('A1', 1), ('A2', 2), ('A3', 3)$$,
    'without positions, the labels'' order: 1, 2, 3');
SELECT results_eq(
    $$SELECT label, position, bucket FROM stockpool.named_free WHERE item_id = 2000 ORDER BY position$$,
    $$VALUES ('A1', 1, 1), ('A2', 2, 2), ('A3', 3, 3)$$,
    'every unit is free, in bucket position % 64');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free, unsettled FROM stockpool.stock_levels WHERE item_id = 2000$$,
    $$VALUES (3, 3, 0, 0, 0)$$,
    'stock_levels: the free units are pooled, free (what a refill could move) is 0');
SELECT results_eq(
    $$SELECT delta, on_hand_after, reason, checkout_id, labels FROM stockpool.movements WHERE item_id = 2000$$,
    $$VALUES (3, 3, 'adjust'::text, NULL::uuid, '{A1,A2,A3}'::text[])$$,
    'one movement: +3, naming the units');

-- More units: after the last position, or at the positions given.
SELECT is(stockpool.set_named_units(1, 2000, 1, '{A4,A5}'), 5, 'two more: 5 on hand');
SELECT is(stockpool.set_named_units(1, 2000, 1, '{B2,B1}', '{11,10}'), 7, 'two at positions 11 and 10: 7 on hand');
SELECT results_eq(
    $$SELECT label, position FROM stockpool.named_units WHERE item_id = 2000 ORDER BY position$$,
    $$VALUES ('A1', 1), ('A2', 2), ('A3', 3), ('A4', 4), ('A5', 5), ('B1', 10), ('B2', 11)$$,
    'A4 and A5 follow A3; B1 and B2 sit where they were put');
SELECT results_eq(
    $$SELECT delta, on_hand_after, labels FROM stockpool.movements WHERE item_id = 2000 ORDER BY movement_id$$,
    $$VALUES (3, 3, '{A1,A2,A3}'::text[]), (2, 5, '{A4,A5}'), (2, 7, '{B2,B1}')$$,
    'a movement per call, the history replays to on hand');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id = 2000$$, 'no invariant is broken');

-- A large key spreads over more buckets (one per 128 units).
SELECT is(stockpool.set_named_units(1, 2001, 1, ARRAY(SELECT 'S' || g FROM generate_series(1, 20000) AS g)), 20000,
    '20,000 seats');
SELECT is((SELECT buckets FROM stockpool.stock WHERE item_id = 2001), 156, '156 buckets (20,000 / 128)');
SELECT is((SELECT count(DISTINCT bucket)::integer FROM stockpool.named_free WHERE item_id = 2001), 156,
    'the free units use every one of them');

CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;

-- Repeated labels and positions: SP011.
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{C1,C2,C1}')$$,
    'SP011', NULL, 'a label twice in the array: SP011');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{C1,A2}')$$,
    'SP011', NULL, 'a label the key has already: SP011');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{C1,C2}', '{20,20}')$$,
    'SP011', NULL, 'a position twice in the array: SP011');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{C1,C2}', '{20,10}')$$,
    'SP011', NULL, 'a position the key has already: SP011');

-- Mixing: a counted key refuses named units, a named key counted stock.
SELECT is(stockpool.set_stock(1, 2002, 1, 10), 10, 'counted key 2002 at 10');
DELETE FROM before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2002, 1, '{X}')$$,
    'SP010', NULL, 'named units on a counted key: SP010');
SELECT throws_ok($$SELECT stockpool.set_stock(1, 2000, 1, 10)$$,
    'SP010', NULL, 'set_stock on a named key: SP010');
SELECT throws_ok($$SELECT stockpool.adjust_stock(1, 2000, 1, 1)$$,
    'SP010', NULL, 'adjust_stock on a named key: SP010');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 2000, 1, 1, '00000000-0000-0000-0000-000000002000')$$,
    'SP010', NULL, 'reserve_units on a named key: SP010');
SELECT throws_ok($$SELECT stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000002000', '{2002,2000}', '{1,1}', '{1,1}')$$,
    'SP010', NULL, 'a cart with a line of a named key: SP010');

-- Bad input.
SELECT throws_ok($$SELECT stockpool.set_named_units(NULL, 2000, 1, '{C1}')$$, '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, NULL, 1, '{C1}')$$, '22004', NULL, 'NULL p_item_id: 22004');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, NULL, '{C1}')$$, '22004', NULL, 'NULL p_location_id: 22004');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, NULL)$$, '22004', NULL, 'NULL p_labels: 22004');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{C1,NULL}')$$, '22004', NULL, 'a NULL label: 22004');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{C1,C2}', '{20,NULL}')$$,
    '22004', NULL, 'a NULL position: 22004');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{}')$$, '22023', NULL, 'no labels: 22023');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{{C1,C2}}')$$, '22023', NULL,
    'a two-dimensional array: 22023');
SELECT throws_ok($$SELECT stockpool.set_named_units(1, 2000, 1, '{C1,C2}', '{20}')$$, '22023', NULL,
    'fewer positions than labels: 22023');
SELECT set_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'the refused calls changed nothing');

SELECT * FROM finish();
ROLLBACK;
