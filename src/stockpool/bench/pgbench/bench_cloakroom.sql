-- bench cloakroom: the public cloakroom shape for units with an identity:
-- the first free hanger (seat) in position order, FOR UPDATE SKIP LOCKED
-- LIMIT 1, then UPDATE it to name the checkout. Every claimer starts at the
-- same position and steps over the same locked rows and dead index entries.
UPDATE bench.hangers SET taken = true, checkout_id = gen_random_uuid()
WHERE key_id = 1 AND position = (
    SELECT h.position FROM bench.hangers AS h
    WHERE h.key_id = 1 AND NOT h.taken
    ORDER BY h.position
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING label;
