-- bench stockpool: stockpool.reserve_units as shipped, every guarantee on.
SELECT stockpool.reserve_units(1, 1, 1, 1, gen_random_uuid());
