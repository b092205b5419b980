-- _take_named: take p_quantity free units of a named key, all or none, and
-- delete them from its free units; the caller records the hold.
-- Any units (p_adjacent false): without p_wait, from a random start bucket
-- up, then below it, ORDER BY bucket, position, FOR UPDATE SKIP LOCKED, so
-- concurrent buyers spread over the lowest free positions instead of all
-- fighting for the first; with p_wait, the lowest free positions in
-- position order, waiting for units locked by in-flight transactions (the
-- near-sellout path: a unit whose locker rolls back is not sold out).
-- One block (p_adjacent): p_quantity consecutive free positions (a gap
-- breaks a block). The block starts are read without a lock, in position
-- order; without p_wait one of the first 16 is tried first at random, then
-- the others in order, each SKIP LOCKED; with p_wait every start in
-- position order, waiting. A block found short (a unit taken meanwhile) is
-- given back by rolling back its subtransaction before the next is tried.
-- Locks: named_free rows FOR UPDATE (SKIP LOCKED without p_wait), in
-- position order when waiting. A caller that waits must hold no named_free
-- row (waits are ordered by position, so waiters cannot close a cycle;
-- SKIP LOCKED takers never wait on these rows).
-- Returns the labels in position order, or NULL with nothing taken.
-- Touches named_free.
CREATE OR REPLACE FUNCTION stockpool._take_named(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_buckets integer,
    p_adjacent boolean,
    p_wait boolean
)
RETURNS text[]
LANGUAGE plpgsql
AS $function$
DECLARE
    -- Block starts looked at without waiting (one picked at random first).
    c_spread constant integer := 16;
    v_start integer := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
    v_taken text[];
    v_more text[];
    v_starts integer[];
    v_n integer;
    v_first integer;
    v_i integer;
BEGIN
    IF NOT p_adjacent THEN
        BEGIN
            IF p_wait THEN
                WITH picked AS (
                    SELECT f.ctid AS row_id
                    FROM stockpool.named_free AS f
                    WHERE f.shop_id = p_shop_id
                        AND f.item_id = p_item_id
                        AND f.location_id = p_location_id
                    ORDER BY f.position
                    LIMIT p_quantity
                    FOR UPDATE
                ),
                taken AS (
                    DELETE FROM stockpool.named_free AS d
                    USING picked
                    WHERE d.ctid = picked.row_id
                    RETURNING d.label, d.position
                )
                SELECT pg_catalog.array_agg(t.label ORDER BY t.position) INTO v_taken
                FROM taken AS t;
            ELSE
                WITH picked AS (
                    SELECT f.ctid AS row_id
                    FROM stockpool.named_free AS f
                    WHERE f.shop_id = p_shop_id
                        AND f.item_id = p_item_id
                        AND f.location_id = p_location_id
                        AND f.bucket >= v_start
                    ORDER BY f.bucket, f.position
                    LIMIT p_quantity
                    FOR UPDATE SKIP LOCKED
                ),
                taken AS (
                    DELETE FROM stockpool.named_free AS d
                    USING picked
                    WHERE d.ctid = picked.row_id
                    RETURNING d.label, d.position
                )
                SELECT pg_catalog.array_agg(t.label ORDER BY t.position) INTO v_taken
                FROM taken AS t;
                v_n := coalesce(pg_catalog.cardinality(v_taken), 0);
                IF v_n < p_quantity AND v_start > 0 THEN
                    WITH picked AS (
                        SELECT f.ctid AS row_id
                        FROM stockpool.named_free AS f
                        WHERE f.shop_id = p_shop_id
                            AND f.item_id = p_item_id
                            AND f.location_id = p_location_id
                            AND f.bucket < v_start
                        ORDER BY f.bucket, f.position
                        LIMIT p_quantity - v_n
                        FOR UPDATE SKIP LOCKED
                    ),
                    taken AS (
                        DELETE FROM stockpool.named_free AS d
                        USING picked
                        WHERE d.ctid = picked.row_id
                        RETURNING d.label, d.position
                    )
                    SELECT pg_catalog.array_agg(t.label ORDER BY t.position) INTO v_more
                    FROM taken AS t;
                    IF v_more IS NOT NULL THEN
                        -- Both runs back in position order.
                        SELECT pg_catalog.array_agg(u.label ORDER BY u.position) INTO v_taken
                        FROM stockpool.named_units AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.label = ANY(coalesce(v_taken, '{}') || v_more);
                    END IF;
                END IF;
            END IF;
            IF coalesce(pg_catalog.cardinality(v_taken), 0) < p_quantity THEN
                RAISE EXCEPTION USING ERRCODE = 'SPX04';
            END IF;
            RETURN v_taken;
        EXCEPTION
            WHEN SQLSTATE 'SPX04' THEN
                RETURN NULL;
        END;
    END IF;

    -- A block: starts s whose (p_quantity - 1)th next free position is
    -- s + p_quantity - 1 (positions are unique, so the block has no gap).
    SELECT pg_catalog.array_agg(b.position ORDER BY b.position) INTO v_starts
    FROM (
        SELECT x.position
        FROM (
            SELECT f.position,
                   pg_catalog.lead(f.position, p_quantity - 1) OVER (ORDER BY f.position) AS last_position
            FROM stockpool.named_free AS f
            WHERE f.shop_id = p_shop_id
                AND f.item_id = p_item_id
                AND f.location_id = p_location_id
        ) AS x
        WHERE x.last_position = x.position + p_quantity - 1
        ORDER BY x.position
        LIMIT CASE WHEN p_wait THEN NULL ELSE c_spread END
    ) AS b;
    v_n := coalesce(pg_catalog.cardinality(v_starts), 0);
    IF v_n = 0 THEN
        RETURN NULL;
    END IF;
    v_first := CASE WHEN p_wait THEN 0 ELSE pg_catalog.floor(pg_catalog.random() * v_n)::integer END;

    FOR v_i IN 0..v_n - 1 LOOP
        BEGIN
            IF p_wait THEN
                WITH picked AS (
                    SELECT f.ctid AS row_id
                    FROM stockpool.named_free AS f
                    WHERE f.shop_id = p_shop_id
                        AND f.item_id = p_item_id
                        AND f.location_id = p_location_id
                        AND f.position BETWEEN v_starts[(v_first + v_i) % v_n + 1]
                        AND v_starts[(v_first + v_i) % v_n + 1] + p_quantity - 1
                    ORDER BY f.position
                    FOR UPDATE
                ),
                taken AS (
                    DELETE FROM stockpool.named_free AS d
                    USING picked
                    WHERE d.ctid = picked.row_id
                    RETURNING d.label, d.position
                )
                SELECT pg_catalog.array_agg(t.label ORDER BY t.position) INTO v_taken
                FROM taken AS t;
            ELSE
                WITH picked AS (
                    SELECT f.ctid AS row_id
                    FROM stockpool.named_free AS f
                    WHERE f.shop_id = p_shop_id
                        AND f.item_id = p_item_id
                        AND f.location_id = p_location_id
                        AND f.position BETWEEN v_starts[(v_first + v_i) % v_n + 1]
                        AND v_starts[(v_first + v_i) % v_n + 1] + p_quantity - 1
                    ORDER BY f.position
                    FOR UPDATE SKIP LOCKED
                ),
                taken AS (
                    DELETE FROM stockpool.named_free AS d
                    USING picked
                    WHERE d.ctid = picked.row_id
                    RETURNING d.label, d.position
                )
                SELECT pg_catalog.array_agg(t.label ORDER BY t.position) INTO v_taken
                FROM taken AS t;
            END IF;
            IF coalesce(pg_catalog.cardinality(v_taken), 0) < p_quantity THEN
                RAISE EXCEPTION USING ERRCODE = 'SPX04';
            END IF;
            RETURN v_taken;
        EXCEPTION
            WHEN SQLSTATE 'SPX04' THEN
                NULL;
        END;
    END LOOP;
    RETURN NULL;
END;
$function$;

COMMENT ON FUNCTION stockpool._take_named(bigint, bigint, bigint, integer, integer, boolean, boolean) IS
'Internal: all-or-nothing take of a named key''s free units (any, spread; or one block of consecutive positions), '
'SKIP LOCKED or waiting in position order; returns their labels in position order, or NULL.';
