-- bench checkout stockpool_release: reserve one unit of the hot key, then
-- (payment failed) release it: the reference a claim is measured against.
\set r random(1, 281474976710655)
SELECT stockpool.reserve_units(1, 1, 1, 1, bench.checkout_id(:client_id, :r));
SELECT stockpool.release(1, bench.checkout_id(:client_id, :r));
