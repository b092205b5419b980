"""Deploy the stockpool SQL package into a database.

- Forward-only numbered migrations (sql/migrations/NNNN_name.sql), each applied
  in its own transaction and recorded in stockpool.migrations with a SHA-256
  checksum. A changed checksum of an applied migration is refused loudly.
- All functions and views (sql/functions) re-applied in one transaction on
  every deploy, followed by the privileges, so a re-deploy is idempotent.
- A session advisory lock serialises deployers: a second deployer waits (up to
  ``lock_wait``) and then finds nothing left to do, or fails cleanly.
- Objects are owned by the owner role; the app role gets EXECUTE on the public
  API only, the monitor role the health views and functions only; PUBLIC gets
  nothing. The owner role is made a member of pg_read_all_stats, so that
  stockpool.metrics() and stockpool.wait_events() (SECURITY DEFINER) see the
  state and wait event of every session.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from stockpool import sql_dir
from stockpool.client import behind_pooler
from stockpool.errors import StockpoolError, first_line, redact

# pg_advisory_lock key of the deployer: 'stockpool' as ASCII in a bigint.
DEPLOY_LOCK_ID = 0x73746F636B706F6F

MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

# The public API granted to the app role: name -> identity arguments.
PUBLIC_FUNCTIONS: dict[str, str] = {
    "set_stock": "bigint, bigint, bigint, integer",
    "adjust_stock": "bigint, bigint, bigint, integer",
    "reserve_units": "bigint, bigint, bigint, integer, uuid, interval",
    "reserve_cart": "bigint, uuid, bigint[], bigint[], integer[], interval",
    "claim": "bigint, uuid",
    "release": "bigint, uuid",
    "sweep": "integer",
    "maintain": "interval, integer",
    "replenish_pool": "bigint, bigint, bigint, integer",
    "take_units": "bigint, bigint, bigint, integer",
    "configure_pool": "bigint, bigint, bigint, integer, integer, integer",
    "check_invariants": "",
    "metrics": "",
    "hot_keys": "integer",
    "wait_events": "",
    "set_named_units": "bigint, bigint, bigint, text[], integer[]",
    "retire_named_units": "bigint, bigint, bigint, text[]",
    "reserve_named": "bigint, bigint, bigint, integer, uuid, interval, boolean",
    "reserve_labels": "bigint, bigint, bigint, text[], uuid, interval",
}
MONITOR_FUNCTIONS = ("check_invariants", "metrics", "hot_keys", "wait_events")
MONITOR_VIEWS = ("stock_levels", "unit_status")
# The maintenance worker's role may run maintenance and nothing else; the app
# role gets the rest of the API (sweep included, maintain not: a cycle is the
# worker's job; nor the monitor's metrics, hot_keys and wait_events).
WORKER_FUNCTIONS = ("maintain", "sweep")
APP_FUNCTIONS = tuple(
    name for name in PUBLIC_FUNCTIONS if name not in ("maintain", "metrics", "hot_keys", "wait_events")
)


@dataclass(frozen=True)
class Roles:
    owner: str = "stockpool_owner"
    app: str = "stockpool_app"
    monitor: str = "stockpool_monitor"
    worker: str = "stockpool_worker"

    @property
    def granted(self) -> tuple[str, str, str]:
        """The roles that get grants (the owner owns instead)."""
        return (self.app, self.monitor, self.worker)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text()

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


@dataclass
class DeployReport:
    applied: list[str]
    skipped: list[str]
    functions: int


def migrations(root: Path | None = None) -> list[Migration]:
    folder = (root or sql_dir()) / "migrations"
    found: list[Migration] = []
    for path in sorted(folder.glob("*.sql")):
        match = MIGRATION_NAME.match(path.name)
        if not match:
            raise StockpoolError(f"bad migration file name {path.name}", hint="use NNNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise StockpoolError(f"migrations must be numbered 0001 upwards without gaps: {versions}")
    return found


def function_files(root: Path | None = None) -> list[Path]:
    """Re-applied on every deploy: helpers (leading underscore), views, public
    functions, then retired.sql (old signatures dropped)."""
    base = root or sql_dir()
    functions = sorted((base / "functions").glob("*.sql"))
    views = sorted((base / "views").glob("*.sql"))
    retired = [base / "retired.sql"] if (base / "retired.sql").exists() else []
    return (
        [f for f in functions if f.name.startswith("_")]
        + views
        + [f for f in functions if not f.name.startswith("_")]
        + retired
    )


BOOTSTRAP = """
CREATE SCHEMA IF NOT EXISTS stockpool AUTHORIZATION {owner};
CREATE TABLE IF NOT EXISTS stockpool.migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by text NOT NULL DEFAULT session_user,
    CONSTRAINT migrations_pkey PRIMARY KEY (version)
);
ALTER TABLE stockpool.migrations OWNER TO {owner};
REVOKE ALL ON TABLE stockpool.migrations FROM PUBLIC;
"""


def ensure_role(conn: psycopg.Connection, role: str) -> None:
    exists = conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)).fetchone()
    if exists:
        return
    try:
        with conn.transaction():
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
    except psycopg.errors.DuplicateObject:
        pass  # another deployer created it meanwhile


def _grants(roles: Roles) -> list[sql.SQL | sql.Composed]:
    granted = sql.SQL(", ").join(sql.Identifier(r) for r in roles.granted)
    app, monitor, worker = (sql.Identifier(r) for r in roles.granted)
    stmts: list[sql.SQL | sql.Composed] = [
        # stockpool.metrics() runs as the owner and reads pg_stat_activity,
        # which hides the state and times of other roles' sessions from a
        # role that is not a member of pg_read_all_stats.
        sql.SQL("GRANT pg_read_all_stats TO {}").format(sql.Identifier(roles.owner)),
        sql.SQL("REVOKE ALL ON SCHEMA stockpool FROM PUBLIC"),
        sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA stockpool FROM PUBLIC, {}").format(granted),
        sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA stockpool FROM PUBLIC, {}").format(granted),
        sql.SQL("REVOKE ALL ON ALL FUNCTIONS IN SCHEMA stockpool FROM PUBLIC, {}").format(granted),
        sql.SQL("GRANT USAGE ON SCHEMA stockpool TO {}").format(granted),
    ]
    for role, names in (
        (app, APP_FUNCTIONS),
        (monitor, MONITOR_FUNCTIONS),
        (worker, WORKER_FUNCTIONS),
    ):
        for name in names:
            stmts.append(
                sql.SQL("GRANT EXECUTE ON FUNCTION stockpool.{}({}) TO {}").format(
                    sql.Identifier(name), sql.SQL(PUBLIC_FUNCTIONS[name]), role
                )
            )
    for view in MONITOR_VIEWS:
        stmts.append(sql.SQL("GRANT SELECT ON stockpool.{} TO {}").format(sql.Identifier(view), monitor))
    return stmts


def connect_directly(dsn: str, what: str = "") -> psycopg.Connection:
    """An autocommit session on the server itself, for a deployer or a mover.
    A pooler or proxy in between is refused before anything is written: the
    deploy lock is a session lock and each migration a transaction of the same
    session, and through a transaction pooler neither holds. ``what`` names the
    server in messages (the router, a node)."""
    where = f"{what} {redact(dsn)}" if what else redact(dsn)
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:  # OperationalError, or ProgrammingError for a malformed DSN
        raise StockpoolError(
            f"cannot connect to {where}: {first_line(exc)}",
            hint="check the DSN, that the server is up, and pg_hba.conf",
        ) from exc
    conn.prepare_threshold = None
    if behind_pooler(conn):
        conn.close()
        raise StockpoolError(
            f"{where} is not the server itself (a pooler or a proxy is in between); nothing was deployed",
            hint="deploy with a DSN that reaches PostgreSQL directly, not through pgbouncer",
        )
    return conn


def deploy(
    dsn: str,
    roles: Roles | None = None,
    lock_wait: str = "60s",
    root: Path | None = None,
    upto: int | None = None,
    with_functions: bool = True,
) -> DeployReport:
    """Apply pending migrations and re-apply every function. Idempotent.

    ``upto`` stops after that migration and ``with_functions=False`` skips the
    function step: both exist for upgrade tests.
    """
    roles = roles or Roles()
    found = migrations(root)
    if upto is not None:
        found = [m for m in found if m.version <= upto]
    with connect_directly(dsn) as conn:
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(lock_wait)))
        try:
            conn.execute("SELECT pg_catalog.pg_advisory_lock(%s)", (DEPLOY_LOCK_ID,))
        except psycopg.errors.LockNotAvailable as exc:
            raise StockpoolError(
                f"another deployer has held the stockpool deploy lock for over {lock_wait}",
                hint="wait for it to finish, or raise --lock-wait",
            ) from exc
        conn.execute("SET lock_timeout = 0")
        try:
            return _deploy_locked(conn, roles, found, root, with_functions)
        finally:
            conn.execute("SELECT pg_catalog.pg_advisory_unlock(%s)", (DEPLOY_LOCK_ID,))


def _deploy_locked(
    conn: psycopg.Connection,
    roles: Roles,
    found: Sequence[Migration],
    root: Path | None,
    with_functions: bool,
) -> DeployReport:
    for role in (roles.owner, *roles.granted):
        ensure_role(conn, role)
    owner = sql.Identifier(roles.owner)
    with conn.transaction():
        conn.execute(sql.SQL(BOOTSTRAP).format(owner=owner))
    report = DeployReport(applied=[], skipped=[], functions=0)
    _apply_migrations(conn, owner, found, report)
    if with_functions:
        _apply_functions(conn, owner, roles, root, report)
    return report


def _applied(conn: psycopg.Connection, found: Sequence[Migration]) -> dict[int, tuple[str, str]]:
    """The migrations the database has (version -> name, checksum); refuses
    one that this release does not know, unless a newer release applied it."""
    applied_rows = conn.execute(
        "SELECT version, name, checksum FROM stockpool.migrations ORDER BY version"
    ).fetchall()
    applied = {int(v): (n, c) for v, n, c in applied_rows}
    known = {m.version for m in found}
    for version, (name, _) in applied.items():
        if version not in known and version > max(known, default=0):
            continue  # applied by a newer release; fine with --upto
        if version not in known:
            raise StockpoolError(f"applied migration {version:04d}_{name} is missing from sql/migrations")
    return applied


def _apply_migrations(
    conn: psycopg.Connection, owner: sql.Identifier, found: Sequence[Migration], report: DeployReport
) -> None:
    """Each pending migration in its own transaction, as the owner role;
    an applied one whose file changed is refused."""
    applied = _applied(conn, found)
    for mig in found:
        label = f"{mig.version:04d}_{mig.name}"
        if mig.version in applied:
            _, checksum = applied[mig.version]
            if checksum != mig.checksum:
                raise StockpoolError(
                    f"migration {label} was changed after it was applied "
                    f"(checksum {checksum[:12]} in the database, {mig.checksum[:12]} on disk)",
                    hint="never edit an applied migration: add a new numbered one instead",
                )
            report.skipped.append(label)
            continue
        try:
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(owner))
                conn.execute(mig.text.encode())
                conn.execute(
                    "INSERT INTO stockpool.migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (mig.version, mig.name, mig.checksum),
                )
        except psycopg.Error as exc:
            raise _sql_error(f"migration {label}", exc) from exc
        report.applied.append(label)


def _apply_functions(
    conn: psycopg.Connection, owner: sql.Identifier, roles: Roles, root: Path | None, report: DeployReport
) -> None:
    """Every function and view (as the owner role), then the privileges, in one transaction."""
    current = "functions"
    try:
        with conn.transaction():
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(owner))
            for path in function_files(root):
                current = path.name
                conn.execute(path.read_bytes())
                report.functions += 1
            current = "privileges"
            conn.execute("RESET ROLE")
            for stmt in _grants(roles):
                conn.execute(stmt)
    except psycopg.Error as exc:
        raise _sql_error(current, exc) from exc


def _sql_error(where: str, exc: psycopg.Error) -> StockpoolError:
    state = exc.sqlstate or "?????"
    first = first_line(exc)
    hint = None
    if state == "42501":
        hint = "deploy as a superuser, or as a member of the owner role with CREATEROLE"
    return StockpoolError(f"{where} failed, nothing of it was applied: [{state}] {first}", hint=hint)
