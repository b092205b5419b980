-- bench checkout stockpool_claim: one whole checkout on the hot key, in the
-- two transactions a shop makes: reserve one unit, then (payment succeeded)
-- claim it. One pgbench transaction = one checkout.
\set r random(1, 281474976710655)
SELECT stockpool.reserve_units(1, 1, 1, 1, bench.checkout_id(:client_id, :r));
SELECT stockpool.claim(1, bench.checkout_id(:client_id, :r));
