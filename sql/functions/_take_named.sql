-- _take_named: take p_quantity free units of a named key, all or none, and
-- delete them from its free units; the caller records the hold.
-- Any units (p_adjacent false): without p_wait, from a random start bucket
-- up, then below it, ORDER BY bucket, position, FOR UPDATE SKIP LOCKED, so
-- concurrent buyers spread over the lowest free positions instead of all
-- fighting for the first; with p_wait, the lowest free positions in
-- position order, waiting for units locked by in-flight transactions (the
-- near-sellout path: a unit whose locker rolls back is not sold out).
-- One block (p_adjacent): p_quantity consecutive free positions (a gap
-- breaks a block). Block starts are read without a lock, 16 at a time in
-- position order (an index range scan, not the whole key). Without p_wait:
-- a pass over the whole key, SKIP LOCKED, from a random point within
-- p_buckets * p_quantity positions of the lowest free one up, then from the
-- lowest up to that point, passing over a block that shares seats with the
-- one tried just before it (buyers starting near each other aim at
-- different blocks); a second pass tries those as well. NULL only when no
-- block could be locked. With p_wait: one pass from the lowest free
-- position up, every block, waiting. A block found short (a unit taken
-- meanwhile) is given back by rolling back its subtransaction before the
-- next is tried.
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
    -- Block starts read at a time on the pass without waiting.
    c_spread constant integer := 16;
    v_start integer := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
    v_taken text[];
    v_more text[];
    v_starts integer[];
    v_n integer;
    v_i integer;
    v_lowest integer;
    v_from integer;
    v_next integer;
    v_last integer;
    v_wrapped boolean := false;
    v_dense boolean := false;
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

    -- Blocks, read without a lock c_spread starts at a time (an index range
    -- scan, not the whole key), in position order.
    -- Waiting (near sellout, holding no free row): one pass from the lowest
    -- free position up, every block, waiting for units locked by in-flight
    -- transactions.
    -- Without waiting: a pass SKIP LOCKED from a random point near the
    -- lowest free position (within the key's buckets times p_quantity of it)
    -- up, then from the lowest up to that point; this first pass passes over
    -- a block sharing seats with the one tried just before it, so that
    -- buyers starting near each other aim at different blocks, and a second
    -- pass tries those too. NULL only when no block could be locked (the
    -- caller then waits).
    SELECT pg_catalog.min(f.position) INTO v_lowest
    FROM stockpool.named_free AS f
    WHERE f.shop_id = p_shop_id
        AND f.item_id = p_item_id
        AND f.location_id = p_location_id;
    IF v_lowest IS NULL THEN
        RETURN NULL;
    END IF;
    v_from := v_lowest + CASE WHEN p_wait THEN 0
                              ELSE pg_catalog.floor(pg_catalog.random() * p_buckets * p_quantity)::integer END;
    v_dense := p_wait;
    v_next := v_from;
    LOOP
        -- Starts at or after v_next; on the wrapped pass only those below
        -- v_from (a block may reach past it).
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
                    AND f.position >= v_next
                    AND (NOT v_wrapped OR f.position < v_from + p_quantity - 1)
                ORDER BY f.position
            ) AS x
            WHERE x.last_position = x.position + p_quantity - 1
                AND (NOT v_wrapped OR x.position < v_from)
            ORDER BY x.position
            LIMIT c_spread
        ) AS b;
        v_n := coalesce(pg_catalog.cardinality(v_starts), 0);
        IF v_n = 0 THEN
            IF NOT v_wrapped AND v_from > v_lowest THEN
                v_wrapped := true;
                v_next := v_lowest;
            ELSIF NOT v_dense THEN
                -- A second pass, trying the blocks the first passed over.
                v_dense := true;
                v_wrapped := false;
                v_next := v_from;
            ELSE
                RETURN NULL;
            END IF;
            v_last := NULL;
            CONTINUE;
        END IF;
        FOR v_i IN 1..v_n LOOP
            -- Not a block sharing seats with the one tried before it (on
            -- the first pass without waiting).
            CONTINUE WHEN NOT v_dense AND v_last IS NOT NULL AND v_starts[v_i] < v_last + p_quantity;
            v_last := v_starts[v_i];
            BEGIN
                -- The same take, waiting or SKIP LOCKED: two statements
                -- because the lock clause cannot be a parameter of a cached plan.
                IF p_wait THEN
                    WITH picked AS (
                        SELECT f.ctid AS row_id
                        FROM stockpool.named_free AS f
                        WHERE f.shop_id = p_shop_id
                            AND f.item_id = p_item_id
                            AND f.location_id = p_location_id
                            AND f.position BETWEEN v_starts[v_i] AND v_starts[v_i] + p_quantity - 1
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
                            AND f.position BETWEEN v_starts[v_i] AND v_starts[v_i] + p_quantity - 1
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
        v_next := v_starts[v_n] + 1;
    END LOOP;
END;
$function$;

COMMENT ON FUNCTION stockpool._take_named(bigint, bigint, bigint, integer, integer, boolean, boolean) IS
'Internal: all-or-nothing take of a named key''s free units (any, spread; or one block of consecutive positions), '
'SKIP LOCKED or waiting in position order; returns their labels in position order, or NULL.';
