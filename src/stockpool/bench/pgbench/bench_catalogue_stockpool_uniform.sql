-- bench catalogue stockpool, uniform: one unit of a key drawn from the whole
-- catalogue (-D keys=N; uniform choice).
\set k random(1, :keys)
SELECT stockpool.reserve_units(1, :k, 1, 1, gen_random_uuid());
