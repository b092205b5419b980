-- reserve_units: hold p_quantity units of one key for a checkout, all or
-- nothing, for p_ttl.
-- Returns true when held (or already held by this checkout: a retry is a
-- no-op), false when on hand minus live holds is less than the request.
-- Locks: the checkout lock, then the checkout's new hold row (inserted
-- first; inserting it doubles as the idempotency check), then the key's
-- ledger row if it is free (SKIP LOCKED: the units come straight from it,
-- like a counter's), else pool rows FOR UPDATE SKIP LOCKED (never waiting on
-- other buyers); when the pool runs short, the key's refill lock and ledger
-- row; near sellout, a wait for units
-- locked by in-flight transactions and for expired holds being swept or ended
-- by their owner (see _take_lines). A single unit is taken in one statement
-- with a cached plan and without a subtransaction. The pool is topped up
-- after a successful take when it looks thin (sampled, try-lock only: nobody
-- queues on a low-water refill). A refused request deletes the hold row it
-- inserted, so it leaves nothing behind.
-- Counted (stockpool.metrics()): a new hold by _tally_reservation, a refusal
-- by _tally_refusal, a low-water refill that moved units by _tally_refill;
-- a retry is not counted.
-- Raises 22004 (NULL argument), 22023 (quantity <= 0, ttl <= 0),
-- SP001 (unknown key), SP007 (checkout holds a different quantity), SP010
-- (a named key: reserve_named).
-- Touches holds, stock (a free ledger row's allocated; refills), pool_units.
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
    -- Low-water looks per mark's worth of reservations (see below).
    c_looks constant integer := 24;
    v_stock stockpool.stock;
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

    -- _stock_row inlined: a PL/pgSQL call costs about as much as the read.
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    IF v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, true);
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    IF p_quantity > v_stock.on_hand THEN
        -- No new hold can be that big: only a retry of an old one succeeds.
        -- (The ledger row's on_hand still counts pending claims, so it is
        -- never below the true figure: this only answers what it must.)
        IF stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                    p_quantity, p_ttl) THEN
            RETURN true;
        END IF;
        PERFORM stockpool._tally_refusal();
        RETURN false;
    END IF;

    -- The hold row goes in first, and inserting it is the idempotency check:
    -- a row already there (a retry, or a hold to re-open) takes the careful
    -- path below; a new one costs no separate look-up.
    IF NOT stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                  p_quantity, p_ttl, p_reopen => false) THEN
        IF stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                    p_quantity, p_ttl) THEN
            RETURN true;
        END IF;
        IF NOT stockpool._take_lines(p_shop_id, ARRAY[p_item_id], ARRAY[p_location_id],
                                     ARRAY[p_quantity], ARRAY[v_stock.buckets]) THEN
            PERFORM stockpool._tally_refusal();
            RETURN false;
        END IF;
        PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                       p_quantity, p_ttl, p_reopen => true);
        PERFORM stockpool._tally_reservation();
        RETURN true;
    END IF;

    -- A free ledger row serves the reservation itself, like a counter: a
    -- key nobody contends keeps no pool. A busy one means buyers meet on
    -- this key: they take from its pool instead (SKIP LOCKED, no wait), and
    -- once it has one, they go there first (see _take_ledger).
    -- The try runs in a subtransaction: a try that took nothing may still
    -- have locked the row (see _take_ledger), and this call may wait below.
    IF v_stock.pool_target = 0 AND v_stock.on_hand - v_stock.allocated >= p_quantity THEN
        BEGIN
            IF stockpool._take_ledger(p_shop_id, p_item_id, p_location_id, p_quantity) THEN
                PERFORM stockpool._tally_reservation();
                RETURN true;
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'SPX03';
        EXCEPTION
            WHEN SQLSTATE 'SPX03' THEN
                NULL;
        END;
    END IF;

    IF p_quantity = 1
        AND stockpool._take(p_shop_id, p_item_id, p_location_id, 1, v_stock.buckets) = 1 THEN
        -- Low-water refill, only when this key has free stock to move; a
        -- try-lock, so no buyer ever queues here. Sampled: a look counts up
        -- to the refill mark (stockpool._refill_mark of the pool's level,
        -- stockpool._pool_level), so one reservation in mark / c_looks looks:
        -- the counting costs about c_looks index entries per reservation
        -- whatever the pool's size, and a pool that drains from its mark is
        -- still looked at about c_looks times. A mark set very low (a small
        -- low_water) does not make every reservation look: the rate is
        -- never above c_looks per quarter of the level.
        IF v_stock.on_hand > v_stock.allocated
            AND pg_catalog.random() * GREATEST(
                    stockpool._refill_mark(stockpool._pool_level(v_stock.pool_target), v_stock.low_water,
                                           v_stock.pool_cap),
                    stockpool._pool_level(v_stock.pool_target) / 4) < c_looks THEN
            IF stockpool._refill(p_shop_id, p_item_id, p_location_id,
                                 p_min_extra => 0, p_wait => false, p_low_water_only => true) > 0 THEN
                PERFORM stockpool._tally_refill();
            END IF;
        END IF;
        PERFORM stockpool._tally_reservation();
        RETURN true;
    END IF;

    IF stockpool._take_lines(p_shop_id, ARRAY[p_item_id], ARRAY[p_location_id],
                             ARRAY[p_quantity], ARRAY[v_stock.buckets]) THEN
        PERFORM stockpool._tally_reservation();
        RETURN true;
    END IF;

    -- Not enough stock: the new hold row goes again, nothing is left behind.
    DELETE FROM stockpool.holds AS h
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id;
    PERFORM stockpool._tally_refusal();
    RETURN false;
END;
$function$;

COMMENT ON FUNCTION stockpool.reserve_units(bigint, bigint, bigint, integer, uuid, interval) IS
'Hold p_quantity units of (shop, item, location) for a checkout until now() + p_ttl, all or nothing. '
'true = held (a retry by the same checkout is a no-op), false = not enough stock. '
'SQLSTATEs: 22004 NULL argument, 22023 quantity or ttl not positive, SP001 unknown key, '
'SP007 checkout already holds a different quantity of this key, SP010 named key.';
