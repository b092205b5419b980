-- _settle: fold a key's pending claims into its ledger row (escrow).
-- Locks the key's ledger row FOR NO KEY UPDATE: with p_wait false SKIP
-- LOCKED, so a caller that finds it busy goes on without waiting (the
-- transaction holding it folds, or the next one that finds it free); with
-- p_wait true it waits (set_stock and adjust_stock, which need the true
-- figure). Under that lock it deletes every pending claim of the key it can
-- see (only a holder of the ledger row deletes them, so none is locked by
-- anyone else), appends one movement per claim in claim order, each with the
-- on hand after it, and lowers on_hand and allocated by their sum in one
-- update, keeping pooled + held + pending <= on_hand. For a named key each
-- movement names the units the claim sold (its hold row's labels), so which
-- unit went to which checkout can be read from the history.
-- p_checkout_id / p_quantity: the caller's own claim of this key, folded
-- with the others when the row is free (then it never becomes a pending
-- row); ignored when p_quantity is 0.
-- Returns the units folded, or NULL when the row was busy (nothing done: the
-- caller's own claim, if any, must then be recorded as pending) or the key
-- is unknown. Touches stock, pending_claims, movements (holds read).
CREATE OR REPLACE FUNCTION stockpool._settle(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_wait boolean,
    p_checkout_id uuid DEFAULT NULL,
    p_quantity integer DEFAULT 0
)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
    v_on_hand integer;
    v_named boolean;
    v_units integer;
BEGIN
    IF p_wait THEN
        SELECT s.on_hand, s.named INTO v_on_hand, v_named
        FROM stockpool.stock AS s
        WHERE s.shop_id = p_shop_id
            AND s.item_id = p_item_id
            AND s.location_id = p_location_id
        FOR NO KEY UPDATE;
    ELSE
        SELECT s.on_hand, s.named INTO v_on_hand, v_named
        FROM stockpool.stock AS s
        WHERE s.shop_id = p_shop_id
            AND s.item_id = p_item_id
            AND s.location_id = p_location_id
        FOR NO KEY UPDATE SKIP LOCKED;
    END IF;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    -- Movement ids are drawn in claim order under the ledger row lock, so
    -- the history replays in id order: each on_hand_after is the running
    -- sum of the deltas before it.
    WITH folded AS (
        DELETE FROM stockpool.pending_claims AS c
        WHERE c.shop_id = p_shop_id
            AND c.item_id = p_item_id
            AND c.location_id = p_location_id
        RETURNING c.checkout_id, c.quantity, c.claimed_at
    ),
    claims AS (
        SELECT f.checkout_id, f.quantity, f.claimed_at
        FROM folded AS f
        UNION ALL
        SELECT p_checkout_id, p_quantity, pg_catalog.clock_timestamp()
        WHERE p_quantity > 0
    ),
    recorded AS (
        INSERT INTO stockpool.movements
            (shop_id, item_id, location_id, delta, on_hand_after, reason, checkout_id, labels)
        SELECT p_shop_id, p_item_id, p_location_id, -c.quantity,
               v_on_hand - pg_catalog.sum(c.quantity) OVER (
                   ORDER BY c.claimed_at, c.checkout_id
                   ROWS UNBOUNDED PRECEDING
               ),
               'claim', c.checkout_id,
               CASE WHEN v_named THEN (
                   SELECT h.labels
                   FROM stockpool.holds AS h
                   WHERE h.shop_id = p_shop_id
                       AND h.checkout_id = c.checkout_id
                       AND h.item_id = p_item_id
                       AND h.location_id = p_location_id
               ) END
        FROM claims AS c
        ORDER BY c.claimed_at, c.checkout_id
        RETURNING -delta AS units
    )
    SELECT coalesce(pg_catalog.sum(r.units), 0)::integer INTO v_units
    FROM recorded AS r;

    IF v_units > 0 THEN
        UPDATE stockpool.stock AS s
        SET on_hand = s.on_hand - v_units,
            allocated = s.allocated - v_units,
            updated_at = pg_catalog.now()
        WHERE s.shop_id = p_shop_id
            AND s.item_id = p_item_id
            AND s.location_id = p_location_id;
    END IF;
    RETURN v_units;
END;
$function$;

COMMENT ON FUNCTION stockpool._settle(bigint, bigint, bigint, boolean, uuid, integer) IS
'Internal: fold a key''s pending claims (and the caller''s own) into its ledger row, with their movements; '
'NULL when the row is busy and p_wait is false.';
