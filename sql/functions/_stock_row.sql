-- _stock_row: the ledger row of a key, unlocked; raises SP001 for an unknown
-- key. Touches stock (read only).
CREATE OR REPLACE FUNCTION stockpool._stock_row(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint
)
RETURNS stockpool.stock
LANGUAGE plpgsql
STABLE
AS $function$
DECLARE
    v_stock stockpool.stock;
BEGIN
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    RETURN v_stock;
END;
$function$;

COMMENT ON FUNCTION stockpool._stock_row(bigint, bigint, bigint) IS
'Internal: a key''s ledger row; SP001 when the key is unknown.';
