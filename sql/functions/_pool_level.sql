-- _pool_level: the level of a key's pool, the units a refill fills it to:
-- its pool_target (set by refills from demand, or by replenish_pool), and
-- never below 16, the first pool a key gets when its buyers meet. The one
-- place that least level is written (_refill sizes pools with it,
-- _refill_mark and reserve_units' sampled look take their level from it).
CREATE OR REPLACE FUNCTION stockpool._pool_level(
    p_pool_target integer
)
RETURNS integer
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $function$
    SELECT GREATEST(16, p_pool_target);
$function$;

COMMENT ON FUNCTION stockpool._pool_level(integer) IS
'Internal: the level of a pool of this pool_target: never below 16, the first pool a key gets.';
