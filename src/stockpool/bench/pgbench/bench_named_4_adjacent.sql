-- bench named_4_adjacent: stockpool.reserve_named of 4 adjacent seats of the
-- hot named key (one block of consecutive positions in a row), or NULL when
-- no such block is free: this cell runs the key towards sellout.
SELECT stockpool.reserve_named(1, 1, 1, 4, gen_random_uuid(), interval '15 minutes', true);
