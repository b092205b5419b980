-- sellout: one reservation of one unit of the raced key per transaction; a
-- share of the transactions roll back after reserving (payment page closed
-- before the order was written), the rest record what they saw and commit.
-- Variables (pgbench -D): run, shop, item, location, rollback_pct.
-- The checkout id is rebuilt from run, client and a random draw: pgbench
-- replays a client's random draws when it retries a transaction (40001/40P01)
-- but not its \set arithmetic, so a retried transaction reuses its checkout.
\set seq random(1, 4611686018427387903)
\set draw random(1, 100)
BEGIN;
SELECT stockpool.reserve_units(:shop, :item, :location, 1,
    stockpool_race.checkout_id(:run, :client_id, :seq), interval '1 hour')::integer AS ok \gset
\if :draw <= :rollback_pct
ROLLBACK;
\else
INSERT INTO stockpool_race.outcomes
    (run_id, checkout_id, shop_id, item_ids, quantities, intent, reserved)
VALUES
    (:run, stockpool_race.checkout_id(:run, :client_id, :seq), :shop, ARRAY[:item]::bigint[],
     ARRAY[1], 'hold', :ok = 1);
COMMIT;
\endif
