-- stock_levels: one row per stock key, read in one snapshot.
-- pooled: units in the pool; held: units in live holds (status held,
-- expired but unswept included, since they still own their units);
-- free: on_hand - pooled - held, the stock a refill can still move.
CREATE OR REPLACE VIEW stockpool.stock_levels
WITH (security_barrier)
AS
SELECT
    s.shop_id,
    s.item_id,
    s.location_id,
    s.on_hand,
    coalesce(p.pooled, 0)::integer AS pooled,
    coalesce(h.held, 0)::integer AS held,
    (s.on_hand - coalesce(p.pooled, 0) - coalesce(h.held, 0))::integer AS free
FROM stockpool.stock AS s
LEFT JOIN (
    SELECT u.shop_id, u.item_id, u.location_id, pg_catalog.count(*) AS pooled
    FROM stockpool.pool_units AS u
    GROUP BY u.shop_id, u.item_id, u.location_id
) AS p
    ON p.shop_id = s.shop_id
    AND p.item_id = s.item_id
    AND p.location_id = s.location_id
LEFT JOIN (
    SELECT hd.shop_id, hd.item_id, hd.location_id, pg_catalog.sum(hd.quantity) AS held
    FROM stockpool.holds AS hd
    WHERE hd.status = 'held'
    GROUP BY hd.shop_id, hd.item_id, hd.location_id
) AS h
    ON h.shop_id = s.shop_id
    AND h.item_id = s.item_id
    AND h.location_id = s.location_id;

COMMENT ON VIEW stockpool.stock_levels IS
'Per stock key: on_hand, pooled (units in the pool), held (units in live holds), free (on_hand - pooled - held).';
