-- _refill: move free units (on_hand - allocated) of a key into its pool.
-- Tops the pool up to p_cap (default: the key's pool_cap), and to at least
-- p_min_extra units beyond what is pooled when a reservation needs them now.
-- p_wait false: try the key's refill lock and give up at once if another
-- transaction is refilling (the low-water path must never queue).
-- p_low_water_only: do nothing while more than the key's low_water are pooled.
-- Locks, in this order: the key's transaction-scoped advisory lock, then the
-- ledger row FOR NO KEY UPDATE; both held to commit. Cost is independent of the
-- number of holds (allocated is a counter) and bounded by the pool cap.
-- Returns units added. Touches stock, pool_units.
CREATE OR REPLACE FUNCTION stockpool._refill(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_min_extra integer,
    p_wait boolean,
    p_low_water_only boolean,
    p_cap integer DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_cap integer;
    v_pooled integer;
    v_add integer;
BEGIN
    -- Cheap unlocked look first: nothing free means nothing to queue for.
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND OR v_stock.on_hand - v_stock.allocated <= 0 THEN
        RETURN 0;
    END IF;

    IF p_wait THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(
            stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));
    ELSIF NOT pg_catalog.pg_try_advisory_xact_lock(
            stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id)) THEN
        RETURN 0;
    END IF;

    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE;

    v_cap := coalesce(p_cap, v_stock.pool_cap);
    -- Bounded count: never reads more than cap + needed live entries.
    SELECT pg_catalog.count(*)::integer INTO v_pooled
    FROM (
        SELECT 1
        FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
        LIMIT GREATEST(v_cap, p_min_extra)
    ) AS live;

    IF p_low_water_only AND v_pooled > v_stock.low_water THEN
        RETURN 0;
    END IF;

    v_add := LEAST(
        v_stock.on_hand - v_stock.allocated,
        GREATEST(v_cap - v_pooled, p_min_extra)
    );
    IF v_add <= 0 THEN
        RETURN 0;
    END IF;

    PERFORM stockpool._add_units(p_shop_id, p_item_id, p_location_id, v_add, v_stock.buckets);

    UPDATE stockpool.stock AS s
    SET allocated = s.allocated + v_add,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;

    RETURN v_add;
END;
$function$;

COMMENT ON FUNCTION stockpool._refill(bigint, bigint, bigint, integer, boolean, boolean, integer) IS
'Internal: top a key''s pool up from free stock under its advisory refill lock.';
