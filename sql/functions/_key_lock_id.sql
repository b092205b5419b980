-- _key_lock_id: the advisory lock id of a stock key's refill lock.
-- Pure; a 64-bit hash so that two keys practically never share a lock (a
-- shared lock would still be safe, only slower). One-bigint advisory locks
-- live in a different lock space from the two-int4 checkout locks.
CREATE OR REPLACE FUNCTION stockpool._key_lock_id(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $function$
    SELECT pg_catalog.hashtextextended(
        'stockpool.key/' || p_shop_id::text || '/' || p_item_id::text || '/' || p_location_id::text,
        0
    );
$function$;

COMMENT ON FUNCTION stockpool._key_lock_id(bigint, bigint, bigint) IS
'Internal: advisory lock id of a stock key (refill lock).';
