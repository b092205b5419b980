-- _add_units: insert p_quantity units of a key into the pool, spread evenly
-- over p_buckets buckets from a random offset and written bucket by bucket,
-- so one bucket's rows share heap pages with few other buckets.
-- Does not touch the ledger: callers keep stock.allocated right. Locks nothing
-- that others wait on (new rows are invisible until commit).
-- Returns units added. Touches pool_units.
CREATE OR REPLACE FUNCTION stockpool._add_units(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_buckets integer
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_offset integer := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
BEGIN
    IF p_quantity <= 0 THEN
        RETURN 0;
    END IF;

    INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket)
    SELECT p_shop_id, p_item_id, p_location_id, (v_offset + g.n) % p_buckets
    FROM pg_catalog.generate_series(0, p_quantity - 1) AS g (n)
    ORDER BY (v_offset + g.n) % p_buckets, g.n;

    RETURN p_quantity;
END;
$function$;

COMMENT ON FUNCTION stockpool._add_units(bigint, bigint, bigint, integer, integer) IS
'Internal: insert units into a key''s pool, spread over its buckets.';
