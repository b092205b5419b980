-- _refill_mark: the low-water rule, the one place it is written. A pool
-- whose level (the units a refill fills it to) is p_level is topped up once
-- no more than this many units are left in it: a key filled to its pool_cap
-- (replenish_pool) at its low_water, a demand-sized pool when a quarter of
-- its level has gone, and never later than that (a small pool is topped up
-- when it has given out a quarter).
-- _refill applies it under the key's refill lock; reserve_units samples how
-- often it asks _refill to look (see there).
CREATE OR REPLACE FUNCTION stockpool._refill_mark(
    p_level integer,
    p_low_water integer,
    p_pool_cap integer
)
RETURNS integer
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $function$
    -- bigint: three quarters of a level near the integer maximum must not overflow.
    SELECT LEAST(p_level::bigint * 3 / 4,
                 GREATEST(p_low_water, p_level - GREATEST(p_pool_cap - p_low_water, p_level / 4)))::integer;
$function$;

COMMENT ON FUNCTION stockpool._refill_mark(integer, integer, integer) IS
'Internal: the low-water mark of a pool of level p_level: topped up once no more units than this are left.';
