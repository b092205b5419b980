-- bench catalogue counter_hold, uniform: one unit of a key drawn from the whole
-- catalogue (-D keys=N; uniform choice).
\set k random(1, :keys)
WITH took AS (
    UPDATE bench.counter SET available = available - 1
    WHERE key_id = :k AND available >= 1
    RETURNING key_id
)
INSERT INTO bench.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)
SELECT 1, gen_random_uuid(), took.key_id, 1, 1, now() + interval '15 minutes' FROM took;
