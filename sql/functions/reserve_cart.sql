-- reserve_cart: hold every line of a cart for one checkout, or none.
-- Lines may come in any order: they are summed per key (a key repeated on two
-- lines is checked once against its total) and taken in sorted key order, so
-- two carts with opposite line orders cannot deadlock.
-- Returns true when all lines are held (a retry of the same cart is a no-op),
-- false when any line lacks stock (nothing is held then).
-- Counted (stockpool.metrics()): each line held by _tally_reservation, a
-- refused cart once by _tally_refusal; a retry is not counted.
-- Locks: the checkout lock, then per key in order as in _take_lines.
-- Raises 22004 (NULL argument or NULL array element), 22023 (empty or unequal
-- arrays, quantity <= 0, ttl <= 0), 22003 (a key's summed quantity exceeds
-- integer), SP001 (unknown key), SP007 (checkout holds a different quantity),
-- SP010 (a named key: reserve_named, one key per call).
-- Touches pool_units, holds; stock only when refilling.
CREATE OR REPLACE FUNCTION stockpool.reserve_cart(
    p_shop_id bigint,
    p_checkout_id uuid,
    p_item_ids bigint[],
    p_location_ids bigint[],
    p_quantities integer[],
    p_ttl interval DEFAULT '15 minutes'
)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_lines integer;
    v_item_ids bigint[];
    v_location_ids bigint[];
    v_quantities integer[];
    v_buckets integer[];
    v_need bigint[];
    v_i integer;
    v_satisfied integer := 0;
    v_stock stockpool.stock;
BEGIN
    IF p_shop_id IS NULL OR p_checkout_id IS NULL OR p_item_ids IS NULL
        OR p_location_ids IS NULL OR p_quantities IS NULL OR p_ttl IS NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_checkout_id', 'p_item_ids', 'p_location_ids', 'p_quantities', 'p_ttl'],
                ARRAY[p_shop_id IS NULL, p_checkout_id IS NULL, p_item_ids IS NULL,
                      p_location_ids IS NULL, p_quantities IS NULL, p_ttl IS NULL])
            USING ERRCODE = '22004';
    END IF;
    v_lines := pg_catalog.cardinality(p_item_ids);
    IF v_lines = 0 THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: the cart has no lines'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_ndims(p_item_ids) <> 1
        OR pg_catalog.array_ndims(p_location_ids) IS DISTINCT FROM 1
        OR pg_catalog.array_ndims(p_quantities) IS DISTINCT FROM 1
        OR pg_catalog.cardinality(p_location_ids) <> v_lines
        OR pg_catalog.cardinality(p_quantities) <> v_lines THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: p_item_ids, p_location_ids and p_quantities must be one-dimensional arrays of equal length (got %, %, %)',
            v_lines, pg_catalog.cardinality(p_location_ids), pg_catalog.cardinality(p_quantities)
            USING ERRCODE = '22023';
    END IF;
    IF p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: p_ttl must be positive, got %', p_ttl
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_item_ids, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_location_ids, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_quantities, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: cart lines must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.unnest(p_quantities) AS q (n) WHERE q.n <= 0) THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: every quantity must be positive'
            USING ERRCODE = '22023';
    END IF;

    -- One line per key, in the one lock order every path uses.
    SELECT pg_catalog.array_agg(l.item_id ORDER BY l.item_id, l.location_id),
           pg_catalog.array_agg(l.location_id ORDER BY l.item_id, l.location_id),
           pg_catalog.array_agg(l.quantity ORDER BY l.item_id, l.location_id)
    INTO v_item_ids, v_location_ids, v_need
    FROM (
        SELECT c.item_id, c.location_id, pg_catalog.sum(c.quantity)::bigint AS quantity
        FROM ROWS FROM (pg_catalog.unnest(p_item_ids), pg_catalog.unnest(p_location_ids),
                        pg_catalog.unnest(p_quantities))
            AS c (item_id, location_id, quantity)
        GROUP BY c.item_id, c.location_id
    ) AS l;
    v_lines := pg_catalog.cardinality(v_item_ids);
    v_quantities := ARRAY[]::integer[];
    v_buckets := ARRAY[]::integer[];

    FOR v_i IN 1..v_lines LOOP
        IF v_need[v_i] > 2147483647 THEN
            RAISE EXCEPTION 'stockpool.reserve_cart: quantity of item % at location % sums to %, beyond integer',
                v_item_ids[v_i], v_location_ids[v_i], v_need[v_i]
                USING ERRCODE = '22003';
        END IF;
        v_stock := stockpool._stock_row(p_shop_id, v_item_ids[v_i], v_location_ids[v_i]);
        IF v_stock.named THEN
            PERFORM stockpool._mixed_key(p_shop_id, v_item_ids[v_i], v_location_ids[v_i], true);
        END IF;
        v_quantities := v_quantities || v_need[v_i]::integer;
        v_buckets := v_buckets || v_stock.buckets;
    END LOOP;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);
    FOR v_i IN 1..v_lines LOOP
        IF stockpool._existing_hold(p_shop_id, p_checkout_id, v_item_ids[v_i],
                                    v_location_ids[v_i], v_quantities[v_i], p_ttl) THEN
            v_satisfied := v_satisfied + 1;
        END IF;
    END LOOP;
    IF v_satisfied = v_lines THEN
        RETURN true;
    END IF;
    IF v_satisfied > 0 THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: checkout % already holds some but not all of these lines',
            p_checkout_id
            USING ERRCODE = 'SP007',
                  HINT = 'Release the checkout first, or reserve under a new checkout id.';
    END IF;

    IF NOT stockpool._take_lines(p_shop_id, v_item_ids, v_location_ids, v_quantities, v_buckets) THEN
        PERFORM stockpool._tally_refusal();
        RETURN false;
    END IF;

    FOR v_i IN 1..v_lines LOOP
        PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, v_item_ids[v_i],
                                       v_location_ids[v_i], v_quantities[v_i], p_ttl, p_reopen => true);
    END LOOP;
    FOR v_i IN 1..v_lines LOOP
        PERFORM stockpool._tally_reservation();
    END LOOP;
    RETURN true;
END;
$function$;

COMMENT ON FUNCTION stockpool.reserve_cart(bigint, uuid, bigint[], bigint[], integer[], interval) IS
'Hold every line of a cart for a checkout, or none. Lines in any order; a key repeated on several lines is summed. '
'true = all held (a retry is a no-op), false = some line lacks stock and nothing is held. '
'SQLSTATEs: 22004 NULL argument or element, 22023 empty/unequal arrays or quantity/ttl not positive, '
'22003 summed quantity beyond integer, SP001 unknown key, SP007 checkout holds different lines, SP010 named key.';
