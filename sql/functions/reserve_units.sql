-- reserve_units: hold p_quantity units of one key for a checkout, all or
-- nothing, for p_ttl.
-- Returns true when held (or already held by this checkout: a retry is a
-- no-op), false when on hand minus live holds is less than the request.
-- Three paths, one answer:
-- - The counter's path, for a key nobody contends: the hold row goes in,
--   and the units come straight from the key's ledger row when it is free
--   (SKIP LOCKED), has them and has no pool: what a counter with a hold
--   does, in two statements. They run in a subtransaction, and anything else
--   (a hold row already there: unique_violation; the row busy or short, a
--   pool, a named or unknown key) rolls it back, with any row lock the try
--   took (see _take_ledger); the careful path then answers. One miss goes on
--   instead: a pooled key, for one unit. The try's hold row stays, one pool
--   unit is tried (SKIP LOCKED), and _pool_look notes the key and looks at
--   its level; a pool with no free unit rolls the try back like any miss. A
--   key this session has seen pooled skips the try (the session's note,
--   _pooled_note): its buyers would otherwise pay it on every call.
-- - The pool's path, for one unit of a key in the session's note: the hold
--   row goes in (ON CONFLICT DO NOTHING), and, when it did, one pool unit is
--   taken (_take, SKIP LOCKED); the key's row is not read. No
--   subtransaction: a hold row already there (a retry) goes to the careful
--   path untouched, and a new one whose take found no unit is the careful
--   path's first step done, so it goes on from there (v_held) and deletes
--   the row if it refuses. One call in c_sample reads the key's row
--   (_pool_look): the note's buckets brought up to date, and the low-water
--   look made with c_sample times the odds.
-- - The careful path: the key's row is read; the checkout's hold row is
--   inserted first (inserting it doubles as the idempotency check); then
--   the ledger row if it is free (SKIP LOCKED, in a subtransaction), else
--   pool rows FOR UPDATE SKIP LOCKED (never waiting on other buyers); when
--   the pool runs short, the key's refill lock and ledger row; near
--   sellout, a wait for units locked by in-flight transactions and for
--   expired holds being swept or ended by their owner (see _take_lines). A
--   single pool unit is taken in one statement with a cached plan and
--   without a subtransaction. The pool is topped up after a successful take
--   when it looks thin (sampled, _should_look; the refill lock only tried:
--   nobody queues for a low-water refill). A refused request deletes the
--   hold row it inserted, so it leaves nothing behind.
-- Locks: the checkout lock first, on every path; the counter's path then
-- inserts the hold row (its unique entry waits only for an expirer of this
-- checkout's old row on the key, as the careful path's does) and tries the
-- ledger row SKIP LOCKED, after which nothing waits but a pooled key's
-- low-water look after its take (as the careful path's). The pool's path inserts
-- the hold row (its unique entry waits as the careful path's does) and takes
-- a pool row SKIP LOCKED; its sampled look may then refill, as the careful
-- path's does after a take (the refill lock tried, then the ledger row: a
-- claim folding pending claims can hold that row, and the one buyer with the
-- refill lock waits for it).
-- Counted (stockpool.metrics()): a call that returns counts as a new hold
-- (PostgreSQL's count of this function's calls) unless it calls
-- _tally_no_new_hold, which a refusal and a retry do; a refusal is also
-- counted by _tally_refusal, a low-water refill that moved units by
-- _tally_refill. The counter's and the pool's paths call no tally function:
-- one costs a reservation as much as a statement.
-- Raises 22004 (NULL argument), 22023 (quantity <= 0, ttl <= 0),
-- SP001 (unknown key), SP007 (checkout holds a different quantity), SP010
-- (a named key: reserve_named).
-- Touches holds, stock (a free ledger row's allocated; refills), pool_units.
CREATE OR REPLACE FUNCTION stockpool.reserve_units(
    p_shop_id bigint,
    p_item_id bigint,
    p_location_id bigint,
    p_quantity integer,
    p_checkout_id uuid,
    p_ttl interval DEFAULT '15 minutes'
)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    -- The pool's path reads the key's row in one call out of this many.
    c_sample constant integer := 8;
    v_stock stockpool.stock;
    -- The key's buckets in the session's note of pooled keys, 0 when not noted.
    v_buckets integer;
    -- true when the pool's path wrote this call's hold row and found no unit
    -- for it: the careful path takes one for that row (NULL otherwise).
    v_held boolean;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_quantity IS NULL
        OR p_checkout_id IS NULL OR p_ttl IS NULL OR p_quantity <= 0 OR p_ttl <= interval '0' THEN
        IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL
            OR p_quantity IS NULL OR p_checkout_id IS NULL OR p_ttl IS NULL THEN
            RAISE EXCEPTION 'stockpool.reserve_units: % must not be NULL',
                stockpool._null_args(
                    ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_quantity', 'p_checkout_id', 'p_ttl'],
                    ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL,
                          p_quantity IS NULL, p_checkout_id IS NULL, p_ttl IS NULL])
                USING ERRCODE = '22004';
        END IF;
        IF p_quantity <= 0 THEN
            RAISE EXCEPTION 'stockpool.reserve_units: p_quantity must be positive, got %', p_quantity
                USING ERRCODE = '22023';
        END IF;
        IF p_ttl <= interval '0' THEN
            RAISE EXCEPTION 'stockpool.reserve_units: p_ttl must be positive, got %', p_ttl
                USING ERRCODE = '22023';
        END IF;
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    -- The counter's path (see above). The hold row goes in first, as on the
    -- careful path: its unique entry may wait for a sweeper or another
    -- buyer expiring this checkout's old row on the key, and that buyer may
    -- then wait for the ledger row, so nothing but the checkout lock may be
    -- held here. It goes in without ON CONFLICT: a row already there (a
    -- retry) raises unique_violation, which rolls the try back like any
    -- other miss; ON CONFLICT's speculative insert would cost every call a
    -- WAL record and an index look more. The ledger row's UPDATE is
    -- _take_ledger's statement written out (a PL/pgSQL call would cost this
    -- path about 3% of its instructions): a change to one is a change to both.
    -- Whether the key is noted: split_part, not strpos. Both search the note
    -- by bytes, but strpos then counts the characters before a match (a UTF-8
    -- database's note is multibyte text), and a key noted early sits deep in
    -- the note (the newest go first): about 20,000 instructions, 3% of a
    -- noted key's call, with 200 keys noted (docs/pools.md, run 19).
    IF pg_catalog.split_part(coalesce(pg_catalog.current_setting('stockpool.pooled_keys', true), ''),
                             stockpool._note_key(p_shop_id, p_item_id, p_location_id), 2) = '' THEN
        BEGIN
            INSERT INTO stockpool.holds
                (shop_id, checkout_id, item_id, location_id, quantity, status, expires_at, created_at)
            VALUES
                (p_shop_id, p_checkout_id, p_item_id, p_location_id, p_quantity, 'held',
                 pg_catalog.now() + p_ttl, pg_catalog.clock_timestamp());
            UPDATE stockpool.stock AS s
            SET allocated = s.allocated + p_quantity
            WHERE s.ctid = (
                    SELECT l.ctid
                    FROM stockpool.stock AS l
                    WHERE l.shop_id = p_shop_id
                        AND l.item_id = p_item_id
                        AND l.location_id = p_location_id
                        AND l.on_hand - l.allocated >= p_quantity
                        AND l.pool_target = 0
                        AND NOT l.named
                    FOR NO KEY UPDATE SKIP LOCKED
                );
            IF FOUND THEN
                RETURN true;
            END IF;
            -- A key found pooled (a session's first call on it since its
            -- buyers met): one unit comes from the pool here, with the hold
            -- row already in; then _pool_look notes the key and makes the
            -- careful path's low-water look (p_sampled 1: every take). The
            -- row as read now may be newer than the one the try saw, and a
            -- try that saw it unpooled may have locked a newer version (see
            -- _take_ledger): the pool row is only tried (SKIP LOCKED), and
            -- the look's refill waits for the ledger row only as the careful
            -- path's does, after a take (that lock, if held, is this call's
            -- own). No unit: the try is rolled back and the careful path
            -- answers.
            IF p_quantity = 1 THEN
                SELECT s.buckets INTO v_buckets
                FROM stockpool.stock AS s
                WHERE s.shop_id = p_shop_id
                    AND s.item_id = p_item_id
                    AND s.location_id = p_location_id
                    AND s.pool_target > 0
                    AND NOT s.named;
                IF FOUND AND stockpool._take(p_shop_id, p_item_id, p_location_id, 1, v_buckets) = 1 THEN
                    PERFORM stockpool._pool_look(p_shop_id, p_item_id, p_location_id, 0, 1);
                    RETURN true;
                END IF;
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'SPX03';
        EXCEPTION
            -- datetime_field_overflow: now() + p_ttl beyond timestamptz; the
            -- careful path answers it in its own order (SP001 first for an
            -- unknown key), as it answered before this path existed.
            WHEN SQLSTATE 'SPX03' OR unique_violation OR datetime_field_overflow THEN
                NULL;
        END;
        v_buckets := 0;
    ELSE
        v_buckets := stockpool._noted_buckets(p_shop_id, p_item_id, p_location_id);
    END IF;
    IF v_buckets > 0 AND p_quantity = 1 THEN
        -- The pool's path (see above): the hold row, then one unit of the
        -- pool. No subtransaction: the hold row goes in ON CONFLICT DO
        -- NOTHING (_record_hold's INSERT written out: calling it cost this
        -- path 2.1%, 483,833 instructions against 473,720), and one that
        -- went in without a unit is the careful path's own first step
        -- (v_held); a unit is only ever deleted, so a take that found none
        -- holds no lock. Against the subtransaction: the same instructions (469,508
        -- against 467,961) and no subtransaction id, which a busy server's
        -- snapshots and commits pay for (docs/pools.md, run 18). A TTL
        -- beyond the timestamp range raises 22008 here, before the careful
        -- path could refuse the call.
        INSERT INTO stockpool.holds AS h
            (shop_id, checkout_id, item_id, location_id, quantity, status, expires_at, created_at)
        VALUES
            (p_shop_id, p_checkout_id, p_item_id, p_location_id, 1, 'held',
             pg_catalog.now() + p_ttl, pg_catalog.clock_timestamp())
        ON CONFLICT ON CONSTRAINT holds_pkey DO NOTHING;
        IF FOUND THEN
            IF stockpool._take(p_shop_id, p_item_id, p_location_id, 1, v_buckets) = 1 THEN
                IF pg_catalog.random() * c_sample < 1 THEN
                    PERFORM stockpool._pool_look(p_shop_id, p_item_id, p_location_id, v_buckets, c_sample);
                END IF;
                RETURN true;
            END IF;
            v_held := true;
        END IF;
    END IF;

    -- _stock_row inlined: a PL/pgSQL call costs about as much as the read.
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    IF v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, true);
    END IF;

    IF stockpool._buckets_to_note(v_stock.pool_target, v_stock.buckets) <> v_buckets THEN
        PERFORM stockpool._pooled_note(p_shop_id, p_item_id, p_location_id,
                                       stockpool._buckets_to_note(v_stock.pool_target, v_stock.buckets));
    END IF;

    IF p_quantity > v_stock.on_hand AND v_held IS NOT TRUE THEN
        -- No new hold can be that big: only a retry of an old one succeeds.
        -- (The ledger row's on_hand still counts pending claims, so it is
        -- never below the true figure: this only answers what it must.)
        -- Not with v_held: the row there is this call's own, and the
        -- refusal at the end deletes it.
        IF stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                    p_quantity, p_ttl) THEN
            PERFORM stockpool._tally_no_new_hold();
            RETURN true;
        END IF;
        PERFORM stockpool._tally_refusal();
        PERFORM stockpool._tally_no_new_hold();
        RETURN false;
    END IF;

    -- The hold row goes in first, and inserting it is the idempotency check:
    -- a row already there (a retry, or a hold to re-open) takes the careful
    -- path below; a new one costs no separate look-up.
    IF v_held IS NOT TRUE
        AND NOT stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                       p_quantity, p_ttl, p_reopen => false) THEN
        IF stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                    p_quantity, p_ttl) THEN
            PERFORM stockpool._tally_no_new_hold();
            RETURN true;
        END IF;
        IF NOT stockpool._take_lines(p_shop_id, ARRAY[p_item_id], ARRAY[p_location_id],
                                     ARRAY[p_quantity], ARRAY[v_stock.buckets]) THEN
            PERFORM stockpool._tally_refusal();
            PERFORM stockpool._tally_no_new_hold();
            RETURN false;
        END IF;
        PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                       p_quantity, p_ttl, p_reopen => true);
        RETURN true;
    END IF;

    -- A free ledger row serves the reservation itself, like a counter: a
    -- key nobody contends keeps no pool. A busy one means buyers meet on
    -- this key: they take from its pool instead (SKIP LOCKED, no wait), and
    -- once it has one, they go there first (see _take_ledger).
    -- The try runs in a subtransaction: a try that took nothing may still
    -- have locked the row (see _take_ledger), and this call may wait below.
    IF v_stock.pool_target = 0 AND v_stock.on_hand - v_stock.allocated >= p_quantity THEN
        BEGIN
            IF stockpool._take_ledger(p_shop_id, p_item_id, p_location_id, p_quantity) THEN
                RETURN true;
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'SPX03';
        EXCEPTION
            WHEN SQLSTATE 'SPX03' THEN
                NULL;
        END;
    END IF;

    IF p_quantity = 1
        AND stockpool._take(p_shop_id, p_item_id, p_location_id, 1, v_stock.buckets) = 1 THEN
        -- Low-water refill, only when this key has free stock to move;
        -- sampled (_should_look). The refill lock is only tried, so no buyer
        -- queues for another's look; the one that gets it may wait for the
        -- ledger row (see Locks above).
        IF v_stock.on_hand > v_stock.allocated
            AND stockpool._should_look(v_stock.pool_target, v_stock.low_water, v_stock.pool_cap, 1) THEN
            IF stockpool._refill(p_shop_id, p_item_id, p_location_id,
                                 p_min_extra => 0, p_wait => false, p_low_water_only => true) > 0 THEN
                PERFORM stockpool._tally_refill();
            END IF;
        END IF;
        RETURN true;
    END IF;

    IF stockpool._take_lines(p_shop_id, ARRAY[p_item_id], ARRAY[p_location_id],
                             ARRAY[p_quantity], ARRAY[v_stock.buckets]) THEN
        RETURN true;
    END IF;

    -- Not enough stock: the new hold row goes again, nothing is left behind.
    DELETE FROM stockpool.holds AS h
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id;
    PERFORM stockpool._tally_refusal();
    PERFORM stockpool._tally_no_new_hold();
    RETURN false;
END;
$function$;

COMMENT ON FUNCTION stockpool.reserve_units(bigint, bigint, bigint, integer, uuid, interval) IS
'Hold p_quantity units of (shop, item, location) for a checkout until now() + p_ttl, all or nothing. '
'true = held (a retry by the same checkout is a no-op), false = not enough stock. '
'SQLSTATEs: 22004 NULL argument, 22023 quantity or ttl not positive, SP001 unknown key, '
'SP007 checkout already holds a different quantity of this key, SP010 named key.';
