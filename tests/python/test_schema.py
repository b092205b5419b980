"""A fresh install equals an upgrade through every migration, and equals the
checked-in schema dump (sql/schema/stockpool.sql): the drift check."""

from __future__ import annotations

import difflib

import psycopg
import pytest

from stockpool import sql_dir
from stockpool.install.deploy import deploy, migrations
from stockpool.install.schema import dump

pytestmark = pytest.mark.timeout(180)

CHECKED_IN = sql_dir() / "schema" / "stockpool.sql"


def _diff(expected: str, actual: str, expected_name: str, actual_name: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(keepends=True),
        actual.splitlines(keepends=True),
        fromfile=expected_name,
        tofile=actual_name,
        n=2,
    )
    return "".join(list(lines)[:200])


def test_upgrade_through_every_migration_equals_a_fresh_install(empty_db: str, dsn: str) -> None:
    found = migrations()
    for step in found:
        report = deploy(empty_db, upto=step.version, with_functions=False)
        assert report.applied == [f"{step.version:04d}_{step.name}"]
        assert report.functions == 0
        with psycopg.connect(empty_db) as c:
            versions = [v for (v,) in c.execute("SELECT version FROM stockpool.migrations ORDER BY 1")]
        assert versions == list(range(1, step.version + 1))
    report = deploy(empty_db)
    assert report.applied == []
    upgraded, fresh = dump(empty_db), dump(dsn)
    assert upgraded == fresh, "an upgraded install differs from a fresh one:\n" + _diff(
        fresh, upgraded, "fresh install", "upgraded install"
    )


def test_checked_in_schema_matches_a_fresh_install(dsn: str) -> None:
    fresh = dump(dsn)
    checked_in = CHECKED_IN.read_text()
    assert fresh == checked_in, (
        f"{CHECKED_IN.relative_to(sql_dir().parent)} is out of date with sql/: run `make schema` "
        "and commit the result.\n" + _diff(checked_in, fresh, "sql/schema/stockpool.sql", "fresh install")
    )


def test_control_the_dump_sees_a_changed_function(dsn: str, conn: psycopg.Connection) -> None:
    """Negative control: a drifted install (one function body changed) no longer matches."""
    before = dump(dsn)
    conn.execute("SET ROLE stockpool_owner")
    conn.execute(
        "CREATE OR REPLACE FUNCTION stockpool._null_args(p_names text[], p_is_null boolean[])"
        " RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'drifted' $$"
    )
    conn.execute("RESET ROLE")
    after = dump(dsn)
    assert after != before
    assert after != CHECKED_IN.read_text()
    assert "drifted" in _diff(before, after, "before", "after")
