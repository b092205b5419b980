-- Look-alikes of built-in functions, operators and aggregates, planted in
-- the caller's own schema (first on its search_path, before pg_catalog) and
-- in public, and temporary tables named like stockpool's: the caller's own
-- unqualified SQL reaches every one of them (the positive control), the API
-- called by the app role under that path reaches none, and still returns
-- what it should. Every look-alike counts its call in a sequence (kept when
-- a failed call rolls back) and gives a wrong answer.
BEGIN;
SELECT plan(9);

CREATE SEQUENCE public.shadow_hits;
CREATE TABLE public.shadow_calls (what text);
GRANT USAGE ON SEQUENCE public.shadow_hits TO PUBLIC;
GRANT INSERT, SELECT ON public.shadow_calls TO PUBLIC;
CREATE SCHEMA stockpool_app AUTHORIZATION stockpool_app;
GRANT USAGE ON SCHEMA stockpool_app TO PUBLIC;
CREATE FUNCTION public.shadow_hit(p_what text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    PERFORM pg_catalog.nextval('public.shadow_hits');
    INSERT INTO public.shadow_calls VALUES (p_what);
END;
$$;
GRANT EXECUTE ON FUNCTION public.shadow_hit(text) TO PUBLIC;

CREATE FUNCTION stockpool_app.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('now'); RETURN '2000-01-01 00:00:00+00'; END; $$;
CREATE FUNCTION stockpool_app.random() RETURNS double precision LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('random'); RETURN 0.999; END; $$;
CREATE FUNCTION stockpool_app.hashtext(text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('hashtext'); RETURN 0; END; $$;
CREATE FUNCTION stockpool_app.floor(double precision) RETURNS double precision LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('floor'); RETURN 0; END; $$;
CREATE FUNCTION stockpool_app.int8_eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('= bigint'); RETURN false; END; $$;
CREATE OPERATOR stockpool_app.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = stockpool_app.int8_eq);
CREATE FUNCTION stockpool_app.int4_lt(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('< integer'); RETURN true; END; $$;
CREATE OPERATOR stockpool_app.< (LEFTARG = integer, RIGHTARG = integer, FUNCTION = stockpool_app.int4_lt);
CREATE FUNCTION stockpool_app.interval_le(interval, interval) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('<= interval'); RETURN false; END; $$;
CREATE OPERATOR stockpool_app.<= (LEFTARG = interval, RIGHTARG = interval, FUNCTION = stockpool_app.interval_le);
CREATE FUNCTION stockpool_app.count_step(bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('count'); RETURN 0; END; $$;
CREATE AGGREGATE stockpool_app.count(*) (SFUNC = stockpool_app.count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION public.hashtextextended(text, bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('hashtextextended'); RETURN 0; END; $$;
CREATE FUNCTION public.generate_series(integer, integer) RETURNS SETOF integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('generate_series'); RETURN; END; $$;
CREATE FUNCTION public.cardinality(anyarray) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('cardinality'); RETURN 0; END; $$;
CREATE FUNCTION public.array_position(anycompatiblearray, anycompatible) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('array_position'); RETURN 1; END; $$;
CREATE FUNCTION public.sum_step(bigint, integer) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('sum'); RETURN 0; END; $$;
CREATE AGGREGATE public.sum(integer) (SFUNC = public.sum_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION public.int4_plus(integer, integer) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('+ integer'); RETURN 42; END; $$;
CREATE OPERATOR public.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int4_plus);
CREATE FUNCTION public.int4_minus(integer, integer) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('- integer'); RETURN 42; END; $$;
CREATE OPERATOR public.- (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int4_minus);
CREATE FUNCTION public.int4_gt(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('> integer'); RETURN true; END; $$;
CREATE OPERATOR public.> (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int4_gt);
CREATE FUNCTION public.int8_lt(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('< bigint'); RETURN true; END; $$;
CREATE OPERATOR public.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.int8_lt);
CREATE FUNCTION public.uuid_eq(uuid, uuid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('= uuid'); RETURN false; END; $$;
CREATE OPERATOR public.= (LEFTARG = uuid, RIGHTARG = uuid, FUNCTION = public.uuid_eq);
CREATE FUNCTION public.text_cat(text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('|| text'); RETURN 'x'; END; $$;
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_cat);
-- A definer function without a pinned search_path: fooled by its caller's.
CREATE FUNCTION public.unpinned_probe() RETURNS integer LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN RETURN 2 + 2; END; $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA stockpool_app, public TO PUBLIC;

-- Results of calls under the hostile path, checked after it is reset (pgTAP
-- itself is not pinned and must not run under it).
CREATE TABLE public.results (n serial, what text, result text);
GRANT ALL ON public.results, public.results_n_seq TO PUBLIC;
CREATE TABLE public.planted (what text);
INSERT INTO public.planted VALUES ('now'), ('random'), ('hashtext'), ('floor'), ('= bigint'), ('< integer'),
    ('<= interval'), ('count'), ('hashtextextended'), ('generate_series'), ('cardinality'),
    ('array_position'), ('sum'), ('+ integer'), ('- integer'), ('> integer'), ('< bigint'), ('= uuid'),
    ('|| text');

-- The positive control: the caller's own SQL reaches every look-alike.
SET LOCAL ROLE stockpool_app;
SET LOCAL search_path = stockpool_app, public, pg_catalog;
SELECT now(), random(), hashtext('x'), floor(1.5::float8), 1::bigint = 2::bigint, 1 < 2,
       interval '1 second' <= interval '2 seconds', (SELECT count(*) FROM (VALUES (1)) AS v (x)),
       hashtextextended('x', 0), (SELECT generate_series(1, 2) LIMIT 1), cardinality(ARRAY[1]),
       array_position(ARRAY[1], 1), (SELECT sum(x) FROM (VALUES (1)) AS v (x)), 2 + 2, 2 - 1, 3 > 2,
       1::bigint < 2::bigint, gen_random_uuid() = gen_random_uuid(), 'a'::text || 'b'::text;
INSERT INTO public.results (what, result) VALUES ('unpinned probe', public.unpinned_probe()::text);
RESET search_path;
RESET ROLE;
SELECT set_eq('SELECT DISTINCT what FROM public.shadow_calls', 'SELECT what FROM public.planted',
    'control: the caller''s own SQL reaches every planted look-alike');
SELECT is((SELECT result FROM public.results WHERE what = 'unpinned probe'), '42',
    'control: so does a definer function without a pinned search_path');
SELECT setval('public.shadow_hits', 1, false);
TRUNCATE public.shadow_calls, public.results;

-- The API, as the app, under that path, with temporary tables named like stockpool's.
SET LOCAL ROLE stockpool_app;
SET LOCAL search_path = stockpool_app, public, pg_catalog;
CREATE TEMPORARY TABLE stock (x integer);
CREATE TEMPORARY TABLE holds (x integer);
CREATE TEMPORARY TABLE pool_units (x integer);
CREATE TEMPORARY TABLE movements (x integer);
INSERT INTO public.results (what, result) VALUES
    ('set_stock 1', stockpool.set_stock(1, 1700, 1, 10)::text),
    ('set_stock 2', stockpool.set_stock(1, 1701, 1, 4)::text),
    ('adjust_stock', stockpool.adjust_stock(1, 1700, 1, -1)::text),
    ('configure_pool', stockpool.configure_pool(1, 1700, 1, 6, NULL, 3)::text),
    ('replenish_pool', stockpool.replenish_pool(1, 1700, 1)::text),
    ('reserve_units', stockpool.reserve_units(1, 1700, 1, 1, '00000000-0000-0000-0000-000000001701')::text),
    ('reserve_units retry', stockpool.reserve_units(1, 1700, 1, 1, '00000000-0000-0000-0000-000000001701')::text),
    ('reserve_cart', stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000001702',
                                            '{1701,1700,1701}', '{1,1,1}', '{1,2,2}')::text),
    ('reserve_cart refused', stockpool.reserve_cart(1, '00000000-0000-0000-0000-000000001703',
                                                    '{1701}', '{1}', '{2}')::text),
    ('claim', stockpool.claim(1, '00000000-0000-0000-0000-000000001701')::text),
    ('release', stockpool.release(1, '00000000-0000-0000-0000-000000001702')::text),
    ('check_invariants', (SELECT pg_catalog.count(*) FROM stockpool.check_invariants())::text),
    ('sweep', stockpool.sweep()::text),
    ('set_named_units', stockpool.set_named_units(1, 1702, 1, '{S1,S2}')::text),
    ('reserve_labels', stockpool.reserve_labels(1, 1702, 1, '{S2}', '00000000-0000-0000-0000-000000001705')::text),
    ('reserve_named', stockpool.reserve_named(1, 1702, 1, 1, '00000000-0000-0000-0000-000000001706')::text),
    ('reserve_named retry', stockpool.reserve_named(1, 1702, 1, 1, '00000000-0000-0000-0000-000000001706')::text),
    ('reserve_named refused', stockpool.reserve_named(1, 1702, 1, 1, '00000000-0000-0000-0000-000000001707')::text),
    ('release named', stockpool.release(1, '00000000-0000-0000-0000-000000001705')::text),
    ('retire_named_units', stockpool.retire_named_units(1, 1702, 1, '{S2}')::text),
    ('release named 2', stockpool.release(1, '00000000-0000-0000-0000-000000001706')::text);
DO $$
BEGIN
    PERFORM stockpool.reserve_units(1, 1700, 1, 0, '00000000-0000-0000-0000-000000001704');
EXCEPTION WHEN OTHERS THEN
    INSERT INTO public.results (what, result) VALUES ('quantity 0', SQLSTATE);
END;
$$;
SET LOCAL ROLE stockpool_worker;
INSERT INTO public.results (what, result)
SELECT 'worker: maintain', m::text FROM stockpool.maintain() AS m;
SET LOCAL ROLE stockpool_app;
INSERT INTO public.results (what, result)
SELECT 'temp tables untouched', pg_catalog.concat((SELECT pg_catalog.count(*) FROM pg_temp.stock),
                                                  (SELECT pg_catalog.count(*) FROM pg_temp.holds));
RESET search_path;
RESET ROLE;

SELECT is((SELECT last_value FROM public.shadow_hits WHERE is_called), NULL,
    'no planted look-alike was called from inside the API');
SELECT is_empty('SELECT * FROM public.shadow_calls', 'and none logged a call');
SELECT results_eq(
    $$SELECT what COLLATE "default", result COLLATE "default" FROM public.results ORDER BY n$$,
    $$VALUES ('set_stock 1', '10'), ('set_stock 2', '4'), ('adjust_stock', '9'), ('configure_pool', ''),
             ('replenish_pool', '6'), ('reserve_units', 'true'), ('reserve_units retry', 'true'),
             ('reserve_cart', 'true'), ('reserve_cart refused', 'false'), ('claim', '1'), ('release', '5'),
             ('check_invariants', '0'), ('sweep', '0'), ('set_named_units', '2'), ('reserve_labels', 'true'),
             ('reserve_named', '{S1}'), ('reserve_named retry', '{S1}'), ('reserve_named refused', NULL),
             ('release named', '1'), ('retire_named_units', '1'), ('release named 2', '1'), ('quantity 0', '22023'),
             ('worker: maintain', '(0,0,0,0)'), ('temp tables untouched', '00')$$,
    'every call returned what it should, errors kept their SQLSTATE');
SELECT results_eq(
    $$SELECT item_id, on_hand, pooled, held FROM stockpool.stock_levels WHERE item_id IN (1700, 1701) ORDER BY 1$$,
    $$VALUES (1700::bigint, 8, 8, 0), (1701::bigint, 4, 0, 0)$$,
    'the ledger adds up, key 1700 pooled (refilled to all that is free), 1701 on its ledger row only');
SELECT ok((SELECT bool_and(expires_at > now() + interval '14 minutes') FROM stockpool.holds
           WHERE item_id IN (1700, 1701)),
    'holds expire at the real now() + ttl, not the planted now()');
SET LOCAL ROLE stockpool_monitor;
SET LOCAL search_path = stockpool_app, public, pg_catalog;
INSERT INTO public.results (what, result)
SELECT 'monitor', pg_catalog.concat_ws('/',
    (SELECT pg_catalog.count(*) FROM stockpool.stock_levels WHERE item_id OPERATOR(pg_catalog.=) ANY ('{1700,1701}')),
    (SELECT pg_catalog.count(*) FROM stockpool.check_invariants()),
    (SELECT m.value FROM stockpool.metrics() AS m
     WHERE m.metric OPERATOR(pg_catalog.=) 'stock_pooled_units'),
    (SELECT pg_catalog.string_agg(h.item_id::text, ',') FROM stockpool.hot_keys() AS h),
    (SELECT pg_catalog.count(*) FROM stockpool.wait_events() AS w
     WHERE w.application_name OPERATOR(pg_catalog.=) 'search_path_lookalikes probe'));
RESET search_path;
RESET ROLE;
SELECT results_eq($$SELECT result COLLATE "default" FROM public.results WHERE what = 'monitor'$$,
    $$VALUES ('2/0/9/1700/0')$$,
    'the monitor reads stock_levels, check_invariants, metrics, hot_keys and wait_events under the same path, untouched');
SELECT is((SELECT last_value FROM public.shadow_hits WHERE is_called), NULL,
    'no planted look-alike was called from inside them either');

SELECT * FROM finish();
ROLLBACK;
