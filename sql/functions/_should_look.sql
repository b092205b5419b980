-- _should_look: whether a reservation that just took a unit of a pooled key
-- looks at the pool's low water now (then _refill with p_low_water_only).
-- Sampled: a look counts up to the refill mark (stockpool._refill_mark of
-- the pool's level, stockpool._pool_level), so about one reservation in
-- span / c_looks looks, the span (stockpool._sample_span) being that mark or
-- a quarter of the level when larger: the counting costs about c_looks index
-- entries per reservation whatever the pool's size, and a pool that drains
-- from its mark is still looked at about c_looks times (none of 8 comes in
-- about one pool's draining in 3,000; the next buyer to find it empty
-- refills it).
-- A look runs in the reservation's transaction and costs about what a
-- reservation does: with 24 looks, a key of a 640-unit pool spent 15% of
-- its reservations' instructions on them (docs/pools.md, run 19). A mark
-- set very low (a small low_water) does not make every reservation look:
-- the odds are never above c_looks per quarter of the level. But a pool
-- whose mark and quarter level are at most c_always units is looked at on
-- every take: a new pool (16 units) is topped up as soon as it is down to
-- its mark. p_sampled: the caller came here in one call out of p_sampled
-- (reserve_units' pool's path), so the odds are that many times higher and
-- the looks per reservation stay the same (while they stay below 1).
-- A SQL function, inlined where it is called. VOLATILE (random()).
-- Touches nothing.
CREATE OR REPLACE FUNCTION stockpool._should_look(
    p_pool_target integer,
    p_low_water integer,
    p_pool_cap integer,
    p_sampled integer
)
RETURNS boolean
LANGUAGE sql
VOLATILE
PARALLEL SAFE
AS $function$
    -- c_looks: 8 looks per mark's worth of reservations; and a mark (or
    -- quarter level) of at most c_always, 24 units, on every take.
    SELECT stockpool._sample_span(p_pool_target, p_low_water, p_pool_cap) <= 24
        OR pg_catalog.random() * stockpool._sample_span(p_pool_target, p_low_water, p_pool_cap) < 8 * p_sampled;
$function$;

COMMENT ON FUNCTION stockpool._should_look(integer, integer, integer, integer) IS
'Internal: whether a reservation that took a pooled unit looks at the pool''s low water now (sampled).';
