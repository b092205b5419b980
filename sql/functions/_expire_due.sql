-- _expire_due: expire up to p_batch overdue holds and put their units back
-- (stockpool._return_units: the ledger row of a key without a pool, else its
-- pool; a named key's labels among its free units, stockpool._free_labels).
-- Returns the number of holds expired.
-- Locks: the overdue hold rows FOR UPDATE SKIP LOCKED (a hold being claimed
-- or released is left to its owner; concurrent callers take disjoint
-- batches), then per key what _return_units takes (SKIP LOCKED or inserts):
-- never waits by design. PostgreSQL's SKIP LOCKED waits all the same in one
-- race (docs/locking.md, "SKIP LOCKED can wait"), so callers run it in
-- _maintain_step, which gives it up after 50 ms. The holds expired are
-- counted there (_tally_expiry, stockpool.metrics()'s expiries_total) once
-- the step stands: a step given up later would roll them back.
-- Touches holds, pool_units, named_free, stock, movements.
CREATE OR REPLACE FUNCTION stockpool._expire_due(
    p_batch integer
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_key record;
    v_holds integer := 0;
BEGIN
    FOR v_key IN
        WITH due AS (
            SELECT h.shop_id, h.checkout_id, h.item_id, h.location_id
            FROM stockpool.holds AS h
            WHERE h.status = 'held'
                AND h.expires_at <= pg_catalog.now()
            ORDER BY h.expires_at
            LIMIT p_batch
            FOR UPDATE SKIP LOCKED
        ),
        expired AS (
            UPDATE stockpool.holds AS h
            SET status = 'expired',
                updated_at = pg_catalog.now()
            FROM due
            WHERE h.shop_id = due.shop_id
                AND h.checkout_id = due.checkout_id
                AND h.item_id = due.item_id
                AND h.location_id = due.location_id
            RETURNING h.shop_id, h.checkout_id, h.item_id, h.location_id, h.quantity, h.labels
        )
        -- One row per counted hold (its labels are NULL), one per label of
        -- a named one: a key is one or the other.
        SELECT e.shop_id, e.item_id, e.location_id,
               coalesce(pg_catalog.sum(e.quantity) FILTER (WHERE e.labels IS NULL), 0)::integer AS units,
               pg_catalog.count(DISTINCT e.checkout_id)::integer AS holds,
               pg_catalog.array_agg(l.label) FILTER (WHERE l.label IS NOT NULL) AS labels,
               pg_catalog.min(s.buckets) AS buckets
        FROM expired AS e
        LEFT JOIN LATERAL pg_catalog.unnest(e.labels) AS l (label)
            ON true
        JOIN stockpool.stock AS s
            ON s.shop_id = e.shop_id
            AND s.item_id = e.item_id
            AND s.location_id = e.location_id
        GROUP BY e.shop_id, e.item_id, e.location_id
        ORDER BY e.shop_id, e.item_id, e.location_id
    LOOP
        PERFORM stockpool._return_units(v_key.shop_id, v_key.item_id, v_key.location_id,
                                        v_key.units, v_key.buckets);
        PERFORM stockpool._free_labels(v_key.shop_id, v_key.item_id, v_key.location_id,
                                       v_key.labels, v_key.buckets);
        v_holds := v_holds + v_key.holds;
    END LOOP;
    RETURN v_holds;
END;
$function$;

COMMENT ON FUNCTION stockpool._expire_due(integer) IS
'Internal: expire up to p_batch overdue holds (SKIP LOCKED) and return their units; returns holds expired.';
