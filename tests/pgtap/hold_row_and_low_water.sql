-- Two rules written once: the hold row (stockpool._record_hold, the only
-- insert of one, for reserve_units' careful path, reserve_cart and re-opened
-- holds; reserve_units' counter's path inserts its own, the one statement it
-- costs besides the ledger row's) and the
-- low-water mark (stockpool._refill_mark, which _refill applies and
-- reserve_units samples).
BEGIN;
SELECT plan(41);

-- _record_hold.
SELECT is(stockpool.set_stock(1, 1500, 1, 10), 10, 'key 1500 at 10');
SELECT ok(stockpool._record_hold(1, '00000000-0000-0000-0000-000000001500', 1500, 1, 2, '10 minutes', false),
    'a new hold row: inserted, true');
SELECT results_eq(
    $$SELECT quantity, status::text, expires_at > now() + interval '9 minutes'
      FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000001500'$$,
    $$VALUES (2, 'held', true)$$,
    'with its quantity, held, expiring after its ttl');
SELECT ok(NOT stockpool._record_hold(1, '00000000-0000-0000-0000-000000001500', 1500, 1, 3, '1 minute', false),
    'the row already there, p_reopen false: false (reserve_units'' idempotency check)');
SELECT results_eq(
    $$SELECT quantity, expires_at > now() + interval '9 minutes'
      FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000001500'$$,
    $$VALUES (2, true)$$,
    'and the row is left as it was');
UPDATE stockpool.holds SET status = 'released' WHERE checkout_id = '00000000-0000-0000-0000-000000001500';
SELECT ok(stockpool._record_hold(1, '00000000-0000-0000-0000-000000001500', 1500, 1, 3, '1 minute', true),
    'p_reopen true: a released row is re-opened, true');
SELECT results_eq(
    $$SELECT quantity, status::text, expires_at <= now() + interval '1 minute',
             created_at >= now(), updated_at IS NOT NULL
      FROM stockpool.holds WHERE checkout_id = '00000000-0000-0000-0000-000000001500'$$,
    $$VALUES (3, 'held', true, true, true)$$,
    'held again with the new quantity, ttl and clock');
SELECT is(
    (SELECT count(*)::integer FROM pg_catalog.pg_proc
     WHERE pronamespace = 'stockpool'::regnamespace AND proname = '_record_hold'),
    1, 'one _record_hold (the old signature is retired)');
SELECT set_eq(
    $$SELECT proname::text FROM pg_catalog.pg_proc
      WHERE pronamespace = 'stockpool'::regnamespace
          AND pg_catalog.pg_get_functiondef(oid) ~* 'INSERT\s+INTO\s+stockpool\.holds'$$,
    ARRAY['_record_hold', 'reserve_units'],
    'no other function inserts a hold row (reserve_units: its counter''s path)');

-- _refill_mark.
SELECT is(stockpool._refill_mark(1000, 250, 1000), 250,
    'a pool filled to its pool_cap is topped up at its low_water');
SELECT is(stockpool._refill_mark(40000, 250, 1000), 30000,
    'a demand-sized pool well above pool_cap: when a quarter of its level has gone');
SELECT is(stockpool._refill_mark(16, 250, 1000), 12,
    'a small pool: never later than a quarter gone, even below low_water');
SELECT is(stockpool._refill_mark(2000, 250, 1000), 1250,
    'in between: pool_cap - low_water below the level');
SELECT is(
    (SELECT count(*)::integer FROM pg_catalog.pg_proc
     WHERE pronamespace = 'stockpool'::regnamespace
         AND pg_catalog.pg_get_functiondef(oid) ~ '_refill_mark\('
         AND proname <> '_refill_mark'),
    3, 'the mark is applied by _refill (and _top_up_low before it locks), sampled by reserve_units, nowhere computed again');

-- _refill applies it: above the mark a low-water look does nothing, at it it refills.
-- Level 16 (the least a pool has), low_water 250, pool_cap 1000: mark 12.
SELECT is(stockpool.set_stock(1, 1501, 1, 100), 100, 'key 1501 at 100');
SELECT is(stockpool.replenish_pool(1, 1501, 1, 13), 13, 'key 1501: 13 units pooled, one above the mark');
UPDATE stockpool.stock SET pool_target = 10 WHERE item_id = 1501;
SELECT is(stockpool._refill(1, 1501, 1, p_min_extra => 0, p_wait => false, p_low_water_only => true),
    0, 'a pool above its mark is left alone by a low-water look, free stock or not');
SELECT is(stockpool.replenish_pool(1, 1500, 1, 8), 8, 'key 1500: 8 units pooled, below the mark');
UPDATE stockpool.stock SET pool_target = 10 WHERE item_id = 1500;
SELECT is(stockpool._refill(1, 1500, 1, p_min_extra => 0, p_wait => false, p_low_water_only => true),
    2, 'a pool at or below its mark is topped up (to its level of 16; 2 units were free)');

-- Above a mark of 4,096 the low-water look counts one random bucket and
-- scales it up; what the refill is then sized by is counted exactly. Key
-- 1503: 8,000 units pooled (level 8,000, mark 6,000), all of them moved into
-- bucket 0 of 1,024, so the look almost always sees an empty bucket. Sized
-- by that estimate the refill added 8,000 more units to a pool that was full.
SELECT is(stockpool.set_stock(1, 1503, 1, 100000), 100000, 'key 1503 at 100,000');
SELECT is(stockpool.replenish_pool(1, 1503, 1, 8000), 8000, '8,000 pooled');
UPDATE stockpool.pool_units SET bucket = 0 WHERE item_id = 1503;
UPDATE stockpool.stock SET buckets = 1024 WHERE item_id = 1503;
SELECT is(stockpool._refill_mark(8000, 250, 1000), 6000, 'mark 6,000: above 4,096, estimated from one bucket');
SELECT is(stockpool._refill(1, 1503, 1, p_min_extra => 0, p_wait => false, p_low_water_only => true),
    0, 'a low estimate does not make a full pool refill: the exact count is above the mark');
SELECT is((SELECT count(*)::integer FROM stockpool.pool_units WHERE item_id = 1503), 8000, 'still 8,000 pooled');

-- reserve_units samples its low-water look: even with a mark of 0 (low_water
-- 0, a pool_cap far above the level) one reservation in about level / 4 /
-- 24 looks, not every one. Counted with track_functions in this transaction.
SET LOCAL track_functions = 'pl';
SELECT is(stockpool.set_stock(1, 1502, 1, 100000), 100000, 'key 1502 at 100,000');
SELECT is(stockpool.configure_pool(1, 1502, 1, p_pool_cap => 100000, p_low_water => 0)::text, '',
    'pool_cap 100,000, low_water 0');
SELECT is(stockpool.replenish_pool(1, 1502, 1, 1000), 1000, '1,000 pooled: level 1,000, mark 0');
SELECT is(stockpool._refill_mark(1000, 0, 100000), 0, 'the mark is 0');
SELECT ok(bool_and(stockpool.reserve_units(1, 1502, 1, 1, gen_random_uuid())), '200 one-unit reservations')
FROM generate_series(1, 200);
SELECT cmp_ok(
    coalesce(pg_stat_get_xact_function_calls('stockpool._refill(bigint, bigint, bigint, integer, boolean, boolean, integer)'::regprocedure), 0),
    '<', 100::bigint,
    'fewer than 100 of them looked (about 19 expected; every one did when the mark alone set the rate)');

-- Units a transaction in flight is taking (their row's xmax set: deleted or
-- locked, not committed) are not pooled stock: under a rush they were
-- hundreds of units, and counted as pooled they kept a pool running dry
-- above its mark, with no low-water refill, until it was empty. Here this
-- transaction locks them itself, which sets xmax the same way.
SELECT is(stockpool.set_stock(1, 1504, 1, 1000), 1000, 'key 1504 at 1,000');
SELECT is(stockpool.replenish_pool(1, 1504, 1, 64), 64, '64 pooled: level 64, mark 48');
SELECT is(stockpool._pooled_upto(1, 1504, 1, 48, 1), 49, 'counted up to one past the mark while nothing is taken');
SELECT is((SELECT count(*)::integer FROM (
              SELECT 1 FROM stockpool.pool_units WHERE item_id = 1504 LIMIT 20 FOR UPDATE) AS taken),
    20, '20 of its units locked, as a take in flight locks them');
SELECT is(stockpool._pooled_upto(1, 1504, 1, 48, 1), 44, 'the 20 being taken are not counted: 44 pooled, below the mark');
SELECT is(stockpool._refill(1, 1504, 1, p_min_extra => 0, p_wait => false, p_low_water_only => true),
    20, 'so the low-water look refills them (to the level of 64 not being taken)');

-- A refill of a pool above its mark (a buyer found every unit it looked at
-- being taken) adds the shortfall and keeps the level: measured as demand,
-- the few units given out since a refill an hour ago shrank the level to 16.
SELECT is(stockpool.set_stock(1, 1505, 1, 1000), 1000, 'key 1505 at 1,000');
SELECT is(stockpool.replenish_pool(1, 1505, 1, 64), 64, '64 pooled: level 64, mark 48');
SELECT ok(bool_and(stockpool.reserve_units(1, 1505, 1, 1, gen_random_uuid())), '4 one-unit reservations: 60 left')
FROM generate_series(1, 4);
UPDATE stockpool.stock SET refilled_at = now() - interval '1 hour' WHERE item_id = 1505;
SELECT is(stockpool._refill(1, 1505, 1, p_min_extra => 5, p_wait => false, p_low_water_only => false),
    5, 'a buyer''s shortfall of 5 on a pool above its mark: 5 added');
SELECT is((SELECT pool_target FROM stockpool.stock WHERE item_id = 1505), 64, 'and the level stays at 64');

SELECT * FROM finish();
ROLLBACK;
