-- bench counter_hold: the counter plus the hold row a reservation needs, in
-- one statement (one round trip; the row lock is still held to commit).
WITH took AS (
    UPDATE bench.counter SET available = available - 1
    WHERE key_id = 1 AND available >= 1
    RETURNING key_id
)
INSERT INTO bench.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)
SELECT 1, gen_random_uuid(), took.key_id, 1, 1, now() + interval '15 minutes' FROM took;
