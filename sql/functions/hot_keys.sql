-- hot_keys: the p_limit busiest stock keys now, busiest first, with their
-- levels (as stock_levels shows them), pool level, refill activity and live
-- holds; for `stockpool top` and for an operator after an alert.
-- Busiest: a key with a pool before one without (a key gets a pool only when
-- its buyers meet on its ledger row, and gives it back after 60 s without a
-- refill), pooled keys by pool_target, the level the last refill sized to 20
-- s of what the pool gave out (the key's demand as last measured), then by
-- live holds (checkouts holding units of the key now, not overdue). A key
-- with neither is not listed. Nothing is recorded per call to rank keys:
-- the candidates come from the index of pooled keys (stock_pooled_idx) and
-- the live holds (holds_live_key_idx), and only the p_limit chosen are
-- counted through stock_levels.
-- Locks: none an API call waits for (plain reads; STABLE, so it cannot
-- write). Returns (shop_id, item_id, location_id, on_hand, pooled, held,
-- free, unsettled, pool_target, refilled_at, live_holds).
-- Raises 22004 (NULL p_limit), 22023 (p_limit < 1).
-- Touches stock, pool_units, holds, pending_claims (read only).
CREATE OR REPLACE FUNCTION stockpool.hot_keys(
    p_limit integer DEFAULT 20
)
RETURNS TABLE (
    shop_id bigint,
    item_id bigint,
    location_id bigint,
    on_hand integer,
    pooled integer,
    held integer,
    free integer,
    unsettled integer,
    pool_target integer,
    refilled_at timestamptz,
    live_holds integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
BEGIN
    IF p_limit IS NULL THEN
        RAISE EXCEPTION 'stockpool.hot_keys: p_limit must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_limit < 1 THEN
        RAISE EXCEPTION 'stockpool.hot_keys: p_limit must be positive, got %', p_limit
            USING ERRCODE = '22023';
    END IF;

    RETURN QUERY
    WITH live AS (
        SELECT h.shop_id, h.item_id, h.location_id, pg_catalog.count(*)::integer AS holds
        FROM stockpool.holds AS h
        WHERE h.status = 'held'
            AND h.expires_at > pg_catalog.now()
        GROUP BY h.shop_id, h.item_id, h.location_id
    ),

    candidates AS (
        SELECT s.shop_id, s.item_id, s.location_id
        FROM stockpool.stock AS s
        WHERE s.pool_target > 0
        UNION
        SELECT l.shop_id, l.item_id, l.location_id
        FROM live AS l
    ),

    busiest AS (
        SELECT s.shop_id, s.item_id, s.location_id, s.pool_target, s.refilled_at,
               coalesce(l.holds, 0) AS holds
        FROM candidates AS k
        JOIN stockpool.stock AS s
            ON s.shop_id = k.shop_id
            AND s.item_id = k.item_id
            AND s.location_id = k.location_id
        LEFT JOIN live AS l
            ON l.shop_id = k.shop_id
            AND l.item_id = k.item_id
            AND l.location_id = k.location_id
        ORDER BY s.pool_target DESC, holds DESC, s.shop_id, s.item_id, s.location_id
        LIMIT p_limit
    )

    -- OFFSET 0 keeps the planner from pulling the view up into a join, which
    -- would count the units and holds of every key before picking these:
    -- this way each key's are read through its indexes.
    SELECT b.shop_id, b.item_id, b.location_id, v.on_hand, v.pooled, v.held, v.free, v.unsettled,
           b.pool_target, b.refilled_at, b.holds
    FROM busiest AS b
    CROSS JOIN LATERAL (
        SELECT lv.on_hand, lv.pooled, lv.held, lv.free, lv.unsettled
        FROM stockpool.stock_levels AS lv
        WHERE lv.shop_id = b.shop_id
            AND lv.item_id = b.item_id
            AND lv.location_id = b.location_id
        OFFSET 0
    ) AS v
    ORDER BY b.pool_target DESC, b.holds DESC, b.shop_id, b.item_id, b.location_id;
END;
$function$;

COMMENT ON FUNCTION stockpool.hot_keys(integer) IS
'The p_limit busiest stock keys now: pooled keys first by pool_target (their demand as last measured), '
'then by live holds; with on_hand, pooled, held, free, unsettled, pool_target, refilled_at, live_holds. '
'Reads only. SQLSTATEs: 22004 NULL p_limit, 22023 p_limit < 1.';
