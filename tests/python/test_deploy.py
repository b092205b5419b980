"""The deployer: a re-run is a no-op, concurrent deployers never half-apply,
an edited migration is refused, a failing step leaves nothing behind, and the
CLI reports a bad DSN as one line without a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from stockpool import cluster, sql_dir
from stockpool.deploy import DEPLOY_LOCK_ID, DeployReport, deploy, function_files, migrations
from stockpool.errors import StockpoolError
from stockpool.schema import dump
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
