-- _noted_buckets: the buckets the session's note of pooled keys
-- (stockpool.pooled_keys, _pooled_note) records for a key, or 0 when the key
-- is not in it: the text between the key (_note_key) and the next comma.
-- reserve_units reads it for a key its cheaper test (split_part of the note
-- at _note_key, not empty) found in the note: more than 0 sends one unit to
-- the pool's path, whose take starts at a random one of that many buckets.
-- A SQL function, inlined where it is called.
-- STABLE, as current_setting() is. Touches nothing.
CREATE OR REPLACE FUNCTION stockpool._noted_buckets(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint
)
RETURNS integer
LANGUAGE sql
STABLE
PARALLEL SAFE
AS $function$
    SELECT coalesce(NULLIF(pg_catalog.split_part(pg_catalog.split_part(
               coalesce(pg_catalog.current_setting('stockpool.pooled_keys', true), ''),
               stockpool._note_key(p_shop_id, p_item_id, p_location_id), 2), ',', 1), '')::integer, 0);
$function$;

COMMENT ON FUNCTION stockpool._noted_buckets(bigint, bigint, bigint) IS
'Internal: the buckets the session''s note of pooled keys records for a key; 0 when it is not noted.';
