-- _pooled_note: keep the session's note of the keys it has seen pooled,
-- which reserve_units reads (_noted_buckets) to send them to the pool's path
-- and skip the counter's path (a pooled key's buyers would otherwise pay that
-- try on every call, then the careful path). p_buckets: the key's buckets
-- when its ledger row showed a pool just now, 0 when it showed none. A
-- pooled key goes to the front of the note with its buckets, a key back on
-- its ledger comes out; the note keeps the newest c_keys keys.
-- The note is a custom setting of the session (stockpool.pooled_keys): the
-- keys between commas, each with its buckets, ',shop/item/location:buckets,
-- ...,' (_note_key writes a key), or empty. Not a table: reserve_units
-- reads it with a string search (and a noted key's buckets with a second,
-- _noted_buckets), and a session that never saw a pooled key carries none.
-- It is a hint and nothing more: a key wrongly in it (its
-- pool has cooled since) only takes the careful path, which takes it out;
-- one wrongly missing only pays one try; buckets out of date only start the
-- pool's takes on fewer or more buckets than the pool has (the takes still
-- find any free unit), and the pool's path reads them again now and then.
-- Like any setting it goes back with a transaction that rolls back, and
-- RESET ALL or DISCARD ALL (a pooler's reset) empties it.
-- Returns nothing. Touches no table.
CREATE OR REPLACE FUNCTION stockpool._pooled_note(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_buckets integer
)
RETURNS void
LANGUAGE plpgsql
AS $function$
DECLARE
    -- Keys kept. A noted key that drops out pays a missed try and the careful
    -- path before it is noted again, and keys drop out in the order they
    -- were noted, the hottest first: at 16, the bench's Zipf catalogue (about
    -- 120 keys pooled in 10 s) sent 23% of its reservations down the
    -- careful path, at 256 7% (commands.md, run 17). A search of a full
    -- note (about 4 kB) costs a reservation about 2 microseconds.
    c_keys constant integer := 256;
    -- The key as the note writes it, between its leading comma and its buckets.
    v_key text := stockpool._note_key(p_shop_id, p_item_id, p_location_id);
    v_note text := coalesce(pg_catalog.current_setting('stockpool.pooled_keys', true), '');
    -- What follows the key in the note: its buckets and the keys after it;
    -- empty when the key is not noted.
    v_after text := pg_catalog.split_part(v_note, v_key, 2);
BEGIN
    -- String functions only, each one pass over the note in C: every session
    -- notes each pooled key it meets, and taking the note apart into rows
    -- cost a discovery more than the reservation it was part of.
    IF v_after <> '' THEN
        -- The key's entry out: what came before it, then from the comma
        -- that ends its buckets.
        v_note := pg_catalog.split_part(v_note, v_key, 1)
            || pg_catalog.substr(v_after, pg_catalog.strpos(v_after, ','));
    END IF;
    IF p_buckets > 0 THEN
        v_note := v_key || p_buckets || CASE WHEN v_note = '' THEN ',' ELSE v_note END;
        -- One comma more than keys; an entry is at least 8 bytes, so a
        -- shorter note cannot hold too many. Past c_keys the oldest go.
        IF pg_catalog.octet_length(v_note) > 8 * c_keys
            AND pg_catalog.octet_length(v_note)
                - pg_catalog.octet_length(pg_catalog.replace(v_note, ',', '')) > c_keys + 1 THEN
            v_note := ',' || pg_catalog.array_to_string(
                (pg_catalog.string_to_array(pg_catalog.btrim(v_note, ','), ','))[1:c_keys], ',') || ',';
        END IF;
    ELSIF v_note = ',' THEN
        v_note := '';
    END IF;
    PERFORM pg_catalog.set_config('stockpool.pooled_keys', v_note, false);
END;
$function$;

COMMENT ON FUNCTION stockpool._pooled_note(bigint, bigint, bigint, integer) IS
'Internal: put a key seen pooled at the front of the session''s note (stockpool.pooled_keys) with its buckets, '
'or take out one seen on its ledger (p_buckets 0).';
