"""Behind a real pgbouncer 1.18 in transaction mode (Debian 12's), started in
front of the test server: the Python client detects the pooler and never
uses named prepared statements (with detection off, it breaks: the negative
control), the worker runs through it, the deployer refuses it before writing
anything, and `stockpool race --pooler pgbouncer` passes every check while
its naive shape still fails."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typer.testing import CliRunner

from stockpool.cli import app
from stockpool.client import Client, behind_pooler
from stockpool.errors import StockpoolError
from stockpool.install.deploy import deploy
from stockpool.maintenance.worker import Worker, WorkerOptions
from stockpool.server import pooler
from stockpool.server.cluster import SERVER_USER
from stockpool.server.stats import ServerLog
from support import scalar

runner = CliRunner()


@pytest.fixture
def pooled(dsn: str) -> Iterator[pooler.Pooler]:
    with pooler.pgbouncer(dsn, 50) as pb:
        yield pb


def _hammer(dsn: str, pooled_flag: bool | None) -> list[str]:
    """6 clients at once, 30 reservations each, the same statement every time."""
    errors: list[str] = []

    def work() -> None:
        try:
            with Client(dsn, pooled=pooled_flag) as client:
                for _ in range(30):
                    assert client.reserve_units(1, 4001, 1, 1, uuid.uuid4())
        except psycopg.Error as exc:
            errors.append(f"{exc.sqlstate}: {exc}")

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_the_client_detects_the_pooler_and_never_prepares(dsn: str, pooled: pooler.Pooler) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT stockpool.set_stock(1, 4001, 1, 100000)")
        assert not behind_pooler(conn), "the server itself is not a pooler"
    with psycopg.connect(pooled.dsn, autocommit=True, prepare_threshold=None) as conn:
        assert behind_pooler(conn)
    assert _hammer(pooled.dsn, None) == []
    # Negative control: told it is talking to the server, the client prepares
    # its statement after five calls, and other transactions of the session
    # land on server connections that never saw it.
    broken = _hammer(pooled.dsn, False)
    assert broken and all(e.startswith(("26000", "42P05")) for e in broken), broken
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []


def test_the_worker_runs_through_the_pooler(dsn: str, pooled: pooler.Pooler) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT stockpool.set_stock(1, 4011, 1, 100)")
        for _ in range(3):
            conn.execute("SELECT stockpool.reserve_units(1, 4011, 1, 1, %s)", (uuid.uuid4(),))
        conn.execute(
            "UPDATE stockpool.holds SET expires_at = now() - interval '1 minute' WHERE item_id = 4011"
        )
    worker = Worker(pooled.dsn, WorkerOptions())
    with worker.connect() as conn:
        done = [worker.cycle(conn) for _ in range(8)]  # more than psycopg's prepare threshold of 5
    worker.close()
    assert sum(c.expired for c in done) == 3


def test_deploy_through_the_pooler_refuses_and_writes_nothing(empty_db: str) -> None:
    with pooler.pgbouncer(empty_db, 10) as pb, pytest.raises(StockpoolError, match="not the server itself"):
        deploy(pb.dsn)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        assert scalar(conn, "SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = 'stockpool'") == 0


@pytest.mark.slow
def test_race_through_pgbouncer_passes_every_check(dsn: str, server_log: ServerLog, tmp_path: Path) -> None:
    # The race gets only a DSN, so it cannot read the server's log: the test
    # can, and a failure carries the server's account of any deadlock.
    mark = server_log.mark()
    out = runner.invoke(
        app,
        [
            "race",
            "--dsn",
            dsn,
            "--pooler",
            "pgbouncer",
            "--clients",
            "32",
            "--duration",
            "10",
            "--results",
            str(tmp_path),
        ],
    )
    assert out.exit_code == 0, (
        out.output + "\nthe server's deadlock reports: " + repr(server_log.deadlocks_since(mark))
    )
    (report,) = tmp_path.glob("race-*.json")
    data = json.loads(report.read_text())
    assert data["passed"] and data["pooler"].startswith("pgbouncer, transaction mode")
    assert {r["scenario"] for r in data["runs"]} == {"sellout", "soak"}
    naive = runner.invoke(
        app,
        [
            "race",
            "--dsn",
            dsn,
            "--pooler",
            "pgbouncer",
            "--shape",
            "naive",
            "--clients",
            "32",
            "--results",
            str(tmp_path / "naive"),
        ],
    )
    assert naive.exit_code == 1, "the negative control still fails through the pooler"


def test_pgbouncer_reaches_a_local_server_through_its_socket(dsn: str, pg_server: Any) -> None:
    root = str(pg_server.cluster.root)
    bouncer_user = SERVER_USER if os.geteuid() == 0 else None  # as pooler.pgbouncer runs it
    assert pooler.server_address(dsn, bouncer_user) == (root, str(pg_server.port))
    with pooler.pgbouncer(dsn, 10) as pb, psycopg.connect(pb.dsn, prepare_threshold=None) as conn:
        assert pb.server == f"{root}:{pg_server.port}"
        # A server connection over a unix socket has no server address.
        assert scalar(conn, "SELECT pg_catalog.inet_server_addr()") is None
        assert behind_pooler(conn), "a pooler on the server's socket is still a pooler"
    with psycopg.connect(make_conninfo(dsn, host=root)) as conn:
        assert not behind_pooler(conn), "the server's own socket is not a pooler"
    # Negative controls: an OS user who may not enter the socket's directory
    # (the cluster's root is the server user's own, mode 0700), and a server
    # that is not on loopback, keep the DSN's host; a pgbouncer given the TCP
    # address answers with the server's address, so the check above can fail.
    assert oct(Path(root).stat().st_mode & 0o777) == "0o700"
    assert pooler.server_address(dsn, "nobody") == ("127.0.0.1", str(pg_server.port))
    assert pooler.server_address("host=192.0.2.1 port=5432 connect_timeout=1")[0] == "192.0.2.1"
    # hostaddr decides where libpq connects, so a probe could not tell the socket's server.
    with_hostaddr = make_conninfo(dsn, hostaddr="127.0.0.1")
    assert pooler.server_address(with_hostaddr, bouncer_user) == ("127.0.0.1", str(pg_server.port))
    assert "hostaddr" not in conninfo_to_dict(pooler.through(with_hostaddr, 6432)), (
        "clients would miss the pooler"
    )
    with (
        pooler.pgbouncer(dsn, 10, socket=False) as pb,
        psycopg.connect(pb.dsn, prepare_threshold=None) as conn,
    ):
        assert pb.server == f"127.0.0.1:{pg_server.port}"
        assert str(scalar(conn, "SELECT pg_catalog.inet_server_addr()")) == "127.0.0.1"
        assert behind_pooler(conn)
