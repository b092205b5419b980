-- _settle_due: fold the pending claims of up to p_batch keys whose ledger
-- row is free (stockpool._settle, SKIP LOCKED; a busy row is skipped: its
-- holder or a later pass folds it). A quiet key that nobody claims, refills
-- or restocks again gets its pending claims folded here.
-- Returns the units folded. Never waits by design (run in _maintain_step,
-- which gives up a wait PostgreSQL's SKIP LOCKED makes anyway, see
-- docs/locking.md, "SKIP LOCKED can wait"). Touches stock, pending_claims,
-- movements. Only in READ COMMITTED (a later-updated row would raise 40001).
CREATE OR REPLACE FUNCTION stockpool._settle_due(
    p_batch integer
)
RETURNS integer
LANGUAGE sql
AS $function$
    SELECT coalesce(pg_catalog.sum(stockpool._settle(k.shop_id, k.item_id, k.location_id, false)), 0)::integer
    FROM (
        SELECT DISTINCT c.shop_id, c.item_id, c.location_id
        FROM stockpool.pending_claims AS c
        ORDER BY c.shop_id, c.item_id, c.location_id
        LIMIT p_batch
    ) AS k;
$function$;

COMMENT ON FUNCTION stockpool._settle_due(integer) IS
'Internal: fold the pending claims of up to p_batch keys whose ledger row is free; returns units folded.';
