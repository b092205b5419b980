-- _take_lines: take every unit of every line, or none.
-- Lines must be sorted by (item_id, location_id), one line per key, keys known.
-- 1. Fast path, in a subtransaction: per key, the units straight from the
--    ledger row when it is free and has them (SKIP LOCKED, like a counter);
--    else a SKIP LOCKED take from the pool, and if the pool is short a
--    refill of at least the shortfall (or, when another transaction is
--    refilling the key, a wait for that refill to commit, on a shared lock
--    taken and dropped at once), then take again: up to c_rounds times
--    while the ledger row shows free units for the shortfall (a refill
--    shared by a crowd can be too small for it; the path below queues).
-- 2. If any line is still short, the subtransaction is rolled back, which
--    releases every pool row, refill lock and ledger row it took, and the near-
--    sellout path runs with nothing held: first every key's overdue holds are
--    expired (waiting for holds that a sweeper or their owner has locked),
--    then per key: wait for units locked by in-flight transactions (unit_id
--    order), refill, take. Only if that is short too is the answer false.
-- Lock order on both paths: keys in sorted order; within a key pool rows,
-- then the refill advisory lock (or the wait for it), then the ledger row.
-- The ledger row taken first by the fast path is taken SKIP LOCKED (never a
-- wait), and a line it serves needs nothing else of that key.
-- Hold rows are waited on only while no pool row, refill lock or ledger row
-- is held (claim locks holds, then ledger rows), so no wait can close a cycle.
-- Returns true with all units taken (deleted from the pool), false with no
-- change at all. The refills and expiries of the path that succeeded are
-- counted (_tally_refill, _tally_expiry) just before it returns true: a
-- path that fails is rolled back, and so are its refills and expiries.
-- Touches pool_units, stock, holds.
CREATE OR REPLACE FUNCTION stockpool._take_lines(
    p_shop_id bigint,
    p_item_ids bigint[],
    p_location_ids bigint[],
    p_quantities integer[],
    p_buckets integer[]
)
RETURNS boolean
LANGUAGE plpgsql
AS $function$
DECLARE
    -- Refills (or waits for another's) a fast-path line tries before the
    -- near-sellout path.
    c_rounds constant integer := 8;
    v_i integer;
    v_round integer;
    v_got integer;
    v_lines integer := pg_catalog.array_length(p_item_ids, 1);
    v_tried boolean;
    v_refills integer := 0;
    v_expired integer := 0;
BEGIN
    BEGIN
        FOR v_i IN 1..v_lines LOOP
            -- A free ledger row first, like a counter (see _take_ledger), for a
            -- key that has no pool and enough free units as read. A try that
            -- took nothing may have left the row locked: then this line must
            -- not wait for the key's refill lock below (its holder waits for
            -- this row); it goes to the waiting path instead, after this
            -- block is rolled back.
            v_tried := EXISTS (
                SELECT
                FROM stockpool.stock AS s
                WHERE s.shop_id = p_shop_id
                    AND s.item_id = p_item_ids[v_i]
                    AND s.location_id = p_location_ids[v_i]
                    AND s.pool_target = 0
                    AND s.on_hand - s.allocated >= p_quantities[v_i]
            );
            CONTINUE WHEN v_tried AND stockpool._take_ledger(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                                             p_quantities[v_i]);
            v_got := stockpool._take(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                     p_quantities[v_i], p_buckets[v_i]);
            v_round := 0;
            WHILE v_got < p_quantities[v_i] LOOP
                IF v_round >= c_rounds THEN
                    RAISE EXCEPTION USING ERRCODE = 'SPX01';
                END IF;
                -- Refill unless another transaction is refilling this key; then
                -- wait for that refill to commit and look again. Waiters do not
                -- queue for the refill lock itself: each would hold it to its
                -- own commit, one after the other (a convoy that serialised
                -- every buyer of a hot key whose pool ran dry). While the
                -- ledger has free units for the shortfall, a buyer that found
                -- the refill too small for the crowd it was shared by tries
                -- again, up to c_rounds times: the near-sellout path below
                -- waits in a queue, one buyer at a time, and is for a key
                -- whose last units are held or in flight, not for a pool that
                -- ran dry under a rush.
                IF stockpool._refill(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                     p_min_extra => p_quantities[v_i] - v_got,
                                     p_wait => false, p_low_water_only => false) = 0 THEN
                    IF v_tried OR NOT EXISTS (
                            SELECT
                            FROM stockpool.stock AS s
                            WHERE s.shop_id = p_shop_id
                                AND s.item_id = p_item_ids[v_i]
                                AND s.location_id = p_location_ids[v_i]
                                AND s.on_hand - s.allocated >= p_quantities[v_i] - v_got
                        ) THEN
                        RAISE EXCEPTION USING ERRCODE = 'SPX01';
                    END IF;
                    -- The wait: the key's lock, shared, transaction-scoped,
                    -- and dropped at once by rolling back the block that took
                    -- it. Never a session lock: a cancel or statement_timeout
                    -- landing between taking and dropping it would leave it
                    -- held for the life of the connection, and every later
                    -- refill of the key would queue behind it.
                    BEGIN
                        PERFORM pg_catalog.pg_advisory_xact_lock_shared(
                            stockpool._key_lock_id(p_shop_id, p_item_ids[v_i], p_location_ids[v_i]));
                        RAISE EXCEPTION USING ERRCODE = 'SPX02';
                    EXCEPTION
                        WHEN SQLSTATE 'SPX02' THEN
                            NULL;
                    END;
                ELSE
                    v_refills := v_refills + 1;
                END IF;
                v_got := v_got + stockpool._take(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                                 p_quantities[v_i] - v_got, p_buckets[v_i]);
                v_round := v_round + 1;
            END LOOP;
        END LOOP;
        FOR v_i IN 1..v_refills LOOP
            PERFORM stockpool._tally_refill();
        END LOOP;
        RETURN true;
    EXCEPTION
        WHEN SQLSTATE 'SPX01' THEN
            NULL;
    END;

    v_refills := 0;
    BEGIN
        -- Before any pool row or ledger row is locked: waiting on hold rows
        -- while holding a ledger row could close a cycle with claim.
        FOR v_i IN 1..v_lines LOOP
            v_expired := v_expired + stockpool._expire_key(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                                           p_buckets[v_i]);
        END LOOP;
        FOR v_i IN 1..v_lines LOOP
            v_got := stockpool._take_waiting(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                             p_quantities[v_i]);
            IF v_got < p_quantities[v_i] THEN
                IF stockpool._refill(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                     p_min_extra => p_quantities[v_i] - v_got,
                                     p_wait => true, p_low_water_only => false) > 0 THEN
                    v_refills := v_refills + 1;
                END IF;
                v_got := v_got + stockpool._take(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                                 p_quantities[v_i] - v_got, p_buckets[v_i]);
            END IF;
            IF v_got < p_quantities[v_i] THEN
                RAISE EXCEPTION USING ERRCODE = 'SPX01';
            END IF;
        END LOOP;
        FOR v_i IN 1..v_expired LOOP
            PERFORM stockpool._tally_expiry();
        END LOOP;
        FOR v_i IN 1..v_refills LOOP
            PERFORM stockpool._tally_refill();
        END LOOP;
        RETURN true;
    EXCEPTION
        WHEN SQLSTATE 'SPX01' THEN
            RETURN false;
    END;
END;
$function$;

COMMENT ON FUNCTION stockpool._take_lines(bigint, bigint[], bigint[], integer[], integer[]) IS
'Internal: all-or-nothing, deadlock-free take of several keys'' units (fast path, then waiting path).';
