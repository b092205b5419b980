-- take_units: the low-level claim. Takes up to p_quantity units of a key from
-- its pool with FOR UPDATE SKIP LOCKED, starting at a random bucket, and
-- deletes them. Records no hold and does not refill: for callers building
-- their own flow inside one transaction (units not turned into a hold are
-- gone from the pool but still allocated; check_invariants reports them).
-- Returns how many units it took (0..p_quantity); fewer than asked does not
-- mean sold out, only that no unlocked pool unit was left.
-- Raises 22004 (NULL argument), 22023 (p_quantity <= 0), SP001 (unknown key).
-- Touches pool_units.
CREATE OR REPLACE FUNCTION stockpool.take_units(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_stock stockpool.stock;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_quantity IS NULL THEN
        RAISE EXCEPTION 'stockpool.take_units: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_quantity'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_quantity IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_quantity <= 0 THEN
        RAISE EXCEPTION 'stockpool.take_units: p_quantity must be positive, got %', p_quantity
            USING ERRCODE = '22023';
    END IF;
    v_stock := stockpool._stock_row(p_shop_id, p_item_id, p_location_id);
    RETURN stockpool._take(p_shop_id, p_item_id, p_location_id, p_quantity, v_stock.buckets);
END;
$function$;

COMMENT ON FUNCTION stockpool.take_units(bigint, bigint, bigint, integer) IS
'Low-level SKIP LOCKED claim of up to p_quantity pool units of a key (deleted, no hold recorded); '
'returns how many were taken. SQLSTATEs: 22004 NULL argument, 22023 quantity not positive, SP001 unknown key.';
