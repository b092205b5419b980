-- unit_status: one row per unit of a named key, read in one snapshot.
-- status: free (among the key's free units), held (in a hold of status
-- held; expires_at says until when, an overdue one is still held until it
-- is swept or renewed), sold (in a claimed hold), or lost (in neither: a
-- broken invariant, which check_invariants() reports too). checkout_id and
-- expires_at are the hold's, NULL for a free unit. A unit taken by a
-- reservation still in flight shows as free until it commits.
CREATE OR REPLACE VIEW stockpool.unit_status
WITH (security_barrier)
AS
WITH taken AS (
    SELECT h.shop_id, h.item_id, h.location_id, l.label, h.checkout_id, h.expires_at,
           CASE h.status WHEN 'held' THEN 'held' ELSE 'sold' END AS status
    FROM stockpool.holds AS h
    CROSS JOIN LATERAL pg_catalog.unnest(h.labels) AS l (label)
    WHERE h.labels IS NOT NULL
        AND h.status IN ('held', 'claimed')
)

SELECT
    u.shop_id,
    u.item_id,
    u.location_id,
    u.label,
    u.position,
    CASE
        WHEN f.position IS NOT NULL THEN 'free'
        WHEN t.status IS NOT NULL THEN t.status
        ELSE 'lost'
    END AS status,
    t.checkout_id,
    t.expires_at
FROM stockpool.named_units AS u
LEFT JOIN stockpool.named_free AS f
    ON u.shop_id = f.shop_id
    AND u.item_id = f.item_id
    AND u.location_id = f.location_id
    AND u.position = f.position
LEFT JOIN taken AS t
    ON u.shop_id = t.shop_id
    AND u.item_id = t.item_id
    AND u.location_id = t.location_id
    AND u.label = t.label;

COMMENT ON VIEW stockpool.unit_status IS
'Per unit of a named key: label, position, status (free, held, sold; lost only when an invariant is broken), '
'and the holding checkout with its expiry.';
