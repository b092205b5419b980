-- stockpool.reserve_named: p_quantity free units of a named key held for a
-- checkout, all or nothing; their labels in position order, or NULL. With
-- p_adjacent one block of consecutive positions (a gap breaks a block). A
-- retry returns the same labels. Overdue holds are expired inline. Errors
-- carry their SQLSTATE and write nothing.
-- now() is fixed inside this transaction: expiry is simulated by moving
-- holds.expires_at into the past.
BEGIN;
SELECT plan(48);

CREATE TEMPORARY VIEW snapshot AS
SELECT 'stock' AS kind, s::text AS state FROM stockpool.stock AS s
UNION ALL
SELECT 'free', f::text FROM stockpool.named_free AS f
UNION ALL
SELECT 'hold', h::text FROM stockpool.holds AS h
UNION ALL
SELECT 'movement', m::text FROM stockpool.movements AS m;

SELECT has_function('stockpool', 'reserve_named',
    ARRAY['bigint', 'bigint', 'bigint', 'integer', 'uuid', 'interval', 'boolean'],
    'reserve_named(bigint, bigint, bigint, integer, uuid, interval, boolean) exists');
SELECT function_returns('stockpool', 'reserve_named',
    ARRAY['bigint', 'bigint', 'bigint', 'integer', 'uuid', 'interval', 'boolean'], 'text[]',
    'reserve_named returns text[]');

-- Seats 1-3, a gap, 5-6, a gap, 9. Buckets: 64, so every seat is its own bucket.
SELECT is(stockpool.set_named_units(1, 2100, 1, '{R1,R2,R3,R5,R6,R9}', '{1,2,3,5,6,9}'), 6, 'key 2100: 6 seats');

-- One unit: one of the lowest free, its hold records it.
SELECT is(cardinality(stockpool.reserve_named(1, 2100, 1, 1, '00000000-0000-0000-0000-000000002101')), 1,
    'one unit: one label');
SELECT results_eq(
    $$SELECT h.quantity, h.status, h.labels = ARRAY[u.label], h.expires_at = now() + interval '15 minutes'
      FROM stockpool.holds AS h
      JOIN stockpool.unit_status AS u ON u.checkout_id = h.checkout_id
      WHERE h.checkout_id = '00000000-0000-0000-0000-000000002101'$$,
    $$VALUES (1, 'held'::text, true, true)$$,
    'a hold of 1 unit recording its label, expiring after the default 15 minutes');
SELECT is(
    stockpool.reserve_named(1, 2100, 1, 1, '00000000-0000-0000-0000-000000002101'),
    (SELECT labels FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000002101'),
    'a retry returns the same label');
SELECT is((SELECT count(*)::integer FROM stockpool.holds WHERE item_id = 2100), 1, 'and holds nothing more');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000002101'), 1, 'released');

-- Adjacent: a gap breaks a block.
SELECT is(stockpool.reserve_named(1, 2100, 1, 3, '00000000-0000-0000-0000-000000002102', '5 minutes', true),
    '{R1,R2,R3}', 'three together: 1-3, the only block of three (5-6 and 9 are broken by gaps)');
SELECT is(stockpool.reserve_named(1, 2100, 1, 2, '00000000-0000-0000-0000-000000002103', p_adjacent => true),
    '{R5,R6}', 'two together: 5-6');
SELECT is(stockpool.reserve_named(1, 2100, 1, 2, '00000000-0000-0000-0000-000000002104', p_adjacent => true),
    NULL, 'two together when only 9 is left: NULL');
SELECT is((SELECT count(*)::integer FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000002104'),
    0, 'and no hold is left behind');
SELECT is(stockpool.reserve_named(1, 2100, 1, 1, '00000000-0000-0000-0000-000000002104', p_adjacent => true),
    '{R9}', 'one "together" is any one: 9');
SELECT results_eq(
    $$SELECT label, status, checkout_id FROM stockpool.unit_status WHERE item_id = 2100 ORDER BY position$$,
    $$VALUES ('R1', 'held', '00000000-0000-0000-0000-000000002102'::uuid),
             ('R2', 'held', '00000000-0000-0000-0000-000000002102'),
             ('R3', 'held', '00000000-0000-0000-0000-000000002102'),
             ('R5', 'held', '00000000-0000-0000-0000-000000002103'),
             ('R6', 'held', '00000000-0000-0000-0000-000000002103'),
             ('R9', 'held', '00000000-0000-0000-0000-000000002104')$$,
    'unit_status: every seat held, by the checkout that was told so');

-- Sold out: NULL, counted as a refusal, nothing written.
CREATE TEMPORARY TABLE before_refusal AS SELECT * FROM snapshot;
SELECT is(stockpool.reserve_named(1, 2100, 1, 1, '00000000-0000-0000-0000-000000002105'), NULL, 'sold out: NULL');
SELECT is(stockpool.reserve_named(1, 2100, 1, 7, '00000000-0000-0000-0000-000000002105'), NULL,
    'more than the key has: NULL');
SELECT set_eq('SELECT * FROM snapshot', 'SELECT * FROM before_refusal', 'a refusal writes nothing');

-- An overdue hold does not make it refuse: expired inline, its units free again.
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE checkout_id = '00000000-0000-0000-0000-000000002102';
SELECT is(stockpool.reserve_named(1, 2100, 1, 3, '00000000-0000-0000-0000-000000002105', p_adjacent => true),
    '{R1,R2,R3}', 'three together while 1-3 are held by an overdue hold: they are expired and held again');
SELECT is((SELECT status FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000002102'),
    'expired', 'the overdue hold is expired');
-- A retry of the expired checkout takes a new hold, if there is one.
SELECT is(stockpool.reserve_named(1, 2100, 1, 3, '00000000-0000-0000-0000-000000002102'), NULL,
    'the expired checkout''s retry: nothing free, NULL');
SELECT is(stockpool.release(1, '00000000-0000-0000-0000-000000002103'), 2, '5-6 released');
SELECT is(stockpool.reserve_named(1, 2100, 1, 2, '00000000-0000-0000-0000-000000002102'), '{R5,R6}',
    'the expired checkout reserves again: its hold row is re-opened with the new labels');
SELECT results_eq(
    $$SELECT status, quantity, labels FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000002102'$$,
    $$VALUES ('held'::text, 2, '{R5,R6}'::text[])$$,
    'one hold row, held, 2 units, R5 and R6');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2100, 1, 1, '00000000-0000-0000-0000-000000002102')$$,
    'SP007', NULL, 'the same checkout asking for another quantity: SP007');
-- A claimed checkout's retry returns its labels.
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000002102'), 2, 'claimed');
SELECT is(stockpool.reserve_named(1, 2100, 1, 2, '00000000-0000-0000-0000-000000002102'), '{R5,R6}',
    'a retry after the claim returns the same labels');
SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id = 2100$$, 'no invariant is broken');

-- Spread: many one-unit buyers get distinct labels among the lowest free
-- positions, not only the first few, and every free unit is taken at sellout.
SELECT is(stockpool.set_named_units(1, 2110, 1, ARRAY(SELECT 'S' || g FROM generate_series(1, 1000) AS g)), 1000,
    'key 2110: 1,000 seats (64 buckets)');
CREATE TEMPORARY TABLE got AS
SELECT g, stockpool.reserve_named(1, 2110, 1, 1, ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid) AS labels
FROM generate_series(1, 100) AS g;
SELECT is((SELECT count(DISTINCT labels[1])::integer FROM got), 100, '100 buyers, 100 different seats');
SELECT is_empty(
    $$SELECT u.label FROM got JOIN stockpool.named_units AS u ON u.label = got.labels[1] AND u.item_id = 2110
      WHERE EXISTS (SELECT FROM stockpool.named_free AS f
                    WHERE f.item_id = 2110 AND f.bucket = u.position % 64 AND f.position < u.position)$$,
    'each of them the lowest free position of its bucket (one of the 64 lowest free positions when it was taken)');
SELECT cmp_ok((SELECT count(DISTINCT u.position % 64)::integer FROM got
               JOIN stockpool.named_units AS u ON u.label = got.labels[1] AND u.item_id = 2110),
    '>', 32, 'spread over the buckets, not all from the first');
INSERT INTO got
SELECT g, stockpool.reserve_named(1, 2110, 1, 3, ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid)
FROM generate_series(101, 400) AS g;
SELECT is((SELECT count(*)::integer FROM got WHERE labels IS NULL), 0, '300 buyers of 3: all served');
SELECT is(stockpool.reserve_named(1, 2110, 1, 1, '00000000-0000-0000-0000-000000002111'), NULL,
    'sold out exactly: 100 + 900 = 1,000');
SELECT is((SELECT count(DISTINCT l)::integer FROM got CROSS JOIN unnest(labels) AS l), 1000,
    'every seat went to exactly one buyer');
SELECT results_eq(
    $$SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE item_id = 2110$$,
    $$VALUES (1000, 0, 1000, 0)$$, 'stock_levels: 1,000 held, none free');

CREATE TEMPORARY TABLE before_error AS SELECT * FROM snapshot;
-- Bad input and mixing.
SELECT throws_ok($$SELECT stockpool.reserve_named(NULL, 2100, 1, 1, '00000000-0000-0000-0000-0000000021c1')$$,
    '22004', NULL, 'NULL p_shop_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, NULL, 1, 1, '00000000-0000-0000-0000-0000000021c1')$$,
    '22004', NULL, 'NULL p_item_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2100, NULL, 1, '00000000-0000-0000-0000-0000000021c1')$$,
    '22004', NULL, 'NULL p_location_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2100, 1, NULL, '00000000-0000-0000-0000-0000000021c1')$$,
    '22004', NULL, 'NULL p_quantity: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2100, 1, 1, NULL)$$, '22004', NULL, 'NULL p_checkout_id: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2100, 1, 1, '00000000-0000-0000-0000-0000000021c1', NULL)$$,
    '22004', NULL, 'NULL p_ttl: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2100, 1, 1, '00000000-0000-0000-0000-0000000021c1', '1 minute', NULL)$$,
    '22004', NULL, 'NULL p_adjacent: 22004');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2100, 1, 0, '00000000-0000-0000-0000-0000000021c1')$$,
    '22023', NULL, 'quantity 0: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2100, 1, 1, '00000000-0000-0000-0000-0000000021c1', '0 seconds')$$,
    '22023', NULL, 'ttl 0: 22023');
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2199, 1, 1, '00000000-0000-0000-0000-0000000021c1')$$,
    'SP001', NULL, 'unknown key: SP001');
SELECT is(stockpool.set_stock(1, 2120, 1, 5), 5, 'counted key 2120 at 5');
DELETE FROM before_error;
INSERT INTO before_error SELECT * FROM snapshot;
SELECT throws_ok($$SELECT stockpool.reserve_named(1, 2120, 1, 1, '00000000-0000-0000-0000-0000000021c1')$$,
    'SP010', NULL, 'a counted key: SP010');
SELECT set_eq('SELECT * FROM snapshot', 'SELECT * FROM before_error', 'the refused calls changed nothing');

SELECT * FROM finish();
ROLLBACK;
