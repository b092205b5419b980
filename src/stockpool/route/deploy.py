"""Deploy a PL/Proxy router in front of N stockpool nodes.

``stockpool deploy --dsn ROUTER_URL --nodes NODE_URL,NODE_URL,...``:

1. Every node gets stockpool's own deploy, then ``sql/routing/node.sql``
   (its partitions and the guard of routed calls) and two login roles for
   the router's connections: ``stockpool_router``, a member of the app role
   and nothing else, and ``stockpool_router_ops``, a member of the worker
   and monitor roles (maintain and the health checks). Both get one
   password, generated at the first deploy and kept after: it is sent to
   the nodes as a SCRAM verifier (never in clear text) and stored on the
   router only in the user mappings of the two SQL/MED servers, which only
   a superuser reads.
2. The router gets the plproxy extension, ``sql/routing/router.sql``, the
   nodes' registry, the partition map (a new router deals the 64 partitions
   out round-robin; an existing map is kept, so adding a node moves
   nothing: ``stockpool move`` does), the two servers whose partition N is
   the connection string of N's node, and the API written from the first
   node's catalogue (route/functions.py) with the nodes' grants mirrored.

Why SQL/MED rather than PL/Proxy's configuration functions: the password
stays in a user mapping, out of the partitions' connection strings, which
PL/Proxy prints in its connection errors; and a change of the servers is
seen by every router backend through PostgreSQL's cache invalidation, in
the transaction that changes the map.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from stockpool import sql_dir
from stockpool.errors import StockpoolError, first_line, redact
from stockpool.install.deploy import DEPLOY_LOCK_ID, Roles, connect_directly, deploy, ensure_role
from stockpool.route.functions import (
    APP_CLUSTER,
    GENERATED_SQL,
    OPS_CLUSTER,
    ApiFunction,
    ApiView,
    read_api,
    router_grants,
    router_sql,
)

PARTITIONS = 64
ROUTER_ROLE = "stockpool_router"
ROUTER_OPS_ROLE = "stockpool_router_ops"
CONNECTION_LIFETIME = 1800
KEPT_KEYS = ("host", "hostaddr", "port", "dbname", "sslmode", "sslrootcert")


@dataclass(frozen=True)
class Node:
    """A data node: its admin URL (for deploys and moves) and the connection
    string the router uses (no user, no password)."""

    dsn: str
    name: str
    connstr: str

    @classmethod
    def parse(cls, dsn: str, connect_timeout: int = 2) -> Node:
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise StockpoolError(f"bad node URL {redact(dsn)}: {first_line(exc)}") from exc
        host = str(params.get("host") or params.get("hostaddr") or "localhost")
        port = str(params.get("port") or "5432")
        dbname = str(params.get("dbname") or params.get("user") or "postgres")
        kept = {k: str(v) for k, v in params.items() if k in KEPT_KEYS and v is not None}
        # PL/Proxy connects asynchronously, and libpq ignores connect_timeout
        # there; the kernel's TCP_USER_TIMEOUT bounds a connect to a host that
        # does not answer (and, with keepalives, a connection that died).
        kept.update(
            host=host,
            port=port,
            dbname=dbname,
            connect_timeout=str(connect_timeout),
            tcp_user_timeout=str(connect_timeout * 1000),
            keepalives="1",
            keepalives_idle="10",
            keepalives_interval="2",
            keepalives_count="3",
        )
        return cls(dsn=dsn, name=f"{host}:{port}/{dbname}", connstr=make_conninfo(**kept))


@dataclass
class RouterReport:
    nodes: list[str]
    partitions: dict[str, list[int]]
    functions: int
    views: int
    new_map: bool
    node_reports: list[str] = field(default_factory=list)


def scram_verifier(password: str, iterations: int = 4096) -> str:
    """A SCRAM-SHA-256 verifier (RFC 5803, PostgreSQL's format): what ALTER
    ROLE ... PASSWORD stores, so the password itself is never sent."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    b64 = base64.b64encode
    keys = f"{b64(stored_key).decode()}:{b64(server_key).decode()}"
    return f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}${keys}"


def _ensure_login(conn: psycopg.Connection, role: str, verifier: str, member_of: Sequence[str]) -> None:
    exists = conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)).fetchone()
    verb = "ALTER" if exists else "CREATE"
    with conn.transaction():
        conn.execute("SET LOCAL log_statement = 'none'")
        conn.execute(
            sql.SQL("{} ROLE {} LOGIN PASSWORD {}").format(
                sql.SQL(verb), sql.Identifier(role), sql.Literal(verifier)
            )
        )
    for group in member_of:
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(role)))


def _prepare_node(node: Node, roles: Roles, password: str) -> str:
    """stockpool's deploy, the routing objects and the router's login roles."""
    report = deploy(node.dsn, roles)
    verifier = scram_verifier(password)
    with connect_directly(node.dsn, "node") as conn:
        with conn.transaction():
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(roles.owner)))
            conn.execute((sql_dir() / "routing" / "partition.sql").read_bytes())
            conn.execute((sql_dir() / "routing" / "node.sql").read_bytes())
        _ensure_login(conn, ROUTER_ROLE, verifier, (roles.app,))
        _ensure_login(conn, ROUTER_OPS_ROLE, verifier, (roles.worker, roles.monitor))
        for fn in ("_owns_shop(bigint)", "_misplaced()", "_partition_of(bigint)"):
            conn.execute(
                sql.SQL("GRANT EXECUTE ON FUNCTION stockpool.{} TO {}, {}").format(
                    sql.SQL(fn), sql.Identifier(ROUTER_ROLE), sql.Identifier(ROUTER_OPS_ROLE)
                )
            )
    return f"{node.name}: migrations applied {', '.join(report.applied) or 'none'}"


def _existing_password(conn: psycopg.Connection) -> str | None:
    row = conn.execute(
        """
        SELECT o.option_value
        FROM pg_catalog.pg_user_mapping AS um
        JOIN pg_catalog.pg_foreign_server AS s ON s.oid = um.umserver,
             pg_catalog.pg_options_to_table(um.umoptions) AS o
        WHERE s.srvname = %s AND um.umuser = 0 AND o.option_name = 'password'
        """,
        (APP_CLUSTER,),
    ).fetchone()
    return str(row[0]) if row else None


def _node_partitions(conn: psycopg.Connection) -> set[int]:
    return {int(r[0]) for r in conn.execute("SELECT partition FROM stockpool.node_partitions").fetchall()}


def _shop_partitions(conn: psycopg.Connection) -> set[int]:
    """The partitions of the shops a node has rows of."""
    rows = conn.execute(
        """
        SELECT DISTINCT stockpool._partition_of(shop_id)
        FROM (SELECT shop_id FROM stockpool.stock UNION SELECT shop_id FROM stockpool.holds) AS s
        """
    ).fetchall()
    return {int(r[0]) for r in rows}


def server_options(connstrs: dict[int, str], existing: set[str] | None) -> sql.Composed:
    """OPTIONS (... pN 'connstr' ...) of a plproxy SQL/MED server: to create
    it (``existing`` None) or to alter it (SET an option it has, ADD one it
    lacks)."""
    values = {"connection_lifetime": str(CONNECTION_LIFETIME)}
    values.update({f"p{part}": connstrs[part] for part in range(PARTITIONS)})
    opts = []
    for key, value in values.items():
        verb = "" if existing is None else ("SET" if key in existing else "ADD")
        opts.append(sql.SQL("{} {} {}").format(sql.SQL(verb), sql.Identifier(key), sql.Literal(value)))
    return sql.SQL("OPTIONS ({})").format(sql.SQL(", ").join(opts))


def _server_keys(conn: psycopg.Connection, server: str) -> set[str] | None:
    row = conn.execute(
        "SELECT array(SELECT split_part(o, '=', 1) FROM unnest(srvoptions) AS o)"
        " FROM pg_catalog.pg_foreign_server WHERE srvname = %s",
        (server,),
    ).fetchone()
    return set(row[0]) if row else None


def map_connstrs(conn: psycopg.Connection) -> dict[int, str]:
    rows = conn.execute(
        "SELECT pm.partition, n.connstr FROM stockpool.partition_map AS pm "
        "JOIN stockpool.nodes AS n USING (node)"
    ).fetchall()
    return {int(p): str(c) for p, c in rows}


def write_servers(conn: psycopg.Connection) -> None:
    """Point both PL/Proxy clusters' partitions at the map's nodes, creating
    a server the router does not have yet (in the caller's transaction)."""
    connstrs = map_connstrs(conn)
    for server in (APP_CLUSTER, OPS_CLUSTER):
        keys = _server_keys(conn, server)
        stmt = "CREATE SERVER {} FOREIGN DATA WRAPPER plproxy {}" if keys is None else "ALTER SERVER {} {}"
        conn.execute(sql.SQL(stmt).format(sql.Identifier(server), server_options(connstrs, keys)))


def _user_mappings(conn: psycopg.Connection, password: str) -> None:
    """One PUBLIC mapping per server: every router user's calls log in to
    the nodes as the router's role. Neither the statement nor an error of
    it is logged (the password is in it)."""
    conn.execute("SET LOCAL log_statement = 'none'")
    conn.execute("SET LOCAL log_min_error_statement = 'panic'")
    for server, user in ((APP_CLUSTER, ROUTER_ROLE), (OPS_CLUSTER, ROUTER_OPS_ROLE)):
        conn.execute(
            sql.SQL("DROP USER MAPPING IF EXISTS FOR PUBLIC SERVER {}").format(sql.Identifier(server))
        )
        conn.execute(
            sql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {} OPTIONS (user {}, password {})").format(
                sql.Identifier(server), sql.Literal(user), sql.Literal(password)
            )
        )


def deploy_router(
    router_dsn: str, node_dsns: Sequence[str], roles: Roles | None = None, connect_timeout: int = 2
) -> RouterReport:
    roles = roles or Roles()
    nodes = [Node.parse(d, connect_timeout) for d in node_dsns]
    if not nodes:
        raise StockpoolError("--nodes names no node")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise StockpoolError(f"a node is named twice in --nodes: {', '.join(names)}")
    with connect_directly(router_dsn, "router") as router:
        router.execute("SELECT pg_catalog.pg_advisory_lock(%s)", (DEPLOY_LOCK_ID,))
        try:
            return _deploy_router_locked(router, nodes, roles)
        finally:
            router.execute("SELECT pg_catalog.pg_advisory_unlock(%s)", (DEPLOY_LOCK_ID,))


def _deploy_router_locked(router: psycopg.Connection, nodes: list[Node], roles: Roles) -> RouterReport:
    try:
        router.execute("CREATE EXTENSION IF NOT EXISTS plproxy")
    except psycopg.Error as exc:
        raise StockpoolError(
            f"cannot create the plproxy extension on the router: {first_line(exc)}",
            hint="install PL/Proxy on the router's server (Debian: postgresql-15-plproxy); "
            "deploy as a superuser",
        ) from exc
    for role in (roles.owner, *roles.granted):
        ensure_role(router, role)
    has_map = router.execute("SELECT to_regclass('stockpool.partition_map') IS NOT NULL").fetchone()
    existing: dict[int, str] = {}
    if has_map and has_map[0]:
        existing = {
            int(p): str(n) for p, n in router.execute("SELECT partition, node FROM stockpool.partition_map")
        }
    missing = sorted({n for n in existing.values()} - {n.name for n in nodes})
    if missing:
        raise StockpoolError(
            f"node(s) {', '.join(missing)} serve partitions but are not in --nodes",
            hint="name every node that serves partitions; move a node's partitions away before dropping it",
        )
    password = (_existing_password(router) if existing else None) or secrets.token_urlsafe(24)
    node_reports = [_prepare_node(node, roles, password) for node in nodes]
    new_map = not existing
    if new_map:
        existing = {part: nodes[part % len(nodes)].name for part in range(PARTITIONS)}
        _check_placement(nodes, existing)
    else:
        _check_served(nodes, existing)
    with psycopg.ClientCursor(router) as cur, router.transaction():
        owner = sql.Identifier(roles.owner)
        router.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS stockpool AUTHORIZATION {}").format(owner))
        router.execute(sql.SQL("SET LOCAL ROLE {}").format(owner))
        router.execute((sql_dir() / "routing" / "partition.sql").read_bytes())
        router.execute((sql_dir() / "routing" / "router.sql").read_bytes())
        for node in nodes:
            cur.execute(
                "INSERT INTO stockpool.nodes (node, connstr) VALUES (%s, %s) "
                "ON CONFLICT (node) DO UPDATE SET connstr = excluded.connstr",
                (node.name, node.connstr),
            )
        if new_map:
            for part, name in existing.items():
                cur.execute(
                    "INSERT INTO stockpool.partition_map (partition, node) VALUES (%s, %s)", (part, name)
                )
        router.execute("RESET ROLE")
        write_servers(router)
        for server in (APP_CLUSTER, OPS_CLUSTER):
            router.execute(sql.SQL("ALTER SERVER {} OWNER TO {}").format(sql.Identifier(server), owner))
        _user_mappings(router, password)
        with connect_directly(nodes[0].dsn, "node") as first:
            functions, views = read_api(first, roles.granted, roles.app)
        for (drop,) in router.execute(GENERATED_SQL).fetchall():
            router.execute(drop)
        for stmt in router_sql(functions, views, roles.owner):
            router.execute(stmt.encode())
        for grant in _router_privileges(roles, functions, views):
            router.execute(grant)
    if new_map:
        for node in nodes:
            served = sorted(p for p, n in existing.items() if n == node.name)
            with connect_directly(node.dsn, "node") as conn, conn.transaction():
                conn.execute("DELETE FROM stockpool.node_partitions")
                for part in served:
                    conn.execute("INSERT INTO stockpool.node_partitions (partition) VALUES (%s)", (part,))
    partitions = {n.name: sorted(p for p, name in existing.items() if name == n.name) for n in nodes}
    return RouterReport(
        nodes=[n.name for n in nodes],
        partitions=partitions,
        functions=len(functions),
        views=len(views),
        new_map=new_map,
        node_reports=node_reports,
    )


def _check_placement(nodes: list[Node], plan: dict[int, str]) -> None:
    """A new map may not strand rows: a node that already holds shops must
    be dealt their partitions (start with that node alone, then move)."""
    for node in nodes:
        with connect_directly(node.dsn, "node") as conn:
            stray = sorted(p for p in _shop_partitions(conn) if plan[p] != node.name)
        if stray:
            raise StockpoolError(
                f"node {node.name} holds shops of partitions {stray}, which the new map would give to "
                "other nodes; nothing was written on the router",
                hint="deploy the router with that node alone (it then serves every partition), "
                "then move partitions",
            )


def _check_served(nodes: list[Node], plan: dict[int, str]) -> None:
    """An existing map and what the nodes serve must agree (an unfinished
    move is the one exception: `stockpool move` resumes it)."""
    for node in nodes:
        with connect_directly(node.dsn, "node") as conn:
            served = _node_partitions(conn)
        expected = {p for p, n in plan.items() if n == node.name}
        if served - expected:
            raise StockpoolError(
                f"node {node.name} serves partitions {sorted(served - expected)} that the router's map "
                "gives to other nodes",
                hint="an unfinished move? run `stockpool move` to resume it",
            )


def _router_privileges(
    roles: Roles, functions: list[ApiFunction], views: list[ApiView]
) -> list[sql.Composed | sql.SQL]:
    granted = sql.SQL(", ").join(sql.Identifier(r) for r in roles.granted)
    app, monitor, worker = (sql.Identifier(r) for r in roles.granted)
    stmts: list[sql.Composed | sql.SQL] = [
        sql.SQL("REVOKE ALL ON SCHEMA stockpool FROM PUBLIC"),
        sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA stockpool FROM PUBLIC, {}").format(granted),
        sql.SQL("REVOKE ALL ON ALL FUNCTIONS IN SCHEMA stockpool FROM PUBLIC, {}").format(granted),
        sql.SQL("GRANT USAGE ON SCHEMA stockpool TO {}").format(granted),
        sql.SQL(
            "GRANT EXECUTE ON FUNCTION stockpool._route(bigint), stockpool._unreachable(text) TO {}"
        ).format(granted),
        sql.SQL("REVOKE ALL ON FOREIGN SERVER {}, {} FROM PUBLIC").format(
            sql.Identifier(APP_CLUSTER), sql.Identifier(OPS_CLUSTER)
        ),
        sql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}, {}, {}").format(
            sql.Identifier(APP_CLUSTER), app, monitor, worker
        ),
        sql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}, {}").format(
            sql.Identifier(OPS_CLUSTER), monitor, worker
        ),
    ]
    stmts.extend(router_grants(functions, views))
    return stmts
