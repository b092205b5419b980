"""The deployer: a re-run is a no-op, concurrent deployers never half-apply,
an edited migration is refused, a failing step leaves nothing behind, and the
CLI reports a bad DSN as one line without a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from stockpool import sql_dir
from stockpool.errors import StockpoolError
from stockpool.install.deploy import (
    APP_FUNCTIONS,
    DEPLOY_LOCK_ID,
    MONITOR_FUNCTIONS,
    WORKER_FUNCTIONS,
    DeployReport,
    Roles,
    deploy,
    function_files,
    migrations,
)
from stockpool.install.schema import dump
from stockpool.server import cluster
from support import background, result, scalar

pytestmark = pytest.mark.timeout(180)

STOCKPOOL = Path(sys.executable).with_name("stockpool")


def _labels() -> list[str]:
    return [f"{m.version:04d}_{m.name}" for m in migrations()]


def _migrations_table(dsn: str) -> list[tuple[int, str, str]]:
    with psycopg.connect(dsn) as c:
        return [
            (int(v), str(n), str(s))
            for v, n, s in c.execute(
                "SELECT version, name, checksum FROM stockpool.migrations ORDER BY version"
            ).fetchall()
        ]


def _expected_migrations_table() -> list[tuple[int, str, str]]:
    return [(m.version, m.name, m.checksum) for m in migrations()]


def _has_schema(dsn: str) -> bool:
    with psycopg.connect(dsn) as c:
        return bool(scalar(c, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'stockpool')"))


def _copy_sql(tmp_path: Path) -> Path:
    root = tmp_path / "sql"
    shutil.copytree(sql_dir(), root)
    return root


def test_deploy_twice_is_a_no_op(dsn: str) -> None:
    schema_before = dump(dsn)
    table_before = _migrations_table(dsn)
    report = deploy(dsn)
    assert report.applied == []
    assert report.skipped == _labels()
    assert report.functions == len(function_files())
    assert dump(dsn) == schema_before
    assert _migrations_table(dsn) == table_before == _expected_migrations_table()


OLD_RECORD_HOLD = """
CREATE FUNCTION stockpool._record_hold(
    p_shop_id bigint, p_checkout_id uuid, p_item_id bigint, p_location_id bigint,
    p_quantity integer, p_ttl interval
) RETURNS void LANGUAGE sql AS $$ SELECT $$
"""


def _record_holds(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as c:
        rows = c.execute(
            "SELECT oid::regprocedure::text FROM pg_catalog.pg_proc"
            " WHERE pronamespace = 'stockpool'::regnamespace AND proname = '_record_hold' ORDER BY 1"
        ).fetchall()
    return [r[0] for r in rows]


@pytest.mark.parametrize("retired", [True, False], ids=["retired.sql", "without it (negative control)"])
def test_an_upgrade_drops_retired_signatures(dsn: str, tmp_path: Path, retired: bool) -> None:
    """A database from a release whose _record_hold had six arguments ends up,
    once deployed again, with the one function a fresh install has."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SET ROLE stockpool_owner")
        c.execute(OLD_RECORD_HOLD)
    root = _copy_sql(tmp_path)
    if not retired:
        (root / "retired.sql").unlink()
    deploy(dsn, root=root)
    new = "stockpool._record_hold(bigint,uuid,bigint,bigint,integer,interval,boolean,text[])"
    old = "stockpool._record_hold(bigint,uuid,bigint,bigint,integer,interval)"
    assert _record_holds(dsn) == ([new] if retired else sorted([old, new]))


def test_concurrent_deployers_on_an_empty_database(empty_db: str, dsn: str) -> None:
    deployers = 4
    start = threading.Barrier(deployers, timeout=30)

    def one() -> DeployReport | StockpoolError:
        start.wait()
        try:
            return deploy(empty_db)
        except StockpoolError as exc:
            return exc

    with background() as submit:
        outcomes = [result(f, timeout=150) for f in [submit(one) for _ in range(deployers)]]

    reports = [o for o in outcomes if isinstance(o, DeployReport)]
    failures = [o for o in outcomes if isinstance(o, StockpoolError)]
    assert reports, f"no deployer succeeded: {failures}"
    # A deployer that failed did so cleanly, with a StockpoolError (anything else
    # would have escaped above), and exactly one deployer applied the migrations.
    assert sum(1 for r in reports if r.applied) == 1
    assert [r.applied for r in reports if r.applied] == [_labels()]
    assert all(r.applied == [] and r.skipped == _labels() for r in reports if not r.applied)
    assert _migrations_table(empty_db) == _expected_migrations_table()
    assert dump(empty_db) == dump(dsn)


def test_a_deployer_that_cannot_get_the_lock_fails_cleanly(empty_db: str, dsn: str) -> None:
    with psycopg.connect(empty_db, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (DEPLOY_LOCK_ID,))
        with pytest.raises(StockpoolError) as raised:
            deploy(empty_db, lock_wait="200ms")
        assert "another deployer" in raised.value.message
        assert raised.value.hint
        assert not _has_schema(empty_db), "a deployer without the lock changed the database"
    deploy(empty_db)  # the lock is free again
    assert dump(empty_db) == dump(dsn)


def test_an_edited_applied_migration_is_refused(dsn: str, tmp_path: Path) -> None:
    root = _copy_sql(tmp_path)
    first = sorted((root / "migrations").glob("*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited after it was applied\n")
    schema_before = dump(dsn)
    with pytest.raises(StockpoolError) as raised:
        deploy(dsn, root=root)
    assert f"migration {first.stem} was changed after it was applied" in raised.value.message
    assert raised.value.hint and "new numbered" in raised.value.hint
    assert dump(dsn) == schema_before
    assert _migrations_table(dsn) == _expected_migrations_table()


def test_a_failing_migration_applies_nothing_of_itself(dsn: str, tmp_path: Path) -> None:
    root = _copy_sql(tmp_path)
    number = len(migrations()) + 1
    broken = root / "migrations" / f"{number:04d}_broken.sql"
    broken.write_text(
        "CREATE TABLE stockpool.half_applied (id integer);\n"
        "ALTER TABLE stockpool.stock ADD COLUMN half_applied integer;\n"
        "SELECT 1 / 0;\n"
    )
    schema_before = dump(dsn)
    with pytest.raises(StockpoolError) as raised:
        deploy(dsn, root=root)
    assert f"migration {broken.stem} failed, nothing of it was applied: [22012]" in raised.value.message
    assert dump(dsn) == schema_before
    assert _migrations_table(dsn) == _expected_migrations_table()

    broken.write_text("CREATE TABLE stockpool.half_applied (id integer);\n")
    report = deploy(dsn, root=root)
    assert report.applied == [broken.stem]
    assert [v for v, _, _ in _migrations_table(dsn)] == list(range(1, number + 1))


def test_a_failing_function_file_leaves_the_installed_functions(dsn: str, tmp_path: Path) -> None:
    root = _copy_sql(tmp_path)
    files = function_files(root)
    files[0].write_text(files[0].read_text().replace("SELECT", "SELECT SELECT", 1))
    (root / "functions" / "sweep.sql").write_text("-- a changed body that must not land\n" * 3)
    schema_before = dump(dsn)
    with pytest.raises(StockpoolError) as raised:
        deploy(dsn, root=root)
    assert f"{files[0].name} failed, nothing of it was applied: [42601]" in raised.value.message
    assert dump(dsn) == schema_before


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "60", "TERM": "xterm-256color"}
    env.pop("STOCKPOOL_DSN", None)
    return subprocess.run(
        [str(STOCKPOOL), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


@pytest.mark.parametrize(
    "bad_dsn",
    [
        "postgresql://nobody:s3cret-pw@127.0.0.1:{port}/nowhere_with_a_rather_long_database_name",
        "host=127.0.0.1 port={port} user=nobody password=s3cret-pw dbname=nowhere",
        "this is not a dsn password=s3cret-pw",
    ],
    ids=["refused-url", "refused-keywords", "malformed"],
)
def test_cli_deploy_with_a_bad_dsn_prints_one_line(bad_dsn: str) -> None:
    proc = _cli("deploy", "--dsn", bad_dsn.format(port=cluster.free_port()))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Traceback" not in output and "──" not in output, output
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: cannot connect to "), output
    assert len(lines) <= 2, f"more than one error line plus a hint:\n{output}"
    assert all(line.startswith("hint: ") for line in lines[1:]), output
    assert "s3cret-pw" not in output, "the password was printed"


def test_cli_deploy_applies_then_reports_nothing_to_do(empty_db: str) -> None:
    first = _cli("deploy", "--dsn", empty_db)
    assert first.returncode == 0, first.stderr
    assert f"migrations applied: {', '.join(_labels())}" in first.stdout
    second = _cli("deploy", "--dsn", empty_db)
    assert second.returncode == 0, second.stderr
    assert "migrations applied: none" in second.stdout
    assert f"already applied: {len(_labels())}" in second.stdout


GRANTED = """
SELECT 'schema', n.nspname::text, x.privilege_type
FROM pg_catalog.pg_namespace AS n, aclexplode(n.nspacl) AS x
WHERE n.nspname = 'stockpool' AND x.grantee = %(role)s::regrole
UNION ALL
SELECT 'relation', c.relname::text, x.privilege_type
FROM pg_catalog.pg_class AS c, aclexplode(c.relacl) AS x
WHERE c.relnamespace = 'stockpool'::regnamespace AND x.grantee = %(role)s::regrole
UNION ALL
SELECT 'function', p.proname::text, x.privilege_type
FROM pg_catalog.pg_proc AS p, aclexplode(p.proacl) AS x
WHERE p.pronamespace = 'stockpool'::regnamespace AND x.grantee = %(role)s::regrole
"""


def _granted(conn: psycopg.Connection, role: str) -> set[tuple[str, str, str]]:
    quoted = str(sql.Identifier(role).as_string(conn))
    return {(str(k), str(n), str(p)) for k, n, p in conn.execute(GRANTED, {"role": quoted}).fetchall()}


@pytest.mark.parametrize(
    "roles",
    [
        Roles(owner="x_owner", app="x_app", monitor="x_monitor", worker="x_worker"),
        Roles("Shop Owner", "shop-app", "Shop.Monitor", "shop worker"),
    ],
    ids=["plain", "needs-quoting"],
)
def test_custom_role_names_get_the_grants(roles: Roles, empty_db: str) -> None:
    """The deployer's role names are options: the grants land on the names
    given (quoted where they need it), exactly those the default names get."""
    deploy(empty_db, roles=roles)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        try:
            owners = conn.execute(
                "SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_catalog.pg_class"
                " WHERE relnamespace = 'stockpool'::regnamespace"
                " UNION SELECT pg_get_userbyid(proowner) FROM pg_catalog.pg_proc"
                " WHERE pronamespace = 'stockpool'::regnamespace"
                " UNION SELECT pg_get_userbyid(nspowner) FROM pg_catalog.pg_namespace"
                " WHERE nspname = 'stockpool'"
            ).fetchall()
            assert owners == [(roles.owner,)]
            assert _granted(conn, roles.app) == {("schema", "stockpool", "USAGE")} | {
                ("function", name, "EXECUTE") for name in APP_FUNCTIONS
            }
            assert _granted(conn, roles.monitor) == {
                ("schema", "stockpool", "USAGE"),
                ("relation", "stock_levels", "SELECT"),
                ("relation", "unit_status", "SELECT"),
                *(("function", name, "EXECUTE") for name in MONITOR_FUNCTIONS),
            }
            assert _granted(conn, roles.worker) == {("schema", "stockpool", "USAGE")} | {
                ("function", name, "EXECUTE") for name in WORKER_FUNCTIONS
            }
            # metrics() reads every session's state as the owner; nobody else
            # is made a member of anything.
            memberships = conn.execute(
                "SELECT r.rolname::text, m.rolname::text FROM pg_catalog.pg_auth_members AS a"
                " JOIN pg_catalog.pg_roles AS r ON r.oid = a.roleid"
                " JOIN pg_catalog.pg_roles AS m ON m.oid = a.member"
                " WHERE m.rolname = ANY (%s)",
                ([roles.owner, *roles.granted],),
            ).fetchall()
            assert memberships == [("pg_read_all_stats", roles.owner)]
            for default in ("stockpool_app", "stockpool_monitor", "stockpool_worker"):
                row = conn.execute(
                    "SELECT pg_catalog.has_schema_privilege(%s, 'stockpool', 'USAGE')", (default,)
                ).fetchone()
                assert row == (False,), f"{default} got something in a deploy with other names"
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(roles.app)))
            assert conn.execute("SELECT stockpool.set_stock(1, 1, 1, 5)").fetchone() == (5,)
            assert conn.execute(
                "SELECT stockpool.reserve_units(1, 1, 1, 2, %s)", (uuid.uuid4(),)
            ).fetchone() == (True,)
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(roles.monitor)))
            assert conn.execute("SELECT on_hand, held FROM stockpool.stock_levels").fetchall() == [(5, 2)]
            assert conn.execute("SELECT count(*) FROM stockpool.check_invariants()").fetchone() == (0,)
            assert conn.execute(
                "SELECT value FROM stockpool.metrics() WHERE metric = 'stock_held_units'"
            ).fetchone() == (2.0,)
            assert conn.execute("SELECT item_id, live_holds FROM stockpool.hot_keys()").fetchall() == [(1, 1)]
            conn.execute("RESET ROLE")
            # a second deploy with the same names is a no-op and keeps the grants
            before = _granted(conn, roles.app)
            deploy(empty_db, roles=roles)
            assert _granted(conn, roles.app) == before
        finally:
            conn.execute("RESET ROLE")
            names = sql.SQL(", ").join(sql.Identifier(r) for r in (roles.owner, *roles.granted))
            conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(names))
            conn.execute(sql.SQL("DROP ROLE {}").format(names))
