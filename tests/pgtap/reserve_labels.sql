-- stockpool.reserve_labels: exactly the units asked for (a buyer picked
-- seats), all or nothing; false when any is held or sold; a retry is a
-- no-op; labels in any order; overdue holds expired inline. Errors carry
-- their SQLSTATE and write nothing.
BEGIN;
SELECT plan(36);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'free', f::text FROM stockpool.named_free AS f
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'reserve_labels', ARRAY['bigint', 'bigint', 'bigint', 'text[]', 'uuid', 'interval'],
    'reserve_labels(bigint, bigint, bigint, text[], uuid, interval) exists');
SELECT function_returns('stockpool', 'reserve_labels', ARRAY['bigint', 'bigint', 'bigint', 'text[]', 'uuid', 'interval'],
    'boolean', 'reserve_labels returns boolean');

SELECT is(stockpool.set_named_units(1, 2200, 1, '{A,B,C,D,E}'), 5, 'key 2200: A to E at positions 1 to 5');

SELECT ok(stockpool.reserve_labels(1, 2200, 1, '{D,B}', '00000000-0000-0000-0000-000000002201', '5 minutes'),
    'D and B, given out of order: true');
SELECT results_eq(
    $$SELECT quantity, status, labels, expires_at = now() + interval '5 minutes'
      FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000002201'$$,
    $$VALUES (2, 'held'::text, '{B,D}'::text[], true)$$,
    'one hold of 2 units recording B and D in position order, for its ttl');
SELECT ok(stockpool.reserve_labels(1, 2200, 1, '{B,D}', '00000000-0000-0000-0000-000000002201'),
    'a retry (in another order): true');
SELECT is((SELECT count(*)::integer FROM stockpool.holds WHERE item_id = 2200), 1, 'and nothing more is held');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{A,B}', '00000000-0000-0000-0000-000000002201')$$,
    'SP007', NULL, 'the same checkout asking for other units of the key: SP007');

-- Taken ones: false, all or nothing.
CREATE TEMPORARY TABLE before_refusal AS SELECT * FROM snapshot;
SELECT ok(NOT stockpool.reserve_labels(1, 2200, 1, '{A,B}', '00000000-0000-0000-0000-000000002202'),
    'A (free) and B (held): false');
SELECT ok(NOT stockpool.reserve_labels(1, 2200, 1, '{D}', '00000000-0000-0000-0000-000000002202'),
    'D (held): false');
SELECT set_eq('SELECT * FROM snapshot', 'SELECT * FROM before_refusal', 'and A is still free: nothing written');
SELECT ok(stockpool.reserve_labels(1, 2200, 1, '{E,A,C}', '00000000-0000-0000-0000-000000002202'),
    'A, C and E: true');
SELECT ok(NOT stockpool.reserve_labels(1, 2200, 1, '{C}', '00000000-0000-0000-0000-000000002203'), 'C now: false');

-- Overdue: expired inline, then held.
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE checkout_id = '00000000-0000-0000-0000-000000002202';
SELECT ok(stockpool.reserve_labels(1, 2200, 1, '{C}', '00000000-0000-0000-0000-000000002203'),
    'C while its hold is overdue: the hold is expired, C held: true');
SELECT results_eq(
    $$SELECT label, status FROM stockpool.unit_status WHERE item_id = 2200 ORDER BY position$$,
    $$VALUES ('A', 'free'), ('B', 'held'), ('C', 'held'), ('D', 'held'), ('E', 'free')$$,
    'A and E free again, C held by its new buyer');

-- Sold: false for everyone, the same true for the buyer.
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000002201'), 2, 'B and D claimed');
SELECT ok(NOT stockpool.reserve_labels(1, 2200, 1, '{B}', '00000000-0000-0000-0000-000000002204'), 'B sold: false');
SELECT ok(stockpool.reserve_labels(1, 2200, 1, '{D,B}', '00000000-0000-0000-0000-000000002201'),
    'the buyer''s retry after the claim: true');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id = 2200$$, 'no invariant is broken');

-- Bad input and mixing.
DELETE FROM before_refusal;
INSERT INTO before_refusal SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.reserve_labels(NULL, 2200, 1, '{A}', '00000000-0000-0000-0000-0000000022c1')$$,
    '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, NULL, 1, '{A}', '00000000-0000-0000-0000-0000000022c1')$$,
    '22004', NULL, 'NULL p_item_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, NULL, '{A}', '00000000-0000-0000-0000-0000000022c1')$$,
    '22004', NULL, 'NULL p_location_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, NULL, '00000000-0000-0000-0000-0000000022c1')$$,
    '22004', NULL, 'NULL p_labels: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{A,NULL}', '00000000-0000-0000-0000-0000000022c1')$$,
    '22004', NULL, 'a NULL label: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{A}', NULL)$$, '22004', NULL, 'NULL p_checkout_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{A}', '00000000-0000-0000-0000-0000000022c1', NULL)$$,
    '22004', NULL, 'NULL p_ttl: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{}', '00000000-0000-0000-0000-0000000022c1')$$,
    '22023', NULL, 'no labels: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{{A}}', '00000000-0000-0000-0000-0000000022c1')$$,
    '22023', NULL, 'a two-dimensional array: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{A,E,A}', '00000000-0000-0000-0000-0000000022c1')$$,
    '22023', NULL, 'a label repeated: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{A}', '00000000-0000-0000-0000-0000000022c1', '-1 minute')$$,
    '22023', NULL, 'a negative ttl: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{A,Z}', '00000000-0000-0000-0000-0000000022c1')$$,
    'SP013', NULL, 'a label the key does not have: SP013');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2299, 1, '{A}', '00000000-0000-0000-0000-0000000022c1')$$,
    'SP001', NULL, 'unknown key: SP001');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2200, 1, '{A}', '00000000-0000-0000-0000-000000002201')$$,
    'SP007', NULL, 'the claimed checkout asking for other units: SP007');
SELECT set_eq('SELECT * FROM snapshot', 'SELECT * FROM before_refusal', 'the refused calls changed nothing');
SELECT is(stockpool.set_stock(1, 2210, 1, 5), 5, 'counted key 2210 at 5');
SELECT throws_ok($$SELECT stockpool.reserve_labels(1, 2210, 1, '{A}', '00000000-0000-0000-0000-0000000022c1')$$,
    'SP010', NULL, 'a counted key: SP010');

SELECT * FROM finish();
ROLLBACK;
