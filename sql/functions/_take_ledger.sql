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
-- instead of queueing here. Never waits. When nothing is taken, nothing stays
-- locked (a subtransaction, see below), so the caller may wait afterwards.
-- Returns true when taken, false (nothing changed) when the row is busy or
-- short. Touches stock.
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
        IF FOUND THEN
            RETURN true;
        END IF;
        -- Not taken. The row may still be locked by us: when it changed
        -- since our snapshot, the lock is taken on its newest version before
        -- the conditions are checked again, and a row that fails them stays
        -- locked. The caller goes on to the pool and may wait there, and a
        -- refiller holding the key's refill lock waits for this row: a
        -- cycle. Rolling back the block drops that lock.
        RAISE EXCEPTION USING ERRCODE = 'SPX03';
    EXCEPTION
        WHEN SQLSTATE 'SPX03' THEN
            RETURN false;
    END;
END;
$function$;

COMMENT ON FUNCTION stockpool._take_ledger(bigint, bigint, bigint, integer) IS
'Internal: take units straight from a free ledger row (SKIP LOCKED, never waits), like a counter.';
