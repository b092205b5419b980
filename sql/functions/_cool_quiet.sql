-- _cool_quiet: hand the pools of up to p_batch keys not refilled for p_quiet
-- back to their ledger rows (stockpool._cool: try-locks and SKIP LOCKED,
-- never waits by design; run in _maintain_step, which gives up a wait
-- PostgreSQL's SKIP LOCKED makes anyway, docs/locking.md). Returns the units
-- handed back. Touches stock, pool_units.
CREATE OR REPLACE FUNCTION stockpool._cool_quiet(
    p_batch integer,
    p_quiet interval
)
RETURNS integer
LANGUAGE sql
AS $function$
    SELECT coalesce(pg_catalog.sum(stockpool._cool(k.shop_id, k.item_id, k.location_id, p_quiet)), 0)::integer
    FROM (
        SELECT s.shop_id, s.item_id, s.location_id
        FROM stockpool.stock AS s
        WHERE s.pool_target > 0
            AND s.refilled_at < pg_catalog.now() - p_quiet
        ORDER BY s.refilled_at
        LIMIT p_batch
    ) AS k;
$function$;

COMMENT ON FUNCTION stockpool._cool_quiet(integer, interval) IS
'Internal: hand the pools of up to p_batch keys quiet for p_quiet back to their ledger rows; returns units.';
