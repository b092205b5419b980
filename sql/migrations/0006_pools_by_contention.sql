-- 0006_pools_by_contention: a key gets a pool only while its buyers meet,
-- and gives it back when it cools down.
--
-- From now on a reservation takes its units straight from the key's ledger
-- row when the row is free (stockpool._take_ledger), like a counter, and only
-- buyers who find the row busy use the pool; the first refill of a key is
-- small and later ones follow its demand (stockpool._refill). A pool that has
-- not been refilled for a while is handed back to the ledger by the sweep
-- (stockpool._cool). The sweep finds those keys through this index: keys
-- with a pool (pool_target > 0) by the time of their last refill.

CREATE INDEX stock_pooled_idx
    ON stockpool.stock (refilled_at)
    WHERE pool_target > 0;

-- Keys pooled before 0002 recorded no pool_target: mark them pooled, so that
-- they can cool down like the others.
UPDATE stockpool.stock AS s
SET pool_target = s.pool_cap,
    refilled_at = coalesce(s.refilled_at, pg_catalog.now())
WHERE s.pool_target = 0
    AND EXISTS (
        SELECT FROM stockpool.pool_units AS u
        WHERE u.shop_id = s.shop_id
            AND u.item_id = s.item_id
            AND u.location_id = s.location_id
    );
