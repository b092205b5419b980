-- race_hot: reservations only, one unit of one hot key per transaction, a
-- new checkout each time (rebuilt from run, client and seq, so a retry reuses
-- it). Variables (pgbench -D): run, shop, item, location, seq=0.
\set seq :seq + 1
SELECT stockpool.reserve_units(:shop, :item, :location, 1,
    stockpool_race.checkout_id(:run, :client_id, :seq), interval '1 hour');
