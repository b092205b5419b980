--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: stockpool; Type: SCHEMA; Schema: -; Owner: stockpool_owner
--

CREATE SCHEMA stockpool;

ALTER SCHEMA stockpool OWNER TO stockpool_owner;

--
-- Name: SCHEMA stockpool; Type: COMMENT; Schema: -; Owner: stockpool_owner
--

COMMENT ON SCHEMA stockpool IS 'stockpool: inventory reservations inside PostgreSQL (bounded SKIP LOCKED unit pool).';

--
-- Name: _add_units(bigint, bigint, bigint, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._add_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_offset integer := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
BEGIN
    IF p_quantity <= 0 THEN
        RETURN 0;
    END IF;

    INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket)
    SELECT p_shop_id, p_item_id, p_location_id, (v_offset + g.n) % p_buckets
    FROM pg_catalog.generate_series(0, p_quantity - 1) AS g (n)
    ORDER BY (v_offset + g.n) % p_buckets, g.n;

    RETURN p_quantity;
END;
$$;

ALTER FUNCTION stockpool._add_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _add_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._add_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) IS 'Internal: insert units into a key''s pool, spread over its buckets.';

--
-- Name: _apply_on_hand(bigint, bigint, bigint, bigint, boolean); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._apply_on_hand(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_value bigint, p_relative boolean) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_stock stockpool.stock;
    v_target bigint;
    v_taken integer;
    v_expired integer;
    v_expired_holds integer := 0;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(
        stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));

    -- The true figure first: fold every committed pending claim (waiting
    -- for the ledger row). A claim that commits later is folded later, as
    -- if it had come after this change, which is when it committed.
    PERFORM stockpool._settle(p_shop_id, p_item_id, p_location_id, true);

    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE;

    IF NOT FOUND THEN
        IF p_relative THEN
            PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
        END IF;
        INSERT INTO stockpool.stock (shop_id, item_id, location_id, on_hand)
        VALUES (p_shop_id, p_item_id, p_location_id, p_value::integer);
        IF p_value <> 0 THEN
            INSERT INTO stockpool.movements
                (shop_id, item_id, location_id, delta, on_hand_after, reason)
            VALUES (p_shop_id, p_item_id, p_location_id, p_value::integer, p_value::integer, 'set');
        END IF;
        RETURN p_value::integer;
    END IF;

    IF v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, true);
    END IF;

    v_target := CASE WHEN p_relative THEN v_stock.on_hand + p_value ELSE p_value END;
    IF v_target > 2147483647 THEN
        RAISE EXCEPTION 'on hand of (shop %, item %, location %) would be %, beyond integer',
            p_shop_id, p_item_id, p_location_id, v_target
            USING ERRCODE = '22003';
    END IF;
    IF v_target < 0 THEN
        RAISE EXCEPTION 'on hand of (shop %, item %, location %) would be negative (%)',
            p_shop_id, p_item_id, p_location_id, v_target
            USING ERRCODE = '22023';
    END IF;
    IF v_target = v_stock.on_hand THEN
        RETURN v_stock.on_hand;
    END IF;

    IF v_target < v_stock.allocated THEN
        WITH picked AS (
            SELECT u.ctid AS row_id
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
            LIMIT v_stock.allocated - v_target
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM stockpool.pool_units AS d
        USING picked
        WHERE d.shop_id = p_shop_id
            AND d.ctid = picked.row_id;
        GET DIAGNOSTICS v_taken = ROW_COUNT;
        v_stock.allocated := v_stock.allocated - v_taken;
        -- Overdue holds next (_expire_overdue_tried, SKIP LOCKED). Their
        -- units leave allocated as far as the new on_hand needs; any surplus
        -- goes back to the pool (or, for a key without one, stays free on
        -- the ledger row).
        IF v_target < v_stock.allocated THEN
            SELECT e.units, e.holds INTO v_expired, v_expired_holds
            FROM stockpool._expire_overdue_tried(p_shop_id, p_item_id, p_location_id) AS e;
            v_taken := LEAST(v_expired, v_stock.allocated - v_target);
            IF v_stock.pool_target = 0 THEN
                -- No pool: the surplus is free on this row, which we hold.
                v_stock.allocated := v_stock.allocated - v_expired;
            ELSE
                v_stock.allocated := v_stock.allocated - v_taken;
                PERFORM stockpool._add_units(p_shop_id, p_item_id, p_location_id,
                                             v_expired - v_taken, v_stock.buckets);
            END IF;
        END IF;
        IF v_target < v_stock.allocated THEN
            RAISE EXCEPTION 'on hand of (shop %, item %, location %) cannot go below % units held by live holds or in-flight reservations (asked %)',
                p_shop_id, p_item_id, p_location_id, v_stock.allocated, v_target
                USING ERRCODE = 'SP002',
                      HINT = 'Wait for holds to be claimed, released or to expire, then retry.';
        END IF;
    END IF;

    UPDATE stockpool.stock AS s
    SET on_hand = v_target::integer,
        allocated = v_stock.allocated,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;

    INSERT INTO stockpool.movements
        (shop_id, item_id, location_id, delta, on_hand_after, reason)
    VALUES (p_shop_id, p_item_id, p_location_id, (v_target - v_stock.on_hand)::integer,
            v_target::integer, CASE WHEN p_relative THEN 'adjust' ELSE 'set' END);

    FOR v_i IN 1..v_expired_holds LOOP
        PERFORM stockpool._tally_expiry();
    END LOOP;
    RETURN v_target::integer;
END;
$$;

ALTER FUNCTION stockpool._apply_on_hand(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_value bigint, p_relative boolean) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _apply_on_hand(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_value bigint, p_relative boolean); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._apply_on_hand(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_value bigint, p_relative boolean) IS 'Internal: shared body of set_stock and adjust_stock.';

--
-- Name: _buckets_to_note(integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._buckets_to_note(p_pool_target integer, p_buckets integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN p_pool_target > 0 THEN p_buckets ELSE 0 END;
$$;

ALTER FUNCTION stockpool._buckets_to_note(p_pool_target integer, p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _buckets_to_note(p_pool_target integer, p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._buckets_to_note(p_pool_target integer, p_buckets integer) IS 'Internal: the buckets the session''s note of pooled keys records for a key''s row (0: no pool, not noted).';

--
-- Name: _cool(bigint, bigint, bigint, interval); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._cool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quiet interval) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_stock stockpool.stock;
    v_units integer;
    v_left boolean;
BEGIN
    IF NOT pg_catalog.pg_try_advisory_xact_lock(
            stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id)) THEN
        RETURN 0;
    END IF;
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND OR v_stock.pool_target = 0
        OR v_stock.refilled_at > pg_catalog.now() - p_quiet THEN
        RETURN 0;
    END IF;

    WITH picked AS (
        SELECT u.ctid AS row_id
        FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM stockpool.pool_units AS d
    USING picked
    WHERE d.shop_id = p_shop_id
        AND d.ctid = picked.row_id;
    GET DIAGNOSTICS v_units = ROW_COUNT;

    v_left := EXISTS (
        SELECT FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
    );
    UPDATE stockpool.stock AS s
    SET allocated = s.allocated - v_units,
        pool_target = CASE WHEN v_left THEN s.pool_target ELSE 0 END,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    RETURN v_units;
END;
$$;

ALTER FUNCTION stockpool._cool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quiet interval) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _cool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quiet interval); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._cool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quiet interval) IS 'Internal: hand a quiet key''s pool back to its ledger row (try-locks and SKIP LOCKED only).';

--
-- Name: _cool_quiet(integer, interval); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._cool_quiet(p_batch integer, p_quiet interval) RETURNS integer
    LANGUAGE sql
    AS $$
    SELECT coalesce(pg_catalog.sum(stockpool._cool(k.shop_id, k.item_id, k.location_id, p_quiet)), 0)::integer
    FROM (
        SELECT s.shop_id, s.item_id, s.location_id
        FROM stockpool.stock AS s
        WHERE s.pool_target > 0
            AND s.refilled_at < pg_catalog.now() - p_quiet
        ORDER BY s.refilled_at
        LIMIT p_batch
    ) AS k;
$$;

ALTER FUNCTION stockpool._cool_quiet(p_batch integer, p_quiet interval) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _cool_quiet(p_batch integer, p_quiet interval); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._cool_quiet(p_batch integer, p_quiet interval) IS 'Internal: hand the pools of up to p_batch keys quiet for p_quiet back to their ledger rows; returns units.';

--
-- Name: _existing_hold(bigint, uuid, bigint, bigint, integer, interval); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._existing_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_hold stockpool.holds;
BEGIN
    SELECT h.* INTO v_hold
    FROM stockpool.holds AS h
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id;

    IF NOT FOUND OR v_hold.status IN ('released', 'expired') THEN
        RETURN false;
    END IF;

    IF v_hold.quantity <> p_quantity THEN
        RAISE EXCEPTION 'checkout % already holds % units of item % at location %, not %',
            p_checkout_id, v_hold.quantity, p_item_id, p_location_id, p_quantity
            USING ERRCODE = 'SP007',
                  HINT = 'Release the checkout first, or reserve under a new checkout id.';
    END IF;

    IF v_hold.status = 'held' AND v_hold.expires_at <= pg_catalog.now() THEN
        -- Renewed only if still held: a sweeper or a cycle count may have
        -- expired it since the look above (this UPDATE waits for it and
        -- re-reads the row), and its units are then back in the pool.
        UPDATE stockpool.holds AS h
        SET expires_at = pg_catalog.now() + p_ttl,
            updated_at = pg_catalog.now()
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = p_checkout_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
            AND h.status = 'held';
        IF NOT FOUND THEN
            RETURN false;  -- expired meanwhile: a new hold must be taken
        END IF;
    END IF;

    RETURN true;
END;
$$;

ALTER FUNCTION stockpool._existing_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _existing_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._existing_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval) IS 'Internal: idempotency check of a reservation against the checkout''s existing hold.';

--
-- Name: _expire_due(integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._expire_due(p_batch integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_key record;
    v_holds integer := 0;
BEGIN
    FOR v_key IN
        WITH due AS (
            SELECT h.shop_id, h.checkout_id, h.item_id, h.location_id
            FROM stockpool.holds AS h
            WHERE h.status = 'held'
                AND h.expires_at <= pg_catalog.now()
            ORDER BY h.expires_at
            LIMIT p_batch
            FOR UPDATE SKIP LOCKED
        ),
        expired AS (
            UPDATE stockpool.holds AS h
            SET status = 'expired',
                updated_at = pg_catalog.now()
            FROM due
            WHERE h.shop_id = due.shop_id
                AND h.checkout_id = due.checkout_id
                AND h.item_id = due.item_id
                AND h.location_id = due.location_id
            RETURNING h.shop_id, h.checkout_id, h.item_id, h.location_id, h.quantity, h.labels
        )
        -- One row per counted hold (its labels are NULL), one per label of
        -- a named one: a key is one or the other.
        SELECT e.shop_id, e.item_id, e.location_id,
               coalesce(pg_catalog.sum(e.quantity) FILTER (WHERE e.labels IS NULL), 0)::integer AS units,
               pg_catalog.count(DISTINCT e.checkout_id)::integer AS holds,
               pg_catalog.array_agg(l.label) FILTER (WHERE l.label IS NOT NULL) AS labels,
               pg_catalog.min(s.buckets) AS buckets
        FROM expired AS e
        LEFT JOIN LATERAL pg_catalog.unnest(e.labels) AS l (label)
            ON true
        JOIN stockpool.stock AS s
            ON s.shop_id = e.shop_id
            AND s.item_id = e.item_id
            AND s.location_id = e.location_id
        GROUP BY e.shop_id, e.item_id, e.location_id
        ORDER BY e.shop_id, e.item_id, e.location_id
    LOOP
        PERFORM stockpool._return_units(v_key.shop_id, v_key.item_id, v_key.location_id,
                                        v_key.units, v_key.buckets);
        PERFORM stockpool._free_labels(v_key.shop_id, v_key.item_id, v_key.location_id,
                                       v_key.labels, v_key.buckets);
        v_holds := v_holds + v_key.holds;
    END LOOP;
    RETURN v_holds;
END;
$$;

ALTER FUNCTION stockpool._expire_due(p_batch integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _expire_due(p_batch integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._expire_due(p_batch integer) IS 'Internal: expire up to p_batch overdue holds (SKIP LOCKED) and return their units; returns holds expired.';

--
-- Name: _expire_key(bigint, bigint, bigint, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._expire_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_units integer;
    v_holds integer;
    v_labels text[];
BEGIN
    WITH due AS (
        SELECT h.checkout_id
        FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
            AND h.status = 'held'
            AND h.expires_at <= pg_catalog.now()
        ORDER BY h.checkout_id
        FOR UPDATE
    ),
    expired AS (
        UPDATE stockpool.holds AS h
        SET status = 'expired',
            updated_at = pg_catalog.now()
        FROM due
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = due.checkout_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
        RETURNING h.quantity, h.labels
    )
    SELECT coalesce(pg_catalog.sum(e.quantity) FILTER (WHERE e.labels IS NULL), 0)::integer,
           pg_catalog.count(*)::integer,
           (SELECT pg_catalog.array_agg(l.label)
            FROM expired AS n
            CROSS JOIN LATERAL pg_catalog.unnest(n.labels) AS l (label))
    INTO v_units, v_holds, v_labels
    FROM expired AS e;

    PERFORM stockpool._add_units(p_shop_id, p_item_id, p_location_id, v_units, p_buckets);
    PERFORM stockpool._free_labels(p_shop_id, p_item_id, p_location_id, v_labels, p_buckets);
    RETURN v_holds;
END;
$$;

ALTER FUNCTION stockpool._expire_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _expire_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._expire_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer) IS 'Internal: expire one key''s overdue holds and return their units to its pool; returns holds expired.';

--
-- Name: _expire_overdue_tried(bigint, bigint, bigint); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._expire_overdue_tried(p_shop_id bigint, p_item_id bigint, p_location_id bigint, OUT units integer, OUT holds integer) RETURNS record
    LANGUAGE plpgsql
    SET lock_timeout TO '50ms'
    AS $$
BEGIN
    WITH due AS (
        SELECT h.checkout_id
        FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
            AND h.status = 'held'
            AND h.expires_at <= pg_catalog.now()
        FOR UPDATE SKIP LOCKED
    ),
    expired AS (
        UPDATE stockpool.holds AS h
        SET status = 'expired',
            updated_at = pg_catalog.now()
        FROM due
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = due.checkout_id
            AND h.item_id = p_item_id
            AND h.location_id = p_location_id
        RETURNING h.quantity
    )
    SELECT coalesce(pg_catalog.sum(expired.quantity), 0)::integer, pg_catalog.count(*)::integer
    INTO units, holds
    FROM expired;
EXCEPTION
    -- Rolled back: nothing expired.
    WHEN lock_not_available OR deadlock_detected THEN
        units := 0;
        holds := 0;
END;
$$;

ALTER FUNCTION stockpool._expire_overdue_tried(p_shop_id bigint, p_item_id bigint, p_location_id bigint, OUT units integer, OUT holds integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _expire_overdue_tried(p_shop_id bigint, p_item_id bigint, p_location_id bigint, OUT units integer, OUT holds integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._expire_overdue_tried(p_shop_id bigint, p_item_id bigint, p_location_id bigint, OUT units integer, OUT holds integer) IS 'Internal: expire a key''s overdue holds SKIP LOCKED for a cycle count, giving up after 50 ms of waiting; returns (units, holds).';

--
-- Name: _free_labels(bigint, bigint, bigint, text[], integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._free_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_buckets integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_freed integer;
BEGIN
    IF p_labels IS NULL THEN
        RETURN 0;
    END IF;
    INSERT INTO stockpool.named_free (shop_id, item_id, location_id, bucket, position, label)
    SELECT p_shop_id, p_item_id, p_location_id,
           ((u.position % p_buckets) + p_buckets) % p_buckets, u.position, u.label
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels)
    ORDER BY ((u.position % p_buckets) + p_buckets) % p_buckets, u.position;
    GET DIAGNOSTICS v_freed = ROW_COUNT;
    RETURN v_freed;
END;
$$;

ALTER FUNCTION stockpool._free_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _free_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._free_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_buckets integer) IS 'Internal: put a named key''s units (by label) back among its free units.';

--
-- Name: _hold_valid(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._hold_valid() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- One test for a valid row, the detail only for a bad one: PL/pgSQL
    -- prepares each expression once per transaction.
    IF NEW.quantity > 0 AND NEW.status IN ('held', 'claimed', 'released', 'expired')
        AND (NEW.labels IS NULL OR pg_catalog.cardinality(NEW.labels) = NEW.quantity) THEN
        RETURN NEW;
    END IF;
    IF NEW.quantity <= 0 THEN
        RAISE EXCEPTION 'new row for relation "holds" violates check constraint "holds_quantity_positive"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'holds',
                  CONSTRAINT = 'holds_quantity_positive',
                  DETAIL = pg_catalog.format('quantity %s is not positive', NEW.quantity);
    END IF;
    IF NEW.status NOT IN ('held', 'claimed', 'released', 'expired') THEN
        RAISE EXCEPTION 'new row for relation "holds" violates check constraint "holds_status_known"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'holds',
                  CONSTRAINT = 'holds_status_known',
                  DETAIL = pg_catalog.format('status %L is not held, claimed, released or expired', NEW.status);
    END IF;
    IF pg_catalog.cardinality(NEW.labels) <> NEW.quantity THEN
        RAISE EXCEPTION 'new row for relation "holds" violates check constraint "holds_labels_match_quantity"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'holds',
                  CONSTRAINT = 'holds_labels_match_quantity',
                  DETAIL = pg_catalog.format('%s labels for quantity %s', pg_catalog.cardinality(NEW.labels),
                                             NEW.quantity);
    END IF;
    -- None broken: a NULL where the table has NOT NULL (before this runs,
    -- PostgreSQL has not checked it yet), which the table then refuses.
    RETURN NEW;
END;
$$;

ALTER FUNCTION stockpool._hold_valid() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _hold_valid(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._hold_valid() IS 'Internal: BEFORE trigger function of stockpool.holds; refuses a quantity that is not positive, an unknown status and labels not as many as the quantity (23514, naming the rule).';

--
-- Name: _key_lock_id(bigint, bigint, bigint); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._key_lock_id(p_shop_id bigint, p_item_id bigint, p_location_id bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT pg_catalog.hashtextextended(
        'stockpool.key/' || p_shop_id::text || '/' || p_item_id::text || '/' || p_location_id::text,
        0
    );
$$;

ALTER FUNCTION stockpool._key_lock_id(p_shop_id bigint, p_item_id bigint, p_location_id bigint) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _key_lock_id(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._key_lock_id(p_shop_id bigint, p_item_id bigint, p_location_id bigint) IS 'Internal: advisory lock id of a stock key (refill lock).';

--
-- Name: _lock_checkout(bigint, uuid); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._lock_checkout(p_shop_id bigint, p_checkout_id uuid) RETURNS void
    LANGUAGE sql
    AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtext('stockpool.checkout/' || p_shop_id::text),
        pg_catalog.hashtext(p_checkout_id::text)
    );
$$;

ALTER FUNCTION stockpool._lock_checkout(p_shop_id bigint, p_checkout_id uuid) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _lock_checkout(p_shop_id bigint, p_checkout_id uuid); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._lock_checkout(p_shop_id bigint, p_checkout_id uuid) IS 'Internal: transaction-scoped lock serialising all operations of one checkout.';

--
-- Name: _maintain_step(text, integer, interval, timestamp with time zone); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._maintain_step(p_step text, p_batch integer, p_quiet interval, p_until timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    SET lock_timeout TO '50ms'
    AS $$
DECLARE
    v_done integer := 0;
    v_batch integer;
BEGIN
    BEGIN
        IF p_step = 'expire' THEN
            LOOP
                v_batch := stockpool._expire_due(p_batch);
                v_done := v_done + v_batch;
                EXIT WHEN p_until IS NULL OR v_batch < p_batch OR pg_catalog.clock_timestamp() >= p_until;
            END LOOP;
        ELSIF p_step = 'settle' THEN
            v_done := stockpool._settle_due(p_batch);
        ELSIF p_step = 'cool' THEN
            v_done := stockpool._cool_quiet(p_batch, p_quiet);
        ELSIF p_step = 'top_up' THEN
            v_done := stockpool._top_up_low(p_batch, p_quiet);
        ELSE
            RAISE EXCEPTION 'stockpool._maintain_step: unknown step %', p_step;
        END IF;
    EXCEPTION
        WHEN lock_not_available OR deadlock_detected THEN
            PERFORM stockpool._tally_maintenance_yield();
            RETURN 0;
    END;
    IF p_step = 'expire' THEN
        FOR v_i IN 1..v_done LOOP
            PERFORM stockpool._tally_expiry();
        END LOOP;
    END IF;
    RETURN v_done;
END;
$$;

ALTER FUNCTION stockpool._maintain_step(p_step text, p_batch integer, p_quiet interval, p_until timestamp with time zone) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _maintain_step(p_step text, p_batch integer, p_quiet interval, p_until timestamp with time zone); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._maintain_step(p_step text, p_batch integer, p_quiet interval, p_until timestamp with time zone) IS 'Internal: one step of sweep or maintain (expire, settle, cool, top_up) under lock_timeout 50 ms in a subtransaction; a step that waits is rolled back, counted (maintenance_yields_total) and returns 0.';

--
-- Name: _mixed_key(bigint, bigint, bigint, boolean); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._mixed_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_named boolean) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_named THEN
        RAISE EXCEPTION 'stock key (shop %, item %, location %) has named units, not counted ones',
            p_shop_id, p_item_id, p_location_id
            USING ERRCODE = 'SP010',
                  HINT = 'Use stockpool.reserve_named(), reserve_labels(), set_named_units() or retire_named_units().';
    END IF;
    RAISE EXCEPTION 'stock key (shop %, item %, location %) has counted units, not named ones',
        p_shop_id, p_item_id, p_location_id
        USING ERRCODE = 'SP010',
              HINT = 'Use stockpool.reserve_units(), reserve_cart(), set_stock() or adjust_stock(); '
                     'named units need a key of their own.';
END;
$$;

ALTER FUNCTION stockpool._mixed_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_named boolean) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _mixed_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_named boolean); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._mixed_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_named boolean) IS 'Internal: raise SP010 for a call that would mix counted and named units on one key (the only place that does).';

--
-- Name: _movements_immutable(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._movements_immutable() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'stockpool.movements is append-only: % refused', tg_op
        USING ERRCODE = 'SP009',
              HINT = 'Correct stock with stockpool.adjust_stock(), which records a new movement.';
END;
$$;

ALTER FUNCTION stockpool._movements_immutable() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _movements_immutable(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._movements_immutable() IS 'Internal: trigger function of stockpool.movements; refuses UPDATE, DELETE and TRUNCATE (SP009).';

--
-- Name: _note_key(bigint, bigint, bigint); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._note_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT pg_catalog.format(',%s/%s/%s:', p_shop_id, p_item_id, p_location_id);
$$;

ALTER FUNCTION stockpool._note_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _note_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._note_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint) IS 'Internal: a stock key as the session''s note of pooled keys writes it ('',shop/item/location:'').';

--
-- Name: _noted_buckets(bigint, bigint, bigint); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._noted_buckets(p_shop_id bigint, p_item_id bigint, p_location_id bigint) RETURNS integer
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT coalesce(NULLIF(pg_catalog.split_part(pg_catalog.split_part(
               coalesce(pg_catalog.current_setting('stockpool.pooled_keys', true), ''),
               stockpool._note_key(p_shop_id, p_item_id, p_location_id), 2), ',', 1), '')::integer, 0);
$$;

ALTER FUNCTION stockpool._noted_buckets(p_shop_id bigint, p_item_id bigint, p_location_id bigint) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _noted_buckets(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._noted_buckets(p_shop_id bigint, p_item_id bigint, p_location_id bigint) IS 'Internal: the buckets the session''s note of pooled keys records for a key; 0 when it is not noted.';

--
-- Name: _null_args(text[], boolean[]); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._null_args(p_names text[], p_is_null boolean[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT pg_catalog.string_agg(a.name, ', ' ORDER BY a.ord)
    FROM ROWS FROM (pg_catalog.unnest(p_names), pg_catalog.unnest(p_is_null))
        WITH ORDINALITY AS a (name, is_null, ord)
    WHERE a.is_null;
$$;

ALTER FUNCTION stockpool._null_args(p_names text[], p_is_null boolean[]) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _null_args(p_names text[], p_is_null boolean[]); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._null_args(p_names text[], p_is_null boolean[]) IS 'Internal: comma-separated names of NULL arguments, for error messages.';

--
-- Name: _pool_level(integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._pool_level(p_pool_target integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT GREATEST(16, p_pool_target);
$$;

ALTER FUNCTION stockpool._pool_level(p_pool_target integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _pool_level(p_pool_target integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._pool_level(p_pool_target integer) IS 'Internal: the level of a pool of this pool_target: never below 16, the first pool a key gets.';

--
-- Name: _pool_look(bigint, bigint, bigint, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._pool_look(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_noted_buckets integer, p_sampled integer) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_stock stockpool.stock;
BEGIN
    v_stock := stockpool._stock_row(p_shop_id, p_item_id, p_location_id);
    IF stockpool._buckets_to_note(v_stock.pool_target, v_stock.buckets) <> p_noted_buckets THEN
        PERFORM stockpool._pooled_note(p_shop_id, p_item_id, p_location_id,
                                       stockpool._buckets_to_note(v_stock.pool_target, v_stock.buckets));
    END IF;
    IF v_stock.on_hand > v_stock.allocated
        AND stockpool._should_look(v_stock.pool_target, v_stock.low_water, v_stock.pool_cap, p_sampled)
        AND stockpool._refill(p_shop_id, p_item_id, p_location_id,
                              p_min_extra => 0, p_wait => false, p_low_water_only => true) > 0 THEN
        PERFORM stockpool._tally_refill();
    END IF;
END;
$$;

ALTER FUNCTION stockpool._pool_look(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_noted_buckets integer, p_sampled integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _pool_look(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_noted_buckets integer, p_sampled integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._pool_look(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_noted_buckets integer, p_sampled integer) IS 'Internal: the pool''s path''s sampled read of a key''s row: the session''s note brought up to date, and the low-water look.';

--
-- Name: _pooled_note(bigint, bigint, bigint, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._pooled_note(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    -- Keys kept. A noted key that drops out pays a missed try and the careful
    -- path before it is noted again, and keys drop out in the order they
    -- were noted, the hottest first: at 16, the bench's Zipf catalogue (about
    -- 120 keys pooled in 10 s) sent 23% of its reservations down the
    -- careful path, at 256 7% (commands.md, run 17). A search of a full
    -- note (about 4 kB) costs a reservation about 2 microseconds.
    c_keys constant integer := 256;
    -- The key as the note writes it, between its leading comma and its buckets.
    v_key text := stockpool._note_key(p_shop_id, p_item_id, p_location_id);
    v_note text := coalesce(pg_catalog.current_setting('stockpool.pooled_keys', true), '');
    -- What follows the key in the note: its buckets and the keys after it;
    -- empty when the key is not noted.
    v_after text := pg_catalog.split_part(v_note, v_key, 2);
BEGIN
    -- String functions only, each one pass over the note in C: every session
    -- notes each pooled key it meets, and taking the note apart into rows
    -- cost a discovery more than the reservation it was part of.
    IF v_after <> '' THEN
        -- The key's entry out: what came before it, then from the comma
        -- that ends its buckets.
        v_note := pg_catalog.split_part(v_note, v_key, 1)
            || pg_catalog.substr(v_after, pg_catalog.strpos(v_after, ','));
    END IF;
    IF p_buckets > 0 THEN
        v_note := v_key || p_buckets || CASE WHEN v_note = '' THEN ',' ELSE v_note END;
        -- One comma more than keys; an entry is at least 8 bytes, so a
        -- shorter note cannot hold too many. Past c_keys the oldest go.
        IF pg_catalog.octet_length(v_note) > 8 * c_keys
            AND pg_catalog.octet_length(v_note)
                - pg_catalog.octet_length(pg_catalog.replace(v_note, ',', '')) > c_keys + 1 THEN
            v_note := ',' || pg_catalog.array_to_string(
                (pg_catalog.string_to_array(pg_catalog.btrim(v_note, ','), ','))[1:c_keys], ',') || ',';
        END IF;
    ELSIF v_note = ',' THEN
        v_note := '';
    END IF;
    PERFORM pg_catalog.set_config('stockpool.pooled_keys', v_note, false);
END;
$$;

ALTER FUNCTION stockpool._pooled_note(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _pooled_note(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._pooled_note(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer) IS 'Internal: put a key seen pooled at the front of the session''s note (stockpool.pooled_keys) with its buckets, or take out one seen on its ledger (p_buckets 0).';

--
-- Name: _pooled_upto(bigint, bigint, bigint, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._pooled_upto(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_mark integer, p_buckets integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    -- Above this mark the count looks at one bucket, not the pool.
    c_exact_count constant integer := 4096;
    v_bucket integer;
    v_pooled integer;
BEGIN
    IF p_mark <= c_exact_count THEN
        SELECT pg_catalog.count(*)::integer INTO v_pooled
        FROM (
            SELECT 1
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
                AND u.xmax = '0'::xid
            LIMIT p_mark + 1
        ) AS live;
    ELSE
        v_bucket := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
        SELECT pg_catalog.count(*)::integer * p_buckets INTO v_pooled
        FROM (
            SELECT 1
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
                AND u.xmax = '0'::xid
                AND u.bucket = v_bucket
            LIMIT p_mark / p_buckets + 1
        ) AS live;
    END IF;
    RETURN v_pooled;
END;
$$;

ALTER FUNCTION stockpool._pooled_upto(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_mark integer, p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _pooled_upto(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_mark integer, p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._pooled_upto(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_mark integer, p_buckets integer) IS 'Internal: units pooled for a key, counted no further than p_mark + 1 (one bucket, scaled, above 4,096).';

--
-- Name: _record_hold(bigint, uuid, bigint, bigint, integer, interval, boolean, text[]); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._record_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval, p_reopen boolean, p_labels text[] DEFAULT NULL::text[]) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO stockpool.holds AS h
        (shop_id, checkout_id, item_id, location_id, quantity, status, expires_at, created_at, labels)
    VALUES
        (p_shop_id, p_checkout_id, p_item_id, p_location_id, p_quantity, 'held',
         pg_catalog.now() + p_ttl, pg_catalog.clock_timestamp(), p_labels)
    ON CONFLICT ON CONSTRAINT holds_pkey DO NOTHING;
    IF FOUND THEN
        RETURN true;
    ELSIF NOT p_reopen THEN
        RETURN false;
    END IF;

    UPDATE stockpool.holds AS h
    SET quantity = p_quantity,
        status = 'held',
        expires_at = pg_catalog.now() + p_ttl,
        created_at = pg_catalog.clock_timestamp(),
        updated_at = pg_catalog.now(),
        labels = p_labels
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id;
    RETURN true;
END;
$$;

ALTER FUNCTION stockpool._record_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval, p_reopen boolean, p_labels text[]) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _record_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval, p_reopen boolean, p_labels text[]); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._record_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval, p_reopen boolean, p_labels text[]) IS 'Internal: write a checkout''s hold row on one key (the only insert of one); with p_reopen re-open an existing one, without it return false when one exists.';

--
-- Name: _refill(bigint, bigint, bigint, integer, boolean, boolean, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._refill(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_min_extra integer, p_wait boolean, p_low_water_only boolean, p_cap integer DEFAULT NULL::integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    -- Seconds of demand a pool holds, and the most it holds (the least: _pool_level).
    c_pool_seconds constant numeric := 20;
    c_pool_max constant integer := 262144;
    v_stock stockpool.stock;
    v_level integer;
    v_mark integer;
    v_pooled integer;
    v_seconds numeric;
    v_target integer;
    v_buckets integer;
    v_add integer;
BEGIN
    -- Cheap unlocked look first: nothing free means nothing to queue for.
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND OR v_stock.on_hand - v_stock.allocated <= 0 THEN
        RETURN 0;
    END IF;

    IF p_wait THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(
            stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));
    ELSIF NOT pg_catalog.pg_try_advisory_xact_lock(
            stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id)) THEN
        RETURN 0;
    END IF;

    -- Count what is pooled before touching the ledger row, never more
    -- entries than the decision needs.
    v_level := stockpool._pool_level(v_stock.pool_target);
    v_mark := stockpool._refill_mark(v_level, v_stock.low_water, v_stock.pool_cap);
    IF p_low_water_only
        AND stockpool._pooled_upto(p_shop_id, p_item_id, p_location_id, v_mark, v_stock.buckets) > v_mark THEN
        RETURN 0;
    END IF;
    -- What the refill is sized by is counted exactly: above 4,096 units the
    -- low-water check estimates from one bucket, and an estimate that came
    -- out low would read as demand (the level minus what is left) and fill
    -- the pool far past it. Units being taken by transactions still in
    -- flight are not counted (see _pooled_upto): they are demand.
    SELECT pg_catalog.count(*)::integer INTO v_pooled
    FROM (
        SELECT 1
        FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
            AND u.xmax = '0'::xid
        LIMIT GREATEST(coalesce(p_cap, c_pool_max), p_min_extra)
    ) AS live;
    IF p_low_water_only AND v_pooled > v_mark THEN
        RETURN 0;
    END IF;

    -- The ledger row, and since this transaction holds it now anyway, the
    -- key's pending claims are folded into it (free stock, on_hand minus
    -- allocated, is the same before and after).
    PERFORM stockpool._settle(p_shop_id, p_item_id, p_location_id, true);
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;

    IF p_cap IS NOT NULL THEN
        v_target := p_cap;
    ELSIF v_stock.pool_target = 0 THEN
        -- The key's first pool (its buyers just met, or met again after it
        -- cooled down): small, whatever an old refilled_at would suggest.
        v_target := stockpool._pool_level(0);
    ELSE
        v_level := stockpool._pool_level(v_stock.pool_target);
        v_mark := stockpool._refill_mark(v_level, v_stock.low_water, v_stock.pool_cap);
        v_seconds := EXTRACT(EPOCH FROM pg_catalog.now() - v_stock.refilled_at);
        -- Demand is measured once the pool has come down to its mark. A
        -- buyer that found no free unit in a pool above it (every unit it
        -- looked at was being taken) gets its shortfall, and the level stays:
        -- a few units taken over a long time would read as a demand that
        -- shrinks a rush's pool to nothing.
        IF v_seconds > 0 AND v_pooled <= v_mark THEN
            -- What the pool gave out since it was filled to v_level, per second.
            v_target := LEAST((v_level - v_pooled) / v_seconds * c_pool_seconds,
                              2::numeric * v_level, c_pool_max)::integer;
            v_target := stockpool._pool_level(v_target);
        ELSE
            v_target := v_level;
        END IF;
    END IF;

    v_add := LEAST(
        v_stock.on_hand - v_stock.allocated,
        GREATEST(v_target - v_pooled, p_min_extra)
    );
    IF v_add <= 0 THEN
        RETURN 0;
    END IF;

    -- Spreading grows with the pool: one bucket per 128 units of the level
    -- (never fewer than the key's setting, at most 1,024). Otherwise each
    -- bucket of a large pool is a long run of units whose first index leaf
    -- every claimer of that bucket reads: never unpinned under hundreds of
    -- clients, and vacuum needs a cleanup lock on every leaf, so it waited
    -- seconds for them while dead tuples piled up. Raised, never lowered.
    v_buckets := GREATEST(v_stock.buckets, LEAST(1024, v_target / 128));

    PERFORM stockpool._add_units(p_shop_id, p_item_id, p_location_id, v_add, v_buckets);

    UPDATE stockpool.stock AS s
    SET allocated = s.allocated + v_add,
        pool_target = v_target,
        buckets = v_buckets,
        refilled_at = pg_catalog.now(),
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;

    RETURN v_add;
END;
$$;

ALTER FUNCTION stockpool._refill(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_min_extra integer, p_wait boolean, p_low_water_only boolean, p_cap integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _refill(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_min_extra integer, p_wait boolean, p_low_water_only boolean, p_cap integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._refill(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_min_extra integer, p_wait boolean, p_low_water_only boolean, p_cap integer) IS 'Internal: top a key''s pool up from free stock, sized by its demand, under its advisory refill lock.';

--
-- Name: _refill_mark(integer, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._refill_mark(p_level integer, p_low_water integer, p_pool_cap integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- bigint: three quarters of a level near the integer maximum must not overflow.
    SELECT LEAST(p_level::bigint * 3 / 4,
                 GREATEST(p_low_water, p_level - GREATEST(p_pool_cap - p_low_water, p_level / 4)))::integer;
$$;

ALTER FUNCTION stockpool._refill_mark(p_level integer, p_low_water integer, p_pool_cap integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _refill_mark(p_level integer, p_low_water integer, p_pool_cap integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._refill_mark(p_level integer, p_low_water integer, p_pool_cap integer) IS 'Internal: the low-water mark of a pool of level p_level: topped up once no more units than this are left.';

--
-- Name: _return_units(bigint, bigint, bigint, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._return_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_quantity <= 0 THEN
        RETURN 0;
    END IF;
    UPDATE stockpool.stock AS s
    SET allocated = s.allocated - p_quantity
    WHERE s.ctid = (
            SELECT l.ctid
            FROM stockpool.stock AS l
            WHERE l.shop_id = p_shop_id
                AND l.item_id = p_item_id
                AND l.location_id = p_location_id
                AND l.pool_target = 0
            FOR NO KEY UPDATE SKIP LOCKED
        )
        AND s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF FOUND THEN
        RETURN p_quantity;
    END IF;
    RETURN stockpool._add_units(p_shop_id, p_item_id, p_location_id, p_quantity, p_buckets);
END;
$$;

ALTER FUNCTION stockpool._return_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _return_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._return_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) IS 'Internal: give units back to a key: its free ledger row when it has no pool, else its pool.';

--
-- Name: _sample_span(integer, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._sample_span(p_pool_target integer, p_low_water integer, p_pool_cap integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT GREATEST(stockpool._refill_mark(stockpool._pool_level(p_pool_target), p_low_water, p_pool_cap),
                    stockpool._pool_level(p_pool_target) / 4);
$$;

ALTER FUNCTION stockpool._sample_span(p_pool_target integer, p_low_water integer, p_pool_cap integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _sample_span(p_pool_target integer, p_low_water integer, p_pool_cap integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._sample_span(p_pool_target integer, p_low_water integer, p_pool_cap integer) IS 'Internal: the units over which _should_look spreads its looks: the larger of the refill mark and a quarter of the level.';

--
-- Name: _settle(bigint, bigint, bigint, boolean, uuid, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._settle(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_wait boolean, p_checkout_id uuid DEFAULT NULL::uuid, p_quantity integer DEFAULT 0) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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
$$;

ALTER FUNCTION stockpool._settle(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_wait boolean, p_checkout_id uuid, p_quantity integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _settle(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_wait boolean, p_checkout_id uuid, p_quantity integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._settle(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_wait boolean, p_checkout_id uuid, p_quantity integer) IS 'Internal: fold a key''s pending claims (and the caller''s own) into its ledger row, with their movements; NULL when the row is busy and p_wait is false.';

--
-- Name: _settle_due(integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._settle_due(p_batch integer) RETURNS integer
    LANGUAGE sql
    AS $$
    SELECT coalesce(pg_catalog.sum(stockpool._settle(k.shop_id, k.item_id, k.location_id, false)), 0)::integer
    FROM (
        SELECT DISTINCT c.shop_id, c.item_id, c.location_id
        FROM stockpool.pending_claims AS c
        ORDER BY c.shop_id, c.item_id, c.location_id
        LIMIT p_batch
    ) AS k;
$$;

ALTER FUNCTION stockpool._settle_due(p_batch integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _settle_due(p_batch integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._settle_due(p_batch integer) IS 'Internal: fold the pending claims of up to p_batch keys whose ledger row is free; returns units folded.';

--
-- Name: _should_look(integer, integer, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._should_look(p_pool_target integer, p_low_water integer, p_pool_cap integer, p_sampled integer) RETURNS boolean
    LANGUAGE sql PARALLEL SAFE
    AS $$
    -- c_looks: 8 looks per mark's worth of reservations; and a mark (or
    -- quarter level) of at most c_always, 24 units, on every take.
    SELECT stockpool._sample_span(p_pool_target, p_low_water, p_pool_cap) <= 24
        OR pg_catalog.random() * stockpool._sample_span(p_pool_target, p_low_water, p_pool_cap) < 8 * p_sampled;
$$;

ALTER FUNCTION stockpool._should_look(p_pool_target integer, p_low_water integer, p_pool_cap integer, p_sampled integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _should_look(p_pool_target integer, p_low_water integer, p_pool_cap integer, p_sampled integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._should_look(p_pool_target integer, p_low_water integer, p_pool_cap integer, p_sampled integer) IS 'Internal: whether a reservation that took a pooled unit looks at the pool''s low water now (sampled).';

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: stock; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.stock (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    on_hand integer NOT NULL,
    allocated integer DEFAULT 0 NOT NULL,
    pool_cap integer DEFAULT 1000 NOT NULL,
    low_water integer DEFAULT 250 NOT NULL,
    buckets integer DEFAULT 64 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    pool_target integer DEFAULT 0 NOT NULL,
    refilled_at timestamp with time zone,
    named boolean DEFAULT false NOT NULL,
    CONSTRAINT stock_allocated_within_on_hand CHECK (((allocated >= 0) AND (allocated <= on_hand)))
);

ALTER TABLE stockpool.stock OWNER TO stockpool_owner;

--
-- Name: COLUMN stock.pool_target; Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON COLUMN stockpool.stock.pool_target IS 'Fill level the last refill aimed at, sized by demand (0: never refilled); the pool is filled to at least pool_cap.';

--
-- Name: COLUMN stock.refilled_at; Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON COLUMN stockpool.stock.refilled_at IS 'When the key''s pool was last refilled; with pool_target it measures the key''s demand.';

--
-- Name: COLUMN stock.named; Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON COLUMN stockpool.stock.named IS 'true: a named key (units with a label and a position, stockpool.named_units); false: a counted key.';

--
-- Name: _stock_row(bigint, bigint, bigint); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._stock_row(p_shop_id bigint, p_item_id bigint, p_location_id bigint) RETURNS stockpool.stock
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_stock stockpool.stock;
BEGIN
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    RETURN v_stock;
END;
$$;

ALTER FUNCTION stockpool._stock_row(p_shop_id bigint, p_item_id bigint, p_location_id bigint) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _stock_row(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._stock_row(p_shop_id bigint, p_item_id bigint, p_location_id bigint) IS 'Internal: a key''s ledger row; SP001 when the key is unknown.';

--
-- Name: _stock_settings_valid(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._stock_settings_valid() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.pool_cap <= 0 THEN
        RAISE EXCEPTION 'new row for relation "stock" violates check constraint "stock_pool_cap_positive"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'stock',
                  CONSTRAINT = 'stock_pool_cap_positive',
                  DETAIL = pg_catalog.format('pool_cap %s is not positive', NEW.pool_cap);
    END IF;
    IF NEW.low_water < 0 OR NEW.low_water >= NEW.pool_cap THEN
        RAISE EXCEPTION 'new row for relation "stock" violates check constraint "stock_low_water_within_cap"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'stock',
                  CONSTRAINT = 'stock_low_water_within_cap',
                  DETAIL = pg_catalog.format('low_water %s is not in [0, pool_cap %s)', NEW.low_water, NEW.pool_cap);
    END IF;
    IF NEW.buckets < 1 OR NEW.buckets > 1024 THEN
        RAISE EXCEPTION 'new row for relation "stock" violates check constraint "stock_buckets_range"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'stock',
                  CONSTRAINT = 'stock_buckets_range',
                  DETAIL = pg_catalog.format('buckets %s is not in [1, 1024]', NEW.buckets);
    END IF;
    IF NEW.pool_target < 0 THEN
        RAISE EXCEPTION 'new row for relation "stock" violates check constraint "stock_pool_target_nonnegative"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'stock',
                  CONSTRAINT = 'stock_pool_target_nonnegative',
                  DETAIL = pg_catalog.format('pool_target %s is negative', NEW.pool_target);
    END IF;
    RETURN NULL;
END;
$$;

ALTER FUNCTION stockpool._stock_settings_valid() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _stock_settings_valid(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._stock_settings_valid() IS 'Internal: trigger function of stockpool.stock; refuses pool settings out of range (23514, naming the rule).';

--
-- Name: _take(bigint, bigint, bigint, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._take(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
-- Generated by sql/functions/_take.sql from the partitions of
-- stockpool.pool_units (one leaf per claim); read that file, not this body.
DECLARE
    v_start integer := pg_catalog.floor(pg_catalog.random() * p_buckets)::integer;
    v_got integer;
    v_more integer;
BEGIN
    IF p_quantity = 1 THEN
        CASE pg_catalog.hashint8extended(p_shop_id, 8816678312871386365) & 7
        WHEN 5 THEN
            DELETE FROM stockpool.pool_units_p0 AS d
            WHERE d.ctid = (
                    SELECT u.ctid
                    FROM stockpool.pool_units_p0 AS u
                    WHERE u.shop_id = p_shop_id
                        AND u.item_id = p_item_id
                        AND u.location_id = p_location_id
                        AND u.bucket >= v_start
                    ORDER BY u.bucket, u.unit_id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                );
            IF NOT FOUND AND v_start > 0 THEN
                DELETE FROM stockpool.pool_units_p0 AS d
                WHERE d.ctid = (
                        SELECT u.ctid
                        FROM stockpool.pool_units_p0 AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.bucket < v_start
                        ORDER BY u.bucket, u.unit_id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    );
            END IF;
        WHEN 6 THEN
            DELETE FROM stockpool.pool_units_p1 AS d
            WHERE d.ctid = (
                    SELECT u.ctid
                    FROM stockpool.pool_units_p1 AS u
                    WHERE u.shop_id = p_shop_id
                        AND u.item_id = p_item_id
                        AND u.location_id = p_location_id
                        AND u.bucket >= v_start
                    ORDER BY u.bucket, u.unit_id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                );
            IF NOT FOUND AND v_start > 0 THEN
                DELETE FROM stockpool.pool_units_p1 AS d
                WHERE d.ctid = (
                        SELECT u.ctid
                        FROM stockpool.pool_units_p1 AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.bucket < v_start
                        ORDER BY u.bucket, u.unit_id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    );
            END IF;
        WHEN 7 THEN
            DELETE FROM stockpool.pool_units_p2 AS d
            WHERE d.ctid = (
                    SELECT u.ctid
                    FROM stockpool.pool_units_p2 AS u
                    WHERE u.shop_id = p_shop_id
                        AND u.item_id = p_item_id
                        AND u.location_id = p_location_id
                        AND u.bucket >= v_start
                    ORDER BY u.bucket, u.unit_id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                );
            IF NOT FOUND AND v_start > 0 THEN
                DELETE FROM stockpool.pool_units_p2 AS d
                WHERE d.ctid = (
                        SELECT u.ctid
                        FROM stockpool.pool_units_p2 AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.bucket < v_start
                        ORDER BY u.bucket, u.unit_id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    );
            END IF;
        WHEN 0 THEN
            DELETE FROM stockpool.pool_units_p3 AS d
            WHERE d.ctid = (
                    SELECT u.ctid
                    FROM stockpool.pool_units_p3 AS u
                    WHERE u.shop_id = p_shop_id
                        AND u.item_id = p_item_id
                        AND u.location_id = p_location_id
                        AND u.bucket >= v_start
                    ORDER BY u.bucket, u.unit_id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                );
            IF NOT FOUND AND v_start > 0 THEN
                DELETE FROM stockpool.pool_units_p3 AS d
                WHERE d.ctid = (
                        SELECT u.ctid
                        FROM stockpool.pool_units_p3 AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.bucket < v_start
                        ORDER BY u.bucket, u.unit_id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    );
            END IF;
        WHEN 1 THEN
            DELETE FROM stockpool.pool_units_p4 AS d
            WHERE d.ctid = (
                    SELECT u.ctid
                    FROM stockpool.pool_units_p4 AS u
                    WHERE u.shop_id = p_shop_id
                        AND u.item_id = p_item_id
                        AND u.location_id = p_location_id
                        AND u.bucket >= v_start
                    ORDER BY u.bucket, u.unit_id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                );
            IF NOT FOUND AND v_start > 0 THEN
                DELETE FROM stockpool.pool_units_p4 AS d
                WHERE d.ctid = (
                        SELECT u.ctid
                        FROM stockpool.pool_units_p4 AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.bucket < v_start
                        ORDER BY u.bucket, u.unit_id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    );
            END IF;
        WHEN 2 THEN
            DELETE FROM stockpool.pool_units_p5 AS d
            WHERE d.ctid = (
                    SELECT u.ctid
                    FROM stockpool.pool_units_p5 AS u
                    WHERE u.shop_id = p_shop_id
                        AND u.item_id = p_item_id
                        AND u.location_id = p_location_id
                        AND u.bucket >= v_start
                    ORDER BY u.bucket, u.unit_id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                );
            IF NOT FOUND AND v_start > 0 THEN
                DELETE FROM stockpool.pool_units_p5 AS d
                WHERE d.ctid = (
                        SELECT u.ctid
                        FROM stockpool.pool_units_p5 AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.bucket < v_start
                        ORDER BY u.bucket, u.unit_id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    );
            END IF;
        WHEN 3 THEN
            DELETE FROM stockpool.pool_units_p6 AS d
            WHERE d.ctid = (
                    SELECT u.ctid
                    FROM stockpool.pool_units_p6 AS u
                    WHERE u.shop_id = p_shop_id
                        AND u.item_id = p_item_id
                        AND u.location_id = p_location_id
                        AND u.bucket >= v_start
                    ORDER BY u.bucket, u.unit_id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                );
            IF NOT FOUND AND v_start > 0 THEN
                DELETE FROM stockpool.pool_units_p6 AS d
                WHERE d.ctid = (
                        SELECT u.ctid
                        FROM stockpool.pool_units_p6 AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.bucket < v_start
                        ORDER BY u.bucket, u.unit_id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    );
            END IF;
        WHEN 4 THEN
            DELETE FROM stockpool.pool_units_p7 AS d
            WHERE d.ctid = (
                    SELECT u.ctid
                    FROM stockpool.pool_units_p7 AS u
                    WHERE u.shop_id = p_shop_id
                        AND u.item_id = p_item_id
                        AND u.location_id = p_location_id
                        AND u.bucket >= v_start
                    ORDER BY u.bucket, u.unit_id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                );
            IF NOT FOUND AND v_start > 0 THEN
                DELETE FROM stockpool.pool_units_p7 AS d
                WHERE d.ctid = (
                        SELECT u.ctid
                        FROM stockpool.pool_units_p7 AS u
                        WHERE u.shop_id = p_shop_id
                            AND u.item_id = p_item_id
                            AND u.location_id = p_location_id
                            AND u.bucket < v_start
                        ORDER BY u.bucket, u.unit_id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    );
            END IF;
        END CASE;
        RETURN CASE WHEN FOUND THEN 1 ELSE 0 END;
    END IF;

    EXECUTE $sql$
        WITH picked AS (
            SELECT u.ctid AS row_id
            FROM stockpool.pool_units AS u
            WHERE u.shop_id = $1
                AND u.item_id = $2
                AND u.location_id = $3
                AND u.bucket >= $4
            ORDER BY u.bucket, u.unit_id
            LIMIT $5
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM stockpool.pool_units AS d
        USING picked
        WHERE d.shop_id = $1
            AND d.ctid = picked.row_id
    $sql$ USING p_shop_id, p_item_id, p_location_id, v_start, p_quantity;
    GET DIAGNOSTICS v_got = ROW_COUNT;

    IF v_got < p_quantity AND v_start > 0 THEN
        EXECUTE $sql$
            WITH picked AS (
                SELECT u.ctid AS row_id
                FROM stockpool.pool_units AS u
                WHERE u.shop_id = $1
                    AND u.item_id = $2
                    AND u.location_id = $3
                    AND u.bucket < $4
                ORDER BY u.bucket, u.unit_id
                LIMIT $5
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM stockpool.pool_units AS d
            USING picked
            WHERE d.shop_id = $1
                AND d.ctid = picked.row_id
        $sql$ USING p_shop_id, p_item_id, p_location_id, v_start, p_quantity - v_got;
        GET DIAGNOSTICS v_more = ROW_COUNT;
        v_got := v_got + v_more;
    END IF;

    RETURN v_got;
END;
$_$;

ALTER FUNCTION stockpool._take(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _take(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._take(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) IS 'Internal: SKIP LOCKED claim of up to n pool units from a random start bucket; deletes them.';

--
-- Name: _take_ledger(bigint, bigint, bigint, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._take_ledger(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
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
            FOR NO KEY UPDATE SKIP LOCKED
        )
        AND s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    RETURN FOUND;
END;
$$;

ALTER FUNCTION stockpool._take_ledger(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _take_ledger(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._take_ledger(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) IS 'Internal: take units straight from a free ledger row (SKIP LOCKED, never waits), like a counter; false may leave the row locked (see the file header).';

--
-- Name: _take_lines(bigint, bigint[], bigint[], integer[], integer[]); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._take_lines(p_shop_id bigint, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_buckets integer[]) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    -- Refills (or waits for another's) a fast-path line tries before the
    -- near-sellout path.
    c_rounds constant integer := 8;
    v_i integer;
    v_round integer;
    v_got integer;
    v_lines integer := pg_catalog.array_length(p_item_ids, 1);
    v_tried boolean;
    v_refills integer := 0;
    v_expired integer := 0;
BEGIN
    BEGIN
        FOR v_i IN 1..v_lines LOOP
            -- A free ledger row first, like a counter (see _take_ledger), for a
            -- key that has no pool and enough free units as read. A try that
            -- took nothing may have left the row locked: then this line must
            -- not wait for the key's refill lock below (its holder waits for
            -- this row); it goes to the waiting path instead, after this
            -- block is rolled back.
            v_tried := EXISTS (
                SELECT
                FROM stockpool.stock AS s
                WHERE s.shop_id = p_shop_id
                    AND s.item_id = p_item_ids[v_i]
                    AND s.location_id = p_location_ids[v_i]
                    AND s.pool_target = 0
                    AND s.on_hand - s.allocated >= p_quantities[v_i]
            );
            CONTINUE WHEN v_tried AND stockpool._take_ledger(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                                             p_quantities[v_i]);
            v_got := stockpool._take(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                     p_quantities[v_i], p_buckets[v_i]);
            v_round := 0;
            WHILE v_got < p_quantities[v_i] LOOP
                IF v_round >= c_rounds THEN
                    RAISE EXCEPTION USING ERRCODE = 'SPX01';
                END IF;
                -- Refill unless another transaction is refilling this key; then
                -- wait for that refill to commit and look again. Waiters do not
                -- queue for the refill lock itself: each would hold it to its
                -- own commit, one after the other (a convoy that serialised
                -- every buyer of a hot key whose pool ran dry). While the
                -- ledger has free units for the shortfall, a buyer that found
                -- the refill too small for the crowd it was shared by tries
                -- again, up to c_rounds times: the near-sellout path below
                -- waits in a queue, one buyer at a time, and is for a key
                -- whose last units are held or in flight, not for a pool that
                -- ran dry under a rush.
                IF stockpool._refill(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                     p_min_extra => p_quantities[v_i] - v_got,
                                     p_wait => false, p_low_water_only => false) = 0 THEN
                    IF v_tried OR NOT EXISTS (
                            SELECT
                            FROM stockpool.stock AS s
                            WHERE s.shop_id = p_shop_id
                                AND s.item_id = p_item_ids[v_i]
                                AND s.location_id = p_location_ids[v_i]
                                AND s.on_hand - s.allocated >= p_quantities[v_i] - v_got
                        ) THEN
                        RAISE EXCEPTION USING ERRCODE = 'SPX01';
                    END IF;
                    -- The wait: the key's lock, shared, transaction-scoped,
                    -- and dropped at once by rolling back the block that took
                    -- it. Never a session lock: a cancel or statement_timeout
                    -- landing between taking and dropping it would leave it
                    -- held for the life of the connection, and every later
                    -- refill of the key would queue behind it.
                    BEGIN
                        PERFORM pg_catalog.pg_advisory_xact_lock_shared(
                            stockpool._key_lock_id(p_shop_id, p_item_ids[v_i], p_location_ids[v_i]));
                        RAISE EXCEPTION USING ERRCODE = 'SPX02';
                    EXCEPTION
                        WHEN SQLSTATE 'SPX02' THEN
                            NULL;
                    END;
                ELSE
                    v_refills := v_refills + 1;
                END IF;
                v_got := v_got + stockpool._take(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                                 p_quantities[v_i] - v_got, p_buckets[v_i]);
                v_round := v_round + 1;
            END LOOP;
        END LOOP;
        FOR v_i IN 1..v_refills LOOP
            PERFORM stockpool._tally_refill();
        END LOOP;
        RETURN true;
    EXCEPTION
        WHEN SQLSTATE 'SPX01' THEN
            NULL;
    END;

    v_refills := 0;
    BEGIN
        -- Before any pool row or ledger row is locked: waiting on hold rows
        -- while holding a ledger row could close a cycle with claim.
        FOR v_i IN 1..v_lines LOOP
            v_expired := v_expired + stockpool._expire_key(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                                           p_buckets[v_i]);
        END LOOP;
        FOR v_i IN 1..v_lines LOOP
            v_got := stockpool._take_waiting(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                             p_quantities[v_i]);
            IF v_got < p_quantities[v_i] THEN
                IF stockpool._refill(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                     p_min_extra => p_quantities[v_i] - v_got,
                                     p_wait => true, p_low_water_only => false) > 0 THEN
                    v_refills := v_refills + 1;
                END IF;
                v_got := v_got + stockpool._take(p_shop_id, p_item_ids[v_i], p_location_ids[v_i],
                                                 p_quantities[v_i] - v_got, p_buckets[v_i]);
            END IF;
            IF v_got < p_quantities[v_i] THEN
                RAISE EXCEPTION USING ERRCODE = 'SPX01';
            END IF;
        END LOOP;
        FOR v_i IN 1..v_expired LOOP
            PERFORM stockpool._tally_expiry();
        END LOOP;
        FOR v_i IN 1..v_refills LOOP
            PERFORM stockpool._tally_refill();
        END LOOP;
        RETURN true;
    EXCEPTION
        WHEN SQLSTATE 'SPX01' THEN
            RETURN false;
    END;
END;
$$;

ALTER FUNCTION stockpool._take_lines(p_shop_id bigint, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_buckets integer[]) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _take_lines(p_shop_id bigint, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_buckets integer[]); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._take_lines(p_shop_id bigint, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_buckets integer[]) IS 'Internal: all-or-nothing, deadlock-free take of several keys'' units (fast path, then waiting path).';

--
-- Name: _take_named(bigint, bigint, bigint, integer, integer, boolean, boolean); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._take_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer, p_adjacent boolean, p_wait boolean) RETURNS text[]
    LANGUAGE plpgsql
    AS $$
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
$$;

ALTER FUNCTION stockpool._take_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer, p_adjacent boolean, p_wait boolean) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _take_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer, p_adjacent boolean, p_wait boolean); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._take_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer, p_adjacent boolean, p_wait boolean) IS 'Internal: all-or-nothing take of a named key''s free units (any, spread; or one block of consecutive positions), SKIP LOCKED or waiting in position order; returns their labels in position order, or NULL.';

--
-- Name: _take_waiting(bigint, bigint, bigint, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._take_waiting(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_got integer;
BEGIN
    WITH picked AS (
        SELECT u.ctid AS row_id
        FROM stockpool.pool_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
        ORDER BY u.unit_id
        LIMIT p_quantity
        FOR UPDATE
    )
    DELETE FROM stockpool.pool_units AS d
    USING picked
    WHERE d.shop_id = p_shop_id
        AND d.ctid = picked.row_id;
    GET DIAGNOSTICS v_got = ROW_COUNT;
    RETURN v_got;
END;
$$;

ALTER FUNCTION stockpool._take_waiting(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _take_waiting(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._take_waiting(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) IS 'Internal: blocking, unit_id-ordered claim used only on the near-sellout path.';

--
-- Name: _tally_claim(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._tally_claim() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    NULL;
END;
$$;

ALTER FUNCTION stockpool._tally_claim() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _tally_claim(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._tally_claim() IS 'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s claims_total.';

--
-- Name: _tally_expiry(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._tally_expiry() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    NULL;
END;
$$;

ALTER FUNCTION stockpool._tally_expiry() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _tally_expiry(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._tally_expiry() IS 'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s expiries_total.';

--
-- Name: _tally_maintenance_yield(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._tally_maintenance_yield() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    NULL;
END;
$$;

ALTER FUNCTION stockpool._tally_maintenance_yield() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _tally_maintenance_yield(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._tally_maintenance_yield() IS 'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s maintenance_yields_total.';

--
-- Name: _tally_no_new_hold(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._tally_no_new_hold() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    NULL;
END;
$$;

ALTER FUNCTION stockpool._tally_no_new_hold() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _tally_no_new_hold(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._tally_no_new_hold() IS 'Internal: does nothing; its calls in pg_stat_user_functions are subtracted from reserve_units'' calls for stockpool.metrics()''s reservations_total.';

--
-- Name: _tally_refill(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._tally_refill() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    NULL;
END;
$$;

ALTER FUNCTION stockpool._tally_refill() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _tally_refill(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._tally_refill() IS 'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s refills_total.';

--
-- Name: _tally_refusal(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._tally_refusal() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    NULL;
END;
$$;

ALTER FUNCTION stockpool._tally_refusal() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _tally_refusal(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._tally_refusal() IS 'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s refusals_total.';

--
-- Name: _tally_release(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._tally_release() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    NULL;
END;
$$;

ALTER FUNCTION stockpool._tally_release() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _tally_release(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._tally_release() IS 'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s releases_total.';

--
-- Name: _tally_reservation(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._tally_reservation() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    NULL;
END;
$$;

ALTER FUNCTION stockpool._tally_reservation() OWNER TO stockpool_owner;

--
-- Name: FUNCTION _tally_reservation(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._tally_reservation() IS 'Internal: does nothing; its calls in pg_stat_user_functions are stockpool.metrics()''s reservations_total.';

--
-- Name: _top_up_low(integer, interval); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._top_up_low(p_batch integer, p_quiet interval) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_key record;
    v_added integer := 0;
    v_refilled integer;
    v_refills integer := 0;
BEGIN
    FOR v_key IN
        SELECT s.shop_id, s.item_id, s.location_id,
               stockpool._refill_mark(stockpool._pool_level(s.pool_target), s.low_water, s.pool_cap) AS mark,
               s.buckets
        FROM stockpool.stock AS s
        WHERE s.pool_target > 0
            AND s.on_hand > s.allocated
            AND s.refilled_at >= pg_catalog.now() - p_quiet
        ORDER BY pg_catalog.random()
        LIMIT p_batch
    LOOP
        -- Counted without a lock first: a pool above its mark costs no lock.
        CONTINUE WHEN stockpool._pooled_upto(v_key.shop_id, v_key.item_id, v_key.location_id,
                                             v_key.mark, v_key.buckets) > v_key.mark;
        CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(
            stockpool._key_lock_id(v_key.shop_id, v_key.item_id, v_key.location_id));
        PERFORM
        FROM stockpool.stock AS s
        WHERE s.shop_id = v_key.shop_id
            AND s.item_id = v_key.item_id
            AND s.location_id = v_key.location_id
        FOR NO KEY UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        v_refilled := stockpool._refill(v_key.shop_id, v_key.item_id, v_key.location_id,
                                        p_min_extra => 0, p_wait => false, p_low_water_only => true);
        IF v_refilled > 0 THEN
            v_refills := v_refills + 1;
            v_added := v_added + v_refilled;
        END IF;
    END LOOP;
    FOR v_i IN 1..v_refills LOOP
        PERFORM stockpool._tally_refill();
    END LOOP;
    RETURN v_added;
END;
$$;

ALTER FUNCTION stockpool._top_up_low(p_batch integer, p_quiet interval) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _top_up_low(p_batch integer, p_quiet interval); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._top_up_low(p_batch integer, p_quiet interval) IS 'Internal: top up the pools of up to p_batch keys at or below their low-water mark, by try-locks only; returns units.';

--
-- Name: _unknown_key(bigint, bigint, bigint); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool._unknown_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'unknown stock key (shop %, item %, location %)',
        p_shop_id, p_item_id, p_location_id
        USING ERRCODE = 'SP001',
              HINT = 'Create the key with stockpool.set_stock() first.';
END;
$$;

ALTER FUNCTION stockpool._unknown_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint) OWNER TO stockpool_owner;

--
-- Name: FUNCTION _unknown_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool._unknown_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint) IS 'Internal: raise SP001 for an unknown stock key (the only place that does).';

--
-- Name: adjust_stock(bigint, bigint, bigint, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.adjust_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_delta integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_delta IS NULL THEN
        RAISE EXCEPTION 'stockpool.adjust_stock: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_delta'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_delta IS NULL])
            USING ERRCODE = '22004';
    END IF;
    RETURN stockpool._apply_on_hand(p_shop_id, p_item_id, p_location_id, p_delta, true);
END;
$$;

ALTER FUNCTION stockpool.adjust_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_delta integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION adjust_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_delta integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.adjust_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_delta integer) IS 'Change a key''s on hand by p_delta, recording a movement; returns the new on hand. SQLSTATEs: 22004 NULL argument, 22003 result beyond integer, 22023 negative result, SP001 unknown key, SP002 below units held by live holds, SP010 named key.';

--
-- Name: check_invariants(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.check_invariants() RETURNS TABLE(shop_id bigint, item_id bigint, location_id bigint, invariant text, detail text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    WITH levels AS (
        SELECT l.shop_id, l.item_id, l.location_id, l.on_hand, l.pooled, l.held,
               l.unsettled, s.allocated
        FROM stockpool.stock_levels AS l
        JOIN stockpool.stock AS s
            ON s.shop_id = l.shop_id
            AND s.item_id = l.item_id
            AND s.location_id = l.location_id
    ),
    history AS (
        SELECT m.shop_id, m.item_id, m.location_id, pg_catalog.sum(m.delta) AS on_hand
        FROM stockpool.movements AS m
        GROUP BY m.shop_id, m.item_id, m.location_id
    ),
    taken AS (
        SELECT hd.shop_id, hd.item_id, hd.location_id, l.label, hd.checkout_id
        FROM stockpool.holds AS hd
        CROSS JOIN LATERAL pg_catalog.unnest(hd.labels) AS l (label)
        WHERE hd.status IN ('held', 'claimed')
    )
    SELECT l.shop_id, l.item_id, l.location_id, 'oversell',
           pg_catalog.format('pooled %s + held %s > on_hand %s', l.pooled, l.held, l.on_hand)
    FROM levels AS l
    WHERE l.pooled + l.held > l.on_hand
    UNION ALL
    SELECT l.shop_id, l.item_id, l.location_id, 'allocation',
           pg_catalog.format('allocated %s <> pooled %s + held %s + pending claims %s',
                             l.allocated, l.pooled, l.held, l.unsettled)
    FROM levels AS l
    WHERE l.allocated <> l.pooled + l.held + l.unsettled
    UNION ALL
    SELECT s.shop_id, s.item_id, s.location_id, 'ledger_drift',
           pg_catalog.format('on_hand %s <> sum of movements %s', s.on_hand, coalesce(h.on_hand, 0))
    FROM stockpool.stock AS s
    LEFT JOIN history AS h
        ON h.shop_id = s.shop_id
        AND h.item_id = s.item_id
        AND h.location_id = s.location_id
    WHERE s.on_hand <> coalesce(h.on_hand, 0)
    UNION ALL
    SELECT l.shop_id, l.item_id, l.location_id, 'negative',
           pg_catalog.format('on_hand %s, allocated %s, free %s', l.on_hand, l.allocated,
                             l.on_hand - l.pooled - l.held)
    FROM levels AS l
    WHERE l.on_hand < 0 OR l.allocated < 0
    UNION ALL
    SELECT hd.shop_id, hd.item_id, hd.location_id, 'negative',
           pg_catalog.format('hold of checkout %s has quantity %s', hd.checkout_id, hd.quantity)
    FROM stockpool.holds AS hd
    WHERE hd.quantity <= 0
    UNION ALL
    SELECT c.shop_id, c.item_id, c.location_id, 'negative',
           pg_catalog.format('pending claim of checkout %s has quantity %s', c.checkout_id, c.quantity)
    FROM stockpool.pending_claims AS c
    WHERE c.quantity <= 0
    UNION ALL
    SELECT c.shop_id, c.item_id, c.location_id, 'settlement',
           pg_catalog.format('pending claim of %s units by checkout %s, whose hold is %s',
                             c.quantity, c.checkout_id,
                             coalesce(hd.status || ' (' || hd.quantity || ' units)', 'missing'))
    FROM stockpool.pending_claims AS c
    LEFT JOIN stockpool.holds AS hd
        ON hd.shop_id = c.shop_id
        AND hd.checkout_id = c.checkout_id
        AND hd.item_id = c.item_id
        AND hd.location_id = c.location_id
    WHERE hd.status IS DISTINCT FROM 'claimed'
        OR hd.quantity <> c.quantity
    UNION ALL
    SELECT t.shop_id, t.item_id, t.location_id, 'unit',
           pg_catalog.format('unit %s is held or sold by %s checkouts: %s', t.label, pg_catalog.count(*),
                             pg_catalog.string_agg(t.checkout_id::text, ', ' ORDER BY t.checkout_id))
    FROM taken AS t
    GROUP BY t.shop_id, t.item_id, t.location_id, t.label
    HAVING pg_catalog.count(*) > 1
    UNION ALL
    SELECT t.shop_id, t.item_id, t.location_id, 'unit',
           pg_catalog.format('unit %s is free and held or sold by checkout %s', t.label, t.checkout_id)
    FROM taken AS t
    JOIN stockpool.named_free AS f
        ON f.shop_id = t.shop_id
        AND f.item_id = t.item_id
        AND f.location_id = t.location_id
        AND f.label = t.label
    UNION ALL
    SELECT u.shop_id, u.item_id, u.location_id, 'unit',
           pg_catalog.format('unit %s (position %s) is neither free, held nor sold', u.label, u.position)
    FROM stockpool.named_units AS u
    WHERE NOT EXISTS (
            SELECT FROM stockpool.named_free AS f
            WHERE f.shop_id = u.shop_id
                AND f.item_id = u.item_id
                AND f.location_id = u.location_id
                AND f.label = u.label
        )
        AND NOT EXISTS (
            SELECT FROM taken AS t
            WHERE t.shop_id = u.shop_id
                AND t.item_id = u.item_id
                AND t.location_id = u.location_id
                AND t.label = u.label
        )
    UNION ALL
    SELECT x.shop_id, x.item_id, x.location_id, 'unit',
           pg_catalog.format('%s unit %s is not a unit of the key', x.source, x.label)
    FROM (
        SELECT f.shop_id, f.item_id, f.location_id, f.label, 'free' AS source
        FROM stockpool.named_free AS f
        UNION ALL
        SELECT t.shop_id, t.item_id, t.location_id, t.label, 'held or sold'
        FROM taken AS t
    ) AS x
    WHERE NOT EXISTS (
        SELECT FROM stockpool.named_units AS u
        WHERE u.shop_id = x.shop_id
            AND u.item_id = x.item_id
            AND u.location_id = x.location_id
            AND u.label = x.label
    )
    UNION ALL
    SELECT f.shop_id, f.item_id, f.location_id, 'unit',
           pg_catalog.format('unit %s is free at position %s, its position is %s', f.label, f.position, u.position)
    FROM stockpool.named_free AS f
    JOIN stockpool.named_units AS u
        ON u.shop_id = f.shop_id
        AND u.item_id = f.item_id
        AND u.location_id = f.location_id
        AND u.label = f.label
    WHERE u.position <> f.position
    UNION ALL
    SELECT l.shop_id, l.item_id, l.location_id, 'unit',
           pg_catalog.format('named key with on_hand %s but %s free and %s held units', l.on_hand, l.pooled, l.held)
    FROM levels AS l
    JOIN stockpool.stock AS s
        ON s.shop_id = l.shop_id
        AND s.item_id = l.item_id
        AND s.location_id = l.location_id
    WHERE s.named
        AND l.on_hand <> l.pooled + l.held
    UNION ALL
    SELECT m.shop_id, m.item_id, m.location_id, 'mixed', m.detail
    FROM (
        SELECT DISTINCT u.shop_id, u.item_id, u.location_id, true AS if_named, 'named key with pool units' AS detail
        FROM stockpool.pool_units AS u
        UNION ALL
        SELECT DISTINCT u.shop_id, u.item_id, u.location_id, false, 'counted key with named units'
        FROM stockpool.named_units AS u
        UNION ALL
        SELECT DISTINCT f.shop_id, f.item_id, f.location_id, false, 'counted key with free named units'
        FROM stockpool.named_free AS f
        UNION ALL
        SELECT hd.shop_id, hd.item_id, hd.location_id, true,
               pg_catalog.format('hold of checkout %s without labels on a named key', hd.checkout_id)
        FROM stockpool.holds AS hd
        WHERE hd.labels IS NULL
        UNION ALL
        SELECT hd.shop_id, hd.item_id, hd.location_id, false,
               pg_catalog.format('hold of checkout %s with labels on a counted key', hd.checkout_id)
        FROM stockpool.holds AS hd
        WHERE hd.labels IS NOT NULL
    ) AS m
    JOIN stockpool.stock AS s
        ON s.shop_id = m.shop_id
        AND s.item_id = m.item_id
        AND s.location_id = m.location_id
    WHERE s.named = m.if_named
    UNION ALL
    SELECT o.shop_id, o.item_id, o.location_id, 'orphan',
           pg_catalog.format('%s rows of a key missing from the ledger', o.source)
    FROM (
        SELECT DISTINCT u.shop_id, u.item_id, u.location_id, 'pool' AS source
        FROM stockpool.pool_units AS u
        UNION
        SELECT DISTINCT hd.shop_id, hd.item_id, hd.location_id, 'hold'
        FROM stockpool.holds AS hd
        UNION
        SELECT DISTINCT c.shop_id, c.item_id, c.location_id, 'pending claim'
        FROM stockpool.pending_claims AS c
        UNION
        SELECT DISTINCT u.shop_id, u.item_id, u.location_id, 'named unit'
        FROM stockpool.named_units AS u
        UNION
        SELECT DISTINCT f.shop_id, f.item_id, f.location_id, 'free named unit'
        FROM stockpool.named_free AS f
    ) AS o
    WHERE NOT EXISTS (
        SELECT FROM stockpool.stock AS s
        WHERE s.shop_id = o.shop_id
            AND s.item_id = o.item_id
            AND s.location_id = o.location_id
    );
$$;

ALTER FUNCTION stockpool.check_invariants() OWNER TO stockpool_owner;

--
-- Name: FUNCTION check_invariants(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.check_invariants() IS 'One row per violated invariant (oversell, allocation, ledger_drift, negative, orphan, settlement, unit, mixed); none when healthy.';

--
-- Name: claim(bigint, uuid); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.claim(p_shop_id bigint, p_checkout_id uuid) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    -- One claim of a pooled key in this many tries to fold its pending claims.
    c_batch constant integer := 16;
    v_hold record;
    v_fold boolean;
    v_folded integer;
    v_rows integer := 0;
    v_held integer := 0;
    v_expired integer := 0;
    v_released integer := 0;
    v_claimed integer := 0;
    v_item_ids bigint[] := ARRAY[]::bigint[];
    v_location_ids bigint[] := ARRAY[]::bigint[];
    v_quantities integer[] := ARRAY[]::integer[];
    v_pooled boolean[] := ARRAY[]::boolean[];
    v_i integer;
BEGIN
    IF p_shop_id IS NULL OR p_checkout_id IS NULL THEN
        RAISE EXCEPTION 'stockpool.claim: % must not be NULL',
            stockpool._null_args(ARRAY['p_shop_id', 'p_checkout_id'],
                                 ARRAY[p_shop_id IS NULL, p_checkout_id IS NULL])
            USING ERRCODE = '22004';
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    FOR v_hold IN
        SELECT h.item_id, h.location_id, h.status, h.quantity,
               h.expires_at <= pg_catalog.now() AS overdue,
               s.pool_target > 0 AS pooled
        FROM stockpool.holds AS h
        JOIN stockpool.stock AS s
            ON s.shop_id = h.shop_id
            AND s.item_id = h.item_id
            AND s.location_id = h.location_id
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = p_checkout_id
        ORDER BY h.item_id, h.location_id
        FOR UPDATE OF h
    LOOP
        v_rows := v_rows + 1;
        CASE
            WHEN v_hold.status = 'held' AND v_hold.overdue THEN v_expired := v_expired + 1;
            WHEN v_hold.status = 'held' THEN
                v_held := v_held + 1;
                v_item_ids := v_item_ids || v_hold.item_id;
                v_location_ids := v_location_ids || v_hold.location_id;
                v_quantities := v_quantities || v_hold.quantity;
                v_pooled := v_pooled || v_hold.pooled;
            WHEN v_hold.status = 'expired' THEN v_expired := v_expired + 1;
            WHEN v_hold.status = 'released' THEN v_released := v_released + 1;
            ELSE v_claimed := v_claimed + v_hold.quantity;
        END CASE;
    END LOOP;

    IF v_rows = 0 THEN
        RAISE EXCEPTION 'stockpool.claim: checkout % holds nothing in shop %', p_checkout_id, p_shop_id
            USING ERRCODE = 'SP003',
                  HINT = 'Reserve with stockpool.reserve_units() or reserve_cart() before claiming.';
    END IF;
    IF v_held = 0 AND v_claimed > 0 THEN
        -- A retry of a claim that went through returns its total. But lines
        -- the checkout reserved after that claim, and that have since expired
        -- or been released, are a new purchase that failed: say so instead of
        -- answering with the old total as if it had been claimed. Both
        -- timestamps are clock_timestamp() taken under the checkout lock, so
        -- they follow the order in which the calls really ran.
        SELECT pg_catalog.count(*) FILTER (WHERE h.status <> 'released')::integer,
               pg_catalog.count(*) FILTER (WHERE h.status = 'released')::integer
        INTO v_expired, v_released
        FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = p_checkout_id
            AND h.status <> 'claimed'
            AND h.created_at > (
                SELECT pg_catalog.max(c.updated_at)
                FROM stockpool.holds AS c
                WHERE c.shop_id = p_shop_id
                    AND c.checkout_id = p_checkout_id
                    AND c.status = 'claimed'
            );
        IF v_expired = 0 AND v_released = 0 THEN
            RETURN v_claimed;
        END IF;
    END IF;
    IF v_expired > 0 AND (v_held > 0 OR v_released = 0) THEN
        RAISE EXCEPTION 'stockpool.claim: a hold of checkout % has expired; nothing was claimed', p_checkout_id
            USING ERRCODE = 'SP004',
                  HINT = 'Reserve again; the expired units may have been sold to someone else.';
    END IF;
    IF v_held = 0 THEN
        RAISE EXCEPTION 'stockpool.claim: checkout % was released; nothing to claim', p_checkout_id
            USING ERRCODE = 'SP005',
                  HINT = 'Reserve again before claiming.';
    END IF;

    v_fold := pg_catalog.current_setting('transaction_isolation') = 'read committed';
    FOR v_i IN 1..v_held LOOP
        -- A key without a pool (its buyers do not meet): fold at once when
        -- the row is free. A pooled key: a pending claim, and one claim in
        -- c_batch (by its checkout id's hash: no shared row is read or
        -- written to pick it) tries to fold the key's pending claims, so
        -- that its ledger row takes about one update per c_batch claims.
        v_folded := CASE WHEN v_fold AND NOT v_pooled[v_i] THEN
            stockpool._settle(p_shop_id, v_item_ids[v_i], v_location_ids[v_i], false,
                              p_checkout_id, v_quantities[v_i])
        END;
        IF v_folded IS NULL THEN
            INSERT INTO stockpool.pending_claims
                (shop_id, item_id, location_id, checkout_id, quantity)
            VALUES
                (p_shop_id, v_item_ids[v_i], v_location_ids[v_i], p_checkout_id, v_quantities[v_i]);
            IF v_fold AND v_pooled[v_i] AND pg_catalog.uuid_hash(p_checkout_id) % c_batch = 0 THEN
                PERFORM stockpool._settle(p_shop_id, v_item_ids[v_i], v_location_ids[v_i], false);
            END IF;
        END IF;
        v_claimed := v_claimed + v_quantities[v_i];
    END LOOP;

    -- The clock, not the transaction's start: lines reserved after this
    -- claim (under the same checkout lock) get a later created_at.
    UPDATE stockpool.holds AS h
    SET status = 'claimed',
        updated_at = pg_catalog.clock_timestamp()
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.status = 'held';

    FOR v_i IN 1..v_held LOOP
        PERFORM stockpool._tally_claim();
    END LOOP;
    RETURN v_claimed;
END;
$$;

ALTER FUNCTION stockpool.claim(p_shop_id bigint, p_checkout_id uuid) OWNER TO stockpool_owner;

--
-- Name: FUNCTION claim(p_shop_id bigint, p_checkout_id uuid); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.claim(p_shop_id bigint, p_checkout_id uuid) IS 'Payment succeeded: turn the checkout''s live holds into deductions of on hand, all or nothing; never waits for a ledger row (a busy key''s deduction is recorded as a pending claim and folded by the next transaction to find the row free). Returns the units claimed by the checkout; a retry returns the same number and claims nothing twice. SQLSTATEs: 22004 NULL argument, SP003 unknown checkout, SP004 hold expired, SP005 checkout released.';

--
-- Name: configure_pool(bigint, bigint, bigint, integer, integer, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.configure_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_pool_cap integer DEFAULT NULL::integer, p_low_water integer DEFAULT NULL::integer, p_buckets integer DEFAULT NULL::integer) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_stock stockpool.stock;
    v_cap integer;
    v_low_water integer;
    v_buckets integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL THEN
        RAISE EXCEPTION 'stockpool.configure_pool: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL])
            USING ERRCODE = '22004';
    END IF;

    PERFORM stockpool._stock_row(p_shop_id, p_item_id, p_location_id);
    PERFORM pg_catalog.pg_advisory_xact_lock(
        stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE;

    v_cap := coalesce(p_pool_cap, v_stock.pool_cap);
    v_low_water := coalesce(p_low_water,
                            CASE WHEN p_pool_cap IS NULL THEN v_stock.low_water ELSE v_cap / 4 END);
    v_buckets := coalesce(p_buckets, v_stock.buckets);

    IF v_cap <= 0 THEN
        RAISE EXCEPTION 'stockpool.configure_pool: pool cap must be positive, got %', v_cap
            USING ERRCODE = '22023';
    END IF;
    IF v_low_water < 0 OR v_low_water >= v_cap THEN
        RAISE EXCEPTION 'stockpool.configure_pool: low water must be in 0..%, got %', v_cap - 1, v_low_water
            USING ERRCODE = '22023';
    END IF;
    IF v_buckets < 1 OR v_buckets > 1024 THEN
        RAISE EXCEPTION 'stockpool.configure_pool: buckets must be in 1..1024, got %', v_buckets
            USING ERRCODE = '22023';
    END IF;

    UPDATE stockpool.stock AS s
    SET pool_cap = v_cap,
        low_water = v_low_water,
        buckets = v_buckets,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
END;
$$;

ALTER FUNCTION stockpool.configure_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_pool_cap integer, p_low_water integer, p_buckets integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION configure_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_pool_cap integer, p_low_water integer, p_buckets integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.configure_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_pool_cap integer, p_low_water integer, p_buckets integer) IS 'Change a key''s pool cap, low-water mark and bucket count (NULL keeps a setting). SQLSTATEs: 22004 NULL key argument, 22023 setting out of range, SP001 unknown key.';

--
-- Name: hot_keys(integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.hot_keys(p_limit integer DEFAULT 20) RETURNS TABLE(shop_id bigint, item_id bigint, location_id bigint, on_hand integer, pooled integer, held integer, free integer, unsettled integer, pool_target integer, refilled_at timestamp with time zone, live_holds integer)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF p_limit IS NULL THEN
        RAISE EXCEPTION 'stockpool.hot_keys: p_limit must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_limit < 1 THEN
        RAISE EXCEPTION 'stockpool.hot_keys: p_limit must be positive, got %', p_limit
            USING ERRCODE = '22023';
    END IF;

    RETURN QUERY
    WITH live AS (
        SELECT h.shop_id, h.item_id, h.location_id, pg_catalog.count(*)::integer AS holds
        FROM stockpool.holds AS h
        WHERE h.status = 'held'
            AND h.expires_at > pg_catalog.now()
        GROUP BY h.shop_id, h.item_id, h.location_id
    ),

    candidates AS (
        SELECT s.shop_id, s.item_id, s.location_id
        FROM stockpool.stock AS s
        WHERE s.pool_target > 0
        UNION
        SELECT l.shop_id, l.item_id, l.location_id
        FROM live AS l
    ),

    busiest AS (
        SELECT s.shop_id, s.item_id, s.location_id, s.pool_target, s.refilled_at,
               coalesce(l.holds, 0) AS holds
        FROM candidates AS k
        JOIN stockpool.stock AS s
            ON s.shop_id = k.shop_id
            AND s.item_id = k.item_id
            AND s.location_id = k.location_id
        LEFT JOIN live AS l
            ON l.shop_id = k.shop_id
            AND l.item_id = k.item_id
            AND l.location_id = k.location_id
        ORDER BY s.pool_target DESC, holds DESC, s.shop_id, s.item_id, s.location_id
        LIMIT p_limit
    )

    -- OFFSET 0 keeps the planner from pulling the view up into a join, which
    -- would count the units and holds of every key before picking these:
    -- this way each key's are read through its indexes.
    SELECT b.shop_id, b.item_id, b.location_id, v.on_hand, v.pooled, v.held, v.free, v.unsettled,
           b.pool_target, b.refilled_at, b.holds
    FROM busiest AS b
    CROSS JOIN LATERAL (
        SELECT lv.on_hand, lv.pooled, lv.held, lv.free, lv.unsettled
        FROM stockpool.stock_levels AS lv
        WHERE lv.shop_id = b.shop_id
            AND lv.item_id = b.item_id
            AND lv.location_id = b.location_id
        OFFSET 0
    ) AS v
    ORDER BY b.pool_target DESC, b.holds DESC, b.shop_id, b.item_id, b.location_id;
END;
$$;

ALTER FUNCTION stockpool.hot_keys(p_limit integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION hot_keys(p_limit integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.hot_keys(p_limit integer) IS 'The p_limit busiest stock keys now: pooled keys first by pool_target (their demand as last measured), then by live holds; with on_hand, pooled, held, free, unsettled, pool_target, refilled_at, live_holds. Reads only. SQLSTATEs: 22004 NULL p_limit, 22023 p_limit < 1.';

--
-- Name: maintain(interval, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.maintain(p_budget interval DEFAULT '00:00:00.25'::interval, p_batch integer DEFAULT 500) RETURNS TABLE(expired integer, settled integer, refilled integer, cooled integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    -- A pool not refilled for this long goes back to its ledger row.
    c_quiet constant interval := '60 seconds';
    v_until timestamptz := pg_catalog.clock_timestamp() + p_budget;
BEGIN
    IF p_budget IS NULL OR p_batch IS NULL THEN
        RAISE EXCEPTION 'stockpool.maintain: % must not be NULL',
            stockpool._null_args(ARRAY['p_budget', 'p_batch'], ARRAY[p_budget IS NULL, p_batch IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_budget <= interval '0' OR p_batch <= 0 THEN
        RAISE EXCEPTION 'stockpool.maintain: p_budget and p_batch must be positive, got % and %',
            p_budget, p_batch
            USING ERRCODE = '22023';
    END IF;

    expired := 0;
    settled := 0;
    refilled := 0;
    cooled := 0;
    expired := stockpool._maintain_step('expire', p_batch, c_quiet, v_until);
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        settled := stockpool._maintain_step('settle', p_batch, c_quiet);
        cooled := stockpool._maintain_step('cool', p_batch, c_quiet);
        IF pg_catalog.clock_timestamp() < v_until THEN
            refilled := stockpool._maintain_step('top_up', p_batch, c_quiet);
        END IF;
    END IF;
    RETURN NEXT;
END;
$$;

ALTER FUNCTION stockpool.maintain(p_budget interval, p_batch integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION maintain(p_budget interval, p_batch integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.maintain(p_budget interval, p_batch integer) IS 'One maintenance cycle within about p_budget: expire overdue holds in batches, fold pending claims, top up pools at their low-water mark, hand quiet pools back. Returns (expired, settled, refilled, cooled). Never waits; concurrent maintainers take disjoint work. SQLSTATEs: 22004 NULL argument, 22023 not positive.';

--
-- Name: metrics(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.metrics() RETURNS TABLE(metric text, kind text, relation text, application_name text, state text, value double precision)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    WITH levels AS (
        SELECT pg_catalog.count(*) AS keys,
               coalesce(pg_catalog.sum(l.on_hand), 0) AS on_hand,
               coalesce(pg_catalog.sum(l.pooled), 0) AS pooled,
               coalesce(pg_catalog.sum(l.held), 0) AS held,
               coalesce(pg_catalog.sum(l.unsettled), 0) AS unsettled,
               pg_catalog.count(*) FILTER (WHERE s.pool_target > 0) AS pools,
               pg_catalog.count(*) FILTER (WHERE s.pool_target > 0 AND l.pooled = 0 AND l.free > 0) AS dry
        FROM stockpool.stock_levels AS l
        JOIN stockpool.stock AS s
            ON s.shop_id = l.shop_id
            AND s.item_id = l.item_id
            AND s.location_id = l.location_id
    ),

    live AS (
        SELECT pg_catalog.count(*) FILTER (WHERE h.expires_at > pg_catalog.now()) AS holds,
               pg_catalog.count(*) FILTER (WHERE h.expires_at <= pg_catalog.now()) AS overdue,
               pg_catalog.min(h.expires_at) FILTER (WHERE h.expires_at <= pg_catalog.now()) AS oldest_due
        FROM stockpool.holds AS h
        WHERE h.status = 'held'
    ),

    pending AS (
        SELECT pg_catalog.count(*) AS claims,
               pg_catalog.min(c.claimed_at) AS oldest
        FROM stockpool.pending_claims AS c
    ),

    -- A counter is the calls of its functions (minus those of any in
    -- less): reservations_total is the other reserving functions' new holds
    -- (_tally_reservation) plus reserve_units' calls that returned, minus
    -- those that recorded no new hold (see _tally_no_new_hold).
    counters AS (
        SELECT c.ord, c.metric, c.fns, c.less
        FROM (
            VALUES (14, 'reservations_total',
                    ARRAY['stockpool._tally_reservation()'::regprocedure,
                          -- looked up when read: the deployer creates metrics first
                          pg_catalog.to_regprocedure(
                              'stockpool.reserve_units(bigint, bigint, bigint, integer, uuid, interval)')],
                    ARRAY['stockpool._tally_no_new_hold()'::regprocedure]),
                   (15, 'refusals_total', ARRAY['stockpool._tally_refusal()'::regprocedure], '{}'),
                   (16, 'claims_total', ARRAY['stockpool._tally_claim()'::regprocedure], '{}'),
                   (17, 'releases_total', ARRAY['stockpool._tally_release()'::regprocedure], '{}'),
                   (18, 'expiries_total', ARRAY['stockpool._tally_expiry()'::regprocedure], '{}'),
                   (19, 'refills_total', ARRAY['stockpool._tally_refill()'::regprocedure], '{}'),
                   (20, 'maintenance_yields_total', ARRAY['stockpool._tally_maintenance_yield()'::regprocedure], '{}')
        ) AS c (ord, metric, fns, less)
    ),

    tables AS (
        SELECT c.oid, c.relname::text AS relname, c.reltoastrelid, c.relfrozenxid,
               t.relid IN (
                   SELECT p.relid
                   FROM pg_catalog.pg_partition_tree('stockpool.pool_units'::regclass) AS p
                   WHERE p.isleaf
               ) AS pool_leaf,
               t.n_live_tup, t.n_dead_tup,
               GREATEST(t.last_vacuum, t.last_autovacuum) AS vacuumed
        FROM pg_catalog.pg_class AS c
        JOIN pg_catalog.pg_stat_all_tables AS t
            ON t.relid = c.oid
        WHERE c.relnamespace = 'stockpool'::regnamespace
            AND c.relkind = 'r'
    ),

    sessions AS (
        SELECT coalesce(a.application_name, '') AS app,
               coalesce(a.state, 'unknown') AS state,
               pg_catalog.clock_timestamp() - a.xact_start AS in_transaction,
               CASE WHEN a.state LIKE 'idle in transaction%'
                   THEN pg_catalog.clock_timestamp() - a.state_change
               END AS idle_in_transaction
        FROM pg_catalog.pg_stat_activity AS a
        WHERE a.datid = (SELECT d.oid FROM pg_catalog.pg_database AS d WHERE d.datname = pg_catalog.current_database())
            AND coalesce(a.backend_type, 'client backend') = 'client backend'
    )

    -- Rows in the order of docs/metrics.md; a figure's rows by label.
    SELECT r.metric, r.kind, r.relation, r.application_name, r.state, r.value
    FROM (
        SELECT g.ord, g.metric, 'gauge' AS kind, '' AS relation, '' AS application_name, '' AS state,
               g.value::double precision AS value
        FROM levels AS l, live AS h, pending AS c,
            LATERAL (
                VALUES (1, 'stock_keys', l.keys),
                       (2, 'stock_on_hand_units', l.on_hand),
                       (3, 'stock_pooled_units', l.pooled),
                       (4, 'stock_held_units', l.held),
                       (5, 'stock_unsettled_units', l.unsettled),
                       (6, 'pools_active', l.pools),
                       (7, 'pools_dry_with_free_stock', l.dry),
                       (8, 'holds_live', h.holds),
                       (9, 'holds_overdue', h.overdue),
                       (10, 'holds_oldest_overdue_seconds',
                        coalesce(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp() - h.oldest_due), 0)),
                       (11, 'pending_claims', c.claims),
                       (12, 'pending_claims_oldest_seconds',
                        GREATEST(coalesce(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp() - c.oldest), 0), 0)),
                       (13, 'invariant_violations', (SELECT pg_catalog.count(*) FROM stockpool.check_invariants()))
            ) AS g (ord, metric, value)
        UNION ALL
        SELECT c.ord, c.metric, 'counter', '', '', '',
               (SELECT pg_catalog.sum(CASE WHEN f.fn = ANY (c.less) THEN -1 ELSE 1 END
                                      * (coalesce(pg_catalog.pg_stat_get_function_calls(f.fn), 0)
                                         + coalesce(pg_catalog.pg_stat_get_xact_function_calls(f.fn), 0)))
                FROM pg_catalog.unnest(c.fns || c.less) AS f (fn))::double precision
        FROM counters AS c
        UNION ALL
        SELECT 21, 'track_functions_enabled', 'gauge', '', '', '',
               CASE WHEN pg_catalog.current_setting('track_functions') = 'none' THEN 0 ELSE 1 END
        UNION ALL
        SELECT 22, 'pool_dead_ratio', 'gauge', t.relname, '', '',
               CASE WHEN t.n_live_tup + t.n_dead_tup > 0
                   THEN t.n_dead_tup::double precision / (t.n_live_tup + t.n_dead_tup)
                   ELSE 0
               END
        FROM tables AS t
        WHERE t.pool_leaf
        UNION ALL
        SELECT 23, 'pool_last_vacuum_seconds', 'gauge', t.relname, '', '',
               coalesce(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp() - t.vacuumed), -1)
        FROM tables AS t
        WHERE t.pool_leaf
        UNION ALL
        SELECT 24, 'table_xid_age', 'gauge', t.relname, '', '',
               GREATEST(pg_catalog.age(t.relfrozenxid),
                        (SELECT pg_catalog.age(x.relfrozenxid) FROM pg_catalog.pg_class AS x
                         WHERE x.oid = t.reltoastrelid))
        FROM tables AS t
        UNION ALL
        SELECT 25, 'sessions', 'gauge', '', s.app, s.state, pg_catalog.count(*)
        FROM sessions AS s
        GROUP BY s.app, s.state
        UNION ALL
        SELECT m.ord, m.metric, 'gauge', '', a.app, '', m.value
        FROM (
            SELECT s.app,
                   coalesce(EXTRACT(EPOCH FROM pg_catalog.max(s.in_transaction)), 0) AS in_transaction,
                   coalesce(EXTRACT(EPOCH FROM pg_catalog.max(s.idle_in_transaction)), 0) AS idle_in_transaction
            FROM sessions AS s
            GROUP BY s.app
        ) AS a,
            LATERAL (
                VALUES (26, 'longest_transaction_seconds', a.in_transaction),
                       (27, 'longest_idle_in_transaction_seconds', a.idle_in_transaction)
            ) AS m (ord, metric, value)
    ) AS r
    ORDER BY r.ord, r.relation, r.application_name, r.state;
$$;

ALTER FUNCTION stockpool.metrics() OWNER TO stockpool_owner;

--
-- Name: FUNCTION metrics(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.metrics() IS 'stockpool''s figures for an exporter, one row each: (metric, kind, relation, application_name, state, value); kind gauge or counter, '''' for a label a figure lacks. docs/metrics.md lists them. Counters are PostgreSQL''s call counts of stockpool''s _tally_* functions (and reserve_units'') and need track_functions = pl (track_functions_enabled). Reads only, takes no lock an API call waits for. SQLSTATEs: none of its own.';

--
-- Name: release(bigint, uuid); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.release(p_shop_id bigint, p_checkout_id uuid) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_hold record;
    v_rows integer := 0;
    v_held integer := 0;
    v_claimed integer := 0;
    v_released integer := 0;
    v_ended integer := 0;
BEGIN
    IF p_shop_id IS NULL OR p_checkout_id IS NULL THEN
        RAISE EXCEPTION 'stockpool.release: % must not be NULL',
            stockpool._null_args(ARRAY['p_shop_id', 'p_checkout_id'],
                                 ARRAY[p_shop_id IS NULL, p_checkout_id IS NULL])
            USING ERRCODE = '22004';
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    FOR v_hold IN
        SELECT h.status, h.quantity
        FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id
            AND h.checkout_id = p_checkout_id
        ORDER BY h.item_id, h.location_id
        FOR UPDATE
    LOOP
        v_rows := v_rows + 1;
        CASE v_hold.status
            WHEN 'held' THEN v_held := v_held + 1;
            WHEN 'claimed' THEN v_claimed := v_claimed + 1;
            WHEN 'released' THEN v_released := v_released + v_hold.quantity;
            ELSE NULL;
        END CASE;
    END LOOP;

    IF v_rows = 0 THEN
        RAISE EXCEPTION 'stockpool.release: checkout % holds nothing in shop %', p_checkout_id, p_shop_id
            USING ERRCODE = 'SP003';
    END IF;
    IF v_held = 0 AND v_released = 0 AND v_claimed > 0 THEN
        RAISE EXCEPTION 'stockpool.release: checkout % was claimed; claimed stock is not released', p_checkout_id
            USING ERRCODE = 'SP006',
                  HINT = 'Return paid stock with stockpool.adjust_stock(), which records a movement.';
    END IF;

    FOR v_hold IN
        WITH ended AS (
            UPDATE stockpool.holds AS h
            SET status = 'released',
                updated_at = pg_catalog.now()
            WHERE h.shop_id = p_shop_id
                AND h.checkout_id = p_checkout_id
                AND h.status = 'held'
            RETURNING h.item_id, h.location_id, h.quantity, h.labels
        )
        SELECT e.item_id, e.location_id, e.quantity, e.labels, s.buckets
        FROM ended AS e
        JOIN stockpool.stock AS s
            ON s.shop_id = p_shop_id
            AND s.item_id = e.item_id
            AND s.location_id = e.location_id
        ORDER BY e.item_id, e.location_id
    LOOP
        IF v_hold.labels IS NULL THEN
            PERFORM stockpool._return_units(p_shop_id, v_hold.item_id, v_hold.location_id,
                                            v_hold.quantity, v_hold.buckets);
        ELSE
            PERFORM stockpool._free_labels(p_shop_id, v_hold.item_id, v_hold.location_id,
                                           v_hold.labels, v_hold.buckets);
        END IF;
        v_released := v_released + v_hold.quantity;
        v_ended := v_ended + 1;
    END LOOP;

    FOR v_i IN 1..v_ended LOOP
        PERFORM stockpool._tally_release();
    END LOOP;
    RETURN v_released;
END;
$$;

ALTER FUNCTION stockpool.release(p_shop_id bigint, p_checkout_id uuid) OWNER TO stockpool_owner;

--
-- Name: FUNCTION release(p_shop_id bigint, p_checkout_id uuid); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.release(p_shop_id bigint, p_checkout_id uuid) IS 'Payment failed: end the checkout''s live holds and give their units back (ledger row or pool). Returns the units released by the checkout; a retry is a no-op returning the same number. SQLSTATEs: 22004 NULL argument, SP003 unknown checkout, SP006 checkout was claimed.';

--
-- Name: replenish_pool(bigint, bigint, bigint, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.replenish_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_cap integer DEFAULT NULL::integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_stock stockpool.stock;
    v_added integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL THEN
        RAISE EXCEPTION 'stockpool.replenish_pool: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_cap <= 0 THEN
        RAISE EXCEPTION 'stockpool.replenish_pool: p_cap must be positive, got %', p_cap
            USING ERRCODE = '22023';
    END IF;
    v_stock := stockpool._stock_row(p_shop_id, p_item_id, p_location_id);
    -- An explicit level: without p_cap, the key's pool_cap (a refill on its
    -- own sizes the pool by the key's demand instead).
    v_added := stockpool._refill(p_shop_id, p_item_id, p_location_id,
                                 p_min_extra => 0, p_wait => true, p_low_water_only => false,
                                 p_cap => coalesce(p_cap, v_stock.pool_cap));
    IF v_added > 0 THEN
        PERFORM stockpool._tally_refill();
    END IF;
    RETURN v_added;
END;
$$;

ALTER FUNCTION stockpool.replenish_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_cap integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION replenish_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_cap integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.replenish_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_cap integer) IS 'Top a key''s pool up to p_cap (default its pool_cap) from free stock, one refiller per key at a time; returns units added. SQLSTATEs: 22004 NULL key argument, 22023 p_cap not positive, SP001 unknown key.';

--
-- Name: reserve_cart(bigint, uuid, bigint[], bigint[], integer[], interval); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.reserve_cart(p_shop_id bigint, p_checkout_id uuid, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_ttl interval DEFAULT '00:15:00'::interval) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_lines integer;
    v_item_ids bigint[];
    v_location_ids bigint[];
    v_quantities integer[];
    v_buckets integer[];
    v_need bigint[];
    v_i integer;
    v_satisfied integer := 0;
    v_stock stockpool.stock;
BEGIN
    IF p_shop_id IS NULL OR p_checkout_id IS NULL OR p_item_ids IS NULL
        OR p_location_ids IS NULL OR p_quantities IS NULL OR p_ttl IS NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_checkout_id', 'p_item_ids', 'p_location_ids', 'p_quantities', 'p_ttl'],
                ARRAY[p_shop_id IS NULL, p_checkout_id IS NULL, p_item_ids IS NULL,
                      p_location_ids IS NULL, p_quantities IS NULL, p_ttl IS NULL])
            USING ERRCODE = '22004';
    END IF;
    v_lines := pg_catalog.cardinality(p_item_ids);
    IF v_lines = 0 THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: the cart has no lines'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_ndims(p_item_ids) <> 1
        OR pg_catalog.array_ndims(p_location_ids) IS DISTINCT FROM 1
        OR pg_catalog.array_ndims(p_quantities) IS DISTINCT FROM 1
        OR pg_catalog.cardinality(p_location_ids) <> v_lines
        OR pg_catalog.cardinality(p_quantities) <> v_lines THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: p_item_ids, p_location_ids and p_quantities must be one-dimensional arrays of equal length (got %, %, %)',
            v_lines, pg_catalog.cardinality(p_location_ids), pg_catalog.cardinality(p_quantities)
            USING ERRCODE = '22023';
    END IF;
    IF p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: p_ttl must be positive, got %', p_ttl
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_item_ids, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_location_ids, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_quantities, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: cart lines must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.unnest(p_quantities) AS q (n) WHERE q.n <= 0) THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: every quantity must be positive'
            USING ERRCODE = '22023';
    END IF;

    -- One line per key, in the one lock order every path uses.
    SELECT pg_catalog.array_agg(l.item_id ORDER BY l.item_id, l.location_id),
           pg_catalog.array_agg(l.location_id ORDER BY l.item_id, l.location_id),
           pg_catalog.array_agg(l.quantity ORDER BY l.item_id, l.location_id)
    INTO v_item_ids, v_location_ids, v_need
    FROM (
        SELECT c.item_id, c.location_id, pg_catalog.sum(c.quantity)::bigint AS quantity
        FROM ROWS FROM (pg_catalog.unnest(p_item_ids), pg_catalog.unnest(p_location_ids),
                        pg_catalog.unnest(p_quantities))
            AS c (item_id, location_id, quantity)
        GROUP BY c.item_id, c.location_id
    ) AS l;
    v_lines := pg_catalog.cardinality(v_item_ids);
    v_quantities := ARRAY[]::integer[];
    v_buckets := ARRAY[]::integer[];

    FOR v_i IN 1..v_lines LOOP
        IF v_need[v_i] > 2147483647 THEN
            RAISE EXCEPTION 'stockpool.reserve_cart: quantity of item % at location % sums to %, beyond integer',
                v_item_ids[v_i], v_location_ids[v_i], v_need[v_i]
                USING ERRCODE = '22003';
        END IF;
        v_stock := stockpool._stock_row(p_shop_id, v_item_ids[v_i], v_location_ids[v_i]);
        IF v_stock.named THEN
            PERFORM stockpool._mixed_key(p_shop_id, v_item_ids[v_i], v_location_ids[v_i], true);
        END IF;
        v_quantities := v_quantities || v_need[v_i]::integer;
        v_buckets := v_buckets || v_stock.buckets;
    END LOOP;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);
    FOR v_i IN 1..v_lines LOOP
        IF stockpool._existing_hold(p_shop_id, p_checkout_id, v_item_ids[v_i],
                                    v_location_ids[v_i], v_quantities[v_i], p_ttl) THEN
            v_satisfied := v_satisfied + 1;
        END IF;
    END LOOP;
    IF v_satisfied = v_lines THEN
        RETURN true;
    END IF;
    IF v_satisfied > 0 THEN
        RAISE EXCEPTION 'stockpool.reserve_cart: checkout % already holds some but not all of these lines',
            p_checkout_id
            USING ERRCODE = 'SP007',
                  HINT = 'Release the checkout first, or reserve under a new checkout id.';
    END IF;

    IF NOT stockpool._take_lines(p_shop_id, v_item_ids, v_location_ids, v_quantities, v_buckets) THEN
        PERFORM stockpool._tally_refusal();
        RETURN false;
    END IF;

    FOR v_i IN 1..v_lines LOOP
        PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, v_item_ids[v_i],
                                       v_location_ids[v_i], v_quantities[v_i], p_ttl, p_reopen => true);
    END LOOP;
    FOR v_i IN 1..v_lines LOOP
        PERFORM stockpool._tally_reservation();
    END LOOP;
    RETURN true;
END;
$$;

ALTER FUNCTION stockpool.reserve_cart(p_shop_id bigint, p_checkout_id uuid, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_ttl interval) OWNER TO stockpool_owner;

--
-- Name: FUNCTION reserve_cart(p_shop_id bigint, p_checkout_id uuid, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_ttl interval); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.reserve_cart(p_shop_id bigint, p_checkout_id uuid, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_ttl interval) IS 'Hold every line of a cart for a checkout, or none. Lines in any order; a key repeated on several lines is summed. true = all held (a retry is a no-op), false = some line lacks stock and nothing is held. SQLSTATEs: 22004 NULL argument or element, 22023 empty/unequal arrays or quantity/ttl not positive, 22003 summed quantity beyond integer, SP001 unknown key, SP007 checkout holds different lines, SP010 named key.';

--
-- Name: reserve_labels(bigint, bigint, bigint, text[], uuid, interval); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.reserve_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_checkout_id uuid, p_ttl interval DEFAULT '00:15:00'::interval) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_stock stockpool.stock;
    v_count integer := pg_catalog.cardinality(p_labels);
    v_labels text[];
    v_positions integer[];
    v_held text[];
    v_missing text;
    v_got integer;
    v_expired integer;
    v_try integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_labels IS NULL
        OR p_checkout_id IS NULL OR p_ttl IS NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_labels: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_labels', 'p_checkout_id', 'p_ttl'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_labels IS NULL,
                      p_checkout_id IS NULL, p_ttl IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF v_count = 0 OR pg_catalog.array_ndims(p_labels) <> 1 THEN
        RAISE EXCEPTION 'stockpool.reserve_labels: p_labels must be a non-empty one-dimensional array'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_labels, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_labels: p_labels must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'stockpool.reserve_labels: p_ttl must be positive, got %', p_ttl
            USING ERRCODE = '22023';
    END IF;

    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    IF NOT v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, false);
    END IF;

    -- The units in position order: the order they are locked in, and the
    -- order the hold records them in.
    SELECT pg_catalog.array_agg(u.label ORDER BY u.position), pg_catalog.array_agg(u.position ORDER BY u.position)
    INTO v_labels, v_positions
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels);
    IF coalesce(pg_catalog.cardinality(v_labels), 0) < v_count THEN
        IF (SELECT pg_catalog.count(DISTINCT l.label) FROM pg_catalog.unnest(p_labels) AS l (label)) < v_count THEN
            RAISE EXCEPTION 'stockpool.reserve_labels: p_labels repeats a label'
                USING ERRCODE = '22023';
        END IF;
        SELECT pg_catalog.string_agg(l.label, ', ' ORDER BY l.label) INTO v_missing
        FROM pg_catalog.unnest(p_labels) AS l (label)
        WHERE l.label <> ALL(coalesce(v_labels, '{}'));
        RAISE EXCEPTION 'stockpool.reserve_labels: (shop %, item %, location %) has no unit labelled %',
            p_shop_id, p_item_id, p_location_id, v_missing
            USING ERRCODE = 'SP013';
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    -- A hold row of this checkout on this key already: a retry (true, if it
    -- holds these very units), or a released or expired hold to take again.
    SELECT h.labels INTO v_held
    FROM stockpool.holds AS h
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id
        AND h.status IN ('held', 'claimed');
    IF FOUND AND v_held IS DISTINCT FROM v_labels THEN
        RAISE EXCEPTION 'checkout % already holds units % of item % at location %, not %',
            p_checkout_id, v_held, p_item_id, p_location_id, v_labels
            USING ERRCODE = 'SP007',
                  HINT = 'Release the checkout first, or reserve under a new checkout id.';
    END IF;
    IF FOUND AND stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                          v_count, p_ttl) THEN
        RETURN true;
    END IF;

    v_expired := 0;
    FOR v_try IN 1..2 LOOP
        BEGIN
            WITH picked AS (
                SELECT f.ctid AS row_id
                FROM stockpool.named_free AS f
                WHERE f.shop_id = p_shop_id
                    AND f.item_id = p_item_id
                    AND f.location_id = p_location_id
                    AND f.position = ANY(v_positions)
                ORDER BY f.position
                FOR UPDATE
            )
            DELETE FROM stockpool.named_free AS d
            USING picked
            WHERE d.ctid = picked.row_id;
            GET DIAGNOSTICS v_got = ROW_COUNT;
            IF v_got < v_count THEN
                RAISE EXCEPTION USING ERRCODE = 'SPX05';
            END IF;
            PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                           v_count, p_ttl, p_reopen => true, p_labels => v_labels);
            FOR v_i IN 1..v_expired LOOP
                PERFORM stockpool._tally_expiry();
            END LOOP;
            PERFORM stockpool._tally_reservation();
            RETURN true;
        EXCEPTION
            WHEN SQLSTATE 'SPX05' THEN
                NULL;
        END;
        -- A unit not free: holding nothing now, expire the key's overdue
        -- holds (their units come back) and look once more, if any did.
        EXIT WHEN v_try = 2;
        v_expired := stockpool._expire_key(p_shop_id, p_item_id, p_location_id, v_stock.buckets);
        EXIT WHEN v_expired = 0;
    END LOOP;

    FOR v_i IN 1..v_expired LOOP
        PERFORM stockpool._tally_expiry();
    END LOOP;
    PERFORM stockpool._tally_refusal();
    RETURN false;
END;
$$;

ALTER FUNCTION stockpool.reserve_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_checkout_id uuid, p_ttl interval) OWNER TO stockpool_owner;

--
-- Name: FUNCTION reserve_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_checkout_id uuid, p_ttl interval); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.reserve_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_checkout_id uuid, p_ttl interval) IS 'Hold exactly the units p_labels of a named key for a checkout until now() + p_ttl, all or nothing. true = held (a retry by the same checkout is a no-op), false = a unit is held or sold. Labels may come in any order (locked in position order). SQLSTATEs: 22004 NULL argument or element, 22023 empty, multi-dimensional or repeated labels or ttl not positive, SP001 unknown key, SP010 counted key, SP013 unknown label, SP007 checkout holds other units of this key.';

--
-- Name: reserve_named(bigint, bigint, bigint, integer, uuid, interval, boolean); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.reserve_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval DEFAULT '00:15:00'::interval, p_adjacent boolean DEFAULT false) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_stock stockpool.stock;
    v_labels text[];
    v_label text;
    v_start integer;
    v_expired integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_quantity IS NULL
        OR p_checkout_id IS NULL OR p_ttl IS NULL OR p_adjacent IS NULL THEN
        RAISE EXCEPTION 'stockpool.reserve_named: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_quantity', 'p_checkout_id', 'p_ttl',
                      'p_adjacent'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_quantity IS NULL,
                      p_checkout_id IS NULL, p_ttl IS NULL, p_adjacent IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_quantity <= 0 THEN
        RAISE EXCEPTION 'stockpool.reserve_named: p_quantity must be positive, got %', p_quantity
            USING ERRCODE = '22023';
    END IF;
    IF p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'stockpool.reserve_named: p_ttl must be positive, got %', p_ttl
            USING ERRCODE = '22023';
    END IF;

    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    IF NOT v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, false);
    END IF;

    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);

    -- A hold row of this checkout on this key already: a retry (the same
    -- labels), or a released or expired hold to take again.
    SELECT h.labels INTO v_labels
    FROM stockpool.holds AS h
    WHERE h.shop_id = p_shop_id
        AND h.checkout_id = p_checkout_id
        AND h.item_id = p_item_id
        AND h.location_id = p_location_id;
    IF FOUND AND stockpool._existing_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                          p_quantity, p_ttl) THEN
        RETURN v_labels;
    END IF;

    IF p_quantity > v_stock.on_hand THEN
        PERFORM stockpool._tally_refusal();
        RETURN NULL;
    END IF;

    IF p_quantity = 1 THEN
        -- _take_named's spread take, inlined for one unit: one statement per
        -- direction, a cached plan, nothing locked when nothing is found.
        v_start := pg_catalog.floor(pg_catalog.random() * v_stock.buckets)::integer;
        DELETE FROM stockpool.named_free AS d
        WHERE d.ctid = (
                SELECT f.ctid
                FROM stockpool.named_free AS f
                WHERE f.shop_id = p_shop_id
                    AND f.item_id = p_item_id
                    AND f.location_id = p_location_id
                    AND f.bucket >= v_start
                ORDER BY f.bucket, f.position
                LIMIT 1
                FOR UPDATE SKIP LOCKED
            )
        RETURNING d.label INTO v_label;
        IF NOT FOUND AND v_start > 0 THEN
            DELETE FROM stockpool.named_free AS d
            WHERE d.ctid = (
                    SELECT f.ctid
                    FROM stockpool.named_free AS f
                    WHERE f.shop_id = p_shop_id
                        AND f.item_id = p_item_id
                        AND f.location_id = p_location_id
                        AND f.bucket < v_start
                    ORDER BY f.bucket, f.position
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                )
            RETURNING d.label INTO v_label;
        END IF;
        v_labels := CASE WHEN v_label IS NOT NULL THEN ARRAY[v_label] END;
    ELSE
        v_labels := stockpool._take_named(p_shop_id, p_item_id, p_location_id, p_quantity,
                                          v_stock.buckets, p_adjacent, false);
    END IF;

    IF v_labels IS NULL THEN
        -- Near sellout, holding no free row: overdue holds first (their
        -- units come back), then wait for units locked by in-flight buyers.
        v_expired := stockpool._expire_key(p_shop_id, p_item_id, p_location_id, v_stock.buckets);
        FOR v_i IN 1..v_expired LOOP
            PERFORM stockpool._tally_expiry();
        END LOOP;
        v_labels := stockpool._take_named(p_shop_id, p_item_id, p_location_id, p_quantity,
                                          v_stock.buckets, p_adjacent, true);
        IF v_labels IS NULL THEN
            PERFORM stockpool._tally_refusal();
            RETURN NULL;
        END IF;
    END IF;

    PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id,
                                   p_quantity, p_ttl, p_reopen => true, p_labels => v_labels);
    PERFORM stockpool._tally_reservation();
    RETURN v_labels;
END;
$$;

ALTER FUNCTION stockpool.reserve_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval, p_adjacent boolean) OWNER TO stockpool_owner;

--
-- Name: FUNCTION reserve_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval, p_adjacent boolean); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.reserve_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval, p_adjacent boolean) IS 'Hold p_quantity free units of a named key for a checkout until now() + p_ttl, all or nothing; with p_adjacent one block of consecutive positions. Returns their labels in position order (one of the lowest free positions first, spread under load), NULL when not enough are free; a retry by the same checkout returns the same labels. SQLSTATEs: 22004 NULL argument, 22023 quantity or ttl not positive, SP001 unknown key, SP010 counted key, SP007 checkout already holds a different quantity of this key.';

--
-- Name: reserve_units(bigint, bigint, bigint, integer, uuid, interval); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.reserve_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval DEFAULT '00:15:00'::interval) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
$$;

ALTER FUNCTION stockpool.reserve_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval) OWNER TO stockpool_owner;

--
-- Name: FUNCTION reserve_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.reserve_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval) IS 'Hold p_quantity units of (shop, item, location) for a checkout until now() + p_ttl, all or nothing. true = held (a retry by the same checkout is a no-op), false = not enough stock. SQLSTATEs: 22004 NULL argument, 22023 quantity or ttl not positive, SP001 unknown key, SP007 checkout already holds a different quantity of this key, SP010 named key.';

--
-- Name: retire_named_units(bigint, bigint, bigint, text[]); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.retire_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_stock stockpool.stock;
    v_count integer := pg_catalog.cardinality(p_labels);
    v_positions integer[];
    v_missing text;
    v_freed integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_labels IS NULL THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_labels'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_labels IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF v_count = 0 OR pg_catalog.array_ndims(p_labels) <> 1 THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: p_labels must be a non-empty one-dimensional array'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_labels, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: p_labels must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    IF (SELECT pg_catalog.count(DISTINCT l.label) FROM pg_catalog.unnest(p_labels) AS l (label)) < v_count THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: p_labels repeats a label'
            USING ERRCODE = '22023';
    END IF;

    PERFORM pg_catalog.pg_advisory_xact_lock(
        stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));
    PERFORM stockpool._settle(p_shop_id, p_item_id, p_location_id, true);
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM stockpool._unknown_key(p_shop_id, p_item_id, p_location_id);
    END IF;
    IF NOT v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, false);
    END IF;

    SELECT pg_catalog.string_agg(l.label, ', ' ORDER BY l.label) INTO v_missing
    FROM pg_catalog.unnest(p_labels) AS l (label)
    WHERE NOT EXISTS (
        SELECT
        FROM stockpool.named_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
            AND u.label = l.label
    );
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: (shop %, item %, location %) has no unit labelled %',
            p_shop_id, p_item_id, p_location_id, v_missing
            USING ERRCODE = 'SP013';
    END IF;
    SELECT pg_catalog.array_agg(u.position ORDER BY u.position) INTO v_positions
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels);

    WITH picked AS (
        SELECT f.ctid AS row_id
        FROM stockpool.named_free AS f
        WHERE f.shop_id = p_shop_id
            AND f.item_id = p_item_id
            AND f.location_id = p_location_id
            AND f.position = ANY(v_positions)
        ORDER BY f.position
        FOR UPDATE
    )
    DELETE FROM stockpool.named_free AS d
    USING picked
    WHERE d.ctid = picked.row_id;
    GET DIAGNOSTICS v_freed = ROW_COUNT;
    IF v_freed < v_count THEN
        RAISE EXCEPTION 'stockpool.retire_named_units: % of the % units are held or sold; nothing was retired',
            v_count - v_freed, v_count
            USING ERRCODE = 'SP012',
                  HINT = 'Retire a unit once its hold is released or expires; a sold unit stays sold.';
    END IF;

    DELETE FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels);
    UPDATE stockpool.stock AS s
    SET on_hand = s.on_hand - v_count,
        allocated = s.allocated - v_count,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    INSERT INTO stockpool.movements
        (shop_id, item_id, location_id, delta, on_hand_after, reason, labels)
    VALUES (p_shop_id, p_item_id, p_location_id, -v_count, v_stock.on_hand - v_count, 'adjust', p_labels);
    RETURN v_stock.on_hand - v_count;
END;
$$;

ALTER FUNCTION stockpool.retire_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[]) OWNER TO stockpool_owner;

--
-- Name: FUNCTION retire_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[]); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.retire_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[]) IS 'Take free units of a named key out of sale, all or nothing; held or sold ones are refused. Returns the key''s units on hand. SQLSTATEs: 22004 NULL argument or element, 22023 empty, multi-dimensional or repeated labels, SP001 unknown key, SP010 counted key, SP013 unknown label, SP012 unit held or sold.';

--
-- Name: set_named_units(bigint, bigint, bigint, text[], integer[]); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.set_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_positions integer[] DEFAULT NULL::integer[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_stock stockpool.stock;
    v_count integer := pg_catalog.cardinality(p_labels);
    v_positions integer[] := p_positions;
    v_repeated text;
    v_units integer;
    v_buckets integer;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_labels IS NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_labels'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_labels IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF v_count = 0 OR pg_catalog.array_ndims(p_labels) <> 1
        OR pg_catalog.array_ndims(p_positions) <> 1
        OR pg_catalog.cardinality(p_positions) <> v_count THEN
        RAISE EXCEPTION 'stockpool.set_named_units: p_labels must be a non-empty one-dimensional array, and p_positions (if given) one of the same length (got % labels, % positions)',
            v_count, pg_catalog.cardinality(p_positions)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_labels, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_positions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: labels and positions must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    SELECT pg_catalog.string_agg(r.label, ', ' ORDER BY r.label) INTO v_repeated
    FROM (
        SELECT l.label
        FROM pg_catalog.unnest(p_labels) AS l (label)
        GROUP BY l.label
        HAVING pg_catalog.count(*) > 1
    ) AS r;
    IF v_repeated IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: labels repeated: %', v_repeated
            USING ERRCODE = 'SP011',
                  HINT = 'Every unit of a key has a label of its own.';
    END IF;
    SELECT pg_catalog.string_agg(r.position::text, ', ' ORDER BY r.position) INTO v_repeated
    FROM (
        SELECT p.position
        FROM pg_catalog.unnest(p_positions) AS p (position)
        GROUP BY p.position
        HAVING pg_catalog.count(*) > 1
    ) AS r;
    IF v_repeated IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: positions repeated: %', v_repeated
            USING ERRCODE = 'SP011',
                  HINT = 'Every unit of a key has a position of its own.';
    END IF;

    -- set_stock's order: the refill lock, then the ledger row (true figure).
    PERFORM pg_catalog.pg_advisory_xact_lock(
        stockpool._key_lock_id(p_shop_id, p_item_id, p_location_id));
    PERFORM stockpool._settle(p_shop_id, p_item_id, p_location_id, true);
    SELECT s.* INTO v_stock
    FROM stockpool.stock AS s
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        INSERT INTO stockpool.stock (shop_id, item_id, location_id, on_hand, named)
        VALUES (p_shop_id, p_item_id, p_location_id, 0, true)
        RETURNING * INTO v_stock;
    ELSIF NOT v_stock.named THEN
        PERFORM stockpool._mixed_key(p_shop_id, p_item_id, p_location_id, false);
    END IF;

    SELECT pg_catalog.string_agg(u.label, ', ' ORDER BY u.label) INTO v_repeated
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id
        AND u.label = ANY(p_labels);
    IF v_repeated IS NOT NULL THEN
        RAISE EXCEPTION 'stockpool.set_named_units: (shop %, item %, location %) has units labelled % already',
            p_shop_id, p_item_id, p_location_id, v_repeated
            USING ERRCODE = 'SP011',
                  HINT = 'Every unit of a key has a label of its own (sold units keep theirs).';
    END IF;
    IF v_positions IS NULL THEN
        SELECT pg_catalog.array_agg(m.last_position + g.n ORDER BY g.n) INTO v_positions
        FROM (
            SELECT coalesce(pg_catalog.max(u.position), 0) AS last_position
            FROM stockpool.named_units AS u
            WHERE u.shop_id = p_shop_id
                AND u.item_id = p_item_id
                AND u.location_id = p_location_id
        ) AS m
        CROSS JOIN pg_catalog.generate_series(1, v_count) AS g (n);
    ELSE
        SELECT pg_catalog.string_agg(u.position::text, ', ' ORDER BY u.position) INTO v_repeated
        FROM stockpool.named_units AS u
        WHERE u.shop_id = p_shop_id
            AND u.item_id = p_item_id
            AND u.location_id = p_location_id
            AND u.position = ANY(p_positions);
        IF v_repeated IS NOT NULL THEN
            RAISE EXCEPTION 'stockpool.set_named_units: (shop %, item %, location %) has units at positions % already',
                p_shop_id, p_item_id, p_location_id, v_repeated
                USING ERRCODE = 'SP011',
                      HINT = 'Every unit of a key has a position of its own (sold units keep theirs).';
        END IF;
    END IF;

    -- Spread grows with the key, as a pool's does (one bucket per 128 units,
    -- at most 1,024); raised, never lowered.
    SELECT pg_catalog.count(*)::integer + v_count INTO v_units
    FROM stockpool.named_units AS u
    WHERE u.shop_id = p_shop_id
        AND u.item_id = p_item_id
        AND u.location_id = p_location_id;
    v_buckets := GREATEST(v_stock.buckets, LEAST(1024, v_units / 128));

    INSERT INTO stockpool.named_units (shop_id, item_id, location_id, label, position)
    SELECT p_shop_id, p_item_id, p_location_id, n.label, n.position
    FROM ROWS FROM (pg_catalog.unnest(p_labels), pg_catalog.unnest(v_positions)) AS n (label, position);
    PERFORM stockpool._free_labels(p_shop_id, p_item_id, p_location_id, p_labels, v_buckets);

    UPDATE stockpool.stock AS s
    SET on_hand = s.on_hand + v_count,
        allocated = s.allocated + v_count,
        buckets = v_buckets,
        updated_at = pg_catalog.now()
    WHERE s.shop_id = p_shop_id
        AND s.item_id = p_item_id
        AND s.location_id = p_location_id;
    INSERT INTO stockpool.movements
        (shop_id, item_id, location_id, delta, on_hand_after, reason, labels)
    VALUES (p_shop_id, p_item_id, p_location_id, v_count, v_stock.on_hand + v_count, 'adjust', p_labels);
    RETURN v_stock.on_hand + v_count;
END;
$$;

ALTER FUNCTION stockpool.set_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_positions integer[]) OWNER TO stockpool_owner;

--
-- Name: FUNCTION set_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_positions integer[]); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.set_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_positions integer[]) IS 'Add labelled units to a named key (creating it), free at once; p_positions orders them and defines adjacency (default: after the key''s last position, in array order). Returns the key''s units on hand. SQLSTATEs: 22004 NULL argument or element, 22023 empty, multi-dimensional or unequal arrays, SP010 counted key, SP011 label or position repeated.';

--
-- Name: set_stock(bigint, bigint, bigint, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.set_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_on_hand integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_on_hand IS NULL THEN
        RAISE EXCEPTION 'stockpool.set_stock: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_on_hand'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_on_hand IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_on_hand < 0 THEN
        RAISE EXCEPTION 'stockpool.set_stock: p_on_hand must not be negative, got %', p_on_hand
            USING ERRCODE = '22023';
    END IF;
    RETURN stockpool._apply_on_hand(p_shop_id, p_item_id, p_location_id, p_on_hand, false);
END;
$$;

ALTER FUNCTION stockpool.set_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_on_hand integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION set_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_on_hand integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.set_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_on_hand integer) IS 'Create a stock key or set its on hand, recording a movement for the difference; returns the new on hand. Pool units above the new bound are taken back. SQLSTATEs: 22004 NULL argument, 22023 negative on hand, SP002 below units held by live holds, SP010 named key.';

--
-- Name: sweep(integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.sweep(p_batch integer DEFAULT 500) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    -- A pool not refilled for this long goes back to its ledger row.
    c_quiet constant interval := '60 seconds';
    v_holds integer;
BEGIN
    IF p_batch IS NULL THEN
        RAISE EXCEPTION 'stockpool.sweep: p_batch must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_batch <= 0 THEN
        RAISE EXCEPTION 'stockpool.sweep: p_batch must be positive, got %', p_batch
            USING ERRCODE = '22023';
    END IF;

    v_holds := stockpool._maintain_step('expire', p_batch, c_quiet);
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM stockpool._maintain_step('settle', p_batch, c_quiet);
        PERFORM stockpool._maintain_step('cool', p_batch, c_quiet);
    END IF;

    RETURN v_holds;
END;
$$;

ALTER FUNCTION stockpool.sweep(p_batch integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION sweep(p_batch integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.sweep(p_batch integer) IS 'Expire up to p_batch overdue holds in one short transaction and return their units to the pool; then fold the pending claims of up to p_batch keys whose ledger row is free, and hand the pools of up to p_batch keys quiet for 60 s back to their ledger rows. Returns holds expired. Concurrent sweepers take disjoint batches (SKIP LOCKED). SQLSTATEs: 22004 NULL p_batch, 22023 p_batch not positive.';

--
-- Name: take_units(bigint, bigint, bigint, integer); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.take_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_stock stockpool.stock;
BEGIN
    IF p_shop_id IS NULL OR p_item_id IS NULL OR p_location_id IS NULL OR p_quantity IS NULL THEN
        RAISE EXCEPTION 'stockpool.take_units: % must not be NULL',
            stockpool._null_args(
                ARRAY['p_shop_id', 'p_item_id', 'p_location_id', 'p_quantity'],
                ARRAY[p_shop_id IS NULL, p_item_id IS NULL, p_location_id IS NULL, p_quantity IS NULL])
            USING ERRCODE = '22004';
    END IF;
    IF p_quantity <= 0 THEN
        RAISE EXCEPTION 'stockpool.take_units: p_quantity must be positive, got %', p_quantity
            USING ERRCODE = '22023';
    END IF;
    v_stock := stockpool._stock_row(p_shop_id, p_item_id, p_location_id);
    RETURN stockpool._take(p_shop_id, p_item_id, p_location_id, p_quantity, v_stock.buckets);
END;
$$;

ALTER FUNCTION stockpool.take_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) OWNER TO stockpool_owner;

--
-- Name: FUNCTION take_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.take_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) IS 'Low-level SKIP LOCKED claim of up to p_quantity pool units of a key (deleted, no hold recorded); returns how many were taken. SQLSTATEs: 22004 NULL argument, 22023 quantity not positive, SP001 unknown key.';

--
-- Name: wait_events(); Type: FUNCTION; Schema: stockpool; Owner: stockpool_owner
--

CREATE FUNCTION stockpool.wait_events() RETURNS TABLE(application_name text, wait_event text, backends integer)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT coalesce(a.application_name, '') AS application_name,
           coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') AS wait_event,
           pg_catalog.count(*)::integer AS backends
    FROM pg_catalog.pg_stat_activity AS a
    WHERE a.datid = (SELECT d.oid FROM pg_catalog.pg_database AS d WHERE d.datname = pg_catalog.current_database())
        AND a.pid <> pg_catalog.pg_backend_pid()
        AND a.backend_type = 'client backend'
        AND a.state = 'active'
    GROUP BY 1, 2
    ORDER BY backends DESC, application_name, wait_event;
$$;

ALTER FUNCTION stockpool.wait_events() OWNER TO stockpool_owner;

--
-- Name: FUNCTION wait_events(); Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON FUNCTION stockpool.wait_events() IS 'This database''s active client sessions now, other than the caller''s, by (application_name, wait_event): wait_event is wait_event_type:wait_event, or CPU when waiting for nothing; backends is how many. Sees every role''s sessions (runs as the owner, a member of pg_read_all_stats). Reads only, takes no lock. SQLSTATEs: none of its own.';

--
-- Name: holds; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.holds (
    shop_id bigint NOT NULL,
    checkout_id uuid NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    quantity integer NOT NULL,
    status text DEFAULT 'held'::text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    labels text[]
)
WITH (autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_cost_delay='0');

ALTER TABLE stockpool.holds OWNER TO stockpool_owner;

--
-- Name: migrations; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    applied_by text DEFAULT SESSION_USER NOT NULL
);

ALTER TABLE stockpool.migrations OWNER TO stockpool_owner;

--
-- Name: movements; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.movements (
    shop_id bigint NOT NULL,
    movement_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    delta integer NOT NULL,
    on_hand_after integer NOT NULL,
    reason text NOT NULL,
    checkout_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    labels text[],
    CONSTRAINT movements_claim_has_checkout CHECK (((reason = 'claim'::text) = (checkout_id IS NOT NULL))),
    CONSTRAINT movements_delta_nonzero CHECK ((delta <> 0)),
    CONSTRAINT movements_on_hand_after_nonnegative CHECK ((on_hand_after >= 0)),
    CONSTRAINT movements_reason_known CHECK ((reason = ANY (ARRAY['set'::text, 'adjust'::text, 'claim'::text])))
);

ALTER TABLE stockpool.movements OWNER TO stockpool_owner;

--
-- Name: movements_movement_id_seq; Type: SEQUENCE; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE stockpool.movements ALTER COLUMN movement_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME stockpool.movements_movement_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: named_free; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.named_free (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    "position" integer NOT NULL,
    label text NOT NULL,
    CONSTRAINT named_free_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.named_free OWNER TO stockpool_owner;

--
-- Name: TABLE named_free; Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON TABLE stockpool.named_free IS 'The free units of named keys, claimed by deleting them (SKIP LOCKED), put back on release and expiry.';

--
-- Name: named_units; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.named_units (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    label text NOT NULL,
    "position" integer NOT NULL
);

ALTER TABLE stockpool.named_units OWNER TO stockpool_owner;

--
-- Name: TABLE named_units; Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON TABLE stockpool.named_units IS 'Every unit of a named key (label, position), sold ones included; see migration 0007.';

--
-- Name: pending_claims; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pending_claims (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    checkout_id uuid NOT NULL,
    quantity integer NOT NULL,
    claimed_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT pending_claims_quantity_positive CHECK ((quantity > 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='1000', autovacuum_vacuum_cost_delay='0');

ALTER TABLE stockpool.pending_claims OWNER TO stockpool_owner;

--
-- Name: TABLE pending_claims; Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON TABLE stockpool.pending_claims IS 'Claims recorded while their key''s ledger row was busy, not yet folded into stock.on_hand (see stockpool._settle).';

--
-- Name: pool_units; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
PARTITION BY HASH (shop_id);

ALTER TABLE stockpool.pool_units OWNER TO stockpool_owner;

--
-- Name: pool_units_p0; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units_p0 (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.pool_units_p0 OWNER TO stockpool_owner;

--
-- Name: pool_units_p1; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units_p1 (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.pool_units_p1 OWNER TO stockpool_owner;

--
-- Name: pool_units_p2; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units_p2 (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.pool_units_p2 OWNER TO stockpool_owner;

--
-- Name: pool_units_p3; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units_p3 (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.pool_units_p3 OWNER TO stockpool_owner;

--
-- Name: pool_units_p4; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units_p4 (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.pool_units_p4 OWNER TO stockpool_owner;

--
-- Name: pool_units_p5; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units_p5 (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.pool_units_p5 OWNER TO stockpool_owner;

--
-- Name: pool_units_p6; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units_p6 (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.pool_units_p6 OWNER TO stockpool_owner;

--
-- Name: pool_units_p7; Type: TABLE; Schema: stockpool; Owner: stockpool_owner
--

CREATE TABLE stockpool.pool_units_p7 (
    shop_id bigint NOT NULL,
    item_id bigint NOT NULL,
    location_id bigint NOT NULL,
    bucket integer NOT NULL,
    unit_id bigint NOT NULL,
    CONSTRAINT pool_units_bucket_nonnegative CHECK ((bucket >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='2000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='2000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', autovacuum_vacuum_cost_delay='0', vacuum_truncate=off);

ALTER TABLE stockpool.pool_units_p7 OWNER TO stockpool_owner;

--
-- Name: pool_units_unit_id_seq; Type: SEQUENCE; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE stockpool.pool_units ALTER COLUMN unit_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME stockpool.pool_units_unit_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: stock_levels; Type: VIEW; Schema: stockpool; Owner: stockpool_owner
--

CREATE VIEW stockpool.stock_levels WITH (security_barrier='true') AS
 WITH pooled AS (
         SELECT u.shop_id,
            u.item_id,
            u.location_id,
            count(*) AS units
           FROM stockpool.pool_units u
          GROUP BY u.shop_id, u.item_id, u.location_id
        ), held AS (
         SELECT hd.shop_id,
            hd.item_id,
            hd.location_id,
            sum(hd.quantity) AS units
           FROM stockpool.holds hd
          WHERE (hd.status = 'held'::text)
          GROUP BY hd.shop_id, hd.item_id, hd.location_id
        ), named_free AS (
         SELECT f.shop_id,
            f.item_id,
            f.location_id,
            count(*) AS units
           FROM stockpool.named_free f
          GROUP BY f.shop_id, f.item_id, f.location_id
        ), pending AS (
         SELECT c_1.shop_id,
            c_1.item_id,
            c_1.location_id,
            sum(c_1.quantity) AS units
           FROM stockpool.pending_claims c_1
          GROUP BY c_1.shop_id, c_1.item_id, c_1.location_id
        )
 SELECT s.shop_id,
    s.item_id,
    s.location_id,
    ((s.on_hand - COALESCE(c.units, (0)::bigint)))::integer AS on_hand,
    ((COALESCE(p.units, (0)::bigint) + COALESCE(n.units, (0)::bigint)))::integer AS pooled,
    (COALESCE(h.units, (0)::bigint))::integer AS held,
    (((((s.on_hand - COALESCE(c.units, (0)::bigint)) - COALESCE(p.units, (0)::bigint)) - COALESCE(n.units, (0)::bigint)) - COALESCE(h.units, (0)::bigint)))::integer AS free,
    (COALESCE(c.units, (0)::bigint))::integer AS unsettled
   FROM ((((stockpool.stock s
     LEFT JOIN pooled p ON (((s.shop_id = p.shop_id) AND (s.item_id = p.item_id) AND (s.location_id = p.location_id))))
     LEFT JOIN named_free n ON (((s.shop_id = n.shop_id) AND (s.item_id = n.item_id) AND (s.location_id = n.location_id))))
     LEFT JOIN held h ON (((s.shop_id = h.shop_id) AND (s.item_id = h.item_id) AND (s.location_id = h.location_id))))
     LEFT JOIN pending c ON (((s.shop_id = c.shop_id) AND (s.item_id = c.item_id) AND (s.location_id = c.location_id))));

ALTER TABLE stockpool.stock_levels OWNER TO stockpool_owner;

--
-- Name: VIEW stock_levels; Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON VIEW stockpool.stock_levels IS 'Per stock key: on_hand (net of claims not yet folded into the ledger), pooled (units in the pool; a named key''s free units), held (units in live holds), free (on_hand - pooled - held), unsettled (units of pending claims).';

--
-- Name: unit_status; Type: VIEW; Schema: stockpool; Owner: stockpool_owner
--

CREATE VIEW stockpool.unit_status WITH (security_barrier='true') AS
 WITH taken AS (
         SELECT h.shop_id,
            h.item_id,
            h.location_id,
            l.label,
            h.checkout_id,
            h.expires_at,
                CASE h.status
                    WHEN 'held'::text THEN 'held'::text
                    ELSE 'sold'::text
                END AS status
           FROM (stockpool.holds h
             CROSS JOIN LATERAL unnest(h.labels) l(label))
          WHERE ((h.labels IS NOT NULL) AND (h.status = ANY (ARRAY['held'::text, 'claimed'::text])))
        )
 SELECT u.shop_id,
    u.item_id,
    u.location_id,
    u.label,
    u."position",
        CASE
            WHEN (f."position" IS NOT NULL) THEN 'free'::text
            WHEN (t.status IS NOT NULL) THEN t.status
            ELSE 'lost'::text
        END AS status,
    t.checkout_id,
    t.expires_at
   FROM ((stockpool.named_units u
     LEFT JOIN stockpool.named_free f ON (((u.shop_id = f.shop_id) AND (u.item_id = f.item_id) AND (u.location_id = f.location_id) AND (u."position" = f."position"))))
     LEFT JOIN taken t ON (((u.shop_id = t.shop_id) AND (u.item_id = t.item_id) AND (u.location_id = t.location_id) AND (u.label = t.label))));

ALTER TABLE stockpool.unit_status OWNER TO stockpool_owner;

--
-- Name: VIEW unit_status; Type: COMMENT; Schema: stockpool; Owner: stockpool_owner
--

COMMENT ON VIEW stockpool.unit_status IS 'Per unit of a named key: label, position, status (free, held, sold; lost only when an invariant is broken), and the holding checkout with its expiry.';

--
-- Name: pool_units_p0; Type: TABLE ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pool_units ATTACH PARTITION stockpool.pool_units_p0 FOR VALUES WITH (modulus 8, remainder 0);

--
-- Name: pool_units_p1; Type: TABLE ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pool_units ATTACH PARTITION stockpool.pool_units_p1 FOR VALUES WITH (modulus 8, remainder 1);

--
-- Name: pool_units_p2; Type: TABLE ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pool_units ATTACH PARTITION stockpool.pool_units_p2 FOR VALUES WITH (modulus 8, remainder 2);

--
-- Name: pool_units_p3; Type: TABLE ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pool_units ATTACH PARTITION stockpool.pool_units_p3 FOR VALUES WITH (modulus 8, remainder 3);

--
-- Name: pool_units_p4; Type: TABLE ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pool_units ATTACH PARTITION stockpool.pool_units_p4 FOR VALUES WITH (modulus 8, remainder 4);

--
-- Name: pool_units_p5; Type: TABLE ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pool_units ATTACH PARTITION stockpool.pool_units_p5 FOR VALUES WITH (modulus 8, remainder 5);

--
-- Name: pool_units_p6; Type: TABLE ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pool_units ATTACH PARTITION stockpool.pool_units_p6 FOR VALUES WITH (modulus 8, remainder 6);

--
-- Name: pool_units_p7; Type: TABLE ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pool_units ATTACH PARTITION stockpool.pool_units_p7 FOR VALUES WITH (modulus 8, remainder 7);

--
-- Name: holds holds_pkey; Type: CONSTRAINT; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.holds
    ADD CONSTRAINT holds_pkey PRIMARY KEY (shop_id, checkout_id, item_id, location_id);

--
-- Name: migrations migrations_pkey; Type: CONSTRAINT; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.migrations
    ADD CONSTRAINT migrations_pkey PRIMARY KEY (version);

--
-- Name: movements movements_pkey; Type: CONSTRAINT; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.movements
    ADD CONSTRAINT movements_pkey PRIMARY KEY (shop_id, movement_id);

--
-- Name: named_units named_units_pkey; Type: CONSTRAINT; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.named_units
    ADD CONSTRAINT named_units_pkey PRIMARY KEY (shop_id, item_id, location_id, label);

--
-- Name: named_units named_units_position_key; Type: CONSTRAINT; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.named_units
    ADD CONSTRAINT named_units_position_key UNIQUE (shop_id, item_id, location_id, "position");

--
-- Name: pending_claims pending_claims_pkey; Type: CONSTRAINT; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.pending_claims
    ADD CONSTRAINT pending_claims_pkey PRIMARY KEY (shop_id, item_id, location_id, checkout_id);

--
-- Name: stock stock_pkey; Type: CONSTRAINT; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.stock
    ADD CONSTRAINT stock_pkey PRIMARY KEY (shop_id, item_id, location_id);

--
-- Name: holds_expiry_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX holds_expiry_idx ON stockpool.holds USING btree (expires_at) WHERE (status = 'held'::text);

--
-- Name: holds_live_key_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX holds_live_key_idx ON stockpool.holds USING btree (shop_id, item_id, location_id, expires_at) WHERE (status = 'held'::text);

--
-- Name: movements_key_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX movements_key_idx ON stockpool.movements USING btree (shop_id, item_id, location_id);

--
-- Name: named_free_claim_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX named_free_claim_idx ON stockpool.named_free USING btree (shop_id, item_id, location_id, bucket, "position");

--
-- Name: named_free_position_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE UNIQUE INDEX named_free_position_idx ON stockpool.named_free USING btree (shop_id, item_id, location_id, "position");

--
-- Name: pool_units_claim_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_claim_idx ON ONLY stockpool.pool_units USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: pool_units_p0_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_p0_shop_id_item_id_location_id_bucket_unit_id_idx ON stockpool.pool_units_p0 USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: pool_units_p1_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_p1_shop_id_item_id_location_id_bucket_unit_id_idx ON stockpool.pool_units_p1 USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: pool_units_p2_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_p2_shop_id_item_id_location_id_bucket_unit_id_idx ON stockpool.pool_units_p2 USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: pool_units_p3_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_p3_shop_id_item_id_location_id_bucket_unit_id_idx ON stockpool.pool_units_p3 USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: pool_units_p4_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_p4_shop_id_item_id_location_id_bucket_unit_id_idx ON stockpool.pool_units_p4 USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: pool_units_p5_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_p5_shop_id_item_id_location_id_bucket_unit_id_idx ON stockpool.pool_units_p5 USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: pool_units_p6_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_p6_shop_id_item_id_location_id_bucket_unit_id_idx ON stockpool.pool_units_p6 USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: pool_units_p7_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX pool_units_p7_shop_id_item_id_location_id_bucket_unit_id_idx ON stockpool.pool_units_p7 USING btree (shop_id, item_id, location_id, bucket, unit_id);

--
-- Name: stock_pooled_idx; Type: INDEX; Schema: stockpool; Owner: stockpool_owner
--

CREATE INDEX stock_pooled_idx ON stockpool.stock USING btree (refilled_at) WHERE (pool_target > 0);

--
-- Name: pool_units_p0_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER INDEX stockpool.pool_units_claim_idx ATTACH PARTITION stockpool.pool_units_p0_shop_id_item_id_location_id_bucket_unit_id_idx;

--
-- Name: pool_units_p1_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER INDEX stockpool.pool_units_claim_idx ATTACH PARTITION stockpool.pool_units_p1_shop_id_item_id_location_id_bucket_unit_id_idx;

--
-- Name: pool_units_p2_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER INDEX stockpool.pool_units_claim_idx ATTACH PARTITION stockpool.pool_units_p2_shop_id_item_id_location_id_bucket_unit_id_idx;

--
-- Name: pool_units_p3_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER INDEX stockpool.pool_units_claim_idx ATTACH PARTITION stockpool.pool_units_p3_shop_id_item_id_location_id_bucket_unit_id_idx;

--
-- Name: pool_units_p4_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER INDEX stockpool.pool_units_claim_idx ATTACH PARTITION stockpool.pool_units_p4_shop_id_item_id_location_id_bucket_unit_id_idx;

--
-- Name: pool_units_p5_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER INDEX stockpool.pool_units_claim_idx ATTACH PARTITION stockpool.pool_units_p5_shop_id_item_id_location_id_bucket_unit_id_idx;

--
-- Name: pool_units_p6_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER INDEX stockpool.pool_units_claim_idx ATTACH PARTITION stockpool.pool_units_p6_shop_id_item_id_location_id_bucket_unit_id_idx;

--
-- Name: pool_units_p7_shop_id_item_id_location_id_bucket_unit_id_idx; Type: INDEX ATTACH; Schema: stockpool; Owner: stockpool_owner
--

ALTER INDEX stockpool.pool_units_claim_idx ATTACH PARTITION stockpool.pool_units_p7_shop_id_item_id_location_id_bucket_unit_id_idx;

--
-- Name: holds holds_valid; Type: TRIGGER; Schema: stockpool; Owner: stockpool_owner
--

CREATE TRIGGER holds_valid BEFORE INSERT OR UPDATE OF quantity, status, labels ON stockpool.holds FOR EACH ROW EXECUTE FUNCTION stockpool._hold_valid();

--
-- Name: movements movements_immutable; Type: TRIGGER; Schema: stockpool; Owner: stockpool_owner
--

CREATE TRIGGER movements_immutable BEFORE DELETE OR UPDATE ON stockpool.movements FOR EACH ROW EXECUTE FUNCTION stockpool._movements_immutable();

--
-- Name: movements movements_no_truncate; Type: TRIGGER; Schema: stockpool; Owner: stockpool_owner
--

CREATE TRIGGER movements_no_truncate BEFORE TRUNCATE ON stockpool.movements FOR EACH STATEMENT EXECUTE FUNCTION stockpool._movements_immutable();

--
-- Name: stock stock_settings_valid; Type: TRIGGER; Schema: stockpool; Owner: stockpool_owner
--

CREATE TRIGGER stock_settings_valid AFTER INSERT OR UPDATE OF pool_cap, low_water, buckets, pool_target ON stockpool.stock FOR EACH ROW EXECUTE FUNCTION stockpool._stock_settings_valid();

--
-- Name: movements movements_stock_fkey; Type: FK CONSTRAINT; Schema: stockpool; Owner: stockpool_owner
--

ALTER TABLE ONLY stockpool.movements
    ADD CONSTRAINT movements_stock_fkey FOREIGN KEY (shop_id, item_id, location_id) REFERENCES stockpool.stock(shop_id, item_id, location_id);

--
-- Name: SCHEMA stockpool; Type: ACL; Schema: -; Owner: stockpool_owner
--

GRANT USAGE ON SCHEMA stockpool TO stockpool_app;
GRANT USAGE ON SCHEMA stockpool TO stockpool_monitor;
GRANT USAGE ON SCHEMA stockpool TO stockpool_worker;

--
-- Name: FUNCTION _add_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._add_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) FROM PUBLIC;

--
-- Name: FUNCTION _apply_on_hand(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_value bigint, p_relative boolean); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._apply_on_hand(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_value bigint, p_relative boolean) FROM PUBLIC;

--
-- Name: FUNCTION _buckets_to_note(p_pool_target integer, p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._buckets_to_note(p_pool_target integer, p_buckets integer) FROM PUBLIC;

--
-- Name: FUNCTION _cool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quiet interval); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._cool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quiet interval) FROM PUBLIC;

--
-- Name: FUNCTION _cool_quiet(p_batch integer, p_quiet interval); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._cool_quiet(p_batch integer, p_quiet interval) FROM PUBLIC;

--
-- Name: FUNCTION _existing_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._existing_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval) FROM PUBLIC;

--
-- Name: FUNCTION _expire_due(p_batch integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._expire_due(p_batch integer) FROM PUBLIC;

--
-- Name: FUNCTION _expire_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._expire_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer) FROM PUBLIC;

--
-- Name: FUNCTION _expire_overdue_tried(p_shop_id bigint, p_item_id bigint, p_location_id bigint, OUT units integer, OUT holds integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._expire_overdue_tried(p_shop_id bigint, p_item_id bigint, p_location_id bigint, OUT units integer, OUT holds integer) FROM PUBLIC;

--
-- Name: FUNCTION _free_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._free_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_buckets integer) FROM PUBLIC;

--
-- Name: FUNCTION _hold_valid(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._hold_valid() FROM PUBLIC;

--
-- Name: FUNCTION _key_lock_id(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._key_lock_id(p_shop_id bigint, p_item_id bigint, p_location_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION _lock_checkout(p_shop_id bigint, p_checkout_id uuid); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._lock_checkout(p_shop_id bigint, p_checkout_id uuid) FROM PUBLIC;

--
-- Name: FUNCTION _maintain_step(p_step text, p_batch integer, p_quiet interval, p_until timestamp with time zone); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._maintain_step(p_step text, p_batch integer, p_quiet interval, p_until timestamp with time zone) FROM PUBLIC;

--
-- Name: FUNCTION _mixed_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_named boolean); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._mixed_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_named boolean) FROM PUBLIC;

--
-- Name: FUNCTION _movements_immutable(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._movements_immutable() FROM PUBLIC;

--
-- Name: FUNCTION _note_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._note_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION _noted_buckets(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._noted_buckets(p_shop_id bigint, p_item_id bigint, p_location_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION _null_args(p_names text[], p_is_null boolean[]); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._null_args(p_names text[], p_is_null boolean[]) FROM PUBLIC;

--
-- Name: FUNCTION _pool_level(p_pool_target integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._pool_level(p_pool_target integer) FROM PUBLIC;

--
-- Name: FUNCTION _pool_look(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_noted_buckets integer, p_sampled integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._pool_look(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_noted_buckets integer, p_sampled integer) FROM PUBLIC;

--
-- Name: FUNCTION _pooled_note(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._pooled_note(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_buckets integer) FROM PUBLIC;

--
-- Name: FUNCTION _pooled_upto(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_mark integer, p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._pooled_upto(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_mark integer, p_buckets integer) FROM PUBLIC;

--
-- Name: FUNCTION _record_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval, p_reopen boolean, p_labels text[]); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._record_hold(p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint, p_quantity integer, p_ttl interval, p_reopen boolean, p_labels text[]) FROM PUBLIC;

--
-- Name: FUNCTION _refill(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_min_extra integer, p_wait boolean, p_low_water_only boolean, p_cap integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._refill(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_min_extra integer, p_wait boolean, p_low_water_only boolean, p_cap integer) FROM PUBLIC;

--
-- Name: FUNCTION _refill_mark(p_level integer, p_low_water integer, p_pool_cap integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._refill_mark(p_level integer, p_low_water integer, p_pool_cap integer) FROM PUBLIC;

--
-- Name: FUNCTION _return_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._return_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) FROM PUBLIC;

--
-- Name: FUNCTION _sample_span(p_pool_target integer, p_low_water integer, p_pool_cap integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._sample_span(p_pool_target integer, p_low_water integer, p_pool_cap integer) FROM PUBLIC;

--
-- Name: FUNCTION _settle(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_wait boolean, p_checkout_id uuid, p_quantity integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._settle(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_wait boolean, p_checkout_id uuid, p_quantity integer) FROM PUBLIC;

--
-- Name: FUNCTION _settle_due(p_batch integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._settle_due(p_batch integer) FROM PUBLIC;

--
-- Name: FUNCTION _should_look(p_pool_target integer, p_low_water integer, p_pool_cap integer, p_sampled integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._should_look(p_pool_target integer, p_low_water integer, p_pool_cap integer, p_sampled integer) FROM PUBLIC;

--
-- Name: FUNCTION _stock_row(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._stock_row(p_shop_id bigint, p_item_id bigint, p_location_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION _stock_settings_valid(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._stock_settings_valid() FROM PUBLIC;

--
-- Name: FUNCTION _take(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._take(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer) FROM PUBLIC;

--
-- Name: FUNCTION _take_ledger(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._take_ledger(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) FROM PUBLIC;

--
-- Name: FUNCTION _take_lines(p_shop_id bigint, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_buckets integer[]); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._take_lines(p_shop_id bigint, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_buckets integer[]) FROM PUBLIC;

--
-- Name: FUNCTION _take_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer, p_adjacent boolean, p_wait boolean); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._take_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_buckets integer, p_adjacent boolean, p_wait boolean) FROM PUBLIC;

--
-- Name: FUNCTION _take_waiting(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._take_waiting(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) FROM PUBLIC;

--
-- Name: FUNCTION _tally_claim(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._tally_claim() FROM PUBLIC;

--
-- Name: FUNCTION _tally_expiry(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._tally_expiry() FROM PUBLIC;

--
-- Name: FUNCTION _tally_maintenance_yield(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._tally_maintenance_yield() FROM PUBLIC;

--
-- Name: FUNCTION _tally_no_new_hold(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._tally_no_new_hold() FROM PUBLIC;

--
-- Name: FUNCTION _tally_refill(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._tally_refill() FROM PUBLIC;

--
-- Name: FUNCTION _tally_refusal(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._tally_refusal() FROM PUBLIC;

--
-- Name: FUNCTION _tally_release(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._tally_release() FROM PUBLIC;

--
-- Name: FUNCTION _tally_reservation(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._tally_reservation() FROM PUBLIC;

--
-- Name: FUNCTION _top_up_low(p_batch integer, p_quiet interval); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._top_up_low(p_batch integer, p_quiet interval) FROM PUBLIC;

--
-- Name: FUNCTION _unknown_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool._unknown_key(p_shop_id bigint, p_item_id bigint, p_location_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION adjust_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_delta integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.adjust_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_delta integer) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.adjust_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_delta integer) TO stockpool_app;

--
-- Name: FUNCTION check_invariants(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.check_invariants() FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.check_invariants() TO stockpool_app;
GRANT ALL ON FUNCTION stockpool.check_invariants() TO stockpool_monitor;

--
-- Name: FUNCTION claim(p_shop_id bigint, p_checkout_id uuid); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.claim(p_shop_id bigint, p_checkout_id uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.claim(p_shop_id bigint, p_checkout_id uuid) TO stockpool_app;

--
-- Name: FUNCTION configure_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_pool_cap integer, p_low_water integer, p_buckets integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.configure_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_pool_cap integer, p_low_water integer, p_buckets integer) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.configure_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_pool_cap integer, p_low_water integer, p_buckets integer) TO stockpool_app;

--
-- Name: FUNCTION hot_keys(p_limit integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.hot_keys(p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.hot_keys(p_limit integer) TO stockpool_monitor;

--
-- Name: FUNCTION maintain(p_budget interval, p_batch integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.maintain(p_budget interval, p_batch integer) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.maintain(p_budget interval, p_batch integer) TO stockpool_worker;

--
-- Name: FUNCTION metrics(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.metrics() FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.metrics() TO stockpool_monitor;

--
-- Name: FUNCTION release(p_shop_id bigint, p_checkout_id uuid); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.release(p_shop_id bigint, p_checkout_id uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.release(p_shop_id bigint, p_checkout_id uuid) TO stockpool_app;

--
-- Name: FUNCTION replenish_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_cap integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.replenish_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_cap integer) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.replenish_pool(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_cap integer) TO stockpool_app;

--
-- Name: FUNCTION reserve_cart(p_shop_id bigint, p_checkout_id uuid, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_ttl interval); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.reserve_cart(p_shop_id bigint, p_checkout_id uuid, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_ttl interval) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.reserve_cart(p_shop_id bigint, p_checkout_id uuid, p_item_ids bigint[], p_location_ids bigint[], p_quantities integer[], p_ttl interval) TO stockpool_app;

--
-- Name: FUNCTION reserve_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_checkout_id uuid, p_ttl interval); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.reserve_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_checkout_id uuid, p_ttl interval) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.reserve_labels(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_checkout_id uuid, p_ttl interval) TO stockpool_app;

--
-- Name: FUNCTION reserve_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval, p_adjacent boolean); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.reserve_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval, p_adjacent boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.reserve_named(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval, p_adjacent boolean) TO stockpool_app;

--
-- Name: FUNCTION reserve_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.reserve_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.reserve_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer, p_checkout_id uuid, p_ttl interval) TO stockpool_app;

--
-- Name: FUNCTION retire_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[]); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.retire_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.retire_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[]) TO stockpool_app;

--
-- Name: FUNCTION set_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_positions integer[]); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.set_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_positions integer[]) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.set_named_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_labels text[], p_positions integer[]) TO stockpool_app;

--
-- Name: FUNCTION set_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_on_hand integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.set_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_on_hand integer) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.set_stock(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_on_hand integer) TO stockpool_app;

--
-- Name: FUNCTION sweep(p_batch integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.sweep(p_batch integer) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.sweep(p_batch integer) TO stockpool_app;
GRANT ALL ON FUNCTION stockpool.sweep(p_batch integer) TO stockpool_worker;

--
-- Name: FUNCTION take_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.take_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.take_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint, p_quantity integer) TO stockpool_app;

--
-- Name: FUNCTION wait_events(); Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

REVOKE ALL ON FUNCTION stockpool.wait_events() FROM PUBLIC;
GRANT ALL ON FUNCTION stockpool.wait_events() TO stockpool_monitor;

--
-- Name: TABLE stock_levels; Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

GRANT SELECT ON TABLE stockpool.stock_levels TO stockpool_monitor;

--
-- Name: TABLE unit_status; Type: ACL; Schema: stockpool; Owner: stockpool_owner
--

GRANT SELECT ON TABLE stockpool.unit_status TO stockpool_monitor;

--
-- PostgreSQL database dump complete
--
