-- _take_ledger: take p_quantity units of a key straight from its ledger row,
-- like a counter, when the row is free and has that many free units
-- (on_hand - allocated). The units become allocated; the caller records the
-- hold. A key that nobody contends is served this way and never gets a pool.
-- A key that has a pool (pool_target > 0: its buyers met) is not tried: the
-- row is checked before it is locked, because every try of a busy row is a
-- heavyweight tuple-lock attempt, and on a hot key all of them meet in one
-- lock-manager partition (LWLock:LockManager at hundreds of clients).
-- Locks: the ledger row FOR NO KEY UPDATE SKIP LOCKED, held to commit when
-- taken: a busy row means buyers meet on the key, and they go to its pool
-- instead of queueing here. Never waits.
-- CAUTION: false does not mean nothing is locked. PostgreSQL locks the newest
-- version of a row before it checks the conditions again, and a row that
-- changed since the snapshot and now fails them (the key just got a pool, or
-- its free units ran out) is skipped but stays locked. A caller that may wait
-- afterwards must call this inside a subtransaction it rolls back when false
-- comes back (reserve_units), or must not wait for this key's refill lock
-- (a refiller holding it waits for this row) before rolling back
-- (_take_lines' fast path). See docs/locking.md.
-- Not a subtransaction of its own on purpose: a row locked by a committed
-- subtransaction makes its waiters wait for the whole top-level transaction,
-- even when the subtransaction's parent rolls back later.
-- reserve_units' counter's path runs this statement written out (see there):
-- change both together.
-- Returns true when taken, false when not. Touches stock.
CREATE OR REPLACE FUNCTION stockpool._take_ledger(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer
)
RETURNS boolean
LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE stockpool.stock AS s
    SET allocated = s.allocated + p_quantity
    WHERE s.ctid = (
            SELECT l.ctid
            FROM stockpool.stock AS l
            WHERE l.shop_id = p_shop_id
                AND l.item_id = p_item_id
                AND l.location_id = p_location_id
                AND l.on_hand - l.allocated >= p_quantity
                AND l.pool_target = 0
            FOR NO KEY UPDATE SKIP LOCKED
        )
        AND s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    RETURN FOUND;
END;
$function$;

COMMENT ON FUNCTION stockpool._take_ledger(bigint, bigint, bigint, integer) IS
'Internal: take units straight from a free ledger row (SKIP LOCKED, never waits), like a counter; '
'false may leave the row locked (see the file header).';
