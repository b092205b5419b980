-- replenish_pool: top a key's pool up to p_cap units (default: the key's
-- pool_cap) from free stock (on_hand - allocated). One refiller per key at a
-- time: it waits for the key's transaction-scoped advisory lock.
-- Returns units added (0 when the pool is full or nothing is free); a refill
-- that added units is counted (_tally_refill).
-- Locks: the key's refill lock, then its ledger row, both to commit. Its cost
-- does not depend on the number of holds: allocated is kept as a counter.
-- Raises 22004 (NULL key argument), 22023 (p_cap <= 0), SP001 (unknown key).
-- Touches stock, pool_units.
CREATE OR REPLACE FUNCTION stockpool.replenish_pool(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_cap integer DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_added integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL THEN
        RAISE EXCEPTION 'stockpool.replenish_pool: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_cap <= 0 THEN
        RAISE EXCEPTION 'stockpool.replenish_pool: p_cap must be positive, got %', p_cap
            USING ERRCODE = '22023';
    END IF;
    v_stock := stockpool._stock_row(p_shop_id, p_item_id, p_location_id);
    -- An explicit level: without p_cap, the key's pool_cap (a refill on its
    -- own sizes the pool by the key's demand instead).
    v_added := stockpool._refill(p_shop_id, p_item_id, p_location_id,
                                 p_min_extra => 0, p_wait => true, p_low_water_only => false,
                                 p_cap => coalesce(p_cap, v_stock.pool_cap));
    IF v_added > 0 THEN
        PERFORM stockpool._tally_refill();
    END IF;
    RETURN v_added;
END;
$function$;

COMMENT ON FUNCTION stockpool.replenish_pool(bigint, bigint, bigint, integer) IS
'Top a key''s pool up to p_cap (default its pool_cap) from free stock, one refiller per key at a time; '
'returns units added. SQLSTATEs: 22004 NULL key argument, 22023 p_cap not positive, SP001 unknown key.';
