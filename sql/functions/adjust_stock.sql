-- adjust_stock: change a key's on_hand by p_delta (returns, shrinkage,
-- corrections), with a movement row. A zero delta changes nothing.
-- Returns the new on_hand.
-- Locks: the key's refill lock, then its ledger row (see _apply_on_hand).
-- Raises 22004 (NULL argument), 22003 (result beyond integer), 22023
-- (negative result), SP001 (unknown key), SP002 (below live holds), SP010
-- (a named key: set_named_units, retire_named_units).
-- Touches stock, pool_units, movements.
CREATE OR REPLACE FUNCTION stockpool.adjust_stock(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_delta integer
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_delta IS NULL THEN
        RAISE EXCEPTION 'stockpool.adjust_stock: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_delta'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_delta IS NULL])
            USING ERRCODE = '22004';
    END IF;
    RETURN stockpool._apply_on_hand(p_shop_id, p_item_id, p_location_id, p_delta, true);
END;
$function$;

COMMENT ON FUNCTION stockpool.adjust_stock(bigint, bigint, bigint, integer) IS
'Change a key''s on hand by p_delta, recording a movement; returns the new on hand. '
'SQLSTATEs: 22004 NULL argument, 22003 result beyond integer, 22023 negative result, '
'SP001 unknown key, SP002 below units held by live holds, SP010 named key.';
