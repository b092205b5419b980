-- stockpool.maintain: one maintenance cycle within a time budget. Expires
-- overdue holds in batches until none is due (or the budget is spent, checked
-- between batches), folds pending claims, tops up pools at their low-water
-- mark, hands quiet pools back, and says what it did; never waits.
BEGIN;
SELECT plan(32);

SELECT has_function('stockpool', 'maintain', ARRAY['interval', 'integer'], 'maintain(interval, integer) exists');
SELECT throws_ok('SELECT * FROM stockpool.maintain(NULL)', '22004', NULL, 'NULL p_budget: 22004');
SELECT throws_ok('SELECT * FROM stockpool.maintain(''1 second'', NULL)', '22004', NULL, 'NULL p_batch: 22004');
SELECT throws_ok('SELECT * FROM stockpool.maintain(''0 seconds'')', '22023', NULL, 'a zero budget: 22023');
SELECT throws_ok('SELECT * FROM stockpool.maintain(''1 second'', 0)', '22023', NULL, 'a zero batch: 22023');
SELECT results_eq('SELECT * FROM stockpool.maintain()', $$VALUES (0, 0, 0, 0)$$,
    'nothing to do: one row of zeros');

-- Overdue holds: 7 on an unpooled key (1800), in batches of 2.
SELECT is(stockpool.set_stock(1, 1800, 1, 20), 20, 'key 1800 at 20');
SELECT ok(bool_and(stockpool.reserve_units(1, 1800, 1, 1, format('00000000-0000-0000-0000-%s', lpad(g::text, 12, '0'))::uuid)),
    '7 holds of one unit')
FROM generate_series(1801, 1807) AS g;
UPDATE stockpool.holds SET expires_at = now() - interval '1 minute' WHERE item_id = 1800;
SELECT results_eq($$SELECT expired FROM stockpool.maintain('10 seconds', 2)$$, $$VALUES (7)$$,
    'batches of 2 until none is due: all 7 expired in one call');
SELECT results_eq(
    $$SELECT on_hand, held, free FROM stockpool.stock_levels WHERE (shop_id, item_id, location_id) = (1, 1800, 1)$$,
    $$VALUES (20, 0, 20)$$, 'their units are free again on the ledger row');

-- The budget is checked between batches: a budget already spent runs one batch.
SELECT ok(bool_and(stockpool.reserve_units(1, 1800, 1, 1, format('00000000-0000-0000-0000-%s', lpad(g::text, 12, '0'))::uuid)),
    '5 more holds')
FROM generate_series(1811, 1815) AS g;
UPDATE stockpool.holds SET expires_at = now() - interval '1 minute' WHERE item_id = 1800 AND status = 'held';
SELECT results_eq($$SELECT expired FROM stockpool.maintain('1 microsecond', 2)$$, $$VALUES (2)$$,
    'a spent budget: one batch of 2, not interrupted');
SELECT results_eq($$SELECT expired FROM stockpool.maintain('10 seconds', 2)$$, $$VALUES (3)$$,
    'the next cycle expires the other 3');

-- Pending claims are folded.
SELECT is(stockpool.set_stock(1, 1820, 1, 10), 10, 'key 1820 at 10');
SELECT ok(stockpool.reserve_units(1, 1820, 1, 3, '00000000-0000-0000-0000-000000001821'), 'a hold of 3');
WITH claimed AS (
    UPDATE stockpool.holds SET status = 'claimed', updated_at = clock_timestamp()
    WHERE checkout_id = '00000000-0000-0000-0000-000000001821' RETURNING item_id, location_id, quantity
)
INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity)
SELECT 1, item_id, location_id, '00000000-0000-0000-0000-000000001821', quantity FROM claimed;
SELECT results_eq($$SELECT settled FROM stockpool.maintain()$$, $$VALUES (3)$$,
    'a pending claim of 3 units is folded');
SELECT results_eq(
    $$SELECT s.on_hand, (SELECT count(*)::integer FROM stockpool.pending_claims WHERE item_id = 1820)
      FROM stockpool.stock AS s WHERE (s.shop_id, s.item_id, s.location_id) = (1, 1820, 1)$$,
    $$VALUES (7, 0)$$, 'into the ledger row: on hand 7, nothing pending');

-- A pool at its low-water mark is topped up; one above it is left alone.
SELECT is(stockpool.set_stock(1, 1830, 1, 100), 100, 'key 1830 at 100');
SELECT is(stockpool.replenish_pool(1, 1830, 1, 8), 8, 'key 1830: 8 pooled, its level 16: at or below the mark of 12');
SELECT is(stockpool.set_stock(1, 1831, 1, 100), 100, 'key 1831 at 100');
SELECT is(stockpool.replenish_pool(1, 1831, 1, 14), 14, 'key 1831: 14 pooled, above its mark');
UPDATE stockpool.stock SET pool_target = 10 WHERE item_id IN (1830, 1831);
SELECT results_eq($$SELECT refilled FROM stockpool.maintain('1 hour')$$, $$VALUES (8)$$,
    'only key 1830 is topped up, to its level of 16');

-- A pool not refilled for 60 s goes back to its ledger row.
UPDATE stockpool.stock SET refilled_at = now() - interval '61 seconds' WHERE item_id = 1831;
SELECT results_eq($$SELECT cooled FROM stockpool.maintain()$$, $$VALUES (14)$$,
    'the quiet pool of key 1831 (14 units) is handed back');

-- _maintain_step, which every step of sweep and maintain goes through (the
-- give-up after 50 ms of waiting needs a second session:
-- tests/python/test_skip_locked_race.py).
SELECT throws_ok($$SELECT stockpool._maintain_step('vacuum', 10, '1 minute')$$, 'P0001',
    'stockpool._maintain_step: unknown step vacuum', 'an unknown step is refused');
SELECT is(stockpool.set_stock(1, 1840, 1, 5), 5, 'key 1840 at 5');
SELECT ok(stockpool.reserve_units(1, 1840, 1, 1, '00000000-0000-0000-0000-000000001841'), 'a hold');
SELECT ok(stockpool.reserve_units(1, 1840, 1, 1, '00000000-0000-0000-0000-000000001842'), 'another');
UPDATE stockpool.holds SET expires_at = now() - interval '1 minute' WHERE item_id = 1840;
CREATE TEMPORARY TABLE expiries_before AS
SELECT coalesce(pg_catalog.pg_stat_get_xact_function_calls('stockpool._tally_expiry()'::regprocedure), 0) AS n;
SET LOCAL lock_timeout = '7s';
SELECT is(stockpool._maintain_step('expire', 1, '1 minute', clock_timestamp() + interval '1 hour'), 2,
    'expire with p_until: batches of 1 until one is not full, 2 holds');
SELECT is(
    (SELECT coalesce(pg_catalog.pg_stat_get_xact_function_calls('stockpool._tally_expiry()'::regprocedure), 0) - n
     FROM expiries_before)::integer,
    2, 'counted once the step stands: two expiries');
SELECT is(current_setting('lock_timeout'), '7s', 'the caller''s lock_timeout is back after the step');
SELECT is(
    (SELECT count(*)::integer FROM stockpool.holds WHERE item_id = 1840 AND status = 'expired'),
    2, 'both holds expired');
SELECT set_eq(
    $$SELECT proname::text FROM pg_catalog.pg_proc
      WHERE pronamespace = 'stockpool'::regnamespace
          AND proname NOT IN ('_expire_due', '_settle_due', '_cool_quiet', '_top_up_low')
          AND pg_catalog.pg_get_functiondef(oid) ~ 'stockpool\._(expire_due|settle_due|cool_quiet|top_up_low)\('$$,
    ARRAY['_maintain_step'],
    'no function but _maintain_step runs a maintenance step (one that runs it bare could wait with its batch held)');

SELECT * FROM finish();
ROLLBACK;
