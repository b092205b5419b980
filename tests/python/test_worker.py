"""``stockpool worker``, run as a real process against a real server: it
expires holds and tops up pools, two of them share the work, SIGTERM ends it
cleanly, it carries on after a server restart, and it refuses bad flags, an
unknown role, a database without stockpool and a role without the right."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from stockpool.install.deploy import deploy
from stockpool.maintenance.worker import backoff
from stockpool.server import cluster as clusters
from support import scalar

pytestmark = pytest.mark.timeout(300)
WORKER_ROLE = "test_worker_login"


def _stockpool(*args: str) -> list[str]:
    return [sys.executable, "-m", "stockpool.cli", *args]


def _as_worker(dsn: str) -> str:
    """The DSN as a login role that is a member of stockpool_worker, and nothing else."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = scalar(conn, "SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = %s", (WORKER_ROLE,))
        if not exists:
            conn.execute(f"CREATE ROLE {WORKER_ROLE} LOGIN IN ROLE stockpool_worker")
    return make_conninfo(dsn, user=WORKER_ROLE)


@contextlib.contextmanager
def running(dsn: str, log: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    with log.open("w") as out:
        proc = subprocess.Popen(
            _stockpool("worker", "--dsn", dsn, "--interval", "0.2", *args), stdout=out, stderr=out, text=True
        )
        try:
            # A signal is only handled once the worker says it has started:
            # one sent before that would find Python's default action.
            _until(lambda: proc.poll() is not None or "started:" in log.read_text(), 60)
            assert proc.poll() is None, log.read_text()
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)


def _overdue(conn: psycopg.Connection, item: int, holds: int, stock: int = 1000) -> None:
    conn.execute("SELECT stockpool.set_stock(1, %s, 1, %s)", (item, stock))
    for _ in range(holds):
        conn.execute("SELECT stockpool.reserve_units(1, %s, 1, 1, %s)", (item, uuid.uuid4()))
    conn.execute(
        "UPDATE stockpool.holds SET expires_at = now() - interval '1 minute' WHERE item_id = %s", (item,)
    )


def _until(check: object, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_the_worker_expires_holds_and_tops_up_pools(dsn: str, tmp_path: Path) -> None:
    worker_dsn = _as_worker(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _overdue(conn, 3001, 25)
        conn.execute("SELECT stockpool.set_stock(1, 3002, 1, 100)")
        # 8 pooled: at or below the mark (12, for the least level of 16), so due for a top-up
        conn.execute("SELECT stockpool.replenish_pool(1, 3002, 1, 8)")
        conn.execute("UPDATE stockpool.stock SET pool_target = 10 WHERE item_id = 3002")
        log = tmp_path / "worker.log"
        with running(worker_dsn, log) as proc:
            _until(
                lambda: (
                    scalar(
                        conn, "SELECT count(*) FROM stockpool.holds WHERE item_id = 3001 AND status = 'held'"
                    )
                    == 0
                )
            )
            _until(lambda: scalar(conn, "SELECT pooled FROM stockpool.stock_levels WHERE item_id = 3002") > 8)
            application = scalar(
                conn,
                "SELECT count(*) FROM pg_catalog.pg_stat_activity"
                " WHERE application_name = 'stockpool-worker'",
            )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        assert application == 1
        assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
    text = log.read_text()
    refilled = [
        int(line.split("refilled ")[1].split()[0]) for line in text.splitlines() if "refilled " in line
    ]
    assert "expired 25 holds" in text and sum(refilled) > 0, text
    assert "SIGTERM: finishing the current cycle" in text and "stopped after" in text, text


def test_two_workers_share_the_work_without_errors(dsn: str, tmp_path: Path) -> None:
    worker_dsn = _as_worker(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _overdue(conn, 3011, 400)
        with (
            running(worker_dsn, tmp_path / "a.log", "--batch", "20") as a,
            running(worker_dsn, tmp_path / "b.log", "--batch", "20") as b,
        ):
            _until(
                lambda: (
                    scalar(
                        conn, "SELECT count(*) FROM stockpool.holds WHERE item_id = 3011 AND status = 'held'"
                    )
                    == 0
                )
            )
            for proc in (a, b):
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=30) == 0
        assert (
            scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE item_id = 3011 AND status = 'expired'")
            == 400
        )
        assert scalar(conn, "SELECT held FROM stockpool.stock_levels WHERE item_id = 3011") == 0
        assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
    logs = [(tmp_path / name).read_text() for name in ("a.log", "b.log")]
    expired = [
        sum(int(line.split("expired ")[1].split()[0]) for line in text.splitlines() if "expired " in line)
        for text in logs
    ]
    assert sum(expired) == 400, logs  # every hold expired once, by one of them
    assert all("ERROR" not in text for text in logs), logs


def test_sigterm_mid_cycle_leaves_no_partial_state(dsn: str, tmp_path: Path) -> None:
    """A long cycle (thousands of holds in batches) is interrupted by SIGTERM:
    the cycle's transaction completes, the worker exits 0, and the books add up."""
    worker_dsn = _as_worker(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT stockpool.set_stock(1, 3021, 1, 100000)")
        conn.execute(
            "SELECT count(stockpool.reserve_units(1, 3021, 1, 1, gen_random_uuid()))"
            " FROM generate_series(1, 6000)"
        )
        conn.execute(
            "UPDATE stockpool.holds SET expires_at = now() - interval '1 minute' WHERE item_id = 3021"
        )
        log = tmp_path / "worker.log"
        with running(worker_dsn, log, "--batch", "50", "--budget-ms", "60000") as proc:
            _until(
                lambda: (
                    scalar(
                        conn,
                        "SELECT count(*) FROM pg_catalog.pg_stat_activity"
                        " WHERE application_name = 'stockpool-worker' AND state = 'active'",
                    )
                    == 1
                )
            )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        expired = scalar(
            conn, "SELECT count(*) FROM stockpool.holds WHERE item_id = 3021 AND status = 'expired'"
        )
        assert expired > 0, "the cycle in flight was finished, not abandoned"
        assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
    assert f"expired {expired} holds" in log.read_text()


def test_the_worker_carries_on_after_a_server_restart(tmp_path: Path) -> None:
    with clusters.throwaway(clusters.settings_for_clients(20)) as cl:
        deploy(cl.dsn)
        worker_dsn = _as_worker(cl.dsn)
        log = tmp_path / "worker.log"
        with running(worker_dsn, log) as proc:
            with psycopg.connect(cl.dsn, autocommit=True) as conn:
                _overdue(conn, 3031, 5)
                _until(
                    lambda: scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE status = 'held'") == 0
                )
            cl.stop("immediate")
            time.sleep(1.0)
            cl.start()
            with psycopg.connect(cl.dsn, autocommit=True) as conn:
                _overdue(conn, 3032, 7)
                _until(
                    lambda: scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE status = 'held'") == 0,
                    60,
                )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    text = log.read_text()
    assert "connection lost" in text and "reconnected after" in text, text
    assert "expired 7 holds" in text, text


def test_once_runs_one_cycle(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        _overdue(conn, 3041, 3)
    out = subprocess.run(
        _stockpool("worker", "--dsn", _as_worker(dsn), "--once"), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "expired 3 holds" in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "0"], "--interval must be positive"),
        (["--batch", "-1"], "--batch must be positive"),
        (["--log-level", "loud"], "--log-level must be one of"),
    ],
)
def test_bad_flags_exit_2(dsn: str, args: list[str], message: str) -> None:
    out = subprocess.run(
        _stockpool("worker", "--dsn", dsn, *args), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and message in " ".join(out.stderr.split()), out.stderr


def test_refusals_exit_2(dsn: str, empty_db: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not scalar(conn, "SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = 'test_nobody_login'"):
            conn.execute("CREATE ROLE test_nobody_login LOGIN")
    cases = [
        (make_conninfo(dsn, user="no_such_role", password="s3cret-pw"), "cannot connect"),
        (empty_db, "has no stockpool schema"),
        (make_conninfo(dsn, user="test_nobody_login"), "may not run stockpool.maintain"),
    ]
    for target, message in cases:
        for extra in ([], ["--once"]):
            out = subprocess.run(
                _stockpool("worker", "--dsn", target, *extra), capture_output=True, text=True, timeout=60
            )
            assert out.returncode == 2, (target, extra, out.stderr)
            assert message in " ".join(out.stderr.split()), out.stderr
            assert "s3cret-pw" not in out.stderr, "the DSN's password is never shown"


def test_once_without_a_server_exits_1() -> None:
    port = clusters.free_port()
    out = subprocess.run(
        _stockpool("worker", "--dsn", f"postgresql://postgres@127.0.0.1:{port}/x", "--once"),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PGCONNECT_TIMEOUT": "2"},
    )
    assert out.returncode == 1 and "cannot reach" in out.stderr, out.stderr


def test_backoff_is_capped_and_jittered() -> None:
    import random

    rng = random.Random(7)
    delays = [backoff(n, 0.5, 30.0, rng) for n in range(1, 12)]
    assert all(0.25 <= d <= 0.5 for d in delays[:1])
    assert all(15.0 <= d <= 30.0 for d in delays[8:]), delays  # capped at 30 s, never below half of it
    assert len({round(d, 6) for d in delays[8:]}) == 3, "jittered, not the same delay each time"
    assert delays[1] > delays[0] / 2 and delays[4] > delays[1]
