-- _sample_span: the units of a pool's draining over which _should_look
-- spreads its looks: the pool's refill mark (stockpool._refill_mark of its
-- level, stockpool._pool_level), or a quarter of the level when that is
-- larger (so that a very low mark does not make every take look). A SQL
-- function, inlined where it is called. Touches nothing.
CREATE OR REPLACE FUNCTION stockpool._sample_span(
    p_pool_target integer,
    p_low_water integer,
    p_pool_cap integer
)
RETURNS integer
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $function$
    SELECT GREATEST(stockpool._refill_mark(stockpool._pool_level(p_pool_target), p_low_water, p_pool_cap),
                    stockpool._pool_level(p_pool_target) / 4);
$function$;

COMMENT ON FUNCTION stockpool._sample_span(integer, integer, integer) IS
'Internal: the units over which _should_look spreads its looks: the larger of the refill mark and a quarter of the level.';
