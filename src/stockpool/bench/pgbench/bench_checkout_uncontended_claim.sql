-- bench checkout uncontended_claim: counter+hold's whole checkout with a
-- counter row of the client's own (bench.ceiling), so no two clients ever
-- meet on a row: what a checkout that records a hold and claims it costs on
-- this machine when nothing waits. A reference for scripts/claim-vs-release,
-- not a strategy: it guards nothing (one shared stock is the whole problem).
\set r random(1, 281474976710655)
WITH took AS (
    UPDATE bench.ceiling SET n = n + 1 WHERE client_id = :client_id RETURNING client_id
)
INSERT INTO bench.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)
SELECT 1, bench.checkout_id(:client_id, :r), 1, 1, 1, now() + interval '15 minutes' FROM took;
WITH claimed AS (
    UPDATE bench.holds SET status = 'claimed', updated_at = now()
    WHERE shop_id = 1 AND checkout_id = bench.checkout_id(:client_id, :r) AND status = 'held'
    RETURNING quantity
)
UPDATE bench.ceiling AS c SET n = c.n - claimed.quantity
FROM claimed
WHERE c.client_id = :client_id;
