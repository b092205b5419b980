-- bench cart: stockpool.reserve_cart of 5 lines (one unit each) across 5 hot
-- keys, passed out of order: the function sorts them into its lock order.
SELECT stockpool.reserve_cart(1, gen_random_uuid(),
    '{4,2,5,1,3}'::bigint[], '{1,1,1,1,1}'::bigint[], '{1,1,1,1,1}'::integer[]);
