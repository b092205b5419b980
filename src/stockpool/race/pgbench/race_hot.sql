-- race_hot: reservations only, one unit of one hot key per transaction, a
-- new checkout each time, rebuilt from run, client and a random draw: pgbench
-- replays a client's random draws when it retries a transaction (40001/40P01)
-- but not its \set arithmetic, so a retry reuses the checkout.
-- Variables (pgbench -D): run, shop, item, location.
\set seq random(1, 4611686018427387903)
SELECT stockpool.reserve_units(:shop, :item, :location, 1,
    stockpool_race.checkout_id(:run, :client_id, :seq), interval '1 hour');
