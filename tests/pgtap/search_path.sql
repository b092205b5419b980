-- SECURITY DEFINER functions run as the owner, so a caller's search_path must
-- not be able to redirect anything they call: each one pins
-- search_path = pg_catalog, pg_temp. Shown from the catalog, then by calling
-- the API with an empty search_path and with one that puts a schema of
-- booby-trapped look-alikes (now, random, floor, generate_series,
-- cardinality, array_position, +, <=) in front of pg_catalog.
BEGIN;
SELECT plan(41);

-- The catalog.
SELECT set_eq(
    $$SELECT p.proname::text COLLATE "default" FROM pg_catalog.pg_proc AS p
      WHERE p.pronamespace = 'stockpool'::regnamespace AND p.prosecdef$$,
    ARRAY['set_stock', 'adjust_stock', 'reserve_units', 'reserve_cart', 'claim', 'release', 'sweep', 'maintain',
          'replenish_pool', 'take_units', 'configure_pool', 'check_invariants', 'metrics', 'hot_keys',
          'wait_events', 'set_named_units', 'retire_named_units', 'reserve_named', 'reserve_labels'],
    'the SECURITY DEFINER functions are exactly the public API (helpers are SECURITY INVOKER)');
SELECT is(p.proconfig, ARRAY['search_path=pg_catalog, pg_temp'],
    format('%s pins search_path = pg_catalog, pg_temp', p.oid::regprocedure))
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'stockpool'::regnamespace AND p.prosecdef
ORDER BY p.proname;
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc AS p
      JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
      WHERE n.nspname = 'stockpool' AND p.prosecdef
          AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)$$,
    'no SECURITY DEFINER function in stockpool lacks the pinned search_path');
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc AS p
      WHERE p.pronamespace = 'stockpool'::regnamespace AND NOT p.prosecdef AND p.proname !~ '^_'$$,
    'every public function is SECURITY DEFINER');

-- The trap: look-alikes that any unqualified call would pick up (USAGE granted,
-- so the owner role running a definer function would see them too).
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT '2000-01-01 00:00:00+00'::timestamptz $$;
CREATE FUNCTION evil.random() RETURNS double precision LANGUAGE sql AS $$ SELECT -1.0::double precision $$;
CREATE FUNCTION evil.floor(double precision) RETURNS double precision LANGUAGE sql AS $$ SELECT -7.0::double precision $$;
CREATE FUNCTION evil.generate_series(integer, integer) RETURNS SETOF integer LANGUAGE sql AS $$ SELECT 1 WHERE false $$;
CREATE FUNCTION evil.cardinality(anyarray) RETURNS integer LANGUAGE sql AS $$ SELECT 0 $$;
CREATE FUNCTION evil.array_position(anycompatiblearray, anycompatible) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION evil.minus(integer, integer) RETURNS integer LANGUAGE sql AS $$ SELECT $1 OPERATOR(pg_catalog.-) $2 $$;
CREATE OPERATOR evil.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.minus);
CREATE FUNCTION evil.never(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$;
CREATE OPERATOR evil.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.never);
-- Probes: an unpinned function is fooled, a pinned one is not.
CREATE FUNCTION evil.probe_unpinned() RETURNS text LANGUAGE plpgsql
AS $$ BEGIN RETURN format('%s %s', now(), 2 + 2); END; $$;
CREATE FUNCTION evil.probe_pinned() RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN format('%s %s', now() = transaction_timestamp(), 2 + 2); END; $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evil TO PUBLIC;

-- Results of calls made under a hostile search_path are logged here and
-- checked after it is reset (pgTAP itself is not pinned and must not run
-- under the trap).
CREATE TEMPORARY TABLE calls (n serial, what text, result text);
GRANT ALL ON calls, calls_n_seq TO PUBLIC;

SELECT is(stockpool.set_stock(1, 1500, 1, 10), 10, 'key 1500 at 10');
SELECT is(stockpool.set_stock(1, 1501, 1, 10) + stockpool.replenish_pool(1, 1501, 1), 20,
    'key 1501 at 10, all pooled (1500 has no pool: both paths run under the trap)');

SET LOCAL search_path = evil, pg_catalog, public;
INSERT INTO pg_temp.calls (what, result) VALUES ('probe unpinned', evil.probe_unpinned());
INSERT INTO pg_temp.calls (what, result) VALUES ('probe pinned', evil.probe_pinned());
INSERT INTO pg_temp.calls (what, result)
VALUES ('set_stock', stockpool.set_stock(1, 1502, 1, 7)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('adjust_stock', stockpool.adjust_stock(1, 1502, 1, 3)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('configure_pool', stockpool.configure_pool(1, 1502, 1, p_pool_cap => 8, p_buckets => 4)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('replenish_pool', stockpool.replenish_pool(1, 1502, 1)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('reserve_units', stockpool.reserve_units(1, 1500, 1, 3, '00000000-0000-0000-0000-000000000a01', '5 minutes')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('reserve_units 1', stockpool.reserve_units(1, 1500, 1, 1, '00000000-0000-0000-0000-000000000a02')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('reserve_cart', stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000a03',
                                               '{1501,1500}', '{1,1}', '{4,2}')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('reserve_units refused', stockpool.reserve_units(1, 1500, 1, 5, '00000000-0000-0000-0000-000000000a04')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('claim', stockpool.claim(1, '00000000-0000-0000-0000-000000000a01')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('release', stockpool.release(1, '00000000-0000-0000-0000-000000000a03')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('take_units', stockpool.take_units(1, 1502, 1, 2)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('adjust_stock back', stockpool.adjust_stock(1, 1502, 1, -2)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('named: set', stockpool.set_named_units(1, 1504, 1, '{N1,N2,N3,N4,N5}', '{1,2,3,5,6}')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('named: adjacent 3', stockpool.reserve_named(1, 1504, 1, 3, '00000000-0000-0000-0000-000000000a11',
                                                     p_adjacent => true)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('named: labels', stockpool.reserve_labels(1, 1504, 1, '{N5,N4}', '00000000-0000-0000-0000-000000000a12')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('named: one', stockpool.reserve_named(1, 1504, 1, 1, '00000000-0000-0000-0000-000000000a13')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('named: release', stockpool.release(1, '00000000-0000-0000-0000-000000000a12')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('named: retire', stockpool.retire_named_units(1, 1504, 1, '{N4}')::text);
RESET search_path;

SELECT is((SELECT result FROM calls WHERE what = 'probe unpinned'), '2000-01-01 00:00:00+00 0',
    'control: under the trap an unpinned function gets evil.now() and evil.+');
SELECT is((SELECT result FROM calls WHERE what = 'probe pinned'), 't 4',
    'control: a pinned function does not');
SELECT results_eq(
    $$SELECT what, result FROM calls WHERE what !~ '^(probe|named)' ORDER BY n$$,
    $$VALUES ('set_stock', '7'), ('adjust_stock', '10'), ('configure_pool', ''), ('replenish_pool', '8'),
             ('reserve_units', 'true'), ('reserve_units 1', 'true'), ('reserve_cart', 'true'),
             ('reserve_units refused', 'false'), ('claim', '3'), ('release', '6'),
             ('take_units', '2'), ('adjust_stock back', '8')$$,
    'under search_path = evil, pg_catalog, public every call returns what it should');
SELECT results_eq(
    $$SELECT what, result FROM calls WHERE what ~ '^named: ' ORDER BY n$$,
    $$VALUES ('named: set', '5'), ('named: adjacent 3', '{N1,N2,N3}'), ('named: labels', 'true'),
             ('named: one', NULL), ('named: release', '2'), ('named: retire', '4')$$,
    'named units under the trap: adjacency, labels, release and retire as they should (no evil + or generate_series)');
SELECT is_empty(
    $$SELECT * FROM stockpool.named_free AS f
      WHERE f.item_id = 1504 AND f.bucket NOT BETWEEN 0 AND 63$$,
    'every free named unit sits in a real bucket (no evil random() or floor())');
SELECT results_eq(
    $$SELECT checkout_id, item_id, status, expires_at FROM stockpool.holds
      WHERE shop_id = 1 AND item_id IN (1500, 1501) ORDER BY checkout_id, item_id$$,
    $$VALUES ('00000000-0000-0000-0000-000000000a01'::uuid, 1500::bigint, 'claimed'::text, now() + interval '5 minutes'),
             ('00000000-0000-0000-0000-000000000a02', 1500, 'held', now() + interval '15 minutes'),
             ('00000000-0000-0000-0000-000000000a03', 1500, 'released', now() + interval '15 minutes'),
             ('00000000-0000-0000-0000-000000000a03', 1501, 'released', now() + interval '15 minutes')$$,
    'holds expire at the real now() + ttl, not evil.now()');
SELECT results_eq(
    $$SELECT item_id, on_hand, pooled, held, free FROM stockpool.stock_levels
      WHERE shop_id = 1 AND item_id IN (1500, 1501, 1502) ORDER BY item_id$$,
    $$VALUES (1500::bigint, 7, 0, 1, 6), (1501, 10, 10, 0, 0), (1502, 8, 6, 0, 2)$$,
    'the ledger and the pools add up (no evil + or -)');
SELECT is_empty(
    $$SELECT * FROM stockpool.pool_units
      WHERE shop_id = 1 AND item_id IN (1500, 1501, 1502)
          AND bucket NOT BETWEEN 0 AND (SELECT s.buckets - 1 FROM stockpool.stock AS s
                                        WHERE (s.shop_id, s.item_id, s.location_id) = (1, pool_units.item_id, 1))$$,
    'every pool unit sits in a real bucket (no evil random() or floor())');
SELECT results_eq(
    $$SELECT item_id, delta, reason FROM stockpool.movements
      WHERE shop_id = 1 AND item_id IN (1500, 1502) ORDER BY movement_id$$,
    $$VALUES (1500::bigint, 10, 'set'::text), (1502, 7, 'set'), (1502, 3, 'adjust'),
             (1500, -3, 'claim'), (1502, -2, 'adjust')$$,
    'the history records the right deltas');
SELECT results_eq(
    $$SELECT shop_id, item_id, location_id, invariant FROM stockpool.check_invariants()$$,
    $$VALUES (1::bigint, 1502::bigint, 1::bigint, 'allocation'::text)$$,
    'the only violation is the one take_units leaves by design');

-- Errors still carry their SQLSTATEs under the trap (evil.cardinality() and
-- evil.array_position() would turn a good cart into 22023 or 22004).
SET LOCAL search_path = evil, pg_catalog, public;
INSERT INTO pg_temp.calls (what, result)
VALUES ('cart under trap', stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000a05', '{1501}', '{1}', '{1}')::text);
RESET search_path;
SELECT is((SELECT result FROM calls WHERE what = 'cart under trap'), 'true',
    'a good cart is not mistaken for an empty or NULL one');

-- Overdue holds: the sweep compares with the real now() and the real <=.
UPDATE stockpool.holds SET expires_at = now() - interval '1 second'
WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000a02';
SET LOCAL search_path = evil, pg_catalog, public;
INSERT INTO pg_temp.calls (what, result) VALUES ('sweep', stockpool.sweep()::text);
RESET search_path;
SELECT is((SELECT result FROM calls WHERE what = 'sweep'), '1', 'sweep under the trap expires the one overdue hold');
SELECT is((SELECT status FROM stockpool.holds WHERE shop_id = 1 AND checkout_id = '00000000-0000-0000-0000-000000000a02'),
    'expired', 'and marks it expired');
-- SQLSTATEs under the trap: throws_ok runs under the normal path, the call
-- inside it sets the trap for itself.
SELECT throws_ok(
    $$SELECT set_config('search_path', 'evil, pg_catalog, public', true),
             stockpool.claim(1, '00000000-0000-0000-0000-000000000a02')$$,
    'SP004', NULL, 'claim of the swept hold under the trap: SP004');
RESET search_path;
SELECT throws_ok(
    $$SELECT set_config('search_path', 'evil, pg_catalog, public', true),
             stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000a06', '{}', '{}', '{}')$$,
    '22023', NULL, 'an empty cart under the trap: 22023');
RESET search_path;

-- An empty search_path.
SET LOCAL search_path = '';
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: set_stock', stockpool.set_stock(1, 1503, 1, 4)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: reserve_cart', stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000000a07',
                                                      '{1503,1503}', '{1,1}', '{1,2}')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: reserve_units', stockpool.reserve_units(1, 1503, 1, 1, '00000000-0000-0000-0000-000000000a08')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: claim', stockpool.claim(1, '00000000-0000-0000-0000-000000000a07')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: release', stockpool.release(1, '00000000-0000-0000-0000-000000000a08')::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: sweep', stockpool.sweep(10)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: replenish_pool', stockpool.replenish_pool(1, 1503, 1)::text);
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: levels', (SELECT pg_catalog.format('%s/%s/%s/%s', l.on_hand, l.pooled, l.held, l.free)
                          FROM stockpool.stock_levels AS l
                          WHERE l.shop_id = 1 AND l.item_id = 1503 AND l.location_id = 1));
INSERT INTO pg_temp.calls (what, result)
VALUES ('empty: check_invariants', (SELECT pg_catalog.count(*)::text FROM stockpool.check_invariants() AS c
                                    WHERE c.item_id = 1503));
RESET search_path;
SELECT results_eq(
    $$SELECT what, result FROM calls WHERE what ~ '^empty: ' ORDER BY n$$,
    $$VALUES ('empty: set_stock', '4'), ('empty: reserve_cart', 'true'), ('empty: reserve_units', 'true'),
             ('empty: claim', '3'), ('empty: release', '1'), ('empty: sweep', '0'), ('empty: replenish_pool', '1'),
             ('empty: levels', '1/1/0/0'), ('empty: check_invariants', '0')$$,
    'with search_path = '''' every call works and returns what it should');
SELECT throws_ok(
    $$SELECT set_config('search_path', '', true), stockpool.reserve_units(1, 1503, 1, 0, '00000000-0000-0000-0000-000000000a09')$$,
    '22023', NULL, 'with search_path = '''' errors keep their SQLSTATE');
RESET search_path;

SELECT * FROM finish();
ROLLBACK;
