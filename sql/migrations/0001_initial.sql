-- 0001_initial: the ledger, the bounded unit pool, holds and the movement history.
--
-- Applied once, in its own transaction, by the deployer (src/stockpool/deploy.py).
-- Tables are an implementation detail: the public API is the functions in
-- sql/functions and the views. Every table is keyed by shop_id first so that a
-- shop's rows can later be routed to one node of a distributed engine.

-- The schema itself is created by the deployer (owned by the owner role)
-- before any migration runs.

COMMENT ON SCHEMA stockpool IS
'stockpool: inventory reservations inside PostgreSQL (bounded SKIP LOCKED unit pool).';

-- The ledger: one row per stock key. on_hand is the truth; allocated counts the
-- units that have left free stock, i.e. units in the pool plus units in live
-- holds. A reservation moves units from the pool to a hold and leaves this row
-- alone, so the hot path never queues on it.
CREATE TABLE stockpool.stock (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    on_hand integer NOT NULL,
    allocated integer NOT NULL DEFAULT 0,
    pool_cap integer NOT NULL DEFAULT 1000,
    low_water integer NOT NULL DEFAULT 250,
    buckets integer NOT NULL DEFAULT 64,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stock_pkey PRIMARY KEY (shop_id, item_id, location_id),
    CONSTRAINT stock_on_hand_nonnegative CHECK (on_hand >= 0),
    CONSTRAINT stock_allocated_nonnegative CHECK (allocated >= 0),
    -- The safety property itself: pool + held can never exceed on hand.
    CONSTRAINT stock_allocated_within_on_hand CHECK (allocated <= on_hand),
    CONSTRAINT stock_pool_cap_positive CHECK (pool_cap > 0),
    CONSTRAINT stock_low_water_within_cap CHECK (low_water >= 0 AND low_water < pool_cap),
    CONSTRAINT stock_buckets_range CHECK (buckets BETWEEN 1 AND 1024)
);

-- The bounded pool of claimable units. Claimers lock rows with
-- FOR UPDATE SKIP LOCKED and DELETE them (a deleted row has no newer version
-- for SKIP LOCKED to follow). Hash-partitioned by shop_id; autovacuum settings
-- live on the leaf partitions (a partitioned parent rejects them).
CREATE TABLE stockpool.pool_units (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint GENERATED ALWAYS AS IDENTITY,
    CONSTRAINT pool_units_bucket_nonnegative CHECK (bucket >= 0)
) PARTITION BY HASH (shop_id);

-- Exactly the columns of the claim query: key equality, start bucket, id order.
CREATE INDEX pool_units_claim_idx
    ON stockpool.pool_units (shop_id, item_id, location_id, bucket, unit_id);

DO $partitions$
DECLARE
    v_i integer;
BEGIN
    FOR v_i IN 0..7 LOOP
        EXECUTE format(
            'CREATE TABLE stockpool.%I PARTITION OF stockpool.pool_units
                 FOR VALUES WITH (MODULUS 8, REMAINDER %s)
                 WITH (
                     autovacuum_vacuum_scale_factor = 0,
                     autovacuum_vacuum_threshold = 2000,
                     autovacuum_vacuum_insert_scale_factor = 0,
                     autovacuum_vacuum_insert_threshold = 2000,
                     autovacuum_analyze_scale_factor = 0,
                     autovacuum_analyze_threshold = 5000,
                     autovacuum_vacuum_cost_delay = 0
                 )',
            'pool_units_p' || v_i, v_i);
    END LOOP;
END;
$partitions$;

-- Holds: one row per (checkout, key). status moves held -> claimed | released
-- | expired and never back; the row stays as the checkout's history, which is
-- what makes claim and release idempotent.
CREATE TABLE stockpool.holds (
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
    -- No foreign key to stock on purpose: its check would take FOR KEY SHARE on
    -- the hot ledger row in every reservation (a MultiXact per concurrent
    -- buyer). The functions validate the key instead.
);

-- The sweeper's queue: live holds by expiry.
CREATE INDEX holds_expiry_idx
    ON stockpool.holds (expires_at)
    WHERE status = 'held';

-- A key's live holds, for the reserve path's inline expiry of its own key.
CREATE INDEX holds_live_key_idx
    ON stockpool.holds (shop_id, item_id, location_id, expires_at)
    WHERE status = 'held';

ALTER TABLE stockpool.holds SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- Immutable history: every change of on_hand leaves one row here.
CREATE TABLE stockpool.movements (
    shop_id bigint NOT NULL,
    movement_id bigint GENERATED ALWAYS AS IDENTITY,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    delta integer NOT NULL,
    on_hand_after integer NOT NULL,
    reason text NOT NULL,
    checkout_id uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT movements_pkey PRIMARY KEY (shop_id, movement_id),
    CONSTRAINT movements_delta_nonzero CHECK (delta <> 0),
    CONSTRAINT movements_on_hand_after_nonnegative CHECK (on_hand_after >= 0),
    CONSTRAINT movements_reason_known CHECK (reason IN ('set', 'adjust', 'claim')),
    CONSTRAINT movements_claim_has_checkout CHECK ((reason = 'claim') = (checkout_id IS NOT NULL)),
    CONSTRAINT movements_stock_fkey FOREIGN KEY (shop_id, item_id, location_id)
        REFERENCES stockpool.stock (shop_id, item_id, location_id)
);

CREATE INDEX movements_key_idx
    ON stockpool.movements (shop_id, item_id, location_id);

-- History is append-only, even for the table owner (TRUNCATE included).
CREATE FUNCTION stockpool._movements_immutable()
RETURNS trigger
LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'stockpool.movements is append-only: % refused', tg_op
        USING ERRCODE = 'SP009',
              HINT = 'Correct stock with stockpool.adjust_stock(), which records a new movement.';
END;
$function$;

CREATE TRIGGER movements_immutable
    BEFORE UPDATE OR DELETE ON stockpool.movements
    FOR EACH ROW EXECUTE FUNCTION stockpool._movements_immutable();

CREATE TRIGGER movements_no_truncate
    BEFORE TRUNCATE ON stockpool.movements
    FOR EACH STATEMENT EXECUTE FUNCTION stockpool._movements_immutable();
