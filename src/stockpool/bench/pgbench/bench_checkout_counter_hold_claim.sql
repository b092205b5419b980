-- bench checkout counter_hold_claim: the counter with a hold row, whole
-- checkout. Reserve: lower available and write the hold (one statement).
-- Claim: mark the hold claimed and lower on hand on the same counter row,
-- whose lock is held to commit by every claim of the key.
\set r random(1, 281474976710655)
WITH took AS (
    UPDATE bench.counter SET available = available - 1
    WHERE key_id = 1 AND available >= 1
    RETURNING key_id
)
INSERT INTO bench.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)
SELECT 1, bench.checkout_id(:client_id, :r), took.key_id, 1, 1, now() + interval '15 minutes' FROM took;
WITH claimed AS (
    UPDATE bench.holds SET status = 'claimed', updated_at = now()
    WHERE shop_id = 1 AND checkout_id = bench.checkout_id(:client_id, :r) AND status = 'held'
    RETURNING item_id, quantity
)
UPDATE bench.counter AS c SET on_hand = c.on_hand - claimed.quantity
FROM claimed
WHERE c.key_id = claimed.item_id;
