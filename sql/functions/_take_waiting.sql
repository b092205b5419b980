-- _take_waiting: like _take, but waits for units locked by in-flight
-- transactions instead of skipping them, so that a unit whose claimer rolls
-- back is not mistaken for sold out.
-- Locks: FOR UPDATE (blocking) on pool rows in unit_id order. Callers must
-- hold no pool, refill or ledger lock of this or a later key, so that waiting
-- cannot close a cycle (ordered waits among waiters; skip-lockers never wait
-- on pool rows). Returns units taken. Touches pool_units.
CREATE OR REPLACE FUNCTION stockpool._take_waiting(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_got integer;
BEGIN
    WITH picked AS (
        SELECT u.ctid AS row_id
        FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
        ORDER BY u.unit_id
        LIMIT p_quantity
        FOR UPDATE
    )
    DELETE FROM stockpool.pool_units AS d
    USING picked
    WHERE d.shop_id = p_shop_id
        AND d.ctid = picked.row_id;
    GET DIAGNOSTICS v_got = ROW_COUNT;
    RETURN v_got;
END;
$function$;

COMMENT ON FUNCTION stockpool._take_waiting(bigint, bigint, bigint, integer) IS
'Internal: blocking, unit_id-ordered claim used only on the near-sellout path.';
