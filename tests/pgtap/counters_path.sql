-- reserve_units' counter's path (issue 10): a key nobody contends is served
-- by two statements in a subtransaction, the ledger row's units and the hold
-- row, and every miss (a retry, a named, unknown or short key, a pool) rolls
-- them back and takes the careful path, leaving nothing behind. Which path
-- served a call shows in this transaction's function statistics: the careful
-- path calls _record_hold, the counter's path calls nothing.
-- The session's note of pooled keys (stockpool.pooled_keys, _pooled_note):
-- a pooled key goes in with its buckets, a key back on its ledger comes out,
-- a noted key skips the counter's path and takes one unit by the pool's path
-- (the hold row and one pool unit, _take, and no _record_hold; a hold row
-- that went in without a unit gets one from the careful path), and a wrong
-- note costs a path, never a wrong answer.
BEGIN;
SELECT plan(87);
SET LOCAL track_functions = 'pl';

-- Calls of a stockpool function made so far in this transaction.
CREATE FUNCTION pg_temp.calls(p_name text) RETURNS bigint
LANGUAGE sql AS $$
    SELECT coalesce(sum(f.calls), 0)::bigint FROM pg_catalog.pg_stat_xact_user_functions AS f
    WHERE f.schemaname = 'stockpool' AND f.funcname = p_name
$$;
CREATE TEMPORARY TABLE seen (name text PRIMARY KEY, calls bigint);
-- Calls of p_name since the last look.
CREATE FUNCTION pg_temp.new_calls(p_name text) RETURNS bigint
LANGUAGE sql AS $$
    WITH now_ AS (SELECT pg_temp.calls(p_name) AS c),
    old AS (DELETE FROM seen WHERE name = p_name RETURNING calls),
    put AS (INSERT INTO seen SELECT p_name, now_.c FROM now_)
    SELECT now_.c - coalesce((SELECT calls FROM old), 0) FROM now_
$$;
DO $$ BEGIN PERFORM pg_temp.new_calls('_record_hold'); END $$;
SET LOCAL stockpool.pooled_keys = '';

SELECT is(stockpool.set_stock(1, 2100, 1, 10), 10, 'key 2100: 10 units, no pool');

-- A new hold: the counter's path.
SELECT ok(stockpool.reserve_units(1, 2100, 1, 3, '00000000-0000-0000-0021-000000000001', '10 minutes'),
    'A: 3 units held');
SELECT is(pg_temp.new_calls('_record_hold'), 0::bigint, 'on the counter''s path (no _record_hold)');
SELECT results_eq(
    $$SELECT quantity, status, expires_at = now() + interval '10 minutes', created_at >= now(), labels IS NULL
      FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0021-000000000001'$$,
    $$VALUES (3, 'held', true, true, true)$$, 'its hold row: 3 units, held, for its ttl, the clock, no labels');
SELECT results_eq(
    $$SELECT allocated, pool_target FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2100, 1)$$,
    $$VALUES (3, 0)$$, 'the ledger row counts them as allocated; no pool');
SELECT is((SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id = 2100), 0, 'and no pool row');

-- A retry: the hold row is there (unique_violation), the try is rolled back.
SELECT ok(stockpool.reserve_units(1, 2100, 1, 3, '00000000-0000-0000-0021-000000000001', '10 minutes'),
    'A again: true');
SELECT is(pg_temp.new_calls('_record_hold'), 1::bigint, 'answered by the careful path');
SELECT is((SELECT allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2100, 1)), 3,
    'the retry took no unit: allocated still 3');
SELECT is((SELECT count(*)::integer FROM stockpool.holds WHERE item_id = 2100), 1, 'still one hold row');
SELECT throws_ok(
    $$SELECT stockpool.reserve_units(1, 2100, 1, 2, '00000000-0000-0000-0021-000000000001')$$,
    'SP007', NULL, 'A with another quantity: SP007');
SELECT results_eq(
    $$SELECT h.quantity, s.allocated FROM stockpool.holds AS h JOIN stockpool.stock AS s USING (shop_id, item_id, location_id)
      WHERE h.checkout_id = '00000000-0000-0000-0021-000000000001'$$,
    $$VALUES (3, 3)$$, 'and nothing of it stayed: the hold of 3, allocated 3');
DO $$ BEGIN PERFORM pg_temp.new_calls('_record_hold'); END $$;

-- Misses that leave nothing behind.
SELECT ok(NOT stockpool.reserve_units(1, 2100, 1, 11, '00000000-0000-0000-0021-000000000002'),
    'B: 11 of 10 refused');
SELECT is(pg_temp.new_calls('_record_hold'), 0::bigint, 'B: refused by the careful path before any hold row');
SELECT ok(NOT stockpool.reserve_units(1, 2100, 1, 8, '00000000-0000-0000-0021-000000000003'),
    'C: 8 of the 7 free refused');
SELECT is(pg_temp.new_calls('_record_hold'), 1::bigint, 'C: by the careful path, after its hold row');
SELECT results_eq(
    $$SELECT (SELECT count(*)::integer FROM stockpool.holds WHERE item_id = 2100),
             (SELECT allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2100, 1))$$,
    $$VALUES (1, 3)$$, 'no hold row and no unit left behind by B or C');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 2199, 1, 1, gen_random_uuid())$$, 'SP001', NULL,
    'an unknown key: SP001');
SELECT is(stockpool.set_named_units(1, 2101, 1, ARRAY['S1', 'S2']), 2, 'key 2101: two named units');
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 2101, 1, 1, gen_random_uuid())$$, 'SP010', NULL,
    'a named key: SP010, its ledger row untouched by the try');
SELECT results_eq(
    $$SELECT on_hand, allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2101, 1)$$,
    $$VALUES (2, 2)$$, 'the named key''s ledger row is as set_named_units left it');
SELECT is(current_setting('stockpool.pooled_keys'), '', 'no pooled key seen: the note is empty');

-- A pooled key: the try misses once, the session notes it, the next call
-- goes to the pool straight away.
SELECT is(stockpool.set_stock(1, 2102, 1, 100), 100, 'key 2102: 100 units');
SELECT is(stockpool.replenish_pool(1, 2102, 1, 20), 20, '20 of them pooled');
UPDATE stockpool.stock SET buckets = 3 WHERE (shop_id, item_id, location_id) = (1, 2102, 1);
DO $$ BEGIN PERFORM pg_temp.new_calls('_take'); END $$;
DO $$ BEGIN PERFORM pg_temp.new_calls('_pool_look'); END $$;
SELECT ok(stockpool.reserve_units(1, 2102, 1, 1, '00000000-0000-0000-0021-000000000004'), 'D: 1 unit of the pooled key');
SELECT is(pg_temp.new_calls('_record_hold'), 0::bigint, 'D: not by the careful path: the try''s hold row kept');
SELECT is(pg_temp.new_calls('_take'), 1::bigint, 'D: and one pool unit taken after the try missed');
SELECT is(pg_temp.new_calls('_pool_look'), 1::bigint, 'D: then the look that notes the key');
SELECT results_eq(
    $$SELECT (SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id = 2102),
             (SELECT count(*)::integer FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0021-000000000004'),
             (SELECT allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2102, 1))$$,
    $$VALUES (19, 1, 20)$$, 'D: 19 units left in the pool, one hold row, allocated still 20');
SELECT is(current_setting('stockpool.pooled_keys'), ',1/2102/1:3,', 'the key is in the note, with its 3 buckets');
SELECT is(stockpool._noted_buckets(1, 2102, 1), 3, '_noted_buckets reads them');
SELECT is(stockpool._noted_buckets(1, 210, 1), 0, 'and 0 for a key not noted (1/210/1 is a prefix of 1/2102/1)');
DO $$ BEGIN PERFORM pg_temp.new_calls('_take'); END $$;
SELECT ok(stockpool.reserve_units(1, 2102, 1, 1, '00000000-0000-0000-0021-000000000005'), 'E: 1 more');
SELECT is(pg_temp.new_calls('_record_hold'), 0::bigint, 'E: not by the careful path');
SELECT is(pg_temp.new_calls('_take'), 1::bigint, 'E: by the pool''s path, one take');
SELECT results_eq(
    $$SELECT allocated, (SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id = 2102)
      FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2102, 1)$$,
    $$VALUES (20, 18)$$, 'both from the pool: 18 left in it, the ledger row untouched');
SELECT results_eq(
    $$SELECT quantity, status, expires_at = now() + interval '15 minutes', created_at >= now()
      FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0021-000000000005'$$,
    $$VALUES (1, 'held', true, true)$$, 'E''s hold row: 1 unit, held, for the default ttl, the clock');

-- The pool's path: a retry, an empty pool, a stale note.
SELECT ok(stockpool.reserve_units(1, 2102, 1, 1, '00000000-0000-0000-0021-000000000005'), 'E again: true');
SELECT is(pg_temp.new_calls('_record_hold'), 1::bigint, 'answered by the careful path (the hold row was there)');
SELECT is((SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id = 2102), 18,
    'and the retry took no unit: still 18 in the pool (the take runs only when the hold row went in)');
DELETE FROM stockpool.pool_units WHERE item_id = 2102;
UPDATE stockpool.stock SET allocated = allocated - 18 WHERE (shop_id, item_id, location_id) = (1, 2102, 1);
DO $$ BEGIN PERFORM pg_temp.new_calls('_take_lines'); END $$;
SELECT ok(stockpool.reserve_units(1, 2102, 1, 1, '00000000-0000-0000-0021-000000000006'),
    'I: the pool empty, 98 units free on the ledger: held, not refused');
SELECT is(pg_temp.new_calls('_record_hold'), 0::bigint, 'I: the hold row written by the pool''s path');
SELECT is(pg_temp.new_calls('_take_lines'), 1::bigint,
    'I: its unit taken by the careful path (from the ledger), after the pool''s path found none');
SELECT results_eq(
    $$SELECT (SELECT count(*)::integer FROM stockpool.holds WHERE item_id = 2102),
             (SELECT allocated - (SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id = 2102)
              FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2102, 1))$$,
    $$VALUES (3, 3)$$, 'I: three hold rows (D, E, I), and held units = allocated less pooled: nothing left behind');
-- Refused after the pool's path wrote the hold row: the row goes.
SELECT is(stockpool.set_stock(1, 2104, 1, 0), 0, 'key 2104: no units');
SELECT is(stockpool.set_stock(1, 2105, 1, 1), 1, 'key 2105: one unit');
SELECT ok(stockpool.reserve_units(1, 2105, 1, 1, gen_random_uuid()), 'key 2105''s unit held');
SET LOCAL stockpool.pooled_keys = ',1/2104/1:3,1/2105/1:3,';
SELECT ok(NOT stockpool.reserve_units(1, 2104, 1, 1, gen_random_uuid()),
    'L: a noted key with no units on hand: false (not a retry of the row the pool''s path wrote)');
SELECT ok(NOT stockpool.reserve_units(1, 2105, 1, 1, gen_random_uuid()), 'L: a noted key sold out: false');
SELECT results_eq(
    $$SELECT item_id, count(*)::integer FROM stockpool.holds WHERE item_id IN (2104, 2105) GROUP BY item_id$$,
    $$VALUES (2105::bigint, 1)$$, 'L: neither refusal left a hold row');
SET LOCAL stockpool.pooled_keys = ',1/2102/1:1000,';
SELECT ok(stockpool.reserve_units(1, 2102, 1, 1, gen_random_uuid()), 'J: the note''s buckets wrong (1000 of 3): held');
SELECT is(pg_temp.new_calls('_record_hold'), 0::bigint, 'J: by the pool''s path all the same');
SELECT lives_ok($$SELECT stockpool._pool_look(1, 2102, 1, 1000, 1)$$, '_pool_look with the wrong buckets');
SELECT is(current_setting('stockpool.pooled_keys'), ',1/2102/1:3,', 'brought the note up to date');
-- A note that is not stockpool's own writing (buckets that are no number, or
-- beyond integer) is refused as PostgreSQL refuses such a number: 22P02,
-- 22003 (docs/api.md). RESET stockpool.pooled_keys clears it.
SET LOCAL stockpool.pooled_keys = ',1/2102/1:x,';
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 2102, 1, 1, gen_random_uuid())$$, '22P02', NULL,
    'a note with buckets ''x'': 22P02');
SET LOCAL stockpool.pooled_keys = ',1/2102/1:99999999999,';
SELECT throws_ok($$SELECT stockpool.reserve_units(1, 2102, 1, 1, gen_random_uuid())$$, '22003', NULL,
    'a note with buckets beyond integer: 22003');
RESET stockpool.pooled_keys;
SELECT ok(stockpool.reserve_units(1, 2102, 1, 1, gen_random_uuid()), 'K: after RESET: held');
SELECT is(pg_temp.new_calls('_record_hold'), 0::bigint, 'K: by the try''s hold row and a pool unit, as D');
SELECT is(current_setting('stockpool.pooled_keys'), ',1/2102/1:3,', 'K: which noted the key again');
SELECT is(stockpool.set_stock(1, 2103, 1, 10), 10, 'key 2103: 10 units');
SELECT ok(stockpool.reserve_units(1, 2103, 1, 1, gen_random_uuid()), 'F: a quiet key while the note holds another');
SELECT is(pg_temp.new_calls('_record_hold'), 0::bigint, 'F on the counter''s path');

-- A wrong note costs a path, never an answer.
SET LOCAL stockpool.pooled_keys = ',1/2103/1:3,1/2102/1:3,';
DO $$ BEGIN PERFORM pg_temp.new_calls('_take_ledger'); END $$;
SELECT ok(stockpool.reserve_units(1, 2103, 1, 1, gen_random_uuid()), 'G: the quiet key, wrongly noted: held');
SELECT is(pg_temp.new_calls('_take_ledger'), 1::bigint,
    'by the careful path''s ledger try, after the pool''s path found no unit (negative control of the look)');
SELECT is(current_setting('stockpool.pooled_keys'), ',1/2102/1:3,', 'which took the key out of the note');
SELECT is((SELECT allocated FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2103, 1)), 2,
    'from its ledger row: allocated 2');
SET LOCAL stockpool.pooled_keys = '';
SELECT ok(stockpool.reserve_units(1, 2102, 1, 1, gen_random_uuid()), 'H: the pooled key, missing from the note: held');
SELECT is(current_setting('stockpool.pooled_keys'), ',1/2102/1:3,', 'and noted again');

-- A pooled key whose pool has no free unit, not noted: the try's hold row
-- goes back with it, and the careful path refills the pool and answers.
SELECT is(stockpool.set_stock(1, 2106, 1, 10), 10, 'key 2106: 10 units');
SELECT is(stockpool.replenish_pool(1, 2106, 1, 2), 2, '2 of them pooled');
DELETE FROM stockpool.pool_units WHERE (shop_id, item_id, location_id) = (1, 2106, 1);
UPDATE stockpool.stock SET allocated = 0 WHERE (shop_id, item_id, location_id) = (1, 2106, 1);
SET LOCAL stockpool.pooled_keys = '';
DO $$ BEGIN PERFORM pg_temp.new_calls('_record_hold'); END $$;
SELECT ok(stockpool.reserve_units(1, 2106, 1, 1, '00000000-0000-0000-0021-000000000007'),
    'L: a pooled key with an empty pool, not noted: held');
SELECT is(pg_temp.new_calls('_record_hold'), 1::bigint, 'L: by the careful path (the try found no unit)');
SELECT results_eq(
    $$SELECT (SELECT count(*)::integer FROM stockpool.holds WHERE item_id = 2106),
             (SELECT allocated - (SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id = 2106)
              FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2106, 1))$$,
    $$VALUES (1, 1)$$, 'L: one hold row, and allocated is the pool plus that one unit');
SELECT is(current_setting('stockpool.pooled_keys'),
    format(',1/2106/1:%s,', (SELECT buckets FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (1, 2106, 1))),
    'L: the key noted by the careful path, with its buckets');

-- _pooled_note itself.
SET LOCAL stockpool.pooled_keys = '';
DO $$ BEGIN PERFORM stockpool._pooled_note(1, g.n, 1, 4) FROM generate_series(1, 300) AS g (n); END $$;
SELECT is(current_setting('stockpool.pooled_keys'),
    ',' || (SELECT string_agg(format('1/%s/1:4', n), ',' ORDER BY n DESC) FROM generate_series(45, 300) AS g (n)) || ',',
    '300 keys noted: the newest 256 kept, newest first, each with its buckets');
DO $$ BEGIN PERFORM stockpool._pooled_note(1, 7, 1, 9); END $$;
SELECT is(split_part(current_setting('stockpool.pooled_keys'), ',', 2), '1/7/1:9',
    'a key noted again moves to the front, with its new buckets');
SELECT is(array_length(string_to_array(btrim(current_setting('stockpool.pooled_keys'), ','), ','), 1), 256,
    'the oldest one went: still 256 keys');
DO $$ BEGIN PERFORM stockpool._pooled_note(1, 7, 1, 9); END $$;
SELECT is(array_length(string_to_array(btrim(current_setting('stockpool.pooled_keys'), ','), ','), 1), 256,
    'noted once: still 256 keys after the same key again');
DO $$ BEGIN PERFORM stockpool._pooled_note(1, 7, 1, 0); END $$;
SELECT ok(strpos(current_setting('stockpool.pooled_keys'), ',1/7/1:') = 0 AND
          array_length(string_to_array(btrim(current_setting('stockpool.pooled_keys'), ','), ','), 1) = 255,
    'a key back on its ledger comes out, the others stay');
DO $$ BEGIN PERFORM stockpool._pooled_note(1, 10, 1, 0); END $$;
SELECT ok(strpos(current_setting('stockpool.pooled_keys'), ',1/100/1:4,') > 0,
    'taking out 1/10/1 leaves 1/100/1 (a key that starts like it)');
SAVEPOINT note;
DO $$ BEGIN PERFORM stockpool._pooled_note(1, 999, 1, 4); END $$;
ROLLBACK TO SAVEPOINT note;
SELECT is(strpos(current_setting('stockpool.pooled_keys'), ',1/999/1:'), 0, 'a note made in a rolled-back subtransaction goes');

-- _should_look: the low-water look's odds, p_sampled times higher on the
-- pool's path. A pool of level 4,000 (pool_cap 4,000, low_water 3,000): its
-- mark is 3,000, so a look in 3,000 / 8 = 375 takes, one in 46.9 with
-- p_sampled 8. 20,000 draws each, from a fixed seed.
SELECT setseed(0.21);
SELECT ok((SELECT count(*) FILTER (WHERE stockpool._should_look(4000, 3000, 4000, 1))
           FROM generate_series(1, 20000)) BETWEEN 35 AND 75,
    '_should_look, p_sampled 1: about 53 looks in 20,000 (one in 375)');
SELECT ok((SELECT count(*) FILTER (WHERE stockpool._should_look(4000, 3000, 4000, 8))
           FROM generate_series(1, 20000)) BETWEEN 360 AND 500,
    '_should_look, p_sampled 8: about 427 looks (one in 46.9)');
SELECT ok((SELECT bool_and(stockpool._should_look(16, 100, 4000, 1)) FROM generate_series(1, 1000)),
    'a pool at the smallest level is looked at on every take');
-- Level 96, low_water 24: mark 24 and a quarter of the level 24, so every
-- take looks; at level 100 the quarter is 25, and 8 takes in 25 do.
SELECT ok((SELECT bool_and(stockpool._should_look(96, 24, 4000, 1)) FROM generate_series(1, 1000)),
    'a mark and quarter level of 24: looked at on every take');
SELECT ok((SELECT count(*) FILTER (WHERE stockpool._should_look(100, 24, 4000, 1))
           FROM generate_series(1, 1000)) BETWEEN 250 AND 400,
    'a quarter level of 25: about 320 looks in 1,000 (8 in 25)');

SELECT is_empty($$SELECT * FROM stockpool.check_invariants() WHERE item_id BETWEEN 2100 AND 2103$$,
    'invariants hold');

SELECT * FROM finish();
ROLLBACK;
