-- _cool: hand a quiet key's pool back to its ledger row. A key is quiet when
-- its pool has not been refilled for p_quiet: since a refill comes when a
-- quarter of the pool's level was given out, its buyers took less than that
-- in all that time, and its ledger row serves them (see _take_ledger).
-- Locks: the key's refill lock (try), its ledger row (SKIP LOCKED), its pool
-- rows (SKIP LOCKED): never waits by design (called by _cool_quiet, a step
-- of _maintain_step, docs/locking.md, "SKIP LOCKED can wait"). Units locked by an in-flight reservation
-- stay in the pool (they become a hold, or come back on rollback); the key
-- stays marked pooled until a later sweep finds none.
-- Returns the units handed back. Touches stock, pool_units.
CREATE OR REPLACE FUNCTION stockpool._cool(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quiet interval
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_stock stockpool.stock;
    v_units integer;
    v_left boolean;
BEGIN
    IF NOT pg_catalog.pg_try_advisory_xact_lock(
            stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id)) THEN
        RETURN 0;
    END IF;
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND OR v_stock.pool_target = 0
        OR v_stock.refilled_at > pg_catalog.now() - p_quiet THEN
        RETURN 0;
    END IF;

    WITH picked AS (
        SELECT u.ctid AS row_id
        FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM stockpool.pool_units AS d
    USING picked
    WHERE d.shop_id = p_shop_id
        AND d.ctid = picked.row_id;
    GET DIAGNOSTICS v_units = ROW_COUNT;

    v_left := EXISTS (
        SELECT FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
    );
    UPDATE stockpool.stock AS s
    SET allocated = s.allocated - v_units,
        pool_target = CASE WHEN v_left THEN s.pool_target ELSE 0 END,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    RETURN v_units;
END;
$function$;

COMMENT ON FUNCTION stockpool._cool(bigint, bigint, bigint, interval) IS
'Internal: hand a quiet key''s pool back to its ledger row (try-locks and SKIP LOCKED only).';
