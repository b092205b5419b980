-- _refill: move free units (on_hand - allocated) of a key into its pool.
-- How full: p_cap when given (replenish_pool); otherwise the key's demand.
-- A key gets a pool only once its buyers meet (its ledger row was busy when
-- one of them came, see _take_ledger), and the first one is small: 16
-- units. After that the level is 20 seconds of what the pool gave out since
-- the previous refill (units taken / seconds elapsed), at most twice the
-- previous level (a rush ramps up over a few refills instead of one huge
-- insert), never below 16 nor above 262,144 units. Demand is measured only
-- once the pool is down to its mark: a refill of a pool above it (a buyer
-- found every unit it looked at being taken) adds the shortfall and keeps
-- the level. Units that transactions in flight are taking count as given
-- out, not as pooled (stockpool._pooled_upto). A key that stays hot
-- gets a pool large enough that hundreds of concurrent claimers rarely meet
-- on a unit, that refills stay seconds apart, and that the dead tuples
-- claims leave between two autovacuum visits stay a small share of its
-- partition; one that cools down is handed back to its ledger row by
-- stockpool._cool. pool_cap is the level replenish_pool() fills to (an
-- operator's pre-fill before a drop), not a floor of these refills. The
-- level and the time are kept on the ledger row (pool_target, refilled_at)
-- for the next refill's measurement, and the key's buckets setting is
-- raised with the level (one per 128 units, at most 1,024), so that a large
-- pool stays spread. A reservation that needs units now gets at least
-- p_min_extra beyond what is pooled.
-- p_wait false: try the key's refill lock and give up at once if another
-- transaction is refilling (no buyer queues on a refill it does not need).
-- p_low_water_only: do nothing while more than the refill mark are pooled
-- (stockpool._refill_mark, the one low-water rule).
-- That check must stay cheap on a pool of 100,000 units: it counts no
-- further than the mark needs (stockpool._pooled_upto).
-- Locks, in this order: the key's transaction-scoped advisory lock, then,
-- only when the pool is below its mark, the ledger row FOR NO KEY UPDATE
-- (waiting; the key's pending claims are folded under it); both held to
-- commit. Cost is independent of the number of holds (allocated is a
-- counter); a check that finds the pool above its mark writes nothing.
-- Returns units added. Not counted here: a caller whose subtransaction may
-- roll the refill back counts it (_tally_refill) once it stands.
-- Touches stock, pool_units, pending_claims, movements.
CREATE OR REPLACE FUNCTION stockpool._refill(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_min_extra integer,
    p_wait boolean,
    p_low_water_only boolean,
    p_cap integer DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    -- Seconds of demand a pool holds, and the most it holds (the least: _pool_level).
    c_pool_seconds constant numeric := 20;
    c_pool_max constant integer := 262144;
    v_stock stockpool.stock;
    v_level integer;
    v_mark integer;
    v_pooled integer;
    v_seconds numeric;
    v_target integer;
    v_buckets integer;
    v_add integer;
BEGIN
    -- Cheap unlocked look first: nothing free means nothing to queue for.
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND OR v_stock.on_hand - v_stock.allocated <= 0 THEN
        RETURN 0;
    END IF;

    IF p_wait THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(
            stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));
    ELSIF NOT pg_catalog.pg_try_advisory_xact_lock(
            stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id)) THEN
        RETURN 0;
    END IF;

    -- Count what is pooled before touching the ledger row, never more
    -- entries than the decision needs.
    v_level := stockpool._pool_level(v_stock.pool_target);
    v_mark := stockpool._refill_mark(v_level, v_stock.low_water, v_stock.pool_cap);
    IF p_low_water_only
        AND stockpool._pooled_upto(p_shop_id, p_item_id, p_location_id, v_mark, v_stock.buckets) > v_mark THEN
        RETURN 0;
    END IF;
    -- What the refill is sized by is counted exactly: above 4,096 units the
    -- low-water check estimates from one bucket, and an estimate that came
    -- out low would read as demand (the level minus what is left) and fill
    -- the pool far past it. Units being taken by transactions still in
    -- flight are not counted (see _pooled_upto): they are demand.
    SELECT pg_catalog.count(*)::integer INTO v_pooled
    FROM (
        SELECT 1
        FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
            AND u.xmax = '0'::xid
        LIMIT GREATEST(coalesce(p_cap, c_pool_max), p_min_extra)
    ) AS live;
    IF p_low_water_only AND v_pooled > v_mark THEN
        RETURN 0;
    END IF;

    -- The ledger row, and since this transaction holds it now anyway, the
    -- key's pending claims are folded into it (free stock, on_hand minus
    -- allocated, is the same before and after).
    PERFORM stockpool._settle(p_shop_id, p_item_id, p_location_id, true);
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;

    IF p_cap IS NOT NULL THEN
        v_target := p_cap;
    ELSIF v_stock.pool_target = 0 THEN
        -- The key's first pool (its buyers just met, or met again after it
        -- cooled down): small, whatever an old refilled_at would suggest.
        v_target := stockpool._pool_level(0);
    ELSE
        v_level := stockpool._pool_level(v_stock.pool_target);
        v_mark := stockpool._refill_mark(v_level, v_stock.low_water, v_stock.pool_cap);
        v_seconds := EXTRACT(EPOCH FROM pg_catalog.now() - v_stock.refilled_at);
        -- Demand is measured once the pool has come down to its mark. A
        -- buyer that found no free unit in a pool above it (every unit it
        -- looked at was being taken) gets its shortfall, and the level stays:
        -- a few units taken over a long time would read as a demand that
        -- shrinks a rush's pool to nothing.
        IF v_seconds > 0 AND v_pooled <= v_mark THEN
            -- What the pool gave out since it was filled to v_level, per second.
            v_target := LEAST((v_level - v_pooled) / v_seconds * c_pool_seconds,
                              2::numeric * v_level, c_pool_max)::integer;
            v_target := stockpool._pool_level(v_target);
        ELSE
            v_target := v_level;
        END IF;
    END IF;

    v_add := LEAST(
        v_stock.on_hand - v_stock.allocated,
        GREATEST(v_target - v_pooled, p_min_extra)
    );
    IF v_add <= 0 THEN
        RETURN 0;
    END IF;

    -- Spreading grows with the pool: one bucket per 128 units of the level
    -- (never fewer than the key's setting, at most 1,024). Otherwise each
    -- bucket of a large pool is a long run of units whose first index leaf
    -- every claimer of that bucket reads: never unpinned under hundreds of
    -- clients, and vacuum needs a cleanup lock on every leaf, so it waited
    -- seconds for them while dead tuples piled up. Raised, never lowered.
    v_buckets := GREATEST(v_stock.buckets, LEAST(1024, v_target / 128));

    PERFORM stockpool._add_units(p_shop_id, p_item_id, p_location_id, v_add, v_buckets);

    UPDATE stockpool.stock AS s
    SET allocated = s.allocated + v_add,
        pool_target = v_target,
        buckets = v_buckets,
        refilled_at = pg_catalog.now(),
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;

    RETURN v_add;
END;
$function$;

COMMENT ON FUNCTION stockpool._refill(bigint, bigint, bigint, integer, boolean, boolean, integer) IS
'Internal: top a key''s pool up from free stock, sized by its demand, under its advisory refill lock.';
