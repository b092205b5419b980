-- _pooled_note: keep the session's note of the keys it has seen pooled,
-- which reserve_units reads to skip the counter's path for them (a pooled
-- key's buyers would otherwise pay that try on every call, then the careful
-- path). p_pooled: whether the key's ledger row showed a pool just now. A
-- pooled key goes to the front of the note, a key back on its ledger comes
-- out; the note keeps the newest c_keys keys.
-- The note is a custom setting of the session (stockpool.pooled_keys): the
-- keys between commas, ',shop/item/location,...,' (_pooled_key writes one),
-- or empty. Not a table: reserve_units reads it with one string search, and a
-- session that never saw a pooled key carries none. It is a hint and nothing
-- more: a key wrongly in it (its pool has cooled since) only takes the
-- careful path, which takes it out; one wrongly missing only pays one try.
-- Like any setting it goes back with a transaction that rolls back, and
-- RESET ALL or DISCARD ALL (a pooler's reset) empties it.
-- Returns nothing. Touches no table.
CREATE OR REPLACE FUNCTION stockpool._pooled_note(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_pooled boolean
)
RETURNS void
LANGUAGE plpgsql
AS $function$
DECLARE
    -- Keys kept: a session serves a few hot keys at a time.
    c_keys constant integer := 16;
    v_key text := pg_catalog.btrim(stockpool._pooled_key(p_shop_id, p_item_id, p_location_id), ',');
    v_note text := coalesce(pg_catalog.current_setting('stockpool.pooled_keys', true), '');
    v_keys text[] := pg_catalog.string_to_array(pg_catalog.btrim(v_note, ','), ',');
BEGIN
    v_keys := pg_catalog.array_remove(v_keys, v_key);
    IF p_pooled THEN
        v_keys := (v_key || v_keys)[1:c_keys];
    END IF;
    PERFORM pg_catalog.set_config(
        'stockpool.pooled_keys',
        CASE WHEN pg_catalog.cardinality(v_keys) > 0
            THEN ',' || pg_catalog.array_to_string(v_keys, ',') || ','
            ELSE ''
        END,
        false);
END;
$function$;

COMMENT ON FUNCTION stockpool._pooled_note(bigint, bigint, bigint, boolean) IS
'Internal: put a key seen pooled at the front of the session''s note (stockpool.pooled_keys), or take out one seen '
'on its ledger.';
