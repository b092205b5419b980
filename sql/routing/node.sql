-- routing/node.sql: what a data node behind a PL/Proxy router has beyond a
-- single server's install. `stockpool deploy --dsn ROUTER --nodes ...` applies
-- it on every node, as the owner role, after the node's own deploy; a single
-- server never gets it. Re-applying is a no-op.
--
-- Shops hash to 64 logical partitions (stockpool._partition_of, the same
-- function on the router); stockpool.node_partitions lists the partitions
-- this node serves. Every routed call runs
--     SELECT stockpool.<function>(...) FROM stockpool._owns_shop(p_shop_id)
-- so a call that reaches a node that does not (or no longer) serve the
-- shop's partition is refused with SP020 before the function runs: a
-- router whose partition map is stale by a few milliseconds, or a move in
-- progress, can never make a shop live on two nodes.

CREATE TABLE IF NOT EXISTS stockpool.node_partitions (
    partition integer NOT NULL,
    owned_since timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT node_partitions_pkey PRIMARY KEY (partition),
    CONSTRAINT node_partitions_range CHECK (partition >= 0 AND partition < 64)
);

COMMENT ON TABLE stockpool.node_partitions IS
'The logical partitions (0..63) whose shops this node serves; written only by the router''s deploy and move.';

-- _owns_shop: the guard of every routed call. Returns (one row, nothing in
-- it) when this node serves the shop's partition; raises SP020 otherwise.
-- A NULL shop passes, so that the API function raises its own 22004.
-- Reads one row of node_partitions; takes no lock a writer waits for.
CREATE OR REPLACE FUNCTION stockpool._owns_shop(p_shop_id bigint)
RETURNS void
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_partition integer := stockpool._partition_of(p_shop_id);
BEGIN
    IF p_shop_id IS NULL THEN
        RETURN;
    END IF;
    PERFORM FROM stockpool.node_partitions AS np WHERE np.partition = v_partition;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'shop % (partition %) is not served by this node now', p_shop_id, v_partition
            USING ERRCODE = 'SP020',
                  HINT = 'Its partition is moving to another node or has just moved: retry the call shortly.';
    END IF;
END;
$function$;

COMMENT ON FUNCTION stockpool._owns_shop(bigint) IS
'Internal: guard of a routed call; SP020 when this node does not serve the shop''s partition.';

-- _misplaced: the router's extra invariant, `placement`: every stock key,
-- hold and movement of a shop whose partition this node does not serve.
-- Empty on a healthy node (during a move, the source's rows until the
-- move's clean-up). Reads stock, holds and movements.
CREATE OR REPLACE FUNCTION stockpool._misplaced()
RETURNS TABLE (
    shop_id bigint,
    item_id bigint,
    location_id bigint,
    invariant text,
    detail text
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
    WITH rows_by_key AS (
        SELECT s.shop_id, s.item_id, s.location_id, 'ledger row' AS what
        FROM stockpool.stock AS s
        UNION ALL
        SELECT DISTINCT h.shop_id, h.item_id, h.location_id, 'holds'
        FROM stockpool.holds AS h
        UNION ALL
        SELECT DISTINCT m.shop_id, m.item_id, m.location_id, 'movements'
        FROM stockpool.movements AS m
    )

    SELECT
        r.shop_id,
        r.item_id,
        r.location_id,
        'placement',
        pg_catalog.format(
            '%s of partition %s on a node that does not serve it',
            r.what, stockpool._partition_of(r.shop_id)
        )
    FROM rows_by_key AS r
    WHERE NOT EXISTS (
        SELECT FROM stockpool.node_partitions AS np
        WHERE np.partition = stockpool._partition_of(r.shop_id)
    );
$function$;

COMMENT ON FUNCTION stockpool._misplaced() IS
'Internal: the placement invariant of a routed node (rows of shops whose partition it does not serve).';

REVOKE ALL ON TABLE stockpool.node_partitions FROM public;
REVOKE ALL ON FUNCTION stockpool._owns_shop(bigint) FROM public;
REVOKE ALL ON FUNCTION stockpool._misplaced() FROM public;
