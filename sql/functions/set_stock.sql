-- set_stock: create a key or set its on_hand (receiving, cycle count), with a
-- movement row for the difference. Pool units above the new on_hand are taken
-- back; lowering on_hand below what live holds need is refused.
-- Returns the new on_hand.
-- Locks: the key's refill lock, then its ledger row (see _apply_on_hand).
-- Raises 22004 (NULL argument), 22023 (p_on_hand < 0), SP002 (below live holds),
-- SP010 (a named key: set_named_units, retire_named_units).
-- Touches stock, pool_units, movements.
CREATE OR REPLACE FUNCTION stockpool.set_stock(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_on_hand integer
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_on_hand IS NULL THEN
        RAISE EXCEPTION 'stockpool.set_stock: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_on_hand'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_on_hand IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_on_hand < 0 THEN
        RAISE EXCEPTION 'stockpool.set_stock: p_on_hand must not be negative, got %', p_on_hand
            USING ERRCODE = '22023';
    END IF;
    RETURN stockpool._apply_on_hand(p_shop_id, p_item_id, p_location_id, p_on_hand, false);
END;
$function$;

COMMENT ON FUNCTION stockpool.set_stock(bigint, bigint, bigint, integer) IS
'Create a stock key or set its on hand, recording a movement for the difference; returns the new on hand. '
'Pool units above the new bound are taken back. '
'SQLSTATEs: 22004 NULL argument, 22023 negative on hand, SP002 below units held by live holds, SP010 named key.';
