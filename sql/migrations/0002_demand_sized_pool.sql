-- 0002_demand_sized_pool: size each key's pool by its demand.
--
-- A fixed pool of 1,000 units is right for most keys and wrong for a hot
-- one: at thousands of reservations a second it is refilled several times a
-- second, hundreds of concurrent claimers find its units locked by each
-- other, and the dead tuples that claims leave behind between two visits of
-- autovacuum outnumber its live rows (claimers step over them, and the dead
-- ratio of its partition stays far above any healthy mark). From now on a
-- refill measures how fast the key's pool emptied since the previous refill
-- and fills it to that many seconds of demand (see stockpool._refill), never
-- below the key's pool_cap, which stays the setting an operator controls.
--
-- pool_target: the fill level the last refill aimed at (0: never refilled).
-- refilled_at: when that refill ran; with pool_target it gives the demand.
-- Both live on the ledger row, which every refill locks and updates anyway.

ALTER TABLE stockpool.stock
    ADD COLUMN pool_target integer NOT NULL DEFAULT 0,
    ADD COLUMN refilled_at timestamptz,
    ADD CONSTRAINT stock_pool_target_nonnegative CHECK (pool_target >= 0);

COMMENT ON COLUMN stockpool.stock.pool_target IS
'Fill level the last refill aimed at, sized by demand (0: never refilled); the pool is filled to at least pool_cap.';
COMMENT ON COLUMN stockpool.stock.refilled_at IS
'When the key''s pool was last refilled; with pool_target it measures the key''s demand.';
