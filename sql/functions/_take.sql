-- _take: claim up to p_quantity free pool units of a key and delete them.
-- Locks: FOR UPDATE SKIP LOCKED on pool rows, never waits. Claimers start at
-- a random bucket (bucket >= start, then bucket < start) so that they do not
-- all read the same index leaf and heap pages; claimed rows are deleted, not
-- updated, so no version chain is left for the next claimer to follow.
-- Returns the number of units taken (0..p_quantity). Touches pool_units.
--
-- One unit (every reservation of one unit) goes straight to the key's leaf
-- partition. A statement on the partitioned parent costs a reservation
-- dearly in PostgreSQL 15: planned per call, because the planner prices a
-- generic plan with every leaf in it above a custom plan pruned to one leaf;
-- or, with a forced generic plan, every leaf is locked at each execution
-- (run-time pruning comes after locking), which overflows the backend's 16
-- fast-path lock slots and sends every lock of the transaction through the
-- shared lock table (LWLock:LockManager at hundreds of clients). Naming the
-- leaf, a statement has one cached plan and locks one table and its index.
-- The leaf of a shop is found with PostgreSQL's hash-partition routing
-- (hashint8extended with the partition seed, then the remainder), and the
-- function is generated below from the partitions that exist, so it follows
-- them; the generator checks the routing against satisfies_hash_partition()
-- and, should it ever disagree (or the leaves not share one power-of-two
-- modulus), generates the same claim on the parent table instead, with
-- forced generic plans.
-- Several units are planned per call for their values (EXECUTE), so the plan
-- is pruned to the key's leaf and sized for p_quantity.
DO $generate$
DECLARE
    -- PostgreSQL's HASH_PARTITION_SEED, and the constant hash_combine64()
    -- adds when the partition key has one column.
    c_seed constant bigint := 8816678312871386365;
    c_combine constant numeric := 5305509591434766563;
    v_leaves text[];
    v_remainders integer[];
    v_moduli integer[];
    v_modulus integer;
    v_routing text;
    v_direct boolean;
    v_i integer;
    v_claim text;
    v_many text;
    v_one text;
    v_config text := '';
BEGIN
    SELECT pg_catalog.array_agg(c.relname::text ORDER BY m.remainder),
           pg_catalog.array_agg(m.remainder ORDER BY m.remainder),
           pg_catalog.array_agg(m.modulus ORDER BY m.remainder)
    INTO v_leaves, v_remainders, v_moduli
    FROM pg_catalog.pg_inherits AS i
    JOIN pg_catalog.pg_class AS c
        ON c.oid = i.inhrelid
    CROSS JOIN LATERAL (
        SELECT b[1]::integer AS modulus, b[2]::integer AS remainder
        FROM pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                     'modulus (\d+), remainder (\d+)', 'i') AS b
    ) AS m
    WHERE i.inhparent = 'stockpool.pool_units'::pg_catalog.regclass;

    v_modulus := v_moduli[1];
    v_direct := v_leaves IS NOT NULL
        AND pg_catalog.cardinality(v_leaves) = v_modulus
        AND v_modulus & (v_modulus - 1) = 0
        AND NOT EXISTS (SELECT FROM pg_catalog.unnest(v_moduli) AS x (m) WHERE x.m <> v_modulus)
        AND v_remainders = ARRAY(SELECT pg_catalog.generate_series(0, v_modulus - 1));
    IF v_direct THEN
        v_routing := pg_catalog.format(
            '(((pg_catalog.hashint8extended(p_shop_id, %s) & %s) + %s) & %s)::integer',
            c_seed, v_modulus - 1, (c_combine % v_modulus)::integer, v_modulus - 1);
        -- The routing must agree with PostgreSQL's own for every kind of id.
        EXECUTE pg_catalog.format($check$
            SELECT pg_catalog.bool_and(pg_catalog.satisfies_hash_partition(
                       'stockpool.pool_units'::pg_catalog.regclass, %s,
                       %s, s.p_shop_id))
            FROM (
                SELECT g.n::bigint AS p_shop_id FROM pg_catalog.generate_series(-1000, 5000) AS g (n)
                UNION ALL
                SELECT (pg_catalog.random() * 9.2e18 - 4.6e18)::bigint
                FROM pg_catalog.generate_series(1, 2000)
                UNION ALL
                VALUES (9223372036854775807), (-9223372036854775808)
            ) AS s
        $check$, v_modulus, v_routing) INTO v_direct;
    END IF;

    -- One unit from one table (%1$I), starting at bucket v_start; %2$s adds
    -- the leaf's partition key when the table is the parent.
    v_claim := $claim$
        DELETE FROM stockpool.%1$I AS d
        WHERE d.ctid = (
                SELECT u.ctid
                FROM stockpool.%1$I AS u
                WHERE u.shop_id = p_shop_id
                    AND u.item_id = p_item_id
                    AND u.location_id = p_location_id
                    AND u.bucket %3$s v_start
                ORDER BY u.bucket, u.unit_id
                LIMIT 1
                FOR UPDATE SKIP LOCKED
            )%2$s;$claim$;

    -- Several units from the parent, from bucket v_start up (%1$s: >=) or
    -- below it (<), at most %2$s of them; dynamic SQL, planned with the values.
    v_many := $many$
    EXECUTE $sql$
        WITH picked AS (
            SELECT u.ctid AS row_id
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = $1
                AND u.item_id = $2
                AND u.location_id = $3
                AND u.bucket %1$s $4
            ORDER BY u.bucket, u.unit_id
            LIMIT $5
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM stockpool.pool_units AS d
        USING picked
        WHERE d.shop_id = $1
            AND d.ctid = picked.row_id
    $sql$ USING p_shop_id, p_item_id, p_location_id, v_start, %2$s;$many$;

    IF v_direct THEN
        v_one := pg_catalog.format(E'\n    CASE %s', v_routing);
        FOR v_i IN 1..pg_catalog.cardinality(v_leaves) LOOP
            v_one := v_one || pg_catalog.format(E'\n    WHEN %s THEN', v_remainders[v_i])
                || pg_catalog.format(v_claim, v_leaves[v_i], '', '>=')
                || E'\n        IF NOT FOUND AND v_start > 0 THEN'
                || pg_catalog.replace(pg_catalog.format(v_claim, v_leaves[v_i], '', '<'),
                                      E'\n        ', E'\n            ')
                || E'\n        END IF;';
        END LOOP;
        v_one := v_one || E'\n    END CASE;';
    ELSE
        v_config := E'\nSET plan_cache_mode = force_generic_plan';
        v_one := pg_catalog.format(v_claim, 'pool_units', E'\n            AND d.shop_id = p_shop_id', '>=')
            || E'\n    IF NOT FOUND AND v_start > 0 THEN'
            || pg_catalog.format(v_claim, 'pool_units', E'\n            AND d.shop_id = p_shop_id', '<')
            || E'\n    END IF;';
    END IF;

    EXECUTE pg_catalog.format($function$
CREATE OR REPLACE FUNCTION stockpool._take(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_buckets integer
)
RETURNS integer
LANGUAGE plpgsql%1$s
AS $body$
-- Generated by sql/functions/_take.sql from the partitions of
-- stockpool.pool_units (%3$s); read that file, not this body.
DECLARE
    v_start integer := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
    v_got integer;
    v_more integer;
BEGIN
    IF p_quantity = 1 THEN%2$s
        RETURN CASE WHEN FOUND THEN 1 ELSE 0 END;
    END IF;
%4$s
    GET DIAGNOSTICS v_got = ROW_COUNT;

    IF v_got < p_quantity AND v_start > 0 THEN%5$s
        GET DIAGNOSTICS v_more = ROW_COUNT;
        v_got := v_got + v_more;
    END IF;

    RETURN v_got;
END;
$body$
$function$,
        v_config,
        pg_catalog.replace(v_one, E'\n', E'\n    '),
        CASE WHEN v_direct THEN 'one leaf per claim' ELSE 'claims on the parent' END,
        pg_catalog.format(v_many, '>=', 'p_quantity'),
        pg_catalog.replace(pg_catalog.format(v_many, '<', 'p_quantity - v_got'), E'\n', E'\n    '));
END;
$generate$;

COMMENT ON FUNCTION stockpool._take(bigint, bigint, bigint, integer, integer) IS
'Internal: SKIP LOCKED claim of up to n pool units from a random start bucket; deletes them.';
