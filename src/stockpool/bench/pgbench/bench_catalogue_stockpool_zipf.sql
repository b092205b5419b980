-- bench catalogue stockpool, zipf: one unit of a key drawn from the whole
-- catalogue (-D keys=N; zipf choice, Zipf exponent 1.1: a few keys are hot).
\set k random_zipfian(1, :keys, 1.1)
SELECT stockpool.reserve_units(1, :k, 1, 1, gen_random_uuid());
