-- bench skip_locked: one row per unit; claim the lowest free id with
-- FOR UPDATE SKIP LOCKED and mark it reserved by UPDATE. Every claimer starts
-- at the same id and steps over the same locked rows and dead index entries.
UPDATE bench.units SET reserved = true
WHERE unit_id = (
    SELECT u.unit_id FROM bench.units AS u
    WHERE u.key_id = 1 AND NOT u.reserved
    ORDER BY u.unit_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED);
