-- _return_units: give back p_quantity units of a key that left a hold
-- (release, expiry). A key without a pool takes them back on its ledger row
-- (allocated goes down, like a counter's), so that a quiet key keeps no pool
-- rows; a pooled key, or one whose ledger row is busy right now, gets them
-- in its pool (buyers who find the row busy take from there first).
-- Locks: the ledger row FOR NO KEY UPDATE SKIP LOCKED, only for a key without
-- a pool (checked before locking): never waits.
-- Returns units given back. Touches stock, pool_units.
CREATE OR REPLACE FUNCTION stockpool._return_units(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_buckets integer
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
BEGIN
    IF p_quantity <= 0 THEN
        RETURN 0;
    END IF;
    UPDATE stockpool.stock AS s
    SET allocated = s.allocated - p_quantity
    WHERE s.ctid = (
            SELECT l.ctid
            FROM stockpool.stock AS l
            WHERE l.shop_id = p_shop_id
                AND l.item_id = p_item_id
                AND l.location_id = p_location_id
                AND l.pool_target = 0
            FOR NO KEY UPDATE SKIP LOCKED
        )
        AND s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF FOUND THEN
        RETURN p_quantity;
    END IF;
    RETURN stockpool._add_units(p_shop_id, p_item_id, p_location_id, p_quantity, p_buckets);
END;
$function$;

COMMENT ON FUNCTION stockpool._return_units(bigint, bigint, bigint, integer, integer) IS
'Internal: give units back to a key: its free ledger row when it has no pool, else its pool.';
