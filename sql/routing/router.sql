-- routing/router.sql: the router database's own tables and helpers. The
-- router holds no stock: every API call is a PL/Proxy function (written by
-- src/stockpool/route/functions.py from a node's catalogue) that runs the
-- same call on the node serving the shop's partition. Applied by
-- `stockpool deploy --dsn ROUTER --nodes ...`, as the owner role; re-applying
-- is a no-op.
--
-- The layout: shops hash to 64 logical partitions (_partition_of, the same
-- function the nodes have); partition_map says which node serves each, and
-- whether it is active or moving. The two PL/Proxy clusters (SQL/MED
-- servers stockpool_app and stockpool_ops) list, for partition N, the
-- connection string of partition_map's node for N; deploy and move rewrite
-- both in the transaction that changes the map.

CREATE TABLE IF NOT EXISTS stockpool.nodes (
    node text NOT NULL,
    connstr text NOT NULL,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT nodes_pkey PRIMARY KEY (node),
    CONSTRAINT nodes_connstr_unique UNIQUE (connstr),
    CONSTRAINT nodes_no_password CHECK (connstr !~* 'password')
);

COMMENT ON TABLE stockpool.nodes IS
'Data nodes: a name (host:port/dbname) and a libpq connection string without user or password (those are the user mappings'').';

CREATE TABLE IF NOT EXISTS stockpool.partition_map (
    partition integer NOT NULL,
    node text NOT NULL,
    state text NOT NULL DEFAULT 'active',
    moving_to text,
    changed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT partition_map_pkey PRIMARY KEY (partition),
    CONSTRAINT partition_map_range CHECK (partition >= 0 AND partition < 64),
    CONSTRAINT partition_map_state_known CHECK (state IN ('active', 'moving')),
    CONSTRAINT partition_map_moving_has_target CHECK ((state = 'moving') = (moving_to IS NOT NULL)),
    CONSTRAINT partition_map_node_fkey FOREIGN KEY (node) REFERENCES stockpool.nodes (node),
    CONSTRAINT partition_map_moving_to_fkey FOREIGN KEY (moving_to) REFERENCES stockpool.nodes (node)
);

COMMENT ON TABLE stockpool.partition_map IS
'Which node serves each of the 64 logical partitions; a moving partition''s calls are refused (SP020) until the move switches it.';

CREATE TABLE IF NOT EXISTS stockpool.moves (
    move_id bigint GENERATED ALWAYS AS IDENTITY,
    partition integer NOT NULL,
    from_node text NOT NULL,
    to_node text NOT NULL,
    phase text NOT NULL DEFAULT 'fencing',
    started_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    switched_at timestamptz,
    finished_at timestamptz,
    rows_copied bigint,
    CONSTRAINT moves_pkey PRIMARY KEY (move_id),
    CONSTRAINT moves_phase_known CHECK (phase IN ('fencing', 'switched', 'done'))
);

CREATE UNIQUE INDEX IF NOT EXISTS moves_one_unfinished_per_partition
ON stockpool.moves (partition) WHERE phase <> 'done';

COMMENT ON TABLE stockpool.moves IS
'Partition moves: fencing (calls refused, rows being copied), switched (the target serves it; the source''s copy is being removed), done.';

-- _route: the PL/Proxy RUN ON function of every call that names a shop.
-- Returns the shop's partition number (PL/Proxy masks it with 63 and runs
-- the call on that partition's connection) when the partition is active;
-- raises SP020 while it moves, and 22004 for a NULL shop (as the nodes do).
-- Reads one row of partition_map in the caller's snapshot; no lock.
CREATE OR REPLACE FUNCTION stockpool._route(p_shop_id bigint)
RETURNS integer
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_partition integer := stockpool._partition_of(p_shop_id);
    v_state text;
BEGIN
    IF p_shop_id IS NULL THEN
        RAISE EXCEPTION 'p_shop_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT pm.state INTO v_state FROM stockpool.partition_map AS pm WHERE pm.partition = v_partition;
    IF v_state IS DISTINCT FROM 'active' THEN
        RAISE EXCEPTION 'shop % (partition %) is moving to another node', p_shop_id, v_partition
            USING ERRCODE = 'SP020',
                  HINT = 'Retry the call shortly: a move refuses its partition''s calls only while it copies.';
    END IF;
    RETURN v_partition;
END;
$function$;

COMMENT ON FUNCTION stockpool._route(bigint) IS
'Internal: the partition a routed call runs on; SP020 while it moves, 22004 for a NULL shop.';

-- _unreachable: called by every routed API function when PL/Proxy itself
-- failed (SQLSTATE XX000; a node's own errors arrive with their own
-- SQLSTATE and never come here). A failure to connect to, or a lost
-- connection with, a node becomes 08006 (connection_failure), which the
-- client's retry rules treat as a lost connection. The message names the
-- function and the node's database, never a password: the partitions'
-- connection strings carry none (the user mappings do).
CREATE OR REPLACE FUNCTION stockpool._unreachable(p_message text)
RETURNS void
LANGUAGE plpgsql
AS $function$
BEGIN
    IF p_message !~ ' REMOTE '
        AND p_message ~ '(connect|PQ|poll|Lost result|Unfinished connection|query timeout|server closed)' THEN
        RAISE EXCEPTION 'a stockpool node cannot be reached: %', p_message
            USING ERRCODE = '08006',
                  HINT = 'Its shops'' calls fail until it is back; other nodes'' shops are unaffected.';
    END IF;
    RAISE EXCEPTION '%', p_message USING ERRCODE = 'XX000';
END;
$function$;

COMMENT ON FUNCTION stockpool._unreachable(text) IS
'Internal: a PL/Proxy failure as 08006 when a node cannot be reached (XX000 otherwise).';

REVOKE ALL ON TABLE stockpool.nodes, stockpool.partition_map, stockpool.moves FROM public;
REVOKE ALL ON FUNCTION stockpool._route(bigint) FROM public;
