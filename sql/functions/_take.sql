-- _take: claim up to p_quantity free pool units of a key and delete them.
-- Locks: FOR UPDATE SKIP LOCKED on pool rows, never waits. Claimers start at
-- a random bucket (bucket >= start, then bucket < start) so that they do not
-- all read the same index leaf and heap pages; claimed rows are deleted, not
-- updated, so no version chain is left for the next claimer to follow.
-- Returns the number of units taken (0..p_quantity). Touches pool_units.
CREATE OR REPLACE FUNCTION stockpool._take(
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
    v_start integer := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
    v_got integer;
    v_more integer;
BEGIN
    WITH picked AS (
        SELECT u.ctid AS row_id
        FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
            AND u.bucket >= v_start
        ORDER BY u.bucket, u.unit_id
        LIMIT p_quantity
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM stockpool.pool_units AS d
    USING picked
    WHERE d.shop_id = p_shop_id
        AND d.ctid = picked.row_id;
    GET DIAGNOSTICS v_got = ROW_COUNT;

    IF v_got < p_quantity AND v_start > 0 THEN
        WITH picked AS (
            SELECT u.ctid AS row_id
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
                AND u.bucket < v_start
            ORDER BY u.bucket, u.unit_id
            LIMIT p_quantity - v_got
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM stockpool.pool_units AS d
        USING picked
        WHERE d.shop_id = p_shop_id
            AND d.ctid = picked.row_id;
        GET DIAGNOSTICS v_more = ROW_COUNT;
        v_got := v_got + v_more;
    END IF;

    RETURN v_got;
END;
$function$;

COMMENT ON FUNCTION stockpool._take(bigint, bigint, bigint, integer, integer) IS
'Internal: SKIP LOCKED claim of up to n pool units from a random start bucket; deletes them.';
