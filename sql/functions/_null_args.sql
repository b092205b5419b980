-- _null_args: names of the arguments that are NULL, for 22004 messages.
CREATE OR REPLACE FUNCTION stockpool._null_args(
    p_names text[],
    p_is_null boolean[]
)
RETURNS text
LANGUAGE sql
IMMUTABLE
AS $function$
    SELECT pg_catalog.string_agg(a.name, ', ' ORDER BY a.ord)
    FROM ROWS FROM (pg_catalog.unnest(p_names), pg_catalog.unnest(p_is_null))
        WITH ORDINALITY AS a (name, is_null, ord)
    WHERE a.is_null;
$function$;

COMMENT ON FUNCTION stockpool._null_args(text[], boolean[]) IS
'Internal: comma-separated names of NULL arguments, for error messages.';
