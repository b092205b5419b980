-- 0005_deferred_claims: a claim no longer queues on its key's ledger row.
--
-- Until now every claim lowered stock.on_hand in its own transaction, so the
-- claims of one hot key waited for each other's row lock until each
-- committed (Lock:transactionid): the counter's collapse, at the moment the
-- buyers pay. From now on a claim that finds the key's ledger row busy
-- records what it consumed here instead, and whoever next finds the row free
-- (a later claim, a refill, a sweep, set_stock / adjust_stock) folds every
-- pending claim of the key into it in one update and writes their movement
-- rows (escrow, after O'Neil 1986; see stockpool._settle).
--
-- Until folded, a claimed unit stays counted in stock.allocated and in
-- stock.on_hand, so the safety property pooled + held + pending <= on_hand
-- holds at every commit, and free stock (on_hand - allocated) is the same
-- whether a claim is folded or not. Readers see on hand net of pending
-- claims (stock_levels, check_invariants), so it is exact at every commit.
--
-- No foreign key to stock, on purpose, like holds: its check would take FOR
-- KEY SHARE on the hot ledger row in every claim. The primary key is the
-- fold's index (the key's columns first) and makes a second pending row for
-- one claimed line impossible.
CREATE TABLE stockpool.pending_claims (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    checkout_id uuid NOT NULL,
    quantity integer NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    CONSTRAINT pending_claims_pkey PRIMARY KEY (shop_id, item_id, location_id, checkout_id),
    CONSTRAINT pending_claims_quantity_positive CHECK (quantity > 0)
);

-- A queue: every row is deleted by the fold that settles it, soon after it
-- was inserted. Absolute thresholds and no cost delay, as for the pool.
ALTER TABLE stockpool.pending_claims SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);

COMMENT ON TABLE stockpool.pending_claims IS
'Claims recorded while their key''s ledger row was busy, not yet folded into stock.on_hand (see stockpool._settle).';
