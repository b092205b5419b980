-- sellout: one reservation of one unit of the raced key per transaction.
-- Variables (pgbench -D): shop, item, location.
SELECT stockpool.reserve_units(:shop, :item, :location, 1, gen_random_uuid());
