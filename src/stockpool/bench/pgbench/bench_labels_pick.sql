-- bench labels_pick: a buyer picks a seat on the map: the first free seat at
-- or after a random position (wrapping to the first free one), read from the
-- key's free units, then stockpool.reserve_labels of exactly that seat
-- (false when another buyer took it between the read and the reservation).
-- Variables (pgbench -D): span, the highest position.
\set p random(1, :span)
SELECT stockpool.reserve_labels(1, 1, 1, ARRAY[coalesce(
    (SELECT f.label FROM stockpool.named_free AS f
     WHERE f.shop_id = 1 AND f.item_id = 1 AND f.location_id = 1 AND f.position >= :p
     ORDER BY f.position LIMIT 1),
    (SELECT f.label FROM stockpool.named_free AS f
     WHERE f.shop_id = 1 AND f.item_id = 1 AND f.location_id = 1
     ORDER BY f.position LIMIT 1))], gen_random_uuid());
