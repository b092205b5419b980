-- stock_levels: one row per stock key, read in one snapshot.
-- on_hand: the ledger's figure net of claims not yet folded into it (exact
-- at every commit, whether a claim was folded at once or is pending);
-- pooled: units in the pool (for a named key: its free units, which are
-- its pool, so that free is 0); held: units in live holds (status held,
-- expired but unswept included, since they still own their units);
-- free: on_hand - pooled - held, the stock a refill can still move;
-- unsettled: units of pending claims, already deducted from on_hand, that
-- the ledger row has yet to absorb (settling lag; see stockpool._settle).
CREATE OR REPLACE VIEW stockpool.stock_levels
WITH (security_barrier)
AS
WITH pooled AS (
    SELECT u.shop_id, u.item_id, u.location_id, pg_catalog.count(*) AS units
    FROM stockpool.pool_units AS u
    GROUP BY u.shop_id, u.item_id, u.location_id
),

held AS (
    SELECT hd.shop_id, hd.item_id, hd.location_id, pg_catalog.sum(hd.quantity) AS units
    FROM stockpool.holds AS hd
    WHERE hd.status = 'held'
    GROUP BY hd.shop_id, hd.item_id, hd.location_id
),

named_free AS (
    SELECT f.shop_id, f.item_id, f.location_id, pg_catalog.count(*) AS units
    FROM stockpool.named_free AS f
    GROUP BY f.shop_id, f.item_id, f.location_id
),

pending AS (
    SELECT c.shop_id, c.item_id, c.location_id, pg_catalog.sum(c.quantity) AS units
    FROM stockpool.pending_claims AS c
    GROUP BY c.shop_id, c.item_id, c.location_id
)

SELECT
    s.shop_id,
    s.item_id,
    s.location_id,
    (s.on_hand - coalesce(c.units, 0))::integer AS on_hand,
    (coalesce(p.units, 0) + coalesce(n.units, 0))::integer AS pooled,
    coalesce(h.units, 0)::integer AS held,
    (s.on_hand - coalesce(c.units, 0) - coalesce(p.units, 0) - coalesce(n.units, 0)
     - coalesce(h.units, 0))::integer AS free,
    coalesce(c.units, 0)::integer AS unsettled
FROM stockpool.stock AS s
LEFT JOIN pooled AS p
    ON s.shop_id = p.shop_id
    AND s.item_id = p.item_id
    AND s.location_id = p.location_id
LEFT JOIN named_free AS n
    ON s.shop_id = n.shop_id
    AND s.item_id = n.item_id
    AND s.location_id = n.location_id
LEFT JOIN held AS h
    ON s.shop_id = h.shop_id
    AND s.item_id = h.item_id
    AND s.location_id = h.location_id
LEFT JOIN pending AS c
    ON s.shop_id = c.shop_id
    AND s.item_id = c.item_id
    AND s.location_id = c.location_id;

COMMENT ON VIEW stockpool.stock_levels IS
'Per stock key: on_hand (net of claims not yet folded into the ledger), pooled (units in the pool; a named key''s free units), '
'held (units in live holds), free (on_hand - pooled - held), unsettled (units of pending claims).';
