-- _buckets_to_note: what the session's note of pooled keys (_pooled_note)
-- should record for a key whose ledger row shows p_pool_target and
-- p_buckets: its buckets when it has a pool, 0 (not noted) when it has none.
-- The one place that rule is written: reserve_units' careful path and
-- _pool_look compare it with what the note holds (_noted_buckets) and hand
-- it to _pooled_note when the two differ. A SQL function, inlined where it
-- is called. Touches nothing.
CREATE OR REPLACE FUNCTION stockpool._buckets_to_note(
    p_pool_target integer,
    p_buckets integer
)
RETURNS integer
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $function$
    SELECT CASE WHEN p_pool_target > 0 THEN p_buckets ELSE 0 END;
$function$;

COMMENT ON FUNCTION stockpool._buckets_to_note(integer, integer) IS
'Internal: the buckets the session''s note of pooled keys records for a key''s row (0: no pool, not noted).';
