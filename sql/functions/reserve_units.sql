-- reserve_units: hold p_quantity units of one key for a checkout, all or
-- nothing, for p_ttl.
-- Returns true when held (or already held by this checkout: a retry is a
-- no-op), false when on hand minus live holds is less than the request.
-- Locks: the checkout lock, then pool rows FOR UPDATE SKIP LOCKED (never
-- waiting on other buyers); when the pool runs short, the key's refill lock
-- and ledger row; near sellout, a wait for units locked by in-flight
-- transactions and for expired holds being swept or ended by their owner
-- (see _take_lines). A single unit is taken without a
-- subtransaction. The pool is topped up in the background of a successful
-- take when it looks thin (try-lock only: nobody queues on a low-water refill).
-- Raises 22004 (NULL argument), 22023 (quantity <= 0, ttl <= 0),
-- SP001 (unknown key), SP007 (checkout holds a different quantity).
-- Touches pool_units, holds; stock only when refilling.
CREATE OR REPLACE FUNCTION stockpool.reserve_units(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_checkout_id uuid,
    p_ttl interval DEFAULT '15 minutes'
)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_got integer := 0;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL
        OR p_quantity IS NULL OR p_checkout_id IS NULL OR p_ttl IS NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_units: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_quantity', 'p_checkout_id', 'p_ttl'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL,
                      p_quantity IS NULL, p_checkout_id IS NULL, p_ttl IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_quantity <= 0 THEN
        RAISE EXCEPTION 'stockpool.reserve_units: p_quantity must be positive, got %', p_quantity
            USING ERRCODE = '22023';
    END IF;
    IF p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'stockpool.reserve_units: p_ttl must be positive, got %', p_ttl
            USING ERRCODE = '22023';
    END IF;

    v_stock := stockpool._stock_row(p_shop_id, p_item_id, p_location_id);

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);
    IF stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                p_quantity, p_ttl) THEN
        RETURN true;
    END IF;

    IF p_quantity > v_stock.on_hand THEN
        RETURN false;
    END IF;

    IF p_quantity = 1 THEN
        v_got := stockpool._take(p_shop_id, p_item_id, p_location_id, 1, v_stock.buckets);
    END IF;

    IF v_got = 1 THEN
        -- Low-water refill, only when this key has free stock to move and the
        -- pool has thinned; a try-lock, so no buyer ever queues here.
        IF v_stock.on_hand > v_stock.allocated
            AND pg_catalog.random() < 0.05 THEN
            PERFORM stockpool._refill(p_shop_id, p_item_id, p_location_id, 0, false, true);
        END IF;
    ELSIF NOT stockpool._take_lines(p_shop_id, ARRAY[p_item_id], ARRAY[p_location_id],
                                    ARRAY[p_quantity], ARRAY[v_stock.buckets]) THEN
        RETURN false;
    END IF;

    PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                   p_quantity, p_ttl);
    RETURN true;
END;
$function$;

COMMENT ON FUNCTION stockpool.reserve_units(bigint, bigint, bigint, integer, uuid, interval) IS
'Hold p_quantity units of (shop, item, location) for a checkout until now() + p_ttl, all or nothing. '
'true = held (a retry by the same checkout is a no-op), false = not enough stock. '
'SQLSTATEs: 22004 NULL argument, 22023 quantity or ttl not positive, SP001 unknown key, '
'SP007 checkout already holds a different quantity of this key.';
