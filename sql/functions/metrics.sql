-- metrics: stockpool's figures, one row per figure, for an exporter (the
-- monitor role's; docs/metrics.md lists every row and what it means).
-- Gauges are read from stockpool's tables (stock_levels, holds,
-- pending_claims, check_invariants) and PostgreSQL's statistics (the pool
-- leaves' dead tuples and vacuums, the tables' xid age, pg_stat_activity of
-- this database). Counters are PostgreSQL's own call counts of the
-- _tally_* functions, and of reserve_units for reservations_total
-- (pg_stat_user_functions, kept when track_functions is 'pl' or 'all'),
-- plus this transaction's calls not flushed yet: nothing on an API path
-- writes a counter. A counter only goes down when an operator
-- resets the statistics (pg_stat_reset), which Prometheus takes as a reset.
-- Sessions are read as the owner role, which the deployer makes a member of
-- pg_read_all_stats; without it other roles' sessions show state 'unknown'
-- and no transaction times.
-- Locks: none an API call waits for: plain reads (ACCESS SHARE on the
-- tables, no row locks, no advisory locks); STABLE, so it cannot write.
-- Cost: a pass over every ledger row, pool unit, live hold and pending
-- claim, and check_invariants' pass over the movements.
-- Returns (metric, kind, relation, application_name, state, value); kind is
-- 'gauge' or 'counter'; a label a figure does not have is ''.
-- Raises nothing of its own. Touches stock, pool_units, holds,
-- pending_claims, movements (read only).
CREATE OR REPLACE FUNCTION stockpool.metrics()
RETURNS TABLE (
    metric text,
    kind text,
    relation text,
    application_name text,
    state text,
    value double precision
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
    WITH levels AS (
        SELECT pg_catalog.count(*) AS keys,
               coalesce(pg_catalog.sum(l.on_hand), 0) AS on_hand,
               coalesce(pg_catalog.sum(l.pooled), 0) AS pooled,
               coalesce(pg_catalog.sum(l.held), 0) AS held,
               coalesce(pg_catalog.sum(l.unsettled), 0) AS unsettled,
               pg_catalog.count(*) FILTER (WHERE s.pool_target > 0) AS pools,
               pg_catalog.count(*) FILTER (WHERE s.pool_target > 0 AND l.pooled = 0 AND l.free > 0) AS dry
        FROM stockpool.stock_levels AS l
        JOIN stockpool.stock AS s
            ON s.shop_id = l.shop_id
            AND s.item_id = l.item_id
            AND s.location_id = l.location_id
    ),

    live AS (
        SELECT pg_catalog.count(*) FILTER (WHERE h.expires_at > pg_catalog.now()) AS holds,
               pg_catalog.count(*) FILTER (WHERE h.expires_at <= pg_catalog.now()) AS overdue,
               pg_catalog.min(h.expires_at) FILTER (WHERE h.expires_at <= pg_catalog.now()) AS oldest_due
        FROM stockpool.holds AS h
        WHERE h.status = 'held'
    ),

    pending AS (
        SELECT pg_catalog.count(*) AS claims,
               pg_catalog.min(c.claimed_at) AS oldest
        FROM stockpool.pending_claims AS c
    ),

    -- A counter is the calls of its functions (minus those of any in
    -- less): reservations_total is the other reserving functions' new holds
    -- (_tally_reservation) plus reserve_units' calls that returned, minus
    -- those that recorded no new hold (see _tally_no_new_hold).
    counters AS (
        SELECT c.ord, c.metric, c.fns, c.less
        FROM (
            VALUES (14, 'reservations_total',
                    ARRAY['stockpool._tally_reservation()'::regprocedure,
                          -- looked up when read: the deployer creates metrics first
                          pg_catalog.to_regprocedure(
                              'stockpool.reserve_units(bigint, bigint, bigint, integer, uuid, interval)')],
                    ARRAY['stockpool._tally_no_new_hold()'::regprocedure]),
                   (15, 'refusals_total', ARRAY['stockpool._tally_refusal()'::regprocedure], '{}'),
                   (16, 'claims_total', ARRAY['stockpool._tally_claim()'::regprocedure], '{}'),
                   (17, 'releases_total', ARRAY['stockpool._tally_release()'::regprocedure], '{}'),
                   (18, 'expiries_total', ARRAY['stockpool._tally_expiry()'::regprocedure], '{}'),
                   (19, 'refills_total', ARRAY['stockpool._tally_refill()'::regprocedure], '{}'),
                   (20, 'maintenance_yields_total', ARRAY['stockpool._tally_maintenance_yield()'::regprocedure], '{}')
        ) AS c (ord, metric, fns, less)
    ),

    tables AS (
        SELECT c.oid, c.relname::text AS relname, c.reltoastrelid, c.relfrozenxid,
               t.relid IN (
                   SELECT p.relid
                   FROM pg_catalog.pg_partition_tree('stockpool.pool_units'::regclass) AS p
                   WHERE p.isleaf
               ) AS pool_leaf,
               t.n_live_tup, t.n_dead_tup,
               GREATEST(t.last_vacuum, t.last_autovacuum) AS vacuumed
        FROM pg_catalog.pg_class AS c
        JOIN pg_catalog.pg_stat_all_tables AS t
            ON t.relid = c.oid
        WHERE c.relnamespace = 'stockpool'::regnamespace
            AND c.relkind = 'r'
    ),

    sessions AS (
        SELECT coalesce(a.application_name, '') AS app,
               coalesce(a.state, 'unknown') AS state,
               pg_catalog.clock_timestamp() - a.xact_start AS in_transaction,
               CASE WHEN a.state LIKE 'idle in transaction%'
                   THEN pg_catalog.clock_timestamp() - a.state_change
               END AS idle_in_transaction
        FROM pg_catalog.pg_stat_activity AS a
        WHERE a.datid = (SELECT d.oid FROM pg_catalog.pg_database AS d WHERE d.datname = pg_catalog.current_database())
            AND coalesce(a.backend_type, 'client backend') = 'client backend'
    )

    -- Rows in the order of docs/metrics.md; a figure's rows by label.
    SELECT r.metric, r.kind, r.relation, r.application_name, r.state, r.value
    FROM (
        SELECT g.ord, g.metric, 'gauge' AS kind, '' AS relation, '' AS application_name, '' AS state,
               g.value::double precision AS value
        FROM levels AS l, live AS h, pending AS c,
            LATERAL (
                VALUES (1, 'stock_keys', l.keys),
                       (2, 'stock_on_hand_units', l.on_hand),
                       (3, 'stock_pooled_units', l.pooled),
                       (4, 'stock_held_units', l.held),
                       (5, 'stock_unsettled_units', l.unsettled),
                       (6, 'pools_active', l.pools),
                       (7, 'pools_dry_with_free_stock', l.dry),
                       (8, 'holds_live', h.holds),
                       (9, 'holds_overdue', h.overdue),
                       (10, 'holds_oldest_overdue_seconds',
                        coalesce(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp() - h.oldest_due), 0)),
                       (11, 'pending_claims', c.claims),
                       (12, 'pending_claims_oldest_seconds',
                        GREATEST(coalesce(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp() - c.oldest), 0), 0)),
                       (13, 'invariant_violations', (SELECT pg_catalog.count(*) FROM stockpool.check_invariants()))
            ) AS g (ord, metric, value)
        UNION ALL
        SELECT c.ord, c.metric, 'counter', '', '', '',
               (SELECT pg_catalog.sum(CASE WHEN f.fn = ANY (c.less) THEN -1 ELSE 1 END
                                      * (coalesce(pg_catalog.pg_stat_get_function_calls(f.fn), 0)
                                         + coalesce(pg_catalog.pg_stat_get_xact_function_calls(f.fn), 0)))
                FROM pg_catalog.unnest(c.fns || c.less) AS f (fn))::double precision
        FROM counters AS c
        UNION ALL
        SELECT 21, 'track_functions_enabled', 'gauge', '', '', '',
               CASE WHEN pg_catalog.current_setting('track_functions') = 'none' THEN 0 ELSE 1 END
        UNION ALL
        SELECT 22, 'pool_dead_ratio', 'gauge', t.relname, '', '',
               CASE WHEN t.n_live_tup + t.n_dead_tup > 0
                   THEN t.n_dead_tup::double precision / (t.n_live_tup + t.n_dead_tup)
                   ELSE 0
               END
        FROM tables AS t
        WHERE t.pool_leaf
        UNION ALL
        SELECT 23, 'pool_last_vacuum_seconds', 'gauge', t.relname, '', '',
               coalesce(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp() - t.vacuumed), -1)
        FROM tables AS t
        WHERE t.pool_leaf
        UNION ALL
        SELECT 24, 'table_xid_age', 'gauge', t.relname, '', '',
               GREATEST(pg_catalog.age(t.relfrozenxid),
                        (SELECT pg_catalog.age(x.relfrozenxid) FROM pg_catalog.pg_class AS x
                         WHERE x.oid = t.reltoastrelid))
        FROM tables AS t
        UNION ALL
        SELECT 25, 'sessions', 'gauge', '', s.app, s.state, pg_catalog.count(*)
        FROM sessions AS s
        GROUP BY s.app, s.state
        UNION ALL
        SELECT m.ord, m.metric, 'gauge', '', a.app, '', m.value
        FROM (
            SELECT s.app,
                   coalesce(EXTRACT(EPOCH FROM pg_catalog.max(s.in_transaction)), 0) AS in_transaction,
                   coalesce(EXTRACT(EPOCH FROM pg_catalog.max(s.idle_in_transaction)), 0) AS idle_in_transaction
            FROM sessions AS s
            GROUP BY s.app
        ) AS a,
            LATERAL (
                VALUES (26, 'longest_transaction_seconds', a.in_transaction),
                       (27, 'longest_idle_in_transaction_seconds', a.idle_in_transaction)
            ) AS m (ord, metric, value)
    ) AS r
    ORDER BY r.ord, r.relation, r.application_name, r.state;
$function$;

COMMENT ON FUNCTION stockpool.metrics() IS
'stockpool''s figures for an exporter, one row each: (metric, kind, relation, application_name, state, value); '
'kind gauge or counter, '''' for a label a figure lacks. docs/metrics.md lists them. Counters are '
'PostgreSQL''s call counts of stockpool''s _tally_* functions (and reserve_units'') and need track_functions = pl '
'(track_functions_enabled). '
'Reads only, takes no lock an API call waits for. SQLSTATEs: none of its own.';
