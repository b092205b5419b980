"""The failover soak: a primary dies mid-run and its standby takes over.

A primary and a streaming standby (synchronous by default; see
server/replica.py) on throwaway clusters, stockpool deployed. Buyers'
threads (race/journal.py) run checkouts through the Python client, and a
maintenance worker runs beside them, all through one multi-host DSN with
``target_session_attrs=read-write``. ``kill_at`` seconds in, every process of
the primary is SIGKILLed and the standby promoted at once (a failover
manager would first take its time to notice). The clients lose their
connections and retry what is idempotent with the same checkout id; libpq
finds the promoted standby; the worker reconnects.

Afterwards, on the new primary, in one snapshot: every outcome a client was
told is there (:func:`journal.missing`), ``check_invariants()`` is clean and
the ledger equals its movement history (verify.py). The clients and the
worker carried on (each committed on the new primary), and the time from
the kill to the first commit acknowledged by the new primary is reported.

The check cannot pass for want of evidence: the old primary must have
acknowledged outcomes before the kill, and every client and the worker must
have committed on the new one. With a synchronous standby, replication must
have been synchronous (``sync_state``) before the kill.

``hold_back``: the standby is cut off from its primary that many seconds
before the kill (a network partition). Synchronous, the primary then
acknowledges nothing more (its commits wait for the standby until the kill;
the clients retry them on the new primary), and a check says so. The
negative control (``synchronous=False``, the command line's
``--async-standby``): an asynchronous standby cut off ``HOLD_BACK`` s before
the kill misses the commits the primary goes on acknowledging, and the check
lists exactly which.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from rich.progress import Progress

from stockpool.checks import Check
from stockpool.errors import StockpoolError
from stockpool.install.deploy import deploy
from stockpool.maintenance.worker import LOG as WORKER_LOG
from stockpool.maintenance.worker import WorkerOptions
from stockpool.race import verify
from stockpool.race.harness import HELPER_SESSIONS, LOCATION, SHOP, validate
from stockpool.race.journal import (
    UNKNOWN,
    Answer,
    Missing,
    Mix,
    Shopper,
    WatchedWorker,
    journal_check,
    missing,
)
from stockpool.race.report import RunReport, latency_ms
from stockpool.server import cluster as clusters
from stockpool.server import replica, stats
from stockpool.server.pgbench import TxnLog
from stockpool.server.target import connect

HOLD_BACK = 1.0  # the negative control: seconds its asynchronous standby is cut off before the kill


@dataclass(frozen=True)
class FailoverOptions:
    """The failover soak's sizes and timing."""

    clients: int = 8
    duration: int = 20  # seconds of load, kill included
    kill_at: float | None = None  # seconds in; default: a third of the duration
    synchronous: bool = True  # False: an asynchronous standby (with hold_back: the negative control)
    hold_back: float | None = None  # seconds the standby is cut off before the kill; None: never
    items: int = 20
    stock: int = 1_000_000
    claim_pct: int = 60
    release_pct: int = 25
    abandon_ttl: float = 1.0

    @property
    def kill_s(self) -> float:
        return self.kill_at if self.kill_at is not None else self.duration / 3

    def validate(self) -> None:
        validate(clients=(self.clients, 1), duration=(self.duration, 3), items=(self.items, 1))
        if not 0 < self.kill_s < self.duration:
            raise StockpoolError(
                f"the kill must come within the run (0-{self.duration} s), got {self.kill_s:g}"
            )
        if self.hold_back is not None and not 0 < self.hold_back < self.kill_s:
            raise StockpoolError(
                f"the standby cannot be cut off {self.hold_back:g} s before a kill at {self.kill_s:g} s: "
                "the cut-off must come after the start and before the kill",
                hint="a longer duration (the kill comes a third of the way in)",
            )
        if self.claim_pct + self.release_pct > 100 or min(self.claim_pct, self.release_pct) < 0:
            raise StockpoolError("claim and release percentages must be >= 0 and add up to at most 100")

    def params(self) -> dict[str, Any]:
        return {**asdict(self), "kill_at": round(self.kill_s, 3)}


@dataclass
class Timeline:
    """What the failover did, in seconds into the run."""

    kill_s: float = 0.0
    promoted_s: float = 0.0
    cut_s: float | None = None  # when the standby was cut off (it received nothing after)
    lag_bytes: int = 0  # WAL the standby had not received when the primary died
    replication: str = ""  # pg_stat_replication's sync_state just before the cut-off or the kill
    first_commit_s: float | None = None  # the first commit the new primary acknowledged

    @property
    def promote_s(self) -> float:
        return self.promoted_s - self.kill_s

    @property
    def kill_to_first_commit_s(self) -> float | None:
        return None if self.first_commit_s is None else self.first_commit_s - self.kill_s


@dataclass
class FailoverResult:
    report: RunReport
    answers: list[Answer]  # every answer every client was given
    missing: list[Missing]  # the acknowledged ones the new primary does not show
    timeline: Timeline
    server_version: str

    @property
    def passed(self) -> bool:
        return self.report.passed


def failover(opts: FailoverOptions, progress: Progress | None = None) -> FailoverResult:
    """Start a primary and a standby on throwaway clusters, deploy stockpool,
    run the failover soak; both clusters are removed afterwards."""
    with pair(opts) as (primary, standby):
        return failover_soak(primary, standby, opts, progress)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def pair(opts: FailoverOptions) -> Iterator[tuple[clusters.Cluster, clusters.Cluster]]:
    """A throwaway primary with stockpool deployed, and its streaming standby
    (synchronous or not, as ``opts`` says), sized for the run; both removed on exit."""
    opts.validate()
    settings = clusters.settings_for_clients(opts.clients + HELPER_SESSIONS)
    settings["log_line_prefix"] = stats.LOG_LINE_PREFIX
    with clusters.throwaway(settings) as primary:
        deploy(primary.dsn)
        with replica.standby_of(primary, synchronous=opts.synchronous) as standby:
            yield primary, standby


def failover_soak(
    primary: clusters.Cluster,
    standby: clusters.Cluster,
    opts: FailoverOptions,
    progress: Progress | None = None,
) -> FailoverResult:
    """The soak on a running pair: ``primary`` is killed, ``standby`` promoted."""
    dsn = replica.multi_host_dsn([primary, standby])
    keys = verify.KeyRange((SHOP,), 1, opts.items, LOCATION)
    with connect(dsn) as conn:
        conn.execute(
            "SELECT stockpool.set_stock(%s, i, %s, %s) FROM pg_catalog.generate_series(1, %s) AS i",
            (SHOP, LOCATION, opts.stock, opts.items),
        )
        before = stats.take(conn)
        version = stats.server_version(conn)
    mix = Mix(
        keys, opts.claim_pct, opts.release_pct, timedelta(minutes=5), timedelta(seconds=opts.abandon_ttl)
    )
    stop = threading.Event()
    started = time.monotonic()
    shoppers = [Shopper(n, dsn, mix, started, stop) for n in range(opts.clients)]
    worker = WatchedWorker(dsn, WorkerOptions(interval=0.5, backoff_base=0.2, backoff_cap=2.0), started)
    threads: list[threading.Thread] = [
        *shoppers,
        threading.Thread(target=worker.run, name="worker", daemon=True),
    ]
    clock = _Clock(started, opts, progress)
    with _worker_log() as worker_log:
        for thread in threads:
            thread.start()
        try:
            timeline = _fail_over(primary, standby, opts, clock)
            clock.wait_until(opts.duration)
        finally:
            stop.set()
            worker.stop()
            for thread in threads:
                thread.join(timeout=60)
            if not any(t.is_alive() for t in threads):
                worker.close()
    elapsed = time.monotonic() - started
    failures = [f"{s.name}: {s.failure!r}" for s in shoppers if s.failure]
    failures += [f"worker: {worker.failure!r}"] if worker.failure else []
    failures += [f"{t.name} did not stop" for t in threads if t.is_alive()]
    if failures:
        raise StockpoolError("the failover soak's threads failed: " + "; ".join(failures))
    answers = sorted((a for s in shoppers for a in s.answers), key=lambda a: a.at)
    with connect(standby.dsn) as conn:
        with verify.snapshot(conn):
            lost, unasked = missing(conn, keys, answers)
            checks = [
                journal_check(answers, lost, unasked, primary.port),
                verify.invariants(conn),
                verify.ledger_history(conn, keys),
            ]
        wal = stats.wal_bytes(conn, before, stats.take(conn))
    first = min((a.at for a in answers if a.acknowledged and a.port == standby.port), default=None)
    timeline.first_commit_s = first
    while_cut = _acknowledged_while_cut_off(answers, timeline, primary.port)
    checks += [
        *([_waited_for_standby(timeline, while_cut)] if opts.synchronous else []),
        _error_answers(answers),
        _clients_carried_on(shoppers, standby.port),
        _worker_carried_on(worker, standby.port, worker_log),
        _first_commit(timeline),
    ]
    report = _report(opts, answers, lost, timeline, worker, shoppers, checks, elapsed, wal, while_cut)
    return FailoverResult(report, answers, lost, timeline, version)


class _Clock:
    """The run's clock, and its progress bar."""

    def __init__(self, started: float, opts: FailoverOptions, progress: Progress | None) -> None:
        self.started = started
        self.progress = progress
        kind = "synchronous" if opts.synchronous else "asynchronous, held back"
        self.label = f"failover: {opts.clients} clients, {kind} standby, kill at {opts.kill_s:.1f} s"
        self.task = progress.add_task(self.label, total=opts.duration) if progress else None

    def now(self) -> float:
        return time.monotonic() - self.started

    def wait_until(self, at: float) -> None:
        while (left := at - self.now()) > 0:
            time.sleep(min(left, 0.1))
            if self.progress is not None and self.task is not None:
                self.progress.update(self.task, completed=min(self.now(), at))

    def say(self, what: str) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=f"{self.label}; {what}")


def _fail_over(
    primary: clusters.Cluster, standby: clusters.Cluster, opts: FailoverOptions, clock: _Clock
) -> Timeline:
    """Kill the primary at ``kill_s`` (the standby cut off ``hold_back``
    before, if given), then promote the standby at once."""
    timeline = Timeline()
    if opts.hold_back is not None:
        clock.wait_until(opts.kill_s - opts.hold_back)
        timeline.replication = _sync_state(primary)
        replica.cut_off(standby)
        timeline.cut_s = clock.now()
        clock.say(f"standby cut off at {timeline.cut_s:.1f} s")
    clock.wait_until(opts.kill_s)
    if opts.hold_back is None:
        timeline.replication = _sync_state(primary)
    timeline.lag_bytes = replica.lag_bytes(primary, standby)
    timeline.kill_s = clock.now()
    primary.crash()
    replica.promote(standby)
    timeline.promoted_s = clock.now()
    clock.say(f"primary killed at {timeline.kill_s:.1f} s, standby promoted in {timeline.promote_s:.2f} s")
    return timeline


def _sync_state(primary: clusters.Cluster) -> str:
    """The primary's standbys' ``sync_state`` (``sync``, ``async``), as it sees them now."""
    with connect(primary.dsn) as conn:
        row = conn.execute(
            "SELECT pg_catalog.string_agg(sync_state, ',') FROM pg_catalog.pg_stat_replication"
        ).fetchone()
    return str(row[0]) if row and row[0] else "no standby connected"


@contextlib.contextmanager
def _worker_log() -> Iterator[list[str]]:
    """The worker's warnings and errors (connection lost, reconnected, a failed
    cycle), kept for the report instead of printed over the progress bar."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Keep(logging.WARNING)
    WORKER_LOG.addHandler(handler)
    try:
        yield lines
    finally:
        WORKER_LOG.removeHandler(handler)


def _acknowledged_while_cut_off(answers: Sequence[Answer], timeline: Timeline, old_port: int) -> int | None:
    """Calls sent to the old primary after its standby was cut off, and
    acknowledged by it (None: the standby was never cut off)."""
    if timeline.cut_s is None:
        return None
    cut = timeline.cut_s
    return sum(a.acknowledged and a.port == old_port and a.at - a.took > cut for a in answers)


def _waited_for_standby(timeline: Timeline, while_cut: int | None) -> Check:
    """Synchronous: the standby was ``sync``; cut off, the primary acknowledged
    no call sent after that (each commit waited for the standby until the kill)."""
    when = "cut-off" if while_cut is not None else "kill"
    detail = f"sync_state {timeline.replication} before the {when}"
    if while_cut is not None:
        detail += f"; {while_cut} calls sent after the cut-off acknowledged by the old primary"
    return Check("commits waited for the standby", timeline.replication == "sync" and not while_cut, detail)


def _error_answers(answers: Sequence[Answer]) -> Check:
    errors = Counter(a.outcome for a in answers if not a.acknowledged and a.outcome != UNKNOWN)
    detail = ", ".join(f"{state} x{n}" for state, n in sorted(errors.items()))
    return Check("no error answers", not errors, detail or "none: every call answered as expected")


def _clients_carried_on(shoppers: Sequence[Shopper], port: int) -> Check:
    after = [sum(a.acknowledged and a.port == port for a in s.answers) for s in shoppers]
    done = sum(n > 0 for n in after)
    return Check(
        "clients carried on",
        done == len(shoppers),
        f"{done} of {len(shoppers)} clients committed on the new primary "
        f"({sum(after)} acknowledged calls there, the fewest by one client {min(after, default=0)})",
    )


def _worker_carried_on(worker: WatchedWorker, port: int, log: Sequence[str]) -> Check:
    after = [cycle for _, on, cycle in worker.ran if on == port]
    before = len(worker.ran) - len(after)
    errors = [line for line in log if line.startswith("cycle failed")]
    reconnected = [line for line in log if line.startswith("reconnected")]
    return Check(
        "worker carried on",
        bool(after) and not errors,
        f"{before} cycles on the old primary, {len(after)} on the new one "
        f"({sum(c.expired for c in after)} holds expired there); "
        + (reconnected[0] if reconnected else "no reconnection logged")
        + (f"; {len(errors)} failed cycles: {errors[0]}" if errors else ""),
    )


def _first_commit(timeline: Timeline) -> Check:
    name = "kill to first new commit"
    if timeline.kill_to_first_commit_s is None:
        return Check(name, False, "no commit was acknowledged by the new primary")
    return Check(
        name,
        True,
        f"{timeline.kill_to_first_commit_s:.2f} s (pg_promote returned after {timeline.promote_s:.2f} s; "
        f"the standby {timeline.lag_bytes:,} bytes of WAL behind at the kill)",
    )


def _report(
    opts: FailoverOptions,
    answers: Sequence[Answer],
    lost: Sequence[Missing],
    timeline: Timeline,
    worker: WatchedWorker,
    shoppers: Sequence[Shopper],
    checks: list[Check],
    elapsed: float,
    wal: int,
    while_cut: int | None,
) -> RunReport:
    acked = [a for a in answers if a.acknowledged]
    outcomes = Counter(a.outcome for a in answers)
    errors = {
        state: n
        for state, n in outcomes.items()
        if state not in ("reserved", "refused", "claimed", "released")
    }
    counts: dict[str, Any] = {
        "checkouts": len({a.checkout_id for a in answers}),
        "acknowledged": len(acked),
        **{k: outcomes.get(k, 0) for k in ("reserved", "refused", "claimed", "released", "unknown")},
        "lost": len(lost),
        "kill_s": round(timeline.kill_s, 3),
        "cut_off_s": _rounded(timeline.cut_s),
        "promote_s": round(timeline.promote_s, 3),
        "kill_to_first_commit_s": _rounded(timeline.kill_to_first_commit_s),
        "replication_before_kill": timeline.replication,
        "acknowledged_while_cut_off": while_cut,
        "standby_lag_bytes_at_kill": timeline.lag_bytes,
        "worker_cycles": len(worker.ran),
        "client_retries": sum(s.client.retries for s in shoppers),
        "missing": [{"checkout_id": str(m.checkout_id), "told": m.told, "found": m.found} for m in lost],
    }
    return RunReport(
        scenario="failover",
        shape="stockpool" if opts.synchronous else "async standby",
        clients=opts.clients,
        run_id=0,
        elapsed_s=elapsed,
        transactions=len(acked),
        reservations=outcomes.get("reserved", 0),
        latency_ms=latency_ms(TxnLog(latencies_us=sorted(int(a.took * 1e6) for a in acked))),
        latency_of="one API call (reserve, claim or release), retries across the failover included",
        errors=dict(sorted(errors.items())),
        retries=counts["client_retries"],
        wal_bytes=wal,
        checks=checks,
        counts=counts,
        params=opts.params(),
    )


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)
