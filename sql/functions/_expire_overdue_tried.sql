-- _expire_overdue_tried: expire a key's overdue holds that can be locked at
-- once, for a cycle count (_apply_on_hand), and say how many units and holds.
-- An overdue hold still counts in allocated until a sweep, but it is not
-- live and must not block a cycle count. SKIP LOCKED, not _expire_key's
-- wait: the caller holds the key's refill lock and ledger row, and a hold
-- locked by its owner or a sweeper is being dealt with already.
-- Locks: the key's overdue hold rows FOR UPDATE SKIP LOCKED, with
-- lock_timeout 50 ms in a subtransaction, as _maintain_step runs the
-- maintenance steps: in PostgreSQL's SKIP LOCKED race (docs/locking.md,
-- "SKIP LOCKED can wait") the lock would wait for a buyer whose _expire_key
-- locked one of these rows and waits for another this one holds (checkout_id
-- order against the index's expiry order). It gives up instead, as if every
-- overdue hold were locked: (0, 0). The function's SET clause gives the
-- caller its own lock_timeout back, whichever way it ends.
-- Returns the units and holds expired; their units are the caller's to put
-- back. Counts nothing (the caller counts once its change stands).
-- Touches holds.
CREATE OR REPLACE FUNCTION stockpool._expire_overdue_tried(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    OUT units integer,
    OUT holds integer
)
LANGUAGE plpgsql
SET lock_timeout = '50ms'
AS $function$
BEGIN
    WITH due AS (
        SELECT h.checkout_id
        FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
            AND h.status = 'held'
            AND h.expires_at <= pg_catalog.now()
        FOR UPDATE SKIP LOCKED
    ),
    expired AS (
        UPDATE stockpool.holds AS h
        SET status = 'expired',
            updated_at = pg_catalog.now()
        FROM due
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = due.checkout_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
        RETURNING h.quantity
    )
    SELECT coalesce(pg_catalog.sum(expired.quantity), 0)::integer, pg_catalog.count(*)::integer
    INTO units, holds
    FROM expired;
EXCEPTION
    -- Rolled back: nothing expired.
    WHEN lock_not_available OR deadlock_detected THEN
        units := 0;
        holds := 0;
END;
$function$;

COMMENT ON FUNCTION stockpool._expire_overdue_tried(bigint, bigint, bigint) IS
'Internal: expire a key''s overdue holds SKIP LOCKED for a cycle count, giving up after 50 ms of waiting; '
'returns (units, holds).';
