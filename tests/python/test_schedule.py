"""``stockpool deploy --schedule`` on a real pg_cron (Debian's
postgresql-15-cron, preloaded on a throwaway cluster): the job is registered
once, runs stockpool.maintain() in the shop's database as the login role
given, and expires overdue holds. Without pg_cron, or with a role that cannot
log in or may not maintain, it fails with one clear line."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from stockpool.server import cluster as clusters
from support import scalar

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _deploy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stockpool.cli", "deploy", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def cron_server() -> Iterator[clusters.Cluster]:
    settings = clusters.settings_for_clients(20)
    settings.update(
        {
            "shared_preload_libraries": "'pg_cron'",
            "cron.database_name": "'postgres'",
            "cron.use_background_workers": "on",
            "max_worker_processes": "16",
        }
    )
    with clusters.throwaway(settings) as cl:
        yield cl


def test_schedule_registers_a_job_that_expires_holds(cron_server: clusters.Cluster) -> None:
    with psycopg.connect(cron_server.dsn, autocommit=True) as admin:
        admin.execute("CREATE DATABASE shop")
    shop = make_conninfo(cron_server.dsn, dbname="shop")
    assert _deploy("--dsn", shop).returncode == 0
    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("CREATE ROLE maint LOGIN IN ROLE stockpool_worker")
        conn.execute("CREATE ROLE maint_nologin NOLOGIN IN ROLE stockpool_worker")
        conn.execute("CREATE ROLE bystander LOGIN")
    for _ in range(2):  # a second deploy updates the job, it does not add one
        out = _deploy("--dsn", shop, "--schedule", "--schedule-as", "maint")
        assert out.returncode == 0, out.stderr
        assert "runs SELECT * FROM stockpool.maintain() in shop as maint every minute" in " ".join(
            out.stdout.split()
        )
    with psycopg.connect(cron_server.dsn, autocommit=True) as cron:
        jobs = cron.execute("SELECT jobname, schedule, command, database, username FROM cron.job").fetchall()
    assert jobs == [
        ("stockpool-maintain:shop", "* * * * *", "SELECT * FROM stockpool.maintain()", "shop", "maint")
    ]

    for role, message in (
        ("maint_nologin", "cannot log in"),
        ("bystander", "may not run stockpool.maintain"),
    ):
        out = _deploy("--dsn", shop, "--schedule", "--schedule-as", role)
        assert out.returncode == 2 and message in " ".join(out.stderr.split()), out.stderr

    with psycopg.connect(shop, autocommit=True) as conn:
        conn.execute("SELECT stockpool.set_stock(1, 1, 1, 10)")
        for _ in range(3):
            conn.execute("SELECT stockpool.reserve_units(1, 1, 1, 1, %s)", (uuid.uuid4(),))
        conn.execute("UPDATE stockpool.holds SET expires_at = now() - interval '1 minute'")
        deadline = time.monotonic() + 150  # the job runs at the top of each minute
        while (
            scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE status = 'held'")
            and time.monotonic() < deadline
        ):
            time.sleep(1)
        assert scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE status = 'expired'") == 3
        assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
    with psycopg.connect(cron_server.dsn, autocommit=True) as cron:
        runs = cron.execute("SELECT DISTINCT status FROM cron.job_run_details").fetchall()
    assert runs == [("succeeded",)], runs


def test_without_pg_cron_schedule_says_so(dsn: str) -> None:
    out = _deploy("--dsn", dsn, "--schedule")
    assert out.returncode == 2
    text = " ".join(out.stderr.split())
    assert "pg_cron is not loaded on this server" in text and "stockpool worker" in text, text
