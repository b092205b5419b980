-- _lock_checkout: serialise every operation on one checkout.
-- Takes a transaction-scoped advisory lock (two-int4 key space) before any
-- other lock, so reserve, cart, claim and release of the same checkout never
-- interleave and never wait on each other while holding pool or ledger locks.
CREATE OR REPLACE FUNCTION stockpool._lock_checkout(
    p_shop_id bigint,
    p_checkout_id uuid
)
RETURNS void
LANGUAGE sql
AS $function$
    SELECT pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtext('stockpool.checkout/' || p_shop_id::text),
        pg_catalog.hashtext(p_checkout_id::text)
    );
$function$;

COMMENT ON FUNCTION stockpool._lock_checkout(bigint, uuid) IS
'Internal: transaction-scoped lock serialising all operations of one checkout.';
