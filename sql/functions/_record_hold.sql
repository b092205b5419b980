-- _record_hold: the one place a hold row is written. Inserts the checkout's
-- hold on a key; when the checkout already has a row for that key (a retry,
-- or a released or expired hold being taken again) it re-opens it with
-- p_reopen, or leaves it alone and returns false without it (reserve_units
-- inserts first, and a row already there is its idempotency check).
-- The caller holds the checkout lock, and every write of a checkout's hold
-- rows by a reservation happens under it, so the row cannot change between
-- the insert and the update. created_at is the clock under that lock, not
-- the transaction's start: claim compares it with its own clock to tell a
-- later line from a retry. p_labels: the units held, for a named key (NULL
-- for a counted one). Returns true when the row now holds this hold.
-- Touches holds.
-- PL/pgSQL, not SQL: PostgreSQL 15 parses and plans the body of a SQL
-- function that cannot be inlined (an INSERT cannot) on every call, which cost
-- a reservation about as much as everything else it does; PL/pgSQL keeps the
-- plan for the session.
CREATE OR REPLACE FUNCTION stockpool._record_hold(
    p_shop_id bigint,
    p_checkout_id uuid,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_ttl interval,
    p_reopen boolean,
    p_labels text[] DEFAULT NULL
)
RETURNS boolean
LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO stockpool.holds AS h
        (shop_id, checkout_id, item_id, location_id, quantity, status, expires_at, created_at, labels)
    VALUES
        (p_shop_id, p_checkout_id, p_item_id, p_location_id, p_quantity, 'held',
         pg_catalog.now() + p_ttl, pg_catalog.clock_timestamp(), p_labels)
    ON CONFLICT ON CONSTRAINT holds_pkey DO NOTHING;
    IF FOUND THEN
        RETURN true;
    ELSIF NOT p_reopen THEN
        RETURN false;
    END IF;

    UPDATE stockpool.holds AS h
    SET quantity = p_quantity,
        status = 'held',
        expires_at = pg_catalog.now() + p_ttl,
        created_at = pg_catalog.clock_timestamp(),
        updated_at = pg_catalog.now(),
        labels = p_labels
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id;
    RETURN true;
END;
$function$;

COMMENT ON FUNCTION stockpool._record_hold(bigint, uuid, bigint, bigint, integer, interval, boolean, text[]) IS
'Internal: write a checkout''s hold row on one key (the only insert of one); with p_reopen re-open an existing one, '
'without it return false when one exists.';
