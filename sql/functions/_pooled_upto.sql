-- _pooled_upto: the units pooled for a key, counted no further than a
-- low-water decision needs: with a mark up to 4,096, exactly, stopping at
-- p_mark + 1; above that, one random bucket (at most p_mark / p_buckets + 1
-- units) scaled up by the number of buckets, which is close enough because
-- claims and refills spread units evenly over the buckets. It must stay
-- cheap on a pool of 100,000 units: _refill's low-water check and
-- _top_up_low call it. A unit some transaction is taking (deleted or locked,
-- not yet committed: its row's xmax is set) is not counted: under a rush of
-- hundreds of buyers those are hundreds of units, and counted as pooled they
-- kept a pool that was running dry above its mark until it was empty.
-- A unit whose taker rolled back keeps its xmax until it is taken or vacuum
-- freezes its row. Counted as gone meanwhile, it makes each refill add that
-- many units more (read as demand too, within the level's doubling): bounded
-- by the number of such units, since the units added are counted, and
-- harmless to the figures (it stays takeable; allocated counts every row).
-- Reads only (no lock). Touches pool_units.
CREATE OR REPLACE FUNCTION stockpool._pooled_upto(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_mark integer,
    p_buckets integer
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    -- Above this mark the count looks at one bucket, not the pool.
    c_exact_count constant integer := 4096;
    v_bucket integer;
    v_pooled integer;
BEGIN
    IF p_mark <= c_exact_count THEN
        SELECT pg_catalog.count(*)::integer INTO v_pooled
        FROM (
            SELECT 1
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
                AND u.xmax = '0'::xid
            LIMIT p_mark + 1
        ) AS live;
    ELSE
        v_bucket := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
        SELECT pg_catalog.count(*)::integer * p_buckets INTO v_pooled
        FROM (
            SELECT 1
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
                AND u.xmax = '0'::xid
                AND u.bucket = v_bucket
            LIMIT p_mark / p_buckets + 1
        ) AS live;
    END IF;
    RETURN v_pooled;
END;
$function$;

COMMENT ON FUNCTION stockpool._pooled_upto(bigint, bigint, bigint, integer, integer) IS
'Internal: units pooled for a key, counted no further than p_mark + 1 (one bucket, scaled, above 4,096).';
