-- _free_labels: put a named key's units back among its free units (release,
-- expiry): one named_free row per label, at the unit's position, in bucket
-- position % p_buckets.
-- Does not touch the ledger: for a named key the units stay allocated while
-- free (they are its pool). Locks nothing that others wait on (new rows are
-- invisible until commit; a unit is freed only by the transaction that ends
-- the hold holding it, under that hold row's lock, so no other transaction
-- inserts the same position).
-- Returns units freed. Touches named_free (named_units read).
CREATE OR REPLACE FUNCTION stockpool._free_labels(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_labels text[],
    p_buckets integer
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_freed integer;
BEGIN
    IF p_labels IS NULL THEN
        RETURN 0;
    END IF;
    INSERT INTO stockpool.named_free (shop_id, item_id, location_id, bucket, position, label)
    SELECT p_shop_id, p_item_id, p_location_id,
           ((u.position % p_buckets) + p_buckets) % p_buckets, u.position, u.label
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels)
    ORDER BY ((u.position % p_buckets) + p_buckets) % p_buckets, u.position;
    GET DIAGNOSTICS v_freed = ROW_COUNT;
    RETURN v_freed;
END;
$function$;

COMMENT ON FUNCTION stockpool._free_labels(bigint, bigint, bigint, text[], integer) IS
'Internal: put a named key''s units (by label) back among its free units.';
