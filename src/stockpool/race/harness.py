"""What every race scenario shares: the harness, one measured pgbench run,
the report of a run and the checks every scenario makes.

Every pgbench transaction that reserves also writes what its client saw into
the harness's own schema (``stockpool_race``, race/pgbench/race_schema.sql) in
the same transaction, so the checks can hold stockpool.holds to exactly what
clients saw committed.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb
from rich.progress import Progress

from stockpool.checks import Check
from stockpool.errors import StockpoolError
from stockpool.race.report import RunReport, latency_ms
from stockpool.server import pgbench, stats
from stockpool.server.sampler import Periodic, WaitSampler
from stockpool.server.target import connect

PGBENCH_DIR = Path(__file__).resolve().parent / "pgbench"

SCENARIOS = ("sellout", "soak", "hot", "seats")
SHAPES = ("stockpool", "naive")
APP_PREFIX = "stockpool-race/"
# Sessions a run opens beside its pgbench clients: the harness's own
# connection, the wait sampler, the invariant checker, a sweeper, a replenisher.
HELPER_SESSIONS = 5
# Each run gets fresh stock keys: item ids run_id * ITEM_STRIDE + 1 ...
ITEM_STRIDE = 1_000_000
SHOP, LOCATION = 1, 1
HOT_STOCK = 100_000_000
NAIVE_HOT_STOCK = 100_000_000
MAX_TRIES = 5  # pgbench retries 40001/40P01 up to this many tries


def pgbench_script(name: str) -> Path:
    path = PGBENCH_DIR / f"{name}.sql"
    if not path.exists():
        raise StockpoolError(f"pgbench script {path} not found")
    return path


@dataclass
class Harness:
    """What the runs on one database share."""

    dsn: str  # the server itself: setup, checks and observers
    log_root: Path  # pgbench per-transaction logs, one directory per run
    server_log: stats.ServerLog | None = None  # only for clusters we started
    progress: Progress | None = None
    sample_interval: float = 0.2
    installed: bool = False
    # Where the clients and the back-office sessions connect: the server, or a
    # transaction pooler in front of it (then no named prepared statements).
    client_dsn: str = ""

    @property
    def clients(self) -> str:
        return self.client_dsn or self.dsn

    def install(self) -> None:
        """Create the harness schema (idempotent; serialised by an advisory lock)."""
        if self.installed:
            return
        with connect(self.dsn) as conn, conn.transaction():
            conn.execute("SELECT pg_catalog.pg_advisory_xact_lock(hashtext('stockpool_race'))")
            conn.execute(pgbench_script("race_schema").read_bytes())
        self.installed = True

    def new_run(
        self, conn: psycopg.Connection[TupleRow], scenario: str, shape: str, params: dict[str, Any]
    ) -> int:
        row = conn.execute(
            "INSERT INTO stockpool_race.runs (scenario, shape, params) VALUES (%s, %s, %s) RETURNING run_id",
            (scenario, shape, Jsonb(params)),
        ).fetchone()
        assert row is not None
        return int(row[0])


@contextlib.contextmanager
def temporary_harness(dsn: str, **kwargs: Any) -> Iterator[Harness]:
    """A :class:`Harness` with a temporary log directory, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="stockpool-race-"))
    try:
        yield Harness(dsn=dsn, log_root=root, **kwargs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def app_name(run_id: int, role: str = "client") -> str:
    return f"{APP_PREFIX}{run_id}/{role}"


def run_pattern(run_id: int) -> str:
    return f"{APP_PREFIX}{run_id}/%"


@dataclass
class Measured:
    """One pgbench run with everything measured around it."""

    result: pgbench.PgbenchResult
    before: stats.Snapshot
    after: stats.Snapshot
    wal_bytes: int
    waits: dict[str, Any]
    errors: Counter[str]
    error_messages: dict[str, str]
    # The server's account of each deadlock (only on a cluster we started).
    deadlock_reports: list[str] = field(default_factory=list)

    @property
    def deadlocks(self) -> int:
        return self.after.deadlocks - self.before.deadlocks


def measure(
    h: Harness,
    run_id: int,
    label: str,
    script: str,
    clients: int,
    *,
    transactions: int | None = None,
    seconds: int | None = None,
    defines: dict[str, object],
    beside: Sequence[Periodic] = (),
) -> Measured:
    """Run pgbench under the wait sampler, with helper threads beside it."""
    with connect(h.dsn) as conn:
        before = stats.take(conn)
    mark = h.server_log.mark() if h.server_log else 0
    on_progress = _progress(h, label, clients, transactions, seconds)
    log_dir = h.log_root / f"run-{run_id}"
    for helper in beside:
        helper.start()
    try:
        with WaitSampler(h.dsn, f"{APP_PREFIX}{run_id}/", h.sample_interval) as sampler:
            result = pgbench.run(
                h.clients,
                pgbench_script(script),
                clients,
                log_dir=log_dir,
                transactions=transactions,
                seconds=seconds,
                defines=defines,
                max_tries=MAX_TRIES,
                application_name=app_name(run_id),
                on_progress=on_progress,
            )
    finally:
        for helper in beside:
            helper.stop()
    on_progress(-1.0, 0.0)  # done

    with connect(h.dsn) as conn:
        stats.wait_for_sessions_gone(conn, run_pattern(run_id))
        after = stats.take(conn)
        wal = stats.wal_bytes(conn, before, after)

    errors, messages, deadlock_reports = _errors(h, run_id, mark, result, beside)
    return Measured(
        result=result,
        before=before,
        after=after,
        wal_bytes=wal,
        waits=sampler.profile.as_json(),
        errors=errors,
        error_messages=messages,
        deadlock_reports=deadlock_reports,
    )


def _progress(
    h: Harness, label: str, clients: int, transactions: int | None, seconds: int | None
) -> Callable[[float, float], None]:
    """A task on the harness's progress bar, moved by pgbench's -P lines;
    ``elapsed < 0`` completes it."""
    if h.progress is None:
        return lambda elapsed, tps: None
    progress = h.progress
    total = float(seconds if seconds is not None else clients * (transactions or 0))
    task = progress.add_task(label, total=total or 1.0)
    done = [0.0, 0.0]  # transactions so far (estimated from -P), last elapsed

    def on_progress(elapsed: float, tps: float) -> None:
        if elapsed < 0:
            progress.update(task, completed=progress.tasks[task].total)
        elif seconds is not None:
            progress.update(task, completed=elapsed)
        else:
            done[0] += tps * (elapsed - done[1])
            done[1] = elapsed
            progress.update(task, completed=done[0])

    return on_progress


def _errors(
    h: Harness, run_id: int, mark: int, result: pgbench.PgbenchResult, beside: Sequence[Periodic]
) -> tuple[Counter[str], dict[str, str], list[str]]:
    """Errors by SQLSTATE, a message for each, and the server's deadlock
    reports: from the server log when the harness started the cluster, else
    from what pgbench and the helper sessions saw."""
    if h.server_log is not None:
        logged, first = h.server_log.errors_since(mark, f"{APP_PREFIX}{run_id}/")
        return logged, first, h.server_log.deadlocks_since(mark)
    errors = Counter(result.log.failures)
    messages: dict[str, str] = {}
    for abort in result.aborts:
        errors["client abort"] += 1
        messages.setdefault("client abort", abort.message)
    for helper in beside:
        errors.update(helper.errors)
        for state, message in helper.messages.items():
            messages.setdefault(state, message)
    return errors, messages, []


def make_report(
    scenario: str,
    shape: str,
    clients: int,
    run_id: int,
    m: Measured,
    latency_of: str,
    checks: list[Check],
    counts: dict[str, Any],
    params: dict[str, Any],
) -> RunReport:
    log = m.result.log
    return RunReport(
        scenario=scenario,
        shape=shape,
        clients=clients,
        run_id=run_id,
        elapsed_s=log.elapsed_s,
        transactions=log.succeeded,
        reservations=log.succeeded,
        latency_ms=latency_ms(log),
        latency_of=latency_of,
        errors=dict(sorted(m.errors.items())),
        error_messages=m.error_messages,
        failed=log.failed,
        retries=log.retries,
        aborted_clients=len(m.result.aborts),
        waits=m.waits,
        pool=stats.pool_health(m.before, m.after),
        wal_bytes=m.wal_bytes,
        checks=checks,
        counts=counts,
        params=params,
    )


def no_errors(m: Measured, expected_transactions: int | None = None) -> Check:
    log = m.result.log
    problems = []
    if expected_transactions is not None and log.succeeded + log.failed != expected_transactions:
        problems.append(f"{log.succeeded + log.failed} of {expected_transactions} transactions ran")
    if log.failed:
        problems.append(f"{log.failed} failed after {MAX_TRIES} tries")
    if m.result.aborts:
        problems.append(f"{len(m.result.aborts)} clients aborted: {m.result.aborts[0].message}")
    if m.errors:
        problems.append("errors " + ", ".join(f"{k} x{v}" for k, v in sorted(m.errors.items())))
    detail = "; ".join(problems) or f"{log.succeeded} transactions, {log.retries} retries, no error"
    return Check("no failed transactions or errors", not problems, detail)


def zero_deadlocks(m: Measured) -> Check:
    detail = f"{m.deadlocks} deadlocks (pg_stat_database)"
    if m.deadlocks and m.deadlock_reports:
        # The cycle, as the server logged it: what to fix, not just a count.
        # (The log covers the whole cluster, the count this database.)
        detail += f"; the server's report: {m.deadlock_reports[0]}"
    return Check("zero deadlocks", m.deadlocks == 0, detail)


def shape_tag(shape: str) -> str:
    return "" if shape == "stockpool" else f" ({shape})"


def validate(**sizes: tuple[int, int]) -> None:
    """Each value must be >= its minimum: one clear line when not."""
    for name, (value, minimum) in sizes.items():
        if value < minimum:
            flag = "--" + name.replace("_", "-")
            raise StockpoolError(f"{flag} must be at least {minimum}, got {value}")
