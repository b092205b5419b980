-- 0007_named_units: units with an identity (a seat, a hanger, a time slot).
--
-- A stock key is either counted (interchangeable units: pool rows and the
-- ledger's free stock) or named (every unit has a label and a position):
-- stock.named says which, and no function mixes the two on one key.
--
-- A named key keeps the ledger's bookkeeping of a pooled key, with its free
-- units as its pool: on_hand counts the units not sold (free, held, claimed
-- but not yet folded), allocated the same units (free + held + pending
-- claims), so that on_hand - allocated is always 0 (nothing for a refill to
-- move) and the safety property pooled + held + pending <= on_hand, the
-- CHECK constraint and stockpool.check_invariants() hold unchanged. As for
-- pool units, a reservation deletes free rows and writes its hold row, and
-- never touches the ledger row; a claim folds into it later (_settle).
--
-- named_units: every unit of a named key, sold ones too (the row stays as
-- the unit's identity; which checkout bought it is the claimed hold's
-- labels and the claim's movement row). Label and position are each unique
-- per key; positions order the units and define adjacency (consecutive
-- positions are side by side, a gap breaks a block).
CREATE TABLE stockpool.named_units (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    label text NOT NULL,
    position integer NOT NULL,
    CONSTRAINT named_units_pkey PRIMARY KEY (shop_id, item_id, location_id, label),
    CONSTRAINT named_units_position_key UNIQUE (shop_id, item_id, location_id, position)
    -- No foreign key to stock, as for holds: set_named_units and
    -- retire_named_units write these rows under the key's ledger row lock.
);

-- The free units of named keys: the named key's pool. A reservation locks
-- rows FOR UPDATE SKIP LOCKED and deletes them (a deleted row has no newer
-- version to follow); release and expiry insert them again. bucket is
-- position % the key's buckets when the row was written: claimers start at a
-- random bucket, so that under load they do not all fight for the first
-- free row, and still take one of the lowest free positions.
CREATE TABLE stockpool.named_free (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    position integer NOT NULL,
    label text NOT NULL,
    CONSTRAINT named_free_bucket_nonnegative CHECK (bucket >= 0)
);

-- Exactly the columns of the one-unit claim: key, start bucket, position.
CREATE INDEX named_free_claim_idx
    ON stockpool.named_free (shop_id, item_id, location_id, bucket, position);

-- A free unit at most once; the adjacency search and reserve_labels walk it
-- in position order.
CREATE UNIQUE INDEX named_free_position_idx
    ON stockpool.named_free (shop_id, item_id, location_id, position);

-- Every reservation leaves a dead tuple here: absolute thresholds and no
-- cost delay, as for the pool's leaves.
ALTER TABLE stockpool.named_free SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 2000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 5000,
    autovacuum_vacuum_cost_delay = 0,
    vacuum_truncate = off
);

ALTER TABLE stockpool.stock
    ADD COLUMN named boolean NOT NULL DEFAULT false;

COMMENT ON COLUMN stockpool.stock.named IS
'true: a named key (units with a label and a position, stockpool.named_units); false: a counted key.';

-- The labels a hold holds, for a named key: NULL for a counted key. The hold
-- row is written once per reservation anyway, so recording them costs no
-- extra write; release, expiry and claim read them from here.
ALTER TABLE stockpool.holds
    ADD COLUMN labels text[],
    ADD CONSTRAINT holds_labels_match_quantity
        CHECK (labels IS NULL OR pg_catalog.cardinality(labels) = quantity);

-- Which units a movement added, retired or sold, for a named key.
ALTER TABLE stockpool.movements
    ADD COLUMN labels text[];

COMMENT ON TABLE stockpool.named_units IS
'Every unit of a named key (label, position), sold ones included; see migration 0007.';
COMMENT ON TABLE stockpool.named_free IS
'The free units of named keys, claimed by deleting them (SKIP LOCKED), put back on release and expiry.';
