-- routing/partition.sql: the logical partition of a shop, 0..63, applied on
-- the router and on every node before router.sql / node.sql: both must
-- compute the same number, and PostgreSQL's hashint8 is the same on every
-- server of one major version.
CREATE OR REPLACE FUNCTION stockpool._partition_of(p_shop_id bigint)
RETURNS integer
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $function$
    SELECT pg_catalog.hashint8(p_shop_id) & 63;
$function$;

COMMENT ON FUNCTION stockpool._partition_of(bigint) IS
'Internal: the logical partition (0..63) of a shop, the same on the router and on every node.';

REVOKE ALL ON FUNCTION stockpool._partition_of(bigint) FROM public;
