"""What the toolkit reads, checked without a server: pgbench's logs and
percentiles, the server log's errors and deadlock reports, the wait profile,
the deadlock check, the error and DSN helpers. Every case is exact input and
exact output."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stockpool import race
from stockpool.bench.alternate import alternate, report
from stockpool.errors import first_line, redact
from stockpool.server import pgbench
from stockpool.server import stats as serverstats
from stockpool.server.sampler import WaitProfile
from stockpool.server.stats import ServerLog


def test_percentiles_are_exact_nearest_rank() -> None:
    values = list(range(1, 101))  # 1..100
    assert pgbench.percentile(values, 50) == 50
    assert pgbench.percentile(values, 95) == 95
    assert pgbench.percentile(values, 99) == 99
    assert pgbench.percentile(values, 100) == 100
    assert pgbench.percentile([7], 99) == 7
    assert pgbench.percentile([], 50) is None
    assert pgbench.percentile([1, 2, 3], 50) == 2


def test_pgbench_logs_are_read_from_every_thread_file(tmp_path: Path) -> None:
    # client txn time script epoch us retries
    (tmp_path / "txn.100").write_text("0 1 1500 0 1700000000 000100 0\n0 2 2500 0 1700000000 500000 2\n")
    (tmp_path / "txn.100.1").write_text(
        "1 1 deadlock 0 1700000001 000000 4\n1 2 serialization 0 1700000001 100000 4\n"
        "1 3 1000 0 1700000001 200000 0\n"
    )
    log = pgbench.read_logs(tmp_path)
    assert log.latencies_us == [1000, 1500, 2500]
    assert log.failures == {"40P01": 1, "40001": 1}
    assert (log.retries, log.retried) == (10, 3)
    assert log.first_start_us == 1700000000 * 1_000_000 + 100 - 1500
    assert log.last_end_us == 1700000001 * 1_000_000 + 200000


def test_server_log_errors_by_sqlstate_for_one_run_only(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("old line app=stockpool-race/1/client sqlstate=40P01 ERROR:  deadlock detected\n")
    log = ServerLog(path)
    mark = log.mark()
    stamp = "2026-01-01 00:00:00.000 UTC"
    with path.open("a") as f:
        f.write(
            f"{stamp} [1] app=stockpool-race/2/client sqlstate=40P01 ERROR:  deadlock detected\n"
            f"{stamp} [1] app=stockpool-race/2/client sqlstate=40P01 STATEMENT:  SELECT 1\n"
            f"{stamp} [2] app=stockpool-race/2/sweeper sqlstate=SP004 ERROR:  expired\n"
            f"{stamp} [3] app=stockpool-race/20/client sqlstate=22012 ERROR:  other run\n"
            f"{stamp} [4] app=psql sqlstate=42703 ERROR:  not ours\n"
        )
    counts, messages = log.errors_since(mark, "stockpool-race/2/")
    assert counts == {"40P01": 1, "SP004": 1}
    assert messages["40P01"] == "deadlock detected"


def test_wait_profile_averages_per_sample() -> None:
    profile = WaitProfile(samples=4)
    profile.counts.update({"LWLock:BufferContent": 10, "CPU": 2})
    assert profile.top(2) == [("LWLock:BufferContent", 2.5), ("CPU", 0.5)]
    assert WaitProfile().top() == []


def test_server_log_gives_each_deadlock_with_its_cycle(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    stamp = "2026-01-01 00:00:00.000 UTC"
    path.write_text(f"{stamp} [7] app=x sqlstate=40P01 ERROR:  deadlock detected\n")  # before the mark
    log = ServerLog(path)
    mark = log.mark()
    with path.open("a") as f:
        f.write(
            f"{stamp} [11] app=stockpool-race/2/client sqlstate=00000 LOG:  checkpoint starting\n"
            f"{stamp} [12] app=stockpool-race/2/sweeper sqlstate=40P01 ERROR:  deadlock detected\n"
            f"{stamp} [12] app=stockpool-race/2/sweeper sqlstate=40P01 DETAIL:  Process 12 waits for "
            "ShareLock on transaction 5; blocked by process 13.\n"
            "\tProcess 13 waits for ShareLock on transaction 4; blocked by process 12.\n"
            "\tProcess 12: SELECT stockpool.sweep(500)\n"
            "\tProcess 13: SELECT stockpool.claim(1, 'x')\n"
            f"{stamp} [12] app=race/2/sweeper sqlstate=40P01 HINT:  See server log for query details.\n"
            f"{stamp} [14] app=psql sqlstate=42703 ERROR:  not a deadlock\n"
            f"{stamp} [14] app=psql sqlstate=42703 STATEMENT:  SELECT nope\n"
            f"{stamp} [12] app=race/2/sweeper sqlstate=40P01 STATEMENT:  too late, another report came\n"
            f"{stamp} [20] app=PostgreSQL JDBC Driver sqlstate=40P01 ERROR:  deadlock detected\n"
            f"{stamp} [20] app=PostgreSQL JDBC Driver sqlstate=40P01 CONTEXT:  while locking tuple (0,1)\n"
            f"{stamp} [20] app=PostgreSQL JDBC Driver sqlstate=40P01 LOCATION:  DeadLockReport, deadlock.c\n"
            f"{stamp} [20] app=PostgreSQL JDBC Driver sqlstate=40P01 STATEMENT:  UPDATE t SET x = 1\n"
        )
    reports = log.deadlocks_since(mark)
    assert reports == [
        "ERROR: deadlock detected | DETAIL: Process 12 waits for ShareLock on transaction 5; blocked by "
        "process 13. | Process 13 waits for ShareLock on transaction 4; blocked by process 12. | "
        "Process 12: SELECT stockpool.sweep(500) | Process 13: SELECT stockpool.claim(1, 'x') | "
        "HINT: See server log for query details.",
        "ERROR: deadlock detected | CONTEXT: while locking tuple (0,1) | "
        "LOCATION: DeadLockReport, deadlock.c | STATEMENT: UPDATE t SET x = 1",
    ]
    assert ServerLog(tmp_path / "missing.log").deadlocks_since(0) == []


def test_zero_deadlocks_check_carries_the_servers_report() -> None:
    def measured(deadlocks: int, reports: list[str]) -> race.Measured:
        before = serverstats.Snapshot(wal_lsn="0/0", deadlocks=0)
        after = serverstats.Snapshot(wal_lsn="0/0", deadlocks=deadlocks)
        return race.Measured(
            result=pgbench.PgbenchResult(
                argv=[], exit_code=0, stdout="", stderr="", log=pgbench.TxnLog(), aborts=[], tps=0.0
            ),
            before=before,
            after=after,
            wal_bytes=0,
            waits={},
            errors=Counter(),
            error_messages={},
            deadlock_reports=reports,
        )

    clean = race.zero_deadlocks(measured(0, []))
    assert clean.passed and clean.detail == "0 deadlocks (pg_stat_database)"
    caught = race.zero_deadlocks(measured(1, ["ERROR: deadlock detected | DETAIL: Process 12 waits"]))
    assert not caught.passed
    assert caught.detail.endswith("the server's report: ERROR: deadlock detected | DETAIL: Process 12 waits")
    assert not race.zero_deadlocks(measured(1, [])).passed, "a count without a report still fails"
    # Another database's deadlock in the cluster's log: not this run's.
    other = race.zero_deadlocks(measured(0, ["ERROR: deadlock detected | DETAIL: elsewhere"]))
    assert other.passed and other.detail == "0 deadlocks (pg_stat_database)"


def test_transactions_per_interval_from_the_logs(tmp_path: Path) -> None:
    (tmp_path / "txn.1").write_text(
        "0 1 1000 0 1700000000 000100 0\n0 2 1000 0 1700000004 000000 0\n"
        "0 3 deadlock 0 1700000005 000000 0\n0 4 1000 0 1700000012 000000 0\n"
    )
    (tmp_path / "txn.1.1").write_text("1 1 1000 0 1700000009 999999 0\n")
    log = pgbench.read_logs(tmp_path)
    # successful ends at +0, +4, +9 and +12 s; the failed one is not counted
    assert log.per_interval(5) == [2, 1, 1]
    assert log.per_interval(10) == [3, 1]
    assert pgbench.TxnLog().per_interval(10) == []


def test_first_line_of_an_error() -> None:
    assert first_line(ValueError("one\nDETAIL: two")) == "one"
    assert first_line(ValueError("  padded  \n")) == "padded"
    assert first_line(ValueError()) == "ValueError"


def test_redact_hides_passwords() -> None:
    assert redact("postgresql://app:s3cret@db:5432/shop") == "postgresql://app:***@db:5432/shop"
    assert redact("host=db password='a b' user=app") == "host=db password=*** user=app"
    assert redact("postgresql://db/shop?password=x&sslmode=require") == (
        "postgresql://db/shop?password=***&sslmode=require"
    )
    assert redact("postgresql://app@db/shop") == "postgresql://app@db/shop"


def test_pgbench_threads_follow_cores_then_clients() -> None:
    assert pgbench.threads_for(1, cores=2) == 1  # never more threads than clients
    assert pgbench.threads_for(32, cores=2) == 2
    assert pgbench.threads_for(128, cores=2) == 2
    assert pgbench.threads_for(129, cores=2) == 3
    assert pgbench.threads_for(512, cores=2) == 8
    assert pgbench.threads_for(1000, cores=2) == 16
    assert pgbench.threads_for(100, cores=8) == 8


def test_alternated_cells_swap_order_every_round(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    rates = iter([100.0, 50.0, 40.0, 120.0, 90.0, 90.0])

    def rate(name: str) -> float:
        calls.append(name)
        return next(rates)

    measured = alternate(("A", "B"), rate, 3, "8 clients")
    # Neither side always runs first (a drifting machine would favour it).
    assert calls == ["A", "B", "B", "A", "A", "B"]
    assert measured == [{"A": 100.0, "B": 50.0}, {"B": 40.0, "A": 120.0}, {"A": 90.0, "B": 90.0}]
    assert report("8 clients", measured, "B", "A") == [0.5, 40.0 / 120.0, 1.0]
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "8 clients, round 1, B: 50/s"
    assert out[-1] == "8 clients: B / A [0.5, 0.33, 1.0], median 0.50"


def test_alternated_cells_rotate_beyond_two(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []

    def rate(name: str) -> float:
        calls.append(name)
        return {"A": 10.0, "B": 20.0, "C": 5.0}[name]

    measured = alternate(("A", "B", "C"), rate, 3, "32 clients")
    # Each round starts one cell further on: every cell starts once in 3 rounds.
    assert calls == ["A", "B", "C", "B", "C", "A", "C", "A", "B"]
    assert measured == [{"A": 10.0, "B": 20.0, "C": 5.0}] * 3
    report("32 clients", measured, "C", "A", note="the bar: >= 0.7")
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "32 clients: C / A [0.5, 0.5, 0.5], median 0.50 (the bar: >= 0.7)"
