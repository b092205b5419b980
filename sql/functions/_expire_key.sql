-- _expire_key: expire a key's live holds whose TTL has passed and put their
-- units back into the pool (a named key's: among its free units,
-- _free_labels), so that an expired but unswept hold never causes a refusal.
-- Locks: hold rows FOR UPDATE in checkout_id order, waiting for a
-- hold locked by a sweeper or by its owner: skipping it would answer "sold
-- out" while the sweep's units are still invisible, or while a claim of the
-- expired hold is about to fail and roll back. After the wait a hold that is
-- no longer live is left alone. Callers must hold no pool row, refill lock or
-- ledger row (see _take_lines), nor any named_free row (reserve_named):
-- claim locks holds before ledger rows.
-- Returns the number of holds expired: _take_lines counts them
-- (_tally_expiry) only if its take succeeds, since its refusal rolls these
-- expiries back. Touches holds, pool_units, named_free.
CREATE OR REPLACE FUNCTION stockpool._expire_key(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_buckets integer
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_units integer;
    v_holds integer;
    v_labels text[];
BEGIN
    WITH due AS (
        SELECT h.checkout_id
        FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
            AND h.status = 'held'
            AND h.expires_at <= pg_catalog.now()
        ORDER BY h.checkout_id
        FOR UPDATE
    ),
    expired AS (
        UPDATE stockpool.holds AS h
        SET status = 'expired',
            updated_at = pg_catalog.now()
        FROM due
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = due.checkout_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
        RETURNING h.quantity, h.labels
    )
    SELECT coalesce(pg_catalog.sum(e.quantity) FILTER (WHERE e.labels IS NULL), 0)::integer,
           pg_catalog.count(*)::integer,
           (SELECT pg_catalog.array_agg(l.label)
            FROM expired AS n
            CROSS JOIN LATERAL pg_catalog.unnest(n.labels) AS l (label))
    INTO v_units, v_holds, v_labels
    FROM expired AS e;

    PERFORM stockpool._add_units(p_shop_id, p_item_id, p_location_id, v_units, p_buckets);
    PERFORM stockpool._free_labels(p_shop_id, p_item_id, p_location_id, v_labels, p_buckets);
    RETURN v_holds;
END;
$function$;

COMMENT ON FUNCTION stockpool._expire_key(bigint, bigint, bigint, integer) IS
'Internal: expire one key''s overdue holds and return their units to its pool; returns holds expired.';
