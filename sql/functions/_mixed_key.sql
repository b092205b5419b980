-- _mixed_key: the one place that raises SP010, for a call that would mix
-- counted and named units on one stock key. p_named is what the key is: a
-- counted-units call (set_stock, adjust_stock, reserve_units, reserve_cart)
-- on a named key, or a named-units call (set_named_units,
-- retire_named_units, reserve_named, reserve_labels) on a counted key.
-- Raises SP010, always. Touches nothing.
CREATE OR REPLACE FUNCTION stockpool._mixed_key(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_named boolean
)
RETURNS void
LANGUAGE plpgsql
AS $function$
BEGIN
    IF p_named THEN
        RAISE EXCEPTION 'stock key (shop %, item %, location %) has named units, not counted ones',
            p_shop_id, p_item_id, p_location_id
            USING ERRCODE = 'SP010',
                  HINT = 'Use stockpool.reserve_named(), reserve_labels(), set_named_units() or retire_named_units().';
    END IF;
    RAISE EXCEPTION 'stock key (shop %, item %, location %) has counted units, not named ones',
        p_shop_id, p_item_id, p_location_id
        USING ERRCODE = 'SP010',
              HINT = 'Use stockpool.reserve_units(), reserve_cart(), set_stock() or adjust_stock(); '
                     'named units need a key of their own.';
END;
$function$;

COMMENT ON FUNCTION stockpool._mixed_key(bigint, bigint, bigint, boolean) IS
'Internal: raise SP010 for a call that would mix counted and named units on one key (the only place that does).';
