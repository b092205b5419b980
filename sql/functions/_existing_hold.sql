-- _existing_hold: decide what a (re)try of a reservation means for a key the
-- checkout already has a hold row on. Caller holds the checkout lock.
-- Returns true when the request is already satisfied (live or claimed hold of
-- the same quantity; an expired but unswept hold still owns its units and is
-- simply renewed), false when a new hold must be taken (none, released,
-- expired and swept, or expired by a sweeper or cycle count while this call
-- looked). Raises SP007 when the checkout holds a different
-- quantity of this key. Touches holds.
CREATE OR REPLACE FUNCTION stockpool._existing_hold(
    p_shop_id bigint,
    p_checkout_id uuid,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_ttl interval
)
RETURNS boolean
LANGUAGE plpgsql
AS $function$
DECLARE
    v_hold stockpool.holds;
BEGIN
    SELECT h.* INTO v_hold
    FROM stockpool.holds AS h
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id;

    IF NOT FOUND OR v_hold.status IN ('released', 'expired') THEN
        RETURN false;
    END IF;

    IF v_hold.quantity <> p_quantity THEN
        RAISE EXCEPTION 'checkout % already holds % units of item % at location %, not %',
            p_checkout_id, v_hold.quantity, p_item_id, p_location_id, p_quantity
            USING ERRCODE = 'SP007',
                  HINT = 'Release the checkout first, or reserve under a new checkout id.';
    END IF;

    IF v_hold.status = 'held' AND v_hold.expires_at <= pg_catalog.now() THEN
        -- Renewed only if still held: a sweeper or a cycle count may have
        -- expired it since the look above (this UPDATE waits for it and
        -- re-reads the row), and its units are then back in the pool.
        UPDATE stockpool.holds AS h
        SET expires_at = pg_catalog.now() + p_ttl,
            updated_at = pg_catalog.now()
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = p_checkout_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
            AND h.status = 'held';
        IF NOT FOUND THEN
            RETURN false;  -- expired meanwhile: a new hold must be taken
        END IF;
    END IF;

    RETURN true;
END;
$function$;

COMMENT ON FUNCTION stockpool._existing_hold(bigint, uuid, bigint, bigint, integer, interval) IS
'Internal: idempotency check of a reservation against the checkout''s existing hold.';
