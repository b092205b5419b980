"""The router's API: written from a node's catalogue, so that it has exactly
the public API's names, argument names, types, defaults and result types.

Every public function ``f`` of a node becomes two functions on the router:

- ``stockpool._node_f``: a PL/Proxy function. A function whose first
  argument is ``p_shop_id`` runs on the partition ``stockpool._route`` picks
  (the shop's, refused with SP020 while it moves), as
  ``SELECT stockpool.f(...) FROM stockpool._owns_shop(p_shop_id)`` so that a
  node that does not serve the shop refuses too. The others (sweep,
  maintain, the health checks) run on every node (PL/Proxy runs once per
  distinct connection string, so once per node).
- ``stockpool.f``: PL/pgSQL with f's own signature. It returns the node's
  answer, combines the nodes' answers for the functions that run on all of
  them (summed counts, every node's rows), and turns PL/Proxy's own failure
  to reach a node (XX000) into 08006 (``stockpool._unreachable``). Errors a
  node raises arrive with their own SQLSTATE, untouched.

A view ``v`` (stock_levels, ...) becomes ``stockpool._node_view_v`` (every
node's rows), ``stockpool._all_v`` (the same, with the 08006 rule) and the
view itself over the latter.

Calls the app role may make on a node go through the ``stockpool_app``
cluster, whose connections log in as a role with the app role's rights;
the rest (maintain, metrics, hot_keys, wait_events, the monitor's views)
through ``stockpool_ops``, whose role has the worker's and the monitor's.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from stockpool.errors import StockpoolError

APP_CLUSTER = "stockpool_app"
OPS_CLUSTER = "stockpool_ops"

# How the router combines the nodes' answers of the calls that name no shop.
# (name -> the wrapper's body, over stockpool._node_<name>(<args>) AS n)
ALL_NODES: dict[str, str] = {
    "sweep": "RETURN (SELECT coalesce(pg_catalog.sum(n), 0)::integer FROM {call} AS n);",
    "maintain": (
        "RETURN QUERY SELECT coalesce(pg_catalog.sum(n.expired), 0)::integer,"
        " coalesce(pg_catalog.sum(n.settled), 0)::integer,"
        " coalesce(pg_catalog.sum(n.refilled), 0)::integer,"
        " coalesce(pg_catalog.sum(n.cooled), 0)::integer FROM {call} AS n;"
    ),
    "check_invariants": "RETURN QUERY SELECT * FROM {call} AS n ORDER BY 1, 2, 3, 4;",
    "metrics": (
        "RETURN QUERY SELECT n.metric, n.kind, n.relation, n.application_name, n.state,"
        " CASE WHEN n.metric = 'track_functions_enabled' THEN pg_catalog.min(n.value)"
        " WHEN n.metric ~ '(_seconds|_ratio|_age)$' THEN pg_catalog.max(n.value)"
        " ELSE pg_catalog.sum(n.value) END"
        " FROM {call} AS n GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 3, 4, 5;"
    ),
    "hot_keys": (
        "RETURN QUERY SELECT * FROM {call} AS n"
        " ORDER BY n.pool_target DESC, n.live_holds DESC, n.shop_id, n.item_id, n.location_id"
        # LIMIT 0 would skip the call, and with it the node's 22023.
        " LIMIT greatest(p_limit, 1);"
    ),
    "wait_events": (
        "RETURN QUERY SELECT n.application_name, n.wait_event, pg_catalog.sum(n.backends)::integer"
        " FROM {call} AS n GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2;"
    ),
}
# The query each node runs for them (PL/Proxy's SELECT; arguments by name).
REMOTE_ALL: dict[str, str] = {
    "check_invariants": (
        "SELECT i.shop_id, i.item_id, i.location_id, i.invariant,"
        " pg_catalog.format('partition %s: %s', stockpool._partition_of(i.shop_id), i.detail) AS detail"
        " FROM (SELECT * FROM stockpool.check_invariants()"
        " UNION ALL SELECT * FROM stockpool._misplaced()) AS i"
    ),
}


@dataclass(frozen=True)
class ApiFunction:
    """One public function of a node, as its catalogue describes it."""

    name: str
    arguments: str  # pg_get_function_arguments: names, types, defaults
    identity: str  # pg_get_function_identity_arguments: names and types
    result: str  # pg_get_function_result
    returns_set: bool
    in_names: tuple[str, ...]
    grantees: tuple[str, ...]  # roles with EXECUTE on the node
    app_may_call: bool

    @property
    def shop_first(self) -> bool:
        return bool(self.in_names) and self.in_names[0] == "p_shop_id"

    @property
    def composite(self) -> bool:
        return self.result.startswith("TABLE(")

    @property
    def cluster(self) -> str:
        return APP_CLUSTER if self.app_may_call else OPS_CLUSTER


@dataclass(frozen=True)
class ApiView:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, type)
    grantees: tuple[str, ...]
    app_may_read: bool

    @property
    def cluster(self) -> str:
        return APP_CLUSTER if self.app_may_read else OPS_CLUSTER


FUNCTIONS_SQL = """
SELECT p.proname,
       pg_catalog.pg_get_function_arguments(p.oid),
       pg_catalog.pg_get_function_identity_arguments(p.oid),
       pg_catalog.pg_get_function_result(p.oid),
       p.proretset,
       coalesce(
           (SELECT array_agg(a.name ORDER BY a.ord)
            FROM unnest(p.proargnames, coalesce(p.proargmodes, array_fill('i'::"char", ARRAY[p.pronargs])))
                 WITH ORDINALITY AS a (name, mode, ord)
            WHERE a.mode IN ('i', 'b', 'v')),
           ARRAY[]::text[]),
       array(SELECT r FROM unnest(%(roles)s::text[]) AS r
             WHERE pg_catalog.has_function_privilege(r, p.oid, 'EXECUTE')),
       pg_catalog.has_function_privilege(%(app)s, p.oid, 'EXECUTE')
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'stockpool'::regnamespace
  AND p.proname !~ '^_'
ORDER BY p.proname
"""

VIEWS_SQL = """
SELECT c.relname,
       array(SELECT quote_ident(a.attname) || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod)
             FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY a.attnum),
       array(SELECT r FROM unnest(%(roles)s::text[]) AS r
             WHERE pg_catalog.has_table_privilege(r, c.oid, 'SELECT')),
       pg_catalog.has_table_privilege(%(app)s, c.oid, 'SELECT')
FROM pg_catalog.pg_class AS c
WHERE c.relnamespace = 'stockpool'::regnamespace
  AND c.relkind = 'v'
  AND c.relname !~ '^_'
ORDER BY c.relname
"""


def read_api(
    conn: psycopg.Connection, granted: tuple[str, ...], app: str
) -> tuple[list[ApiFunction], list[ApiView]]:
    """The public functions and views of a deployed node, with who may call them."""
    params = {"roles": list(granted), "app": app}
    functions = [
        ApiFunction(
            name=row[0],
            arguments=row[1],
            identity=row[2],
            result=row[3],
            returns_set=row[4],
            in_names=tuple(row[5]),
            grantees=tuple(row[6]),
            app_may_call=row[7],
        )
        for row in conn.execute(FUNCTIONS_SQL, params).fetchall()
    ]
    views = [
        ApiView(
            name=row[0],
            columns=tuple((col.split(" ", 1)[0], col.split(" ", 1)[1]) for col in row[1]),
            grantees=tuple(row[2]),
            app_may_read=row[3],
        )
        for row in conn.execute(VIEWS_SQL, params).fetchall()
    ]
    for fn in functions:
        if not fn.shop_first and fn.name not in ALL_NODES:
            raise StockpoolError(
                f"stockpool.{fn.name} names no shop first and the router does not know how to combine "
                "its nodes' answers",
                hint="add it to stockpool.route.functions.ALL_NODES",
            )
    return functions, views


def _args_call(names: tuple[str, ...]) -> str:
    return ", ".join(names)


def _node_function(fn: ApiFunction) -> str:
    call = f"stockpool.{fn.name}({_args_call(fn.in_names)})"
    where = "the shop''s node" if fn.shop_first else "every node"
    if fn.shop_first:
        run = "RUN ON stockpool._route(p_shop_id);"
        select = f"SELECT {call} AS {fn.name} FROM stockpool._owns_shop(p_shop_id);"
        result = fn.result
    else:
        run = "RUN ON ALL;"
        remote = REMOTE_ALL.get(fn.name)
        select = (
            f"{remote};"
            if remote
            else (f"SELECT * FROM {call};" if fn.composite else f"SELECT {call} AS {fn.name};")
        )
        result = fn.result if fn.result.startswith(("TABLE(", "SETOF ")) else f"SETOF {fn.result}"
    return (
        f"CREATE OR REPLACE FUNCTION stockpool._node_{fn.name}({fn.identity})\n"
        f"RETURNS {result}\n"
        "LANGUAGE plproxy\n"
        "SET search_path = pg_catalog, pg_temp\n"
        "AS $plproxy$\n"
        f"    CLUSTER '{fn.cluster}';\n"
        f"    {run}\n"
        f"    {select}\n"
        "$plproxy$;\n"
        f"COMMENT ON FUNCTION stockpool._node_{fn.name}({fn.identity}) IS "
        f"'Internal: PL/Proxy call of stockpool.{fn.name} on {where}.';\n"
    )


def _wrapper(fn: ApiFunction) -> str:
    call = f"stockpool._node_{fn.name}({_args_call(fn.in_names)})"
    if not fn.shop_first:
        body = ALL_NODES[fn.name].format(call=call)
    elif fn.returns_set or fn.composite:
        body = f"RETURN QUERY SELECT * FROM {call};"
    elif fn.result == "void":
        body = f"PERFORM {call};"
    else:
        body = f"RETURN {call};"
    where = "the shop''s node" if fn.shop_first else "every node"
    return (
        f"CREATE OR REPLACE FUNCTION stockpool.{fn.name}({fn.arguments})\n"
        f"RETURNS {fn.result}\n"
        "LANGUAGE plpgsql\n"
        "SET search_path = pg_catalog, pg_temp\n"
        "AS $function$\n"
        "BEGIN\n"
        f"    {body}\n"
        "EXCEPTION WHEN internal_error THEN\n"
        "    PERFORM stockpool._unreachable(SQLERRM);\n"
        "    RAISE;\n"
        "END;\n"
        "$function$;\n"
        f"COMMENT ON FUNCTION stockpool.{fn.name}({fn.identity}) IS "
        f"'Routed by PL/Proxy: {where} runs stockpool.{fn.name}.';\n"
    )


def _view(view: ApiView) -> str:
    columns = ", ".join(f"{name} {type_}" for name, type_ in view.columns)
    names = ", ".join(name for name, _ in view.columns)
    return (
        f"CREATE OR REPLACE FUNCTION stockpool._node_view_{view.name}()\n"
        f"RETURNS TABLE ({columns})\n"
        "LANGUAGE plproxy\n"
        "SET search_path = pg_catalog, pg_temp\n"
        "AS $plproxy$\n"
        f"    CLUSTER '{view.cluster}';\n"
        "    RUN ON ALL;\n"
        f"    SELECT {names} FROM stockpool.{view.name};\n"
        "$plproxy$;\n"
        f"CREATE OR REPLACE FUNCTION stockpool._all_{view.name}()\n"
        f"RETURNS TABLE ({columns})\n"
        "LANGUAGE plpgsql\n"
        "SET search_path = pg_catalog, pg_temp\n"
        "AS $function$\n"
        "BEGIN\n"
        f"    RETURN QUERY SELECT * FROM stockpool._node_view_{view.name}();\n"
        "EXCEPTION WHEN internal_error THEN\n"
        "    PERFORM stockpool._unreachable(SQLERRM);\n"
        "    RAISE;\n"
        "END;\n"
        "$function$;\n"
        f"CREATE OR REPLACE VIEW stockpool.{view.name} AS SELECT * FROM stockpool._all_{view.name}();\n"
        f"COMMENT ON VIEW stockpool.{view.name} IS 'Every node''s rows of stockpool.{view.name}.';\n"
    )


# What an earlier deploy wrote, dropped before the API is written again, so
# that a function a node no longer has (or whose result type changed) does not
# linger on the router.
GENERATED_SQL = """
SELECT 'DROP VIEW ' || c.oid::regclass::text
FROM pg_catalog.pg_class AS c
WHERE c.relnamespace = 'stockpool'::regnamespace AND c.relkind = 'v'
UNION ALL
SELECT 'DROP FUNCTION ' || p.oid::regprocedure::text
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'stockpool'::regnamespace
  AND (p.proname !~ '^_' OR p.proname ~ '^_(node|all)_')
"""


def router_sql(functions: list[ApiFunction], views: list[ApiView], owner: str) -> list[str]:
    """The statements that create the router's API (after those of
    GENERATED_SQL have dropped the previous one). PL/Proxy is an untrusted
    language: a superuser runs them, and hands each object to the owner."""
    own = sql.Identifier(owner).as_string(None)
    stmts: list[str] = []
    for fn in functions:
        stmts.append(_node_function(fn))
        stmts.append(_wrapper(fn))
        for name in (fn.name, f"_node_{fn.name}"):
            stmts.append(f"ALTER FUNCTION stockpool.{name}({fn.identity}) OWNER TO {own};")
    for view in views:
        stmts.append(_view(view))
        for name in (f"_all_{view.name}", f"_node_view_{view.name}"):
            stmts.append(f"ALTER FUNCTION stockpool.{name}() OWNER TO {own};")
        stmts.append(f"ALTER VIEW stockpool.{view.name} OWNER TO {own};")
    return stmts


def router_grants(functions: list[ApiFunction], views: list[ApiView]) -> list[sql.Composed]:
    """The node's grants, mirrored: whoever may call f (read v) on a node may
    on the router, and nobody else."""
    stmts: list[sql.Composed] = []
    for fn in functions:
        for role in fn.grantees:
            for name in (fn.name, f"_node_{fn.name}"):
                stmts.append(
                    sql.SQL("GRANT EXECUTE ON FUNCTION stockpool.{}({}) TO {}").format(
                        sql.Identifier(name), sql.SQL(fn.identity), sql.Identifier(role)
                    )
                )
    for view in views:
        for role in view.grantees:
            stmts.append(
                sql.SQL("GRANT SELECT ON stockpool.{} TO {}").format(
                    sql.Identifier(view.name), sql.Identifier(role)
                )
            )
            for name in (f"_all_{view.name}", f"_node_view_{view.name}"):
                stmts.append(
                    sql.SQL("GRANT EXECUTE ON FUNCTION stockpool.{}() TO {}").format(
                        sql.Identifier(name), sql.Identifier(role)
                    )
                )
    return stmts
