-- bench checkout counter_hold_release: the counter with a hold row, reserve
-- then release: mark the hold released and give the unit back to available
-- (the same counter row).
\set r random(1, 281474976710655)
WITH took AS (
    UPDATE bench.counter SET available = available - 1
    WHERE key_id = 1 AND available >= 1
    RETURNING key_id
)
INSERT INTO bench.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)
SELECT 1, bench.checkout_id(:client_id, :r), took.key_id, 1, 1, now() + interval '15 minutes' FROM took;
WITH released AS (
    UPDATE bench.holds SET status = 'released', updated_at = now()
    WHERE shop_id = 1 AND checkout_id = bench.checkout_id(:client_id, :r) AND status = 'held'
    RETURNING item_id, quantity
)
UPDATE bench.counter AS c SET available = c.available + released.quantity
FROM released
WHERE c.key_id = released.item_id;
