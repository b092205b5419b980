-- _unknown_key: the one place that raises SP001 for a stock key the ledger
-- does not know. Callers look the key up themselves (each needs the row, some
-- locked, some not) and call this when the look-up found nothing.
-- Raises SP001, always. Touches nothing.
CREATE OR REPLACE FUNCTION stockpool._unknown_key(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint
)
RETURNS void
LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'unknown stock key (shop %, item %, location %)',
        p_shop_id, p_item_id, p_location_id
        USING ERRCODE = 'SP001',
              HINT = 'Create the key with stockpool.set_stock() first.';
END;
$function$;

COMMENT ON FUNCTION stockpool._unknown_key(bigint, bigint, bigint) IS
'Internal: raise SP001 for an unknown stock key (the only place that does).';
