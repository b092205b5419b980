-- bench checkout cart_claim: a 5-line cart across the 5 hot keys (lines out
-- of order), then its claim, which settles five hot ledger rows.
\set r random(1, 281474976710655)
SELECT stockpool.reserve_cart(1, bench.checkout_id(:client_id, :r),
    '{4,2,5,1,3}'::bigint[], '{1,1,1,1,1}'::bigint[], '{1,1,1,1,1}'::integer[]);
SELECT stockpool.claim(1, bench.checkout_id(:client_id, :r));
