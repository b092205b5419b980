-- claim: payment succeeded. Every live hold of the checkout becomes a
-- permanent deduction of on hand, in one transaction, all or nothing.
-- Returns the units claimed by the checkout in total; a retry claims nothing
-- twice and returns the same number. Lines reserved after the last claim
-- that have since expired or been released are not mistaken for a retry:
-- they raise SP004 or SP005.
-- A claim never waits for a key's ledger row (escrow). For a key without a
-- pool (its buyers do not meet) it folds its units into the ledger row, with
-- those of earlier pending claims, when it finds the row free
-- (stockpool._settle, SKIP LOCKED); when another transaction holds the row
-- it records a pending claim instead, which the next transaction to find the
-- row free folds. For a pooled key (a hot one) it always records a pending
-- claim, and one claim in 16 (picked by its checkout id's hash) tries to
-- fold the key's pending claims (SKIP LOCKED), so the hot ledger row takes
-- about one update per 16 claims rather than one per claim; refills, sweep,
-- maintain, set_stock and adjust_stock fold as well.
-- Either way on hand as read through stock_levels drops at this commit. In a
-- REPEATABLE READ or SERIALIZABLE transaction it always records pending
-- claims and folds none: locking a row updated since the snapshot would
-- raise 40001.
-- Locks: the checkout lock, the checkout's hold rows FOR UPDATE, then the
-- ledger rows of its keys in sorted key order, SKIP LOCKED (pool, then
-- holds, then ledger; nothing waited for after the hold rows).
-- Counted (stockpool.metrics()): each line claimed by _tally_claim, once the
-- claim's writes are done; a retry is not counted.
-- Raises 22004 (NULL argument), SP003 (unknown checkout), SP004 (a live hold
-- of the checkout has expired: nothing is claimed), SP005 (the checkout was
-- released: nothing left to claim).
-- Touches holds, pending_claims, stock, movements.
CREATE OR REPLACE FUNCTION stockpool.claim(
    p_shop_id bigint,
    p_checkout_id uuid
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    -- One claim of a pooled key in this many tries to fold its pending claims.
    c_batch constant integer := 16;
    v_hold record;
    v_fold boolean;
    v_folded integer;
    v_rows integer := 0;
    v_held integer := 0;
    v_expired integer := 0;
    v_released integer := 0;
    v_claimed integer := 0;
    v_item_ids bigint[] := ARRAY[]::bigint[];
    v_location_ids bigint[] := ARRAY[]::bigint[];
    v_quantities integer[] := ARRAY[]::integer[];
    v_pooled boolean[] := ARRAY[]::boolean[];
    v_i integer;
BEGIN
    IF p_shop_id IS NULL OR p_checkout_id IS NULL THEN
        RAISE EXCEPTION 'stockpool.claim: % must not be NULL',
            stockpool._null_args(ARRAY['p_shop_id', 'p_checkout_id'],
                                 ARRAY[p_shop_id IS NULL, p_checkout_id IS NULL])
            USING ERRCODE = '22004';
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    FOR v_hold IN
        SELECT h.item_id, h.location_id, h.status, h.quantity,
               h.expires_at <= pg_catalog.now() AS overdue,
               s.pool_target > 0 AS pooled
        FROM stockpool.holds AS h
        JOIN stockpool.stock AS s
            ON s.shop_id = h.shop_id
            AND s.item_id = h.item_id
            AND s.location_id = h.location_id
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = p_checkout_id
        ORDER BY h.item_id, h.location_id
        FOR UPDATE OF h
    LOOP
        v_rows := v_rows + 1;
        CASE
            WHEN v_hold.status = 'held' AND v_hold.overdue THEN v_expired := v_expired + 1;
            WHEN v_hold.status = 'held' THEN
                v_held := v_held + 1;
                v_item_ids := v_item_ids || v_hold.item_id;
                v_location_ids := v_location_ids || v_hold.location_id;
                v_quantities := v_quantities || v_hold.quantity;
                v_pooled := v_pooled || v_hold.pooled;
            WHEN v_hold.status = 'expired' THEN v_expired := v_expired + 1;
            WHEN v_hold.status = 'released' THEN v_released := v_released + 1;
            ELSE v_claimed := v_claimed + v_hold.quantity;
        END CASE;
    END LOOP;

    IF v_rows = 0 THEN
        RAISE EXCEPTION 'stockpool.claim: checkout % holds nothing in shop %', p_checkout_id, p_shop_id
            USING ERRCODE = 'SP003',
                  HINT = 'Reserve with stockpool.reserve_units() or reserve_cart() before claiming.';
    END IF;
    IF v_held = 0 AND v_claimed > 0 THEN
        -- A retry of a claim that went through returns its total. But lines
        -- the checkout reserved after that claim, and that have since expired
        -- or been released, are a new purchase that failed: say so instead of
        -- answering with the old total as if it had been claimed. Both
        -- timestamps are clock_timestamp() taken under the checkout lock, so
        -- they follow the order in which the calls really ran.
        SELECT pg_catalog.count(*) FILTER (WHERE h.status <> 'released')::integer,
               pg_catalog.count(*) FILTER (WHERE h.status = 'released')::integer
        INTO v_expired, v_released
        FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = p_checkout_id
            AND h.status <> 'claimed'
            AND h.created_at > (
                SELECT pg_catalog.max(c.updated_at)
                FROM stockpool.holds AS c
                WHERE c.shop_id = p_shop_id
                    AND c.checkout_id = p_checkout_id
                    AND c.status = 'claimed'
            );
        IF v_expired = 0 AND v_released = 0 THEN
            RETURN v_claimed;
        END IF;
    END IF;
    IF v_expired > 0 AND (v_held > 0 OR v_released = 0) THEN
        RAISE EXCEPTION 'stockpool.claim: a hold of checkout % has expired; nothing was claimed', p_checkout_id
            USING ERRCODE = 'SP004',
                  HINT = 'Reserve again; the expired units may have been sold to someone else.';
    END IF;
    IF v_held = 0 THEN
        RAISE EXCEPTION 'stockpool.claim: checkout % was released; nothing to claim', p_checkout_id
            USING ERRCODE = 'SP005',
                  HINT = 'Reserve again before claiming.';
    END IF;

    v_fold := pg_catalog.current_setting('transaction_isolation') = 'read committed';
    FOR v_i IN 1..v_held LOOP
        -- A key without a pool (its buyers do not meet): fold at once when
        -- the row is free. A pooled key: a pending claim, and one claim in
        -- c_batch (by its checkout id's hash: no shared row is read or
        -- written to pick it) tries to fold the key's pending claims, so
        -- that its ledger row takes about one update per c_batch claims.
        v_folded := CASE WHEN v_fold AND NOT v_pooled[v_i] THEN
            stockpool._settle(p_shop_id, v_item_ids[v_i], v_location_ids[v_i], false,
                              p_checkout_id, v_quantities[v_i])
        END;
        IF v_folded IS NULL THEN
            INSERT INTO stockpool.pending_claims
                (shop_id, item_id, location_id, checkout_id, quantity)
            VALUES
                (p_shop_id, v_item_ids[v_i], v_location_ids[v_i], p_checkout_id, v_quantities[v_i]);
            IF v_fold AND v_pooled[v_i] AND pg_catalog.uuid_hash(p_checkout_id) % c_batch = 0 THEN
                PERFORM stockpool._settle(p_shop_id, v_item_ids[v_i], v_location_ids[v_i], false);
            END IF;
        END IF;
        v_claimed := v_claimed + v_quantities[v_i];
    END LOOP;

    -- The clock, not the transaction's start: lines reserved after this
    -- claim (under the same checkout lock) get a later created_at.
    UPDATE stockpool.holds AS h
    SET status = 'claimed',
        updated_at = pg_catalog.clock_timestamp()
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.status = 'held';

    FOR v_i IN 1..v_held LOOP
        PERFORM stockpool._tally_claim();
    END LOOP;
    RETURN v_claimed;
END;
$function$;

COMMENT ON FUNCTION stockpool.claim(bigint, uuid) IS
'Payment succeeded: turn the checkout''s live holds into deductions of on hand, all or nothing; never waits for a ledger row '
'(a busy key''s deduction is recorded as a pending claim and folded by the next transaction to find the row free). '
'Returns the units claimed by the checkout; a retry returns the same number and claims nothing twice. '
'SQLSTATEs: 22004 NULL argument, SP003 unknown checkout, SP004 hold expired, SP005 checkout released.';
