-- bench named_1: stockpool.reserve_named of one seat of the hot named key
-- (which seat: one of the lowest free, spread over the key's buckets).
SELECT stockpool.reserve_named(1, 1, 1, 1, gen_random_uuid());
