-- _note_key: a key as the session's note of pooled keys writes it
-- (stockpool.pooled_keys, _pooled_note): ',shop/item/location:', the comma
-- before and the colon after included, so that a search for it cannot match
-- inside another key; the key's buckets follow the colon.
-- The one place the note's format is written: _noted_buckets searches the
-- note for it, _pooled_note adds and removes it. A SQL function, so
-- PostgreSQL inlines it where it is called: reserve_units pays no call.
-- STABLE, as format() is. Touches nothing.
CREATE OR REPLACE FUNCTION stockpool._note_key(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint
)
RETURNS text
LANGUAGE sql
STABLE
PARALLEL SAFE
AS $function$
    SELECT pg_catalog.format(',%s/%s/%s:', p_shop_id, p_item_id, p_location_id);
$function$;

COMMENT ON FUNCTION stockpool._note_key(bigint, bigint, bigint) IS
'Internal: a stock key as the session''s note of pooled keys writes it ('',shop/item/location:'').';
