-- stockpool.retire_named_units: free units taken out of sale, all or
-- nothing; held or sold ones refused (SP012), unknown labels refused
-- (SP013); a movement names the units; errors write nothing.
BEGIN;
SELECT plan(25);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'unit', u::text FROM stockpool.named_units AS u
UNION ALL
SELECT 'free', f::text FROM stockpool.named_free AS f
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'retire_named_units', ARRAY['bigint', 'bigint', 'bigint', 'text[]'],
    'retire_named_units(bigint, bigint, bigint, text[]) exists');
SELECT function_returns('stockpool', 'retire_named_units', ARRAY['bigint', 'bigint', 'bigint', 'text[]'], 'integer',
    'retire_named_units returns integer');

SELECT is(stockpool.set_named_units(1, 2300, 1, '{A,B,C,D,E}'), 5, 'key 2300: A to E');
SELECT ok(stockpool.reserve_labels(1, 2300, 1, '{B}', '00000000-0000-0000-0000-000000002301'), 'B held');
SELECT ok(stockpool.reserve_labels(1, 2300, 1, '{C}', '00000000-0000-0000-0000-000000002302'), 'C held');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000002302'), 1, 'C sold');

SELECT is(stockpool.retire_named_units(1, 2300, 1, '{E,A}'), 2, 'A and E retired: B and D left on hand (C sold)');
SELECT results_eq(
    $$SELECT label, status FROM stockpool.unit_status WHERE item_id = 2300 ORDER BY position$$,
    $$VALUES ('B', 'held'), ('C', 'sold'), ('D', 'free')$$,
    'A and E are gone from the key');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE item_id = 2300$$,
    $$VALUES (2, 1, 1, 0)$$, 'stock_levels: 2 on hand, D free, B held');
SELECT results_eq(
    $$SELECT delta, on_hand_after, reason, labels FROM stockpool.movements WHERE item_id = 2300 ORDER BY movement_id$$,
    $$VALUES (5, 5, 'adjust'::text, '{A,B,C,D,E}'::text[]), (-1, 4, 'claim', '{C}'), (-2, 2, 'adjust', '{E,A}')$$,
    'the history: added, C sold, A and E retired');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id = 2300$$, 'no invariant is broken');

CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2300, 1, '{D,B}')$$,
    'SP012', NULL, 'D (free) and B (held): SP012, nothing retired');
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2300, 1, '{C}')$$, 'SP012', NULL, 'C (sold): SP012');
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2300, 1, '{D,A}')$$, 'SP013', NULL,
    'A (retired already): SP013');
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2300, 1, '{D,D}')$$, '22023', NULL, 'D twice: 22023');
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2300, 1, '{}')$$, '22023', NULL, 'no labels: 22023');
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2300, 1, '{D,NULL}')$$, '22004', NULL, 'a NULL label: 22004');
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2300, 1, NULL)$$, '22004', NULL, 'NULL p_labels: 22004');
SELECT throws_ok($$SELECT stockpool.retire_named_units(NULL, 2300, 1, '{D}')$$, '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2399, 1, '{D}')$$, 'SP001', NULL, 'unknown key: SP001');
SELECT set_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'the refused calls changed nothing');
SELECT is(stockpool.set_stock(1, 2310, 1, 5), 5, 'counted key 2310 at 5');
SELECT throws_ok($$SELECT stockpool.retire_named_units(1, 2310, 1, '{D}')$$, 'SP010', NULL, 'a counted key: SP010');

-- Released: free again, and then it can be retired.
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000002301'), 1, 'B released');
SELECT is(stockpool.retire_named_units(1, 2300, 1, '{B}'), 1, 'B retired: D left');

SELECT * FROM finish();
ROLLBACK;
