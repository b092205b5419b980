-- _record_hold: write (or re-open) a checkout's hold on a key after its units
-- were taken from the pool. The caller holds the checkout lock, so no other
-- transaction writes this row meanwhile. Touches holds.
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
    p_ttl interval
)
RETURNS void
LANGUAGE plpgsql
AS $function$
BEGIN
    -- created_at: the clock under the checkout lock (see claim).
    INSERT INTO stockpool.holds AS h
        (shop_id, checkout_id, item_id, location_id, quantity, status, expires_at, created_at)
    VALUES
        (p_shop_id, p_checkout_id, p_item_id, p_location_id, p_quantity, 'held',
         pg_catalog.now() + p_ttl, pg_catalog.clock_timestamp())
    ON CONFLICT ON CONSTRAINT holds_pkey DO UPDATE
    SET quantity = excluded.quantity,
        status = 'held',
        expires_at = excluded.expires_at,
        created_at = excluded.created_at,
        updated_at = pg_catalog.now();
END;
$function$;

COMMENT ON FUNCTION stockpool._record_hold(bigint, uuid, bigint, bigint, integer, interval) IS
'Internal: insert or re-open a checkout''s hold row on one key.';
