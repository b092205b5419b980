-- bench pool: a bounded pool (<= 1,000 rows) claimed lowest id first by
-- DELETE, a hold row, an inline refill under an advisory lock when dry
-- (bench.pool_reserve in bench_setup.sql).
SELECT bench.pool_reserve(1, gen_random_uuid());
