"""Least privilege: each role does its job and nothing more.

- stockpool_app calls every public function; it cannot read or write any
  table, sequence or the view, cannot call an internal helper, cannot create
  anything in the schema (SET ROLE, then 42501 for each attempt).
- stockpool_monitor reads stock_levels and runs check_invariants(); nothing else.
- PUBLIC has nothing: a role created afterwards gets 42501 everywhere.
- Shadowing: look-alikes of builtins and operators planted in public and in
  the caller's own schema (first in its search_path, before pg_catalog) are
  reached by the caller's own SQL (positive control) but never by the API.
- The deployer's role names are options: grants land on the names given.

Every checker here has a negative control: a deliberately leaked grant that
it must report.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from stockcheck import diff, snapshot
from stockpool.deploy import MONITOR_FUNCTIONS, PUBLIC_FUNCTIONS, Roles, deploy

APP, MONITOR, OWNER = "stockpool_app", "stockpool_monitor", "stockpool_owner"
SHOP = 1


@contextlib.contextmanager
def acting_as(conn: psycopg.Connection, role: str, search_path: str | None = None) -> Iterator[None]:
    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
    if search_path is not None:
        conn.execute(sql.SQL("SET search_path = {}").format(sql.SQL(search_path)))
    try:
        yield
    finally:
        conn.execute("RESET ROLE")
        conn.execute("RESET search_path")


def sqlstate_of(
    conn: psycopg.Connection, statement: str | sql.SQL | sql.Composed, params: Any = None
) -> str | None:
    try:
        conn.execute(statement, params)
        return None
    except psycopg.Error as exc:
        return exc.sqlstate


# ---------------------------------------------------------------------------
# every object of the schema, and what a role may do with it


def relations(conn: psycopg.Connection) -> list[tuple[str, str, str]]:
    """(qualified name, relkind, first column) of every table, partition, view, sequence."""
    return [
        (str(r[0]), str(r[1]), str(r[2] or ""))
        for r in conn.execute(
            "SELECT c.oid::regclass::text, c.relkind,"
            " (SELECT quote_ident(a.attname) FROM pg_catalog.pg_attribute AS a WHERE a.attrelid = c.oid"
            "  AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum LIMIT 1)"
            " FROM pg_catalog.pg_class AS c WHERE c.relnamespace = 'stockpool'::regnamespace"
            " AND c.relkind IN ('r', 'p', 'v', 'S') ORDER BY 1"
        )
    ]


def functions(conn: psycopg.Connection) -> list[tuple[str, str, list[str], str]]:
    """(name, identity arguments, argument types, return type) of every function in stockpool."""
    return [
        (str(r[0]), str(r[1]), [str(t) for t in r[2]], str(r[3]))
        for r in conn.execute(
            "SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid),"
            " ARRAY(SELECT pg_catalog.format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) AS t),"
            " p.prorettype::regtype::text"
            " FROM pg_catalog.pg_proc AS p WHERE p.pronamespace = 'stockpool'::regnamespace ORDER BY 1, 2"
        )
    ]


def attempts(conn: psycopg.Connection) -> list[tuple[str, sql.SQL | sql.Composed]]:
    """Everything a role could try against the schema's objects, one statement each."""
    out: list[tuple[str, sql.SQL | sql.Composed]] = []
    for name, kind, first in relations(conn):
        rel = sql.SQL(name)
        if kind == "S":
            out.append(
                (f"nextval {name}", sql.SQL("SELECT pg_catalog.nextval({})").format(sql.Literal(name)))
            )
            out.append((f"select {name}", sql.SQL("SELECT * FROM {}").format(rel)))
            continue
        out.append((f"select {name}", sql.SQL("SELECT * FROM {} LIMIT 1").format(rel)))
        if kind == "v":
            continue
        col = sql.SQL(first)
        out += [
            (f"insert {name}", sql.SQL("INSERT INTO {} DEFAULT VALUES").format(rel)),
            (f"update {name}", sql.SQL("UPDATE {} SET {} = {}").format(rel, col, col)),
            (f"delete {name}", sql.SQL("DELETE FROM {}").format(rel)),
            (f"truncate {name}", sql.SQL("TRUNCATE {}").format(rel)),
        ]
    for fname, _, types, returns in functions(conn):
        if returns == "trigger":
            continue  # cannot be called at all; its EXECUTE privilege is checked below
        args = sql.SQL(", ").join(sql.SQL("NULL::{}").format(sql.SQL(t)) for t in types)
        out.append((f"call {fname}", sql.SQL("SELECT stockpool.{}({})").format(sql.Identifier(fname), args)))
    out += [
        ("create table", sql.SQL("CREATE TABLE stockpool.planted (x int)")),
        (
            "create function",
            sql.SQL("CREATE FUNCTION stockpool.now() RETURNS int LANGUAGE sql AS 'SELECT 1'"),
        ),
    ]
    return out


def let_through(conn: psycopg.Connection, role: str, allowed: set[str]) -> list[str]:
    """Attempts by ``role`` that were not refused with 42501 (the allowed ones excepted)."""
    leaks = []
    for label, stmt in attempts(conn):
        if label in allowed:
            continue
        with acting_as(conn, role):
            state = sqlstate_of(conn, stmt)
        if state != "42501":
            leaks.append(f"{label}: {state or 'succeeded'}")
    for fname, args, _, returns in functions(conn):
        if returns == "trigger":
            row = conn.execute(
                "SELECT pg_catalog.has_function_privilege(%s, %s, 'EXECUTE')",
                (role, f"stockpool.{fname}({args})"),
            ).fetchone()
            if row and row[0]:
                leaks.append(f"execute {fname}({args})")
    return leaks


API_CALLS = {f"call {name}" for name in PUBLIC_FUNCTIONS}
MONITOR_ALLOWED = {"select stockpool.stock_levels", *(f"call {name}" for name in MONITOR_FUNCTIONS)}


def seed(conn: psycopg.Connection) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, 1, 1, 10)", (SHOP,))
    conn.execute("SELECT stockpool.reserve_units(%s, 1, 1, 2, %s)", (SHOP, uuid.uuid4()))


# ---------------------------------------------------------------------------
# the app role


def test_app_calls_every_public_function(conn: psycopg.Connection) -> None:
    """The app role does the whole job through the API alone."""
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    q = conn.execute
    with acting_as(conn, APP):
        assert q("SELECT current_user").fetchone() == (APP,)
        assert q("SELECT stockpool.set_stock(1, 1, 1, 10)").fetchone() == (10,)
        assert q("SELECT stockpool.set_stock(1, 2, 1, 5)").fetchone() == (5,)
        assert q("SELECT stockpool.adjust_stock(1, 1, 1, 2)").fetchone() == (12,)
        assert q("SELECT stockpool.configure_pool(1, 1, 1, 8, NULL, 4)").fetchone() == ("",)  # void
        assert q("SELECT stockpool.replenish_pool(1, 1, 1)").fetchone() == (8,)
        assert q("SELECT stockpool.reserve_units(1, 1, 1, 3, %s)", (a,)).fetchone() == (True,)
        assert q("SELECT stockpool.reserve_cart(1, %s, '{2,1}', '{1,1}', '{2,1}')", (b,)).fetchone() == (
            True,
        )
        assert q("SELECT stockpool.reserve_units(1, 2, 1, 1, %s, '1 millisecond')", (c,)).fetchone() == (
            True,
        )
        assert q("SELECT stockpool.claim(1, %s)", (a,)).fetchone() == (3,)
        assert q("SELECT stockpool.release(1, %s)", (b,)).fetchone() == (3,)
        q("SELECT pg_catalog.pg_sleep(0.01)")
        assert q("SELECT stockpool.sweep()").fetchone() == (1,)
        # Key 2 has no pool (its buyers never met): take_units needs one.
        assert q("SELECT stockpool.replenish_pool(1, 2, 1)").fetchone() == (5,)
        assert q("SELECT stockpool.take_units(1, 2, 1, 1)").fetchone() == (1,)
        found = q("SELECT invariant FROM stockpool.check_invariants()").fetchall()
    assert found == [("allocation",)]  # take_units leaves a taken unit unaccounted: documented
    assert conn.execute("SELECT on_hand FROM stockpool.stock ORDER BY item_id").fetchall() == [(9,), (5,)]


def test_app_cannot_touch_tables_helpers_or_the_schema(conn: psycopg.Connection) -> None:
    seed(conn)
    before = snapshot(conn)
    assert let_through(conn, APP, API_CALLS) == []
    assert snapshot(conn) == before, diff(before, snapshot(conn))


def test_monitor_reads_health_and_nothing_else(conn: psycopg.Connection) -> None:
    seed(conn)
    with acting_as(conn, MONITOR):
        levels = conn.execute("SELECT on_hand, held FROM stockpool.stock_levels").fetchall()
        violations = conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall()
    assert levels == [(10, 2)]
    assert violations == []
    before = snapshot(conn)
    assert let_through(conn, MONITOR, MONITOR_ALLOWED) == []
    assert snapshot(conn) == before


def test_a_fresh_role_gets_nothing(conn: psycopg.Connection) -> None:
    """REVOKE ALL FROM PUBLIC is effective: a role nobody granted anything is
    refused everything, and no ACL of the schema or its objects names PUBLIC
    (a NULL ACL means the built-in default, which grants functions to PUBLIC)."""
    seed(conn)
    fresh = f"sp_fresh_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(fresh)))
    try:
        assert let_through(conn, fresh, set()) == []
        assert public_grants(conn) == []
    finally:
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(fresh)))


def public_grants(conn: psycopg.Connection) -> list[str]:
    return [
        str(r[0])
        for r in conn.execute(
            """
            SELECT 'schema stockpool' FROM pg_catalog.pg_namespace AS n
            WHERE n.nspname = 'stockpool'
              AND EXISTS (SELECT FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) AS x
                          WHERE x.grantee = 0)
            UNION ALL
            SELECT c.oid::regclass::text FROM pg_catalog.pg_class AS c
            WHERE c.relnamespace = 'stockpool'::regnamespace
              AND EXISTS (
                  SELECT FROM aclexplode(coalesce(c.relacl, acldefault(
                      CASE c.relkind WHEN 'S' THEN 's'::"char" ELSE 'r'::"char" END, c.relowner))) AS x
                  WHERE x.grantee = 0)
            UNION ALL
            SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = 'stockpool'::regnamespace
              AND EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS x
                          WHERE x.grantee = 0)
            """
        )
    ]


def test_negative_controls_leaked_grants_are_caught(conn: psycopg.Connection) -> None:
    """The checkers above must fail on a leak: SELECT on holds for the app,
    EXECUTE on a helper for the monitor, USAGE and a helper for PUBLIC."""
    seed(conn)
    conn.execute(f"GRANT SELECT ON stockpool.holds TO {APP}")
    conn.execute(f"GRANT EXECUTE ON FUNCTION stockpool._key_lock_id(bigint, bigint, bigint) TO {MONITOR}")
    assert let_through(conn, APP, API_CALLS) == ["select stockpool.holds: succeeded"]
    assert let_through(conn, MONITOR, MONITOR_ALLOWED) == ["call _key_lock_id: succeeded"]
    conn.execute("GRANT USAGE ON SCHEMA stockpool TO PUBLIC")
    conn.execute("GRANT EXECUTE ON FUNCTION stockpool._null_args(text[], boolean[]) TO PUBLIC")
    assert sorted(public_grants(conn)) == ["schema stockpool", "stockpool._null_args(text[],boolean[])"]
    fresh = f"sp_fresh_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(fresh)))
    try:
        assert let_through(conn, fresh, set()) == ["call _null_args: succeeded"]
    finally:
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(fresh)))


def test_roles_are_nologin_separate_and_the_owner_owns_everything(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolbypassrls FROM pg_catalog.pg_roles"
        " WHERE rolname IN (%s, %s, %s) ORDER BY 1",
        (APP, MONITOR, OWNER),
    ).fetchall()
    assert rows == [(r, False, False, False, False) for r in sorted((APP, MONITOR, OWNER))]
    for member, role in [(APP, OWNER), (MONITOR, OWNER), (MONITOR, APP), (APP, MONITOR)]:
        row = conn.execute("SELECT pg_catalog.pg_has_role(%s, %s, 'MEMBER')", (member, role)).fetchone()
        assert row == (False,), f"{member} must not be a member of {role}"
    owners = conn.execute(
        "SELECT DISTINCT pg_get_userbyid(o) FROM ("
        " SELECT relowner FROM pg_catalog.pg_class WHERE relnamespace = 'stockpool'::regnamespace"
        " UNION ALL SELECT proowner FROM pg_catalog.pg_proc WHERE pronamespace = 'stockpool'::regnamespace"
        " UNION ALL SELECT nspowner FROM pg_catalog.pg_namespace WHERE nspname = 'stockpool') AS x (o)"
    ).fetchall()
    assert owners == [(OWNER,)]
    # what runs as the owner pins its search_path
    unpinned = conn.execute(
        "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p"
        " WHERE p.pronamespace = 'stockpool'::regnamespace AND p.prosecdef"
        " AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)"
    ).fetchall()
    assert unpinned == []


# ---------------------------------------------------------------------------
# shadowing: planted look-alikes are never called by the API

PLANT = """
CREATE SEQUENCE public.shadow_hits;
CREATE TABLE public.shadow_calls (what text);
GRANT USAGE ON SEQUENCE public.shadow_hits TO PUBLIC;
GRANT INSERT, SELECT ON public.shadow_calls TO PUBLIC;
CREATE SCHEMA {caller} AUTHORIZATION {caller};
GRANT USAGE ON SCHEMA {caller} TO PUBLIC;  -- visible to the owner role too, were it to look

-- Each look-alike counts its call in a sequence (not rolled back with a failed
-- call), logs its name and gives a wrong answer.
CREATE FUNCTION public.shadow_hit(p_what text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    PERFORM pg_catalog.nextval('public.shadow_hits');
    INSERT INTO public.shadow_calls VALUES (p_what);
END;
$$;
GRANT EXECUTE ON FUNCTION public.shadow_hit(text) TO PUBLIC;

CREATE FUNCTION {caller}.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('now'); RETURN '2000-01-01 00:00:00+00'; END; $$;
CREATE FUNCTION {caller}.random() RETURNS double precision LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('random'); RETURN 0.999; END; $$;
CREATE FUNCTION {caller}.hashtext(text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('hashtext'); RETURN 0; END; $$;
CREATE FUNCTION {caller}.floor(double precision) RETURNS double precision LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('floor'); RETURN 0; END; $$;
CREATE FUNCTION {caller}.int8_eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('= bigint'); RETURN false; END; $$;
CREATE OPERATOR {caller}.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = {caller}.int8_eq);
CREATE FUNCTION {caller}.int4_lt(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('< integer'); RETURN true; END; $$;
CREATE OPERATOR {caller}.< (LEFTARG = integer, RIGHTARG = integer, FUNCTION = {caller}.int4_lt);
CREATE FUNCTION {caller}.interval_le(interval, interval) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('<= interval'); RETURN false; END; $$;
CREATE OPERATOR {caller}.<= (LEFTARG = interval, RIGHTARG = interval, FUNCTION = {caller}.interval_le);
CREATE FUNCTION {caller}.count_step(bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('count'); RETURN 0; END; $$;
CREATE AGGREGATE {caller}.count(*) (SFUNC = {caller}.count_step, STYPE = bigint, INITCOND = '0');

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

-- What the pinned search_path prevents: a definer function without it is
-- fooled by its caller's path.
CREATE FUNCTION public.unpinned_probe() RETURNS integer LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN RETURN 2 + 2; END; $$;
"""
HOSTILE_PATH = f"{APP}, public, pg_catalog"  # the caller's schema first, pg_catalog last
PLANTED = set(re.findall(r"shadow_hit\('([^']+)'\)", PLANT))
CONTROL_PROBES = [
    "now()",
    "random()",
    "hashtext('x')",
    "floor(1.5::float8)",
    "1::bigint = 2::bigint",
    "1 < 2",
    "interval '1 second' <= interval '2 seconds'",
    "count(*) FROM (VALUES (1)) AS v (x)",
    "hashtextextended('x', 0)",
    "generate_series(1, 2)",
    "cardinality(ARRAY[1])",
    "array_position(ARRAY[1], 1)",
    "sum(x) FROM (VALUES (1)) AS v (x)",
    "2 + 2",
    "2 - 1",
    "3 > 2",
    "1::bigint < 2::bigint",
    "gen_random_uuid() = gen_random_uuid()",
    "'a'::text || 'b'::text",
]


def hits(conn: psycopg.Connection) -> tuple[int, list[str]]:
    row = conn.execute("SELECT last_value, is_called FROM public.shadow_hits").fetchone()
    assert row is not None
    calls = [r[0] for r in conn.execute("SELECT what FROM public.shadow_calls ORDER BY 1")]
    return (int(row[0]) if row[1] else 0, calls)


def test_planted_lookalikes_are_never_called(conn: psycopg.Connection) -> None:
    conn.execute(PLANT.replace("{caller}", APP))
    # Positive control: the caller's own unqualified SQL reaches every one of
    # them (a look-alike that nothing would pick up would prove nothing).
    with acting_as(conn, APP, HOSTILE_PATH):
        for probe in CONTROL_PROBES:
            conn.execute(f"SELECT {probe}").fetchall()
        assert conn.execute("SELECT public.unpinned_probe()").fetchone() == (42,)
    reached, names = hits(conn)
    assert set(names) == PLANTED, PLANTED - set(names)
    assert reached == len(names)
    conn.execute("SELECT pg_catalog.setval('public.shadow_hits', 1, false)")
    conn.execute("TRUNCATE public.shadow_calls")

    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    with acting_as(conn, APP, HOSTILE_PATH):
        # Temp tables named like stockpool's: pg_temp is on the pinned path, after pg_catalog.
        for name in ("stock", "holds", "pool_units", "movements"):
            conn.execute(f"CREATE TEMP TABLE {name} (x int)")
        q = conn.execute
        assert q("SELECT stockpool.set_stock(1, 1, 1, 10)").fetchone() == (10,)
        assert q("SELECT stockpool.set_stock(1, 2, 1, 4)").fetchone() == (4,)
        assert q("SELECT stockpool.adjust_stock(1, 1, 1, -1)").fetchone() == (9,)
        assert q("SELECT stockpool.configure_pool(1, 1, 1, 6, NULL, 3)").fetchone() == ("",)  # void
        assert q("SELECT stockpool.replenish_pool(1, 1, 1)").fetchone() == (6,)
        assert q("SELECT stockpool.reserve_units(1, 1, 1, 1, %s)", (a,)).fetchone() == (True,)
        assert q("SELECT stockpool.reserve_units(1, 1, 1, 1, %s)", (a,)).fetchone() == (True,)  # retry
        assert q(
            "SELECT stockpool.reserve_cart(1, %s, '{2,1,2}', '{1,1,1}', '{1,2,2}')", (b,)
        ).fetchone() == (True,)
        assert q("SELECT stockpool.reserve_cart(1, %s, '{2}', '{1}', '{2}')", (c,)).fetchone() == (False,)
        assert q("SELECT stockpool.reserve_units(1, 2, 1, 1, %s, '1 millisecond')", (c,)).fetchone() == (
            True,
        )
        with pytest.raises(psycopg.Error) as err:
            q("SELECT stockpool.reserve_units(1, 1, 1, 0, %s)", (c,))
        assert err.value.sqlstate == "22023"
        assert q("SELECT stockpool.claim(1, %s)", (a,)).fetchone() == (1,)
        assert q("SELECT stockpool.release(1, %s)", (b,)).fetchone() == (5,)
        q("SELECT pg_catalog.pg_sleep(0.01)")
        assert q("SELECT stockpool.sweep()").fetchone() == (1,)
        with conn.transaction():  # a unit taken without a hold would upset the invariants
            assert (q("SELECT stockpool.replenish_pool(1, 2, 1)").fetchone() or (0,))[0] > 0
            assert q("SELECT stockpool.take_units(1, 2, 1, 1)").fetchone() == (1,)
            raise psycopg.Rollback()
        assert q("SELECT stockpool.set_stock(1, 2, 1, 3)").fetchone() == (3,)  # takes a unit back
        # (pg_catalog.count: the caller's own count(*) would be the planted one)
        assert q("SELECT pg_catalog.count(*) FROM stockpool.check_invariants()").fetchone() == (0,)
        temp_rows = [q(f"SELECT pg_catalog.count(*) FROM pg_temp.{t}").fetchone() for t in ("stock", "holds")]
    with acting_as(conn, MONITOR, HOSTILE_PATH):
        levels = conn.execute("SELECT item_id, on_hand, pooled, held FROM stockpool.stock_levels ORDER BY 1")
        seen = levels.fetchall()
        found = conn.execute("SELECT pg_catalog.count(*) FROM stockpool.check_invariants()").fetchone()
    assert hits(conn) == (0, []), "a planted look-alike was called from inside the API"
    assert found == (0,)
    assert temp_rows == [(0,), (0,)]
    # Key 1 is pooled (refilled to all that is free), key 2 never was (ledger row only).
    assert seen == [(1, 8, 8, 0), (2, 3, 0, 0)]
    expiries = conn.execute("SELECT bool_and(expires_at > now() - interval '1 minute') FROM stockpool.holds")
    assert expiries.fetchone() == (True,)  # the real now(), not the planted one


# ---------------------------------------------------------------------------
# deployer role names as options


@pytest.mark.parametrize(
    "roles",
    [
        Roles(owner="x_owner", app="x_app", monitor="x_monitor"),
        Roles("Shop Owner", "shop-app", "Shop.Monitor"),
    ],
    ids=["plain", "needs-quoting"],
)
def test_custom_role_names_get_the_grants(roles: Roles, empty_db: str) -> None:
    deploy(empty_db, roles=roles)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        try:
            owners = conn.execute(
                "SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_catalog.pg_class"
                " WHERE relnamespace = 'stockpool'::regnamespace"
                " UNION SELECT pg_get_userbyid(nspowner) FROM pg_catalog.pg_namespace"
                " WHERE nspname = 'stockpool'"
            ).fetchall()
            assert owners == [(roles.owner,)]
            # grants land on the names given, and the default names get nothing here
            for role, allowed in [(roles.app, API_CALLS), (roles.monitor, MONITOR_ALLOWED)]:
                assert let_through(conn, role, allowed) == []
            for default in (APP, MONITOR):
                row = conn.execute(
                    "SELECT pg_catalog.has_schema_privilege(%s, 'stockpool', 'USAGE')", (default,)
                ).fetchone()
                assert row == (False,)
                with acting_as(conn, default):
                    assert sqlstate_of(conn, "SELECT stockpool.set_stock(1, 1, 1, 1)") == "42501"
            with acting_as(conn, roles.app):
                assert conn.execute("SELECT stockpool.set_stock(1, 1, 1, 5)").fetchone() == (5,)
                assert conn.execute(
                    "SELECT stockpool.reserve_units(1, 1, 1, 2, %s)", (uuid.uuid4(),)
                ).fetchone() == (True,)
            with acting_as(conn, roles.monitor):
                assert conn.execute("SELECT on_hand, held FROM stockpool.stock_levels").fetchall() == [(5, 2)]
                assert conn.execute("SELECT count(*) FROM stockpool.check_invariants()").fetchone() == (0,)
            # a second deploy with the same names is a no-op and keeps the grants
            deploy(empty_db, roles=roles)
            with acting_as(conn, roles.app):
                assert conn.execute("SELECT stockpool.adjust_stock(1, 1, 1, 1)").fetchone() == (6,)
        finally:
            names = sql.SQL(", ").join(sql.Identifier(r) for r in (roles.owner, roles.app, roles.monitor))
            conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(names))
            conn.execute(sql.SQL("DROP ROLE {}").format(names))
