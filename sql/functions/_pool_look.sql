-- _pool_look: what reserve_units' pool's path does in one call out of
-- p_sampled, after its take: read the key's row, bring the session's note
-- of pooled keys up to date (the key's buckets, or the key out of the note
-- when it has no pool any more: _pooled_note), and look at the pool's low
-- water with p_sampled times the odds (_should_look), as the careful path does
-- after every take. p_noted_buckets: the buckets the note recorded.
-- Locks: on a look that finds the pool below its mark, what _refill takes
-- (the key's refill lock tried, then the ledger row); nothing otherwise.
-- Returns nothing. Touches stock, pool_units, pending_claims, movements
-- (through _refill).
CREATE OR REPLACE FUNCTION stockpool._pool_look(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_noted_buckets integer,
    p_sampled integer
)
RETURNS void
LANGUAGE plpgsql
AS $function$
DECLARE
    v_stock stockpool.stock;
BEGIN
    v_stock := stockpool._stock_row(p_shop_id, p_item_id, p_location_id);
    IF stockpool._buckets_to_note(v_stock.pool_target, v_stock.buckets) <> p_noted_buckets THEN
        PERFORM stockpool._pooled_note(p_shop_id, p_item_id, p_location_id,
                                       stockpool._buckets_to_note(v_stock.pool_target, v_stock.buckets));
    END IF;
    IF v_stock.on_hand > v_stock.allocated
        AND stockpool._should_look(v_stock.pool_target, v_stock.low_water, v_stock.pool_cap, p_sampled)
        AND stockpool._refill(p_shop_id, p_item_id, p_location_id,
                              p_min_extra => 0, p_wait => false, p_low_water_only => true) > 0 THEN
        PERFORM stockpool._tally_refill();
    END IF;
END;
$function$;

COMMENT ON FUNCTION stockpool._pool_look(bigint, bigint, bigint, integer, integer) IS
'Internal: the pool''s path''s sampled read of a key''s row: the session''s note brought up to date, '
'and the low-water look.';
