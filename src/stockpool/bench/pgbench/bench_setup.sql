-- bench_setup: the strategy benchmark's own tables and helpers, in schema bench.
--
-- Created by `stockpool bench` (src/stockpool/bench/workspace.py) in its template
-- database, never by the deployer: nothing here is part of stockpool. Every
-- cell of the benchmark runs in a fresh copy of that template, on which
-- bench.prepare() lays out the state of one strategy; bench.reserved() counts
-- afterwards what the strategy really reserved, so a cell whose pgbench
-- transactions did not reserve (sold out, aborted) is caught.
--
-- Every strategy reserves one unit of one hot key per transaction:
--   ceiling       each client updates its own row: the commit path alone
--   counter       one conditional UPDATE of the key's row
--   counter_hold  the same plus a hold row, in one statement
--   skip_locked   one row per unit, lowest free id FOR UPDATE SKIP LOCKED, UPDATE
--   pool          <= 1,000 unit rows, lowest id first, DELETE, hold row,
--                 refilled inline under an advisory lock when it runs dry
--   sharded       one row per unit in 64 buckets of contiguous ids, a random
--                 bucket first, any bucket as fallback, UPDATE; records nothing
--   stockpool     stockpool.reserve_units as shipped
-- and, for named units (seats, issue 15), one hot named key of seats in rows
-- of 20 (an aisle between rows): reserve_named of 1 seat, of 4 adjacent
-- seats (at the drop's start, and near sellout: bench.near_sellout), and
-- reserve_labels of a random free pick (bench_named_*.sql,
-- bench_labels_pick.sql), beside the cloakroom (a plain table of hangers:
-- ORDER BY position FOR UPDATE SKIP LOCKED LIMIT 1, then UPDATE);
-- plus the counter's transaction shapes (naive, locked, atomic, serializable),
-- which write one bench.sales row per unit they believe they sold, and whole
-- checkouts (reserve, then claim or release: bench_checkout_*.sql) for
-- stockpool, counter_hold and a 5-line stockpool cart.

CREATE SCHEMA bench;

COMMENT ON SCHEMA bench IS
'stockpool bench harness: strategy tables for the side-by-side benchmark. Not part of stockpool.';

-- ceiling: one private row per pgbench client (:client_id).
CREATE TABLE bench.ceiling (
    client_id integer NOT NULL,
    n bigint NOT NULL DEFAULT 0,
    CONSTRAINT ceiling_pkey PRIMARY KEY (client_id)
);

-- counter, counter_hold and the counter shapes: one row per key.
-- available: on hand minus held (what a reservation takes from); on_hand:
-- lowered by a checkout's claim.
CREATE TABLE bench.counter (
    key_id integer NOT NULL,
    available bigint NOT NULL,
    initial bigint NOT NULL,
    on_hand bigint NOT NULL,
    CONSTRAINT counter_pkey PRIMARY KEY (key_id)
);

-- A checkout's id from the pgbench client and a random draw, so that the
-- reserve and the claim (or release) of one checkout name the same id.
-- Only immutable parts (no format(), which is stable), so the planner inlines
-- it into each prepared statement: a SQL function it cannot inline is parsed
-- and planned on every call, which cost a checkout cell about 9% of its CPU
-- (perf, 32 clients), more than a shop pays to send a uuid parameter.
CREATE FUNCTION bench.checkout_id(p_client integer, p_draw bigint)
RETURNS uuid
LANGUAGE sql
IMMUTABLE
AS $function$
    SELECT (pg_catalog.lpad(pg_catalog.to_hex(p_client), 8, '0') OPERATOR(pg_catalog.||) '-0000-4000-8000-'
            OPERATOR(pg_catalog.||) pg_catalog.lpad(pg_catalog.to_hex(p_draw), 12, '0'))::uuid;
$function$;

-- Holds written by counter_hold and pool: the same row, key, checks and
-- indexes as stockpool.holds, so that the strategies differ in how they claim
-- units, not in what a hold costs to record.
CREATE TABLE bench.holds (
    shop_id bigint NOT NULL,
    checkout_id uuid NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    quantity integer NOT NULL,
    status text NOT NULL DEFAULT 'held',
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT holds_pkey PRIMARY KEY (shop_id, checkout_id, item_id, location_id),
    CONSTRAINT holds_quantity_positive CHECK (quantity > 0),
    CONSTRAINT holds_status_known CHECK (status IN ('held', 'claimed', 'released', 'expired'))
);

CREATE INDEX holds_expiry_idx
    ON bench.holds (expires_at)
    WHERE status = 'held';

CREATE INDEX holds_live_key_idx
    ON bench.holds (shop_id, item_id, location_id, expires_at)
    WHERE status = 'held';

-- skip_locked: one row per unit.
CREATE TABLE bench.units (
    unit_id bigint NOT NULL,
    key_id integer NOT NULL,
    reserved boolean NOT NULL DEFAULT false,
    CONSTRAINT units_pkey PRIMARY KEY (unit_id)
);

CREATE INDEX units_free_idx
    ON bench.units (key_id, unit_id)
    WHERE NOT reserved;

-- sharded: one row per unit, in buckets of contiguous ids.
CREATE TABLE bench.shards (
    unit_id bigint NOT NULL,
    key_id integer NOT NULL,
    bucket integer NOT NULL,
    reserved boolean NOT NULL DEFAULT false,
    CONSTRAINT shards_pkey PRIMARY KEY (unit_id)
);

CREATE INDEX shards_free_idx
    ON bench.shards (key_id, bucket, unit_id)
    WHERE NOT reserved;

-- pool: a small pool of unit rows per key, refilled from a ledger row.
CREATE TABLE bench.pool_ledger (
    key_id integer NOT NULL,
    available bigint NOT NULL,
    initial bigint NOT NULL,
    CONSTRAINT pool_ledger_pkey PRIMARY KEY (key_id)
);

CREATE TABLE bench.pool_units (
    unit_id bigint GENERATED ALWAYS AS IDENTITY,
    key_id integer NOT NULL,
    CONSTRAINT pool_units_pkey PRIMARY KEY (unit_id)
);

CREATE INDEX pool_units_claim_idx
    ON bench.pool_units (key_id, unit_id);

-- cloakroom: one row per hanger (or seat), in position order; a taken one
-- names its checkout.
CREATE TABLE bench.hangers (
    key_id integer NOT NULL,
    position integer NOT NULL,
    label text NOT NULL,
    taken boolean NOT NULL DEFAULT false,
    checkout_id uuid,
    CONSTRAINT hangers_pkey PRIMARY KEY (key_id, position)
);

CREATE INDEX hangers_free_idx
    ON bench.hangers (key_id, position)
    WHERE NOT taken;

-- seats: the labels and positions of p_units seats in rows of 20, with an
-- aisle (a gap of 2 positions) between rows, so a block never spans rows.
CREATE FUNCTION bench.seats(p_units bigint, OUT label text, OUT pos integer)
RETURNS SETOF record
LANGUAGE sql
IMMUTABLE
AS $function$
    SELECT 'R' || (g.n / 20 + 1)::text || '-' || (g.n % 20 + 1)::text,
           (g.n / 20 * 22 + g.n % 20 + 1)::integer
    FROM generate_series(0, p_units - 1) AS g (n);
$function$;

-- counter shapes: one row per unit a client believes it sold.
CREATE TABLE bench.sales (
    sale_id bigint GENERATED ALWAYS AS IDENTITY,
    key_id integer NOT NULL,
    CONSTRAINT sales_pkey PRIMARY KEY (sale_id)
);

-- pool_reserve: the naive bounded pool. Lowest id first (every claimer meets
-- on the same index leaf and heap page), DELETE, hold row; when the pool is
-- dry, one claimer refills up to 1,000 units from the ledger row under the
-- key's advisory lock while the others queue on that lock, then all retry.
-- Returns false only when the ledger is empty too.
CREATE FUNCTION bench.pool_reserve(p_key_id integer, p_checkout_id uuid)
RETURNS boolean
LANGUAGE plpgsql
AS $function$
DECLARE
    v_unit bigint;
    v_available bigint;
    v_add bigint;
BEGIN
    LOOP
        DELETE FROM bench.pool_units AS d
        WHERE d.unit_id = (
            SELECT u.unit_id
            FROM bench.pool_units AS u
            WHERE u.key_id = p_key_id
            ORDER BY u.unit_id
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
        RETURNING d.unit_id INTO v_unit;
        IF v_unit IS NOT NULL THEN
            INSERT INTO bench.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)
            VALUES (1, p_checkout_id, p_key_id, 1, 1, now() + interval '15 minutes');
            RETURN true;
        END IF;
        PERFORM pg_advisory_xact_lock(p_key_id);
        -- Another claimer may have refilled while this one queued.
        PERFORM FROM bench.pool_units AS u WHERE u.key_id = p_key_id LIMIT 1;
        IF NOT FOUND THEN
            SELECT l.available INTO v_available
            FROM bench.pool_ledger AS l
            WHERE l.key_id = p_key_id
            FOR UPDATE;
            v_add := LEAST(v_available, 1000);
            IF v_add = 0 THEN
                RETURN false;
            END IF;
            UPDATE bench.pool_ledger AS l
            SET available = l.available - v_add
            WHERE l.key_id = p_key_id;
            INSERT INTO bench.pool_units (key_id)
            SELECT p_key_id
            FROM generate_series(1, v_add);
        END IF;
    END LOOP;
END;
$function$;

-- prepare: lay out the starting state of one strategy in a fresh copy of the
-- template: p_units units of the hot key (key 1; keys 1..5 for the cart; for
-- a catalogue, p_units keys of p_per_key units each),
-- p_clients private rows for the ceiling. Pools start full, as they would be
-- before a sale. Returns the units made available.
CREATE FUNCTION bench.prepare(p_strategy text, p_clients integer, p_units bigint, p_per_key integer DEFAULT 500)
RETURNS bigint
LANGUAGE plpgsql
AS $function$
DECLARE
    v_key integer;
BEGIN
    CASE p_strategy
    WHEN 'ceiling' THEN
        INSERT INTO bench.ceiling (client_id)
        SELECT g.n FROM generate_series(0, p_clients - 1) AS g (n);
    WHEN 'counter', 'counter_hold', 'naive', 'locked', 'atomic', 'serializable' THEN
        INSERT INTO bench.counter (key_id, available, initial, on_hand) VALUES (1, p_units, p_units, p_units);
    WHEN 'skip_locked' THEN
        INSERT INTO bench.units (unit_id, key_id)
        SELECT g.n, 1 FROM generate_series(1, p_units) AS g (n);
    WHEN 'sharded' THEN
        -- 64 buckets of contiguous ids: bucket b holds the b-th 64th of the ids.
        INSERT INTO bench.shards (unit_id, key_id, bucket)
        SELECT g.n, 1, ((g.n - 1) * 64 / p_units)::integer
        FROM generate_series(1, p_units) AS g (n);
    WHEN 'pool' THEN
        INSERT INTO bench.pool_ledger (key_id, available, initial)
        VALUES (1, p_units - LEAST(p_units, 1000), p_units);
        INSERT INTO bench.pool_units (key_id)
        SELECT 1 FROM generate_series(1, LEAST(p_units, 1000));
    WHEN 'stockpool' THEN
        PERFORM stockpool.set_stock(1, 1, 1, p_units::integer);
        PERFORM stockpool.replenish_pool(1, 1, 1);
    -- One hot named key of p_units seats (stockpool), or as hangers (cloakroom).
    WHEN 'named' THEN
        PERFORM stockpool.set_named_units(1, 1, 1, pg_catalog.array_agg(s.label ORDER BY s.pos),
                                          pg_catalog.array_agg(s.pos ORDER BY s.pos))
        FROM bench.seats(p_units) AS s;
    WHEN 'cloakroom' THEN
        INSERT INTO bench.hangers (key_id, position, label)
        SELECT 1, s.pos, s.label FROM bench.seats(p_units) AS s;
    -- A catalogue: p_units keys of p_per_key units each, nothing pooled.
    WHEN 'catalogue_stockpool' THEN
        PERFORM stockpool.set_stock(1, g.n, 1, p_per_key) FROM generate_series(1, p_units) AS g (n);
    WHEN 'catalogue_counter_hold' THEN
        INSERT INTO bench.counter (key_id, available, initial, on_hand)
        SELECT g.n, p_per_key, p_per_key, p_per_key FROM generate_series(1, p_units) AS g (n);
    WHEN 'cart' THEN
        FOR v_key IN 1..5 LOOP
            PERFORM stockpool.set_stock(1, v_key, 1, p_units::integer);
            PERFORM stockpool.replenish_pool(1, v_key, 1);
        END LOOP;
    ELSE
        RAISE EXCEPTION 'bench.prepare: unknown strategy %', p_strategy
            USING ERRCODE = '22023';
    END CASE;
    RETURN p_units;
END;
$function$;

-- reserved: units the strategy really reserved (or, for the ceiling,
-- transactions it committed), counted from the tables, not from pgbench.
CREATE FUNCTION bench.reserved(p_strategy text)
RETURNS bigint
LANGUAGE sql
AS $function$
    SELECT CASE p_strategy
        WHEN 'ceiling' THEN (SELECT coalesce(sum(c.n), 0) FROM bench.ceiling AS c)
        WHEN 'counter' THEN (SELECT c.initial - c.available FROM bench.counter AS c WHERE c.key_id = 1)
        WHEN 'counter_hold' THEN (SELECT count(*) FROM bench.holds)
        WHEN 'catalogue_counter_hold' THEN (SELECT count(*) FROM bench.holds)
        WHEN 'catalogue_stockpool' THEN (
            SELECT coalesce(sum(h.quantity), 0) FROM stockpool.holds AS h WHERE h.status = 'held')
        WHEN 'skip_locked' THEN (SELECT count(*) FROM bench.units AS u WHERE u.reserved)
        WHEN 'sharded' THEN (SELECT count(*) FROM bench.shards AS s WHERE s.reserved)
        WHEN 'pool' THEN (SELECT count(*) FROM bench.holds)
        WHEN 'stockpool' THEN (
            SELECT coalesce(sum(h.quantity), 0) FROM stockpool.holds AS h WHERE h.status = 'held')
        WHEN 'named' THEN (
            SELECT coalesce(sum(h.quantity), 0) FROM stockpool.holds AS h WHERE h.status = 'held')
        WHEN 'cloakroom' THEN (SELECT count(*) FROM bench.hangers AS h WHERE h.taken)
        WHEN 'cart' THEN (
            SELECT coalesce(sum(h.quantity), 0) FROM stockpool.holds AS h WHERE h.status = 'held')
        -- Whole checkouts: the units that went all the way.
        WHEN 'stockpool_claim' THEN (
            SELECT coalesce(sum(h.quantity), 0) FROM stockpool.holds AS h WHERE h.status = 'claimed')
        WHEN 'cart_claim' THEN (
            SELECT coalesce(sum(h.quantity), 0) FROM stockpool.holds AS h WHERE h.status = 'claimed')
        WHEN 'stockpool_release' THEN (
            SELECT coalesce(sum(h.quantity), 0) FROM stockpool.holds AS h WHERE h.status = 'released')
        WHEN 'counter_hold_claim' THEN (
            SELECT count(*) FROM bench.holds AS h WHERE h.status = 'claimed')
        WHEN 'counter_hold_release' THEN (
            SELECT count(*) FROM bench.holds AS h WHERE h.status = 'released')
        ELSE (SELECT count(*) FROM bench.sales)
    END::bigint;
$function$;

-- catalogue_footprint: what a catalogue run left in the pool: its rows, its
-- bytes (every leaf: a partitioned parent has no storage of its own), and
-- the keys that were touched (have holds).
CREATE FUNCTION bench.catalogue_footprint(OUT pool_rows bigint, OUT pool_bytes bigint, OUT keys_touched bigint)
LANGUAGE sql
AS $function$
    SELECT (SELECT count(*) FROM stockpool.pool_units),
           (SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0)::bigint
            FROM pg_inherits AS i WHERE i.inhparent = 'stockpool.pool_units'::regclass),
           (SELECT count(*) FROM (SELECT DISTINCT h.item_id FROM stockpool.holds AS h) AS t);
$function$;

-- shape_drift: for a counter shape, units clients believe they sold (sales
-- rows) against units that left the counter. Naive read-modify-write loses
-- updates, so it sells more than left the counter: oversell.
CREATE FUNCTION bench.shape_drift(OUT sold bigint, OUT decremented bigint, OUT drift bigint)
LANGUAGE sql
AS $function$
    SELECT s.sold, c.initial - c.available, s.sold - (c.initial - c.available)
    FROM (SELECT count(*) AS sold FROM bench.sales) AS s
    CROSS JOIN bench.counter AS c
    WHERE c.key_id = 1;
$function$;

-- near_sellout: sell rows p_first_row..p_last_row (0-based) of the named key
-- the way a drop leaves them: each row cut into groups of 1-4 seats from its
-- first seat, each group held with probability p_held (reserve_labels, one
-- checkout per group), the others left free; so near sellout a few blocks
-- of 4 free seats are left among scattered single gaps. Seeded by row: the
-- same layout at every client count. Returns the seats held.
CREATE FUNCTION bench.near_sellout(p_first_row integer, p_last_row integer, p_held double precision)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_held integer := 0;
    v_seat integer;
    v_group integer;
    v_labels text[];
BEGIN
    FOR v_row IN p_first_row..p_last_row LOOP
        PERFORM setseed(((v_row * 7919) % 10007) / 10007.0);
        SELECT array_agg(u.label ORDER BY u.position) INTO v_labels
        FROM stockpool.named_units AS u
        WHERE u.shop_id = 1 AND u.item_id = 1 AND u.location_id = 1
            AND u.position BETWEEN v_row * 22 + 1 AND v_row * 22 + 20;
        v_seat := 1;
        WHILE v_seat <= coalesce(cardinality(v_labels), 0) LOOP
            v_group := LEAST(1 + floor(random() * 4)::integer, cardinality(v_labels) - v_seat + 1);
            IF random() < p_held THEN
                PERFORM stockpool.reserve_labels(1, 1, 1, v_labels[v_seat:v_seat + v_group - 1], gen_random_uuid());
                v_held := v_held + v_group;
            END IF;
            v_seat := v_seat + v_group;
        END LOOP;
    END LOOP;
    RETURN v_held;
END;
$function$;

-- seat_figures: a named key after a seats cell: its free seats, and the
-- free blocks of p_block consecutive positions still there (for the
-- adjacent cells: none may be left once a buyer was told NULL).
CREATE FUNCTION bench.seat_figures(p_block integer, OUT free_seats bigint, OUT free_blocks bigint)
LANGUAGE sql
AS $function$
    SELECT (SELECT count(*) FROM stockpool.named_free AS f WHERE f.shop_id = 1 AND f.item_id = 1),
           (SELECT count(*)
            FROM (SELECT f.position,
                         lead(f.position, p_block - 1) OVER (ORDER BY f.position) AS last_position
                  FROM stockpool.named_free AS f
                  WHERE f.shop_id = 1 AND f.item_id = 1) AS b
            WHERE b.last_position = b.position + p_block - 1);
$function$;
