-- configure_pool: change a key's pool settings. NULL keeps a setting as it
-- is, except that a new p_pool_cap without p_low_water sets low_water to a
-- quarter of the cap. Takes effect at the next refill; existing units stay.
-- Returns nothing.
-- Locks: the key's refill lock, then its ledger row.
-- Raises 22004 (NULL key argument), 22023 (cap <= 0, low_water outside
-- 0..cap-1, buckets outside 1..1024), SP001 (unknown key).
-- Touches stock.
CREATE OR REPLACE FUNCTION stockpool.configure_pool(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_pool_cap integer DEFAULT NULL,
    p_low_water integer DEFAULT NULL,
    p_buckets integer DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_cap integer;
    v_low_water integer;
    v_buckets integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL THEN
        RAISE EXCEPTION 'stockpool.configure_pool: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL])
            USING ERRCODE = '22004';
    END IF;

    PERFORM stockpool._stock_row(p_shop_id, p_item_id, p_location_id);
    PERFORM pg_catalog.pg_advisory_xact_lock(
        stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE;

    v_cap := coalesce(p_pool_cap, v_stock.pool_cap);
    v_low_water := coalesce(p_low_water,
                            CASE WHEN p_pool_cap IS NULL THEN v_stock.low_water ELSE v_cap / 4 END);
    v_buckets := coalesce(p_buckets, v_stock.buckets);

    IF v_cap <= 0 THEN
        RAISE EXCEPTION 'stockpool.configure_pool: pool cap must be positive, got %', v_cap
            USING ERRCODE = '22023';
    END IF;
    IF v_low_water < 0 OR v_low_water >= v_cap THEN
        RAISE EXCEPTION 'stockpool.configure_pool: low water must be in 0..%, got %', v_cap - 1, v_low_water
            USING ERRCODE = '22023';
    END IF;
    IF v_buckets < 1 OR v_buckets > 1024 THEN
        RAISE EXCEPTION 'stockpool.configure_pool: buckets must be in 1..1024, got %', v_buckets
            USING ERRCODE = '22023';
    END IF;

    UPDATE stockpool.stock AS s
    SET pool_cap = v_cap,
        low_water = v_low_water,
        buckets = v_buckets,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
END;
$function$;

COMMENT ON FUNCTION stockpool.configure_pool(bigint, bigint, bigint, integer, integer, integer) IS
'Change a key''s pool cap, low-water mark and bucket count (NULL keeps a setting). '
'SQLSTATEs: 22004 NULL key argument, 22023 setting out of range, SP001 unknown key.';
