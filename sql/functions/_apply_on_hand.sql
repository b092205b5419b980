-- _apply_on_hand: set a key's on_hand to an absolute value or by a delta,
-- creating the key when absolute, and record the movement.
-- When on_hand falls below what is allocated (pool + holds), pool units
-- are taken back first (SKIP LOCKED: a unit locked by an in-flight reserve is
-- about to become a hold, or to come back, and is counted either way). If
-- that is not enough, the key's overdue holds are expired (they are not live,
-- swept or not; SKIP LOCKED) and their units taken back too. If live holds
-- still need more than the new on_hand, nothing changes and SP002 is raised.
-- Pending claims of the key are folded first (stockpool._settle), so on_hand
-- here is the true figure.
-- Holds it expires are counted (_tally_expiry) once the change is made.
-- Locks: the key's refill advisory lock, then the ledger row (the same order
-- as refills); never waits on pool rows or hold rows (both SKIP LOCKED). The
-- overdue holds' expiry (_expire_overdue_tried) gives up after 50 ms of
-- waiting, in PostgreSQL's SKIP LOCKED race, as if every overdue hold were
-- locked (SP002 unless the rest suffices).
-- Raises 22003 (result beyond integer), 22023 (negative result), SP001
-- (relative change of an unknown key), SP002 (below live holds), SP010 (a
-- named key: its units come and go with set_named_units and
-- retire_named_units).
-- Returns the new on_hand. Touches stock, pool_units, holds, pending_claims,
-- movements.
CREATE OR REPLACE FUNCTION stockpool._apply_on_hand(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_value bigint,
    p_relative boolean
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_target bigint;
    v_taken integer;
    v_expired integer;
    v_expired_holds integer := 0;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(
        stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));

    -- The true figure first: fold every committed pending claim (waiting
    -- for the ledger row). A claim that commits later is folded later, as
    -- if it had come after this change, which is when it committed.
    PERFORM stockpool._settle(p_shop_id, p_item_id, p_location_id, true);

    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE;

    IF NOT FOUND THEN
        IF p_relative THEN
            PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
        END IF;
        INSERT INTO stockpool.stock (shop_id, item_id, location_id, on_hand)
        VALUES (p_shop_id, p_item_id, p_location_id, p_value::integer);
        IF p_value <> 0 THEN
            INSERT INTO stockpool.movements
                (shop_id, item_id, location_id, delta, on_hand_after, reason)
            VALUES (p_shop_id, p_item_id, p_location_id, p_value::integer, p_value::integer, 'set');
        END IF;
        RETURN p_value::integer;
    END IF;

    IF v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, true);
    END IF;

    v_target := CASE WHEN p_relative THEN v_stock.on_hand + p_value ELSE p_value END;
    IF v_target > 2147483647 THEN
        RAISE EXCEPTION 'on hand of (shop %, item %, location %) would be %, beyond integer',
            p_shop_id, p_item_id, p_location_id, v_target
            USING ERRCODE = '22003';
    END IF;
    IF v_target < 0 THEN
        RAISE EXCEPTION 'on hand of (shop %, item %, location %) would be negative (%)',
            p_shop_id, p_item_id, p_location_id, v_target
            USING ERRCODE = '22023';
    END IF;
    IF v_target = v_stock.on_hand THEN
        RETURN v_stock.on_hand;
    END IF;

    IF v_target < v_stock.allocated THEN
        WITH picked AS (
            SELECT u.ctid AS row_id
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
            LIMIT v_stock.allocated - v_target
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM stockpool.pool_units AS d
        USING picked
        WHERE d.shop_id = p_shop_id
            AND d.ctid = picked.row_id;
        GET DIAGNOSTICS v_taken = ROW_COUNT;
        v_stock.allocated := v_stock.allocated - v_taken;
        -- Overdue holds next (_expire_overdue_tried, SKIP LOCKED). Their
        -- units leave allocated as far as the new on_hand needs; any surplus
        -- goes back to the pool (or, for a key without one, stays free on
        -- the ledger row).
        IF v_target < v_stock.allocated THEN
            SELECT e.units, e.holds INTO v_expired, v_expired_holds
            FROM stockpool._expire_overdue_tried(p_shop_id, p_item_id, p_location_id) AS e;
            v_taken := LEAST(v_expired, v_stock.allocated - v_target);
            IF v_stock.pool_target = 0 THEN
                -- No pool: the surplus is free on this row, which we hold.
                v_stock.allocated := v_stock.allocated - v_expired;
            ELSE
                v_stock.allocated := v_stock.allocated - v_taken;
                PERFORM stockpool._add_units(p_shop_id, p_item_id, p_location_id,
                                             v_expired - v_taken, v_stock.buckets);
            END IF;
        END IF;
        IF v_target < v_stock.allocated THEN
            RAISE EXCEPTION 'on hand of (shop %, item %, location %) cannot go below % units held by live holds or in-flight reservations (asked %)',
                p_shop_id, p_item_id, p_location_id, v_stock.allocated, v_target
                USING ERRCODE = 'SP002',
                      HINT = 'Wait for holds to be claimed, released or to expire, then retry.';
        END IF;
    END IF;

    UPDATE stockpool.stock AS s
    SET on_hand = v_target::integer,
        allocated = v_stock.allocated,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;

    INSERT INTO stockpool.movements
        (shop_id, item_id, location_id, delta, on_hand_after, reason)
    VALUES (p_shop_id, p_item_id, p_location_id, (v_target - v_stock.on_hand)::integer,
            v_target::integer, CASE WHEN p_relative THEN 'adjust' ELSE 'set' END);

    FOR v_i IN 1..v_expired_holds LOOP
        PERFORM stockpool._tally_expiry();
    END LOOP;
    RETURN v_target::integer;
END;
$function$;

COMMENT ON FUNCTION stockpool._apply_on_hand(bigint, bigint, bigint, bigint, boolean) IS
'Internal: shared body of set_stock and adjust_stock.';
