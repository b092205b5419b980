-- The rules migration 0008 moved from CHECK constraints to triggers: a key's
-- pool settings (stock_settings_valid) and a hold row's shape (holds_valid).
-- Each rule still refuses a bad write, even the owner's, with 23514 naming the
-- old constraint and nothing of the statement left; a reservation that takes
-- from a ledger row does not run the settings trigger (what the move was
-- for), and a configure_pool that writes the settings does. Negative
-- controls: with a trigger disabled the same bad write goes through, so it is
-- the trigger that refuses; the call count does see a run of the trigger.
-- Runs as superuser, rolled back.
BEGIN;
SELECT plan(22);

SELECT lives_ok($$SELECT stockpool.set_stock(1, 8801, 1, 50)$$, 'key 8801 at 50');

-- Pool settings, written directly (as the owner could).
SELECT throws_ok($$UPDATE stockpool.stock SET pool_cap = 0 WHERE item_id = 8801$$, '23514',
    'new row for relation "stock" violates check constraint "stock_pool_cap_positive"', 'pool_cap 0 refused');
SELECT throws_ok($$UPDATE stockpool.stock SET low_water = pool_cap WHERE item_id = 8801$$, '23514',
    'new row for relation "stock" violates check constraint "stock_low_water_within_cap"',
    'low_water at pool_cap refused');
SELECT throws_ok($$UPDATE stockpool.stock SET low_water = -1 WHERE item_id = 8801$$, '23514',
    'new row for relation "stock" violates check constraint "stock_low_water_within_cap"', 'low_water -1 refused');
SELECT throws_ok($$UPDATE stockpool.stock SET buckets = 0 WHERE item_id = 8801$$, '23514',
    'new row for relation "stock" violates check constraint "stock_buckets_range"', 'buckets 0 refused');
SELECT throws_ok($$UPDATE stockpool.stock SET buckets = 1025 WHERE item_id = 8801$$, '23514',
    'new row for relation "stock" violates check constraint "stock_buckets_range"', 'buckets 1025 refused');
SELECT throws_ok($$UPDATE stockpool.stock SET pool_target = -1 WHERE item_id = 8801$$, '23514',
    'new row for relation "stock" violates check constraint "stock_pool_target_nonnegative"',
    'pool_target -1 refused');
SELECT throws_ok(
    $$INSERT INTO stockpool.stock (shop_id, item_id, location_id, on_hand, buckets) VALUES (1, 8802, 1, 5, 2000)$$,
    '23514', 'new row for relation "stock" violates check constraint "stock_buckets_range"',
    'a new row with buckets 2000 refused');
SELECT results_eq(
    $$SELECT on_hand, allocated, pool_cap, low_water, buckets, pool_target FROM stockpool.stock
      WHERE item_id IN (8801, 8802)$$,
    $$VALUES (50, 0, 1000, 250, 64, 0)$$,
    'nothing of the refused statements stayed');

-- A hold row's shape.
SELECT ok(stockpool.reserve_units(1, 8801, 1, 2, '00000000-0000-0000-0000-000000008801'), 'a hold of 2');
SELECT throws_ok($$UPDATE stockpool.holds SET quantity = 0 WHERE item_id = 8801$$, '23514',
    'new row for relation "holds" violates check constraint "holds_quantity_positive"', 'quantity 0 refused');
SELECT throws_ok($$UPDATE stockpool.holds SET status = 'lost' WHERE item_id = 8801$$, '23514',
    'new row for relation "holds" violates check constraint "holds_status_known"', 'an unknown status refused');
SELECT throws_ok($$UPDATE stockpool.holds SET labels = '{A1}' WHERE item_id = 8801$$, '23514',
    'new row for relation "holds" violates check constraint "holds_labels_match_quantity"',
    'one label for a quantity of 2 refused');
SELECT throws_ok(
    $$INSERT INTO stockpool.holds (shop_id, checkout_id, item_id, location_id, quantity, status, expires_at)
      VALUES (1, '00000000-0000-0000-0000-000000008802', 8801, 1, 1, 'pending', now())$$,
    '23514', 'new row for relation "holds" violates check constraint "holds_status_known"',
    'a new row with an unknown status refused');
SELECT results_eq(
    $$SELECT quantity, status, labels FROM stockpool.holds WHERE item_id = 8801$$,
    $$VALUES (2, 'held'::text, NULL::text[])$$,
    'the hold is as reserved');

-- Which writes run the settings trigger (calls counted in this transaction;
-- the test cluster runs with track_functions = pl).
CREATE TEMPORARY TABLE settings_calls AS
    SELECT coalesce((SELECT calls FROM pg_catalog.pg_stat_xact_user_functions
                     WHERE schemaname = 'stockpool' AND funcname = '_stock_settings_valid'), 0) AS calls;
SELECT ok(stockpool.reserve_units(1, 8801, 1, 3, '00000000-0000-0000-0000-000000008803'),
    'a reservation of a quiet key, from its ledger row');
SELECT is((SELECT allocated FROM stockpool.stock WHERE item_id = 8801), 5, 'taken from the ledger row');
SELECT is(
    (SELECT calls FROM pg_catalog.pg_stat_xact_user_functions
     WHERE schemaname = 'stockpool' AND funcname = '_stock_settings_valid') - (SELECT calls FROM settings_calls),
    0::bigint, 'the take from the ledger row did not run the settings trigger');
SELECT lives_ok($$SELECT stockpool.configure_pool(1, 8801, 1, 500, 100, 32)$$, 'configure_pool writes the settings');
SELECT is(
    (SELECT calls FROM pg_catalog.pg_stat_xact_user_functions
     WHERE schemaname = 'stockpool' AND funcname = '_stock_settings_valid') - (SELECT calls FROM settings_calls),
    1::bigint, 'negative control: the count sees the trigger run for configure_pool');

-- Negative controls: the triggers are what refuse.
ALTER TABLE stockpool.stock DISABLE TRIGGER stock_settings_valid;
ALTER TABLE stockpool.holds DISABLE TRIGGER holds_valid;
SELECT lives_ok($$UPDATE stockpool.stock SET buckets = 0 WHERE item_id = 8801$$,
    'negative control: with stock_settings_valid disabled, buckets 0 goes through');
SELECT lives_ok($$UPDATE stockpool.holds SET status = 'lost' WHERE item_id = 8801$$,
    'negative control: with holds_valid disabled, an unknown status goes through');

SELECT * FROM finish();
ROLLBACK;
