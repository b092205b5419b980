-- bench sharded: units in 64 buckets of contiguous ids; a random bucket
-- first, any bucket as fallback (the second sub-select runs only when the
-- first finds nothing), claimed by UPDATE. Records no hold.
\set bucket random(0, 63)
WITH first_pick AS (
    SELECT s.unit_id FROM bench.shards AS s
    WHERE s.key_id = 1 AND NOT s.reserved AND s.bucket >= :bucket
    ORDER BY s.bucket, s.unit_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
),
fallback AS (
    SELECT s.unit_id FROM bench.shards AS s
    WHERE s.key_id = 1 AND NOT s.reserved AND s.bucket < :bucket
    ORDER BY s.bucket, s.unit_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE bench.shards SET reserved = true
WHERE unit_id = coalesce((SELECT unit_id FROM first_pick), (SELECT unit_id FROM fallback));
