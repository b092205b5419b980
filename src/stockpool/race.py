"""Races of the installed package under load, driven through pgbench.

Scenarios (each a function that returns what it measured and checked):

- :func:`sellout`: C clients race for N units of one key, demand well above
  supply; a share of the transactions roll back after reserving. Afterwards
  exactly N units are held, each by a reservation a client saw committed.
- :func:`soak`: D seconds of a shop's mix over many keys with a few hot ones
  (Zipf): reserve one line or a cart, then claim, release or walk away, while
  a sweeper and a replenisher run beside the clients; invariants are checked
  at intervals during the run and at the end.
- :func:`hot`: one hot key, reservations only, over a sweep of client counts.

Every pgbench transaction that reserves also writes what its client saw into
the harness's own schema (``stockpool_race``, bench/pgbench/race_schema.sql) in
the same transaction, so the checks can hold stockpool.holds to exactly what
clients saw committed. ``shape="naive"`` swaps stockpool for the negative
control (read a counter, decide in the client, write it back): its checks must
FAIL, which proves they can.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from stockpool import pgbench, serverstats, verify
from stockpool.errors import StockpoolError
from stockpool.report import RunReport, latency_ms
from stockpool.sampler import WaitSampler
from stockpool.verify import Check, KeyRange

__all__ = [
    "Check",
    "Harness",
    "RunReport",
    "SelloutResult",
    "command",
    "hot",
    "pgbench_script",
    "sellout",
    "soak",
]

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench" / "pgbench"

SCENARIOS = ("sellout", "soak", "hot")
SHAPES = ("stockpool", "naive")
APP_PREFIX = "stockpool-race/"
OBSERVER_APP = "stockpool-observer"
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
    path = BENCH_DIR / f"{name}.sql"
    if not path.exists():
        raise StockpoolError(f"pgbench script {path} not found")
    return path


# --- the harness ---------------------------------------------------------------


@dataclass
class Harness:
    """What the runs on one database share."""

    dsn: str
    log_root: Path  # pgbench per-transaction logs, one directory per run
    server_log: serverstats.ServerLog | None = None  # only for clusters we started
    progress: Progress | None = None
    sample_interval: float = 0.2
    installed: bool = False

    def install(self) -> None:
        """Create the harness schema (idempotent; serialised by an advisory lock)."""
        if self.installed:
            return
        with _connect(self.dsn) as conn, conn.transaction():
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


def _connect(dsn: str, application_name: str = OBSERVER_APP) -> psycopg.Connection[TupleRow]:
    try:
        return psycopg.connect(dsn, autocommit=True, application_name=application_name, connect_timeout=10)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StockpoolError(
            f"cannot connect: {first}", hint="check the DSN and that the server is up"
        ) from exc


def _app(run_id: int, role: str = "client") -> str:
    return f"{APP_PREFIX}{run_id}/{role}"


def _run_pattern(run_id: int) -> str:
    return f"{APP_PREFIX}{run_id}/%"


@dataclass
class Measured:
    """One pgbench run with everything measured around it."""

    result: pgbench.PgbenchResult
    before: serverstats.Snapshot
    after: serverstats.Snapshot
    wal_bytes: int
    waits: dict[str, Any]
    errors: Counter[str]
    error_messages: dict[str, str]
    # The server's account of each deadlock (only on a cluster we started).
    deadlock_reports: list[str] = field(default_factory=list)

    @property
    def deadlocks(self) -> int:
        return self.after.deadlocks - self.before.deadlocks


def _measure(
    h: Harness,
    run_id: int,
    label: str,
    script: str,
    clients: int,
    *,
    transactions: int | None = None,
    seconds: int | None = None,
    defines: dict[str, object],
    beside: Sequence[_Helper] = (),
) -> Measured:
    """Run pgbench under the wait sampler, with helper threads beside it."""
    with _connect(h.dsn) as conn:
        before = serverstats.take(conn)
    mark = h.server_log.mark() if h.server_log else 0
    task = None
    if h.progress is not None:
        total = float(seconds if seconds is not None else clients * (transactions or 0))
        task = h.progress.add_task(label, total=total or 1.0)
    done = [0.0, 0.0]  # transactions so far (estimated from -P), last elapsed

    def on_progress(elapsed: float, tps: float) -> None:
        if h.progress is None or task is None:
            return
        if seconds is not None:
            h.progress.update(task, completed=elapsed)
        else:
            done[0] += tps * (elapsed - done[1])
            done[1] = elapsed
            h.progress.update(task, completed=done[0])

    log_dir = h.log_root / f"run-{run_id}"
    for helper in beside:
        helper.start()
    try:
        with WaitSampler(h.dsn, f"{APP_PREFIX}{run_id}/", h.sample_interval) as sampler:
            result = pgbench.run(
                h.dsn,
                pgbench_script(script),
                clients,
                log_dir=log_dir,
                transactions=transactions,
                seconds=seconds,
                defines=defines,
                max_tries=MAX_TRIES,
                application_name=_app(run_id),
                on_progress=on_progress,
            )
    finally:
        for helper in beside:
            helper.stop()
    if h.progress is not None and task is not None:
        h.progress.update(task, completed=h.progress.tasks[task].total)

    with _connect(h.dsn) as conn:
        serverstats.wait_for_sessions_gone(conn, _run_pattern(run_id))
        after = serverstats.take(conn)
        wal = serverstats.wal_bytes(conn, before, after)

    errors: Counter[str] = Counter()
    messages: dict[str, str] = {}
    deadlock_reports: list[str] = []
    if h.server_log is not None:
        errors, messages = h.server_log.errors_since(mark, f"{APP_PREFIX}{run_id}/")
        deadlock_reports = h.server_log.deadlocks_since(mark)
    else:
        errors.update(result.log.failures)
        for abort in result.aborts:
            errors["client abort"] += 1
            messages.setdefault("client abort", abort.message)
        for helper in beside:
            errors.update(helper.errors)
            for state, message in helper.messages.items():
                messages.setdefault(state, message)
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


def _report(
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
        pool=serverstats.pool_health(m.before, m.after),
        wal_bytes=m.wal_bytes,
        checks=checks,
        counts=counts,
        params=params,
    )


def _no_errors(m: Measured, expected_transactions: int | None = None) -> Check:
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


def _zero_deadlocks(m: Measured) -> Check:
    detail = f"{m.deadlocks} deadlocks (pg_stat_database)"
    if m.deadlocks and m.deadlock_reports:
        # The cycle, as the server logged it: what to fix, not just a count.
        # (The log covers the whole cluster, the count this database.)
        detail += f"; the server's report: {m.deadlock_reports[0]}"
    return Check("zero deadlocks", m.deadlocks == 0, detail)


def _shape_tag(shape: str) -> str:
    return "" if shape == "stockpool" else f" ({shape})"


def _validate(**sizes: tuple[int, int]) -> None:
    """Each value must be >= its minimum: one clear line when not."""
    for name, (value, minimum) in sizes.items():
        if value < minimum:
            flag = "--" + name.replace("_", "-")
            raise StockpoolError(f"{flag} must be at least {minimum}, got {value}")


# --- sellout ---------------------------------------------------------------------


@dataclass
class SelloutResult:
    clients: int
    per_client: int
    units: int
    attempts: int
    failed: int
    held: int
    checks: list[Check] = field(default_factory=list)
    report: RunReport | None = None

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)


def sellout(
    dsn: str,
    clients: int = 64,
    per_client: int = 20,
    units: int = 50,
    *,
    rollback_pct: int = 20,
    shape: str = "stockpool",
    harness: Harness | None = None,
) -> SelloutResult:
    """C clients x R one-unit reservations race for N units of one key;
    ``rollback_pct`` percent of them roll back after reserving."""
    _validate(
        clients=(clients, 1), per_client=(per_client, 1), units=(units, 0), rollback_pct=(rollback_pct, 0)
    )
    if rollback_pct > 100:
        raise StockpoolError(f"--rollback-pct must be at most 100, got {rollback_pct}")
    if shape not in SHAPES:
        raise StockpoolError(f"unknown shape {shape!r}", hint=f"one of {', '.join(SHAPES)}")
    with contextlib.ExitStack() as stack:
        h = harness or stack.enter_context(temporary_harness(dsn))
        return _sellout(h, clients, per_client, units, rollback_pct, shape)
    raise AssertionError("unreachable")


def _sellout(
    h: Harness, clients: int, per_client: int, units: int, rollback_pct: int, shape: str
) -> SelloutResult:
    h.install()
    params = {"clients": clients, "per_client": per_client, "units": units, "rollback_pct": rollback_pct}
    with _connect(h.dsn) as conn:
        run_id = h.new_run(conn, "sellout", shape, params)
        item = run_id * ITEM_STRIDE + 1
        keys = KeyRange((SHOP,), item, item, LOCATION)
        if shape == "stockpool":
            conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (SHOP, item, LOCATION, units))
        else:
            conn.execute(
                "INSERT INTO stockpool_race.naive_stock (run_id, units) VALUES (%s, %s)", (run_id, units)
            )
    attempts = clients * per_client
    m = _measure(
        h,
        run_id,
        f"sellout{_shape_tag(shape)}: {clients} clients x {per_client} for {units} units",
        "sellout" if shape == "stockpool" else "race_naive",
        clients,
        transactions=per_client,
        defines={
            "run": run_id,
            "shop": SHOP,
            "item": item,
            "location": LOCATION,
            "rollback_pct": rollback_pct,
        },
    )
    with _connect(h.dsn) as conn:
        if shape == "stockpool":
            checks, counts = _sellout_checks(conn, run_id, keys, units, m)
            held = int(counts["held"])
        else:
            checks, counts = _naive_checks(conn, run_id, units, m)
            held = int(counts["sold"])
    checks.append(_no_errors(m, attempts))
    report = _report(
        "sellout",
        shape,
        clients,
        run_id,
        m,
        "one reservation transaction (committed or rolled back)",
        checks,
        counts,
        params,
    )
    return SelloutResult(clients, per_client, units, attempts, m.result.log.failed, held, checks, report)


def _sellout_checks(
    conn: psycopg.Connection[TupleRow], run_id: int, keys: KeyRange, units: int, m: Measured
) -> tuple[list[Check], dict[str, Any]]:
    with verify.snapshot(conn):
        on_hand, pooled, held = conn.execute(
            "SELECT on_hand, pooled, held FROM stockpool.stock_levels"
            " WHERE shop_id = %s AND item_id = %s AND location_id = %s",
            (SHOP, keys.item_lo, LOCATION),
        ).fetchone() or (0, 0, 0)
        reserved, refused = conn.execute(
            "SELECT pg_catalog.count(*) FILTER (WHERE reserved),"
            " pg_catalog.count(*) FILTER (WHERE NOT reserved)"
            " FROM stockpool_race.outcomes WHERE run_id = %s",
            (run_id,),
        ).fetchone() or (0, 0)
        outcomes = verify.client_outcomes(conn, run_id, keys, final=True)
        invariants = verify.invariants(conn)
        ledger = verify.ledger_history(conn, keys)
    committed = reserved + refused
    expected = min(units, committed)
    checks = [
        Check(
            "no oversell",
            held <= units and pooled + held <= on_hand,
            f"{held} held of {units}; pooled {pooled} + held {held} vs on_hand {on_hand}",
        ),
        Check(
            "no undersell",
            held == expected,
            f"{held} held; {committed} committed reservations ({refused} refused) for {units} units",
        ),
        outcomes,
        _zero_deadlocks(m),
        invariants,
        ledger,
    ]
    counts = {
        "on_hand": on_hand,
        "pooled": pooled,
        "held": held,
        "reserved": reserved,
        "refused": refused,
        "rolled_back": m.result.log.succeeded - committed,
    }
    return checks, counts


def _naive_checks(
    conn: psycopg.Connection[TupleRow], run_id: int, units: int, m: Measured
) -> tuple[list[Check], dict[str, Any]]:
    with verify.snapshot(conn):
        (left,) = conn.execute(
            "SELECT units FROM stockpool_race.naive_stock WHERE run_id = %s", (run_id,)
        ).fetchone() or (0,)
        (sold,) = conn.execute(
            "SELECT pg_catalog.count(*) FROM stockpool_race.naive_sales WHERE run_id = %s", (run_id,)
        ).fetchone() or (0,)
    checks = [
        Check("no oversell", sold <= units, f"{sold} sold of {units}"),
        Check(
            "counter = units - sales",
            left == units - sold,
            f"counter {left}, but {units} - {sold} sales = {units - sold}",
        ),
        _zero_deadlocks(m),
    ]
    return checks, {"units": units, "sold": sold, "counter": left}


# --- soak ------------------------------------------------------------------------


class _Helper(threading.Thread):
    """A session beside the pgbench clients that does one thing every period."""

    def __init__(self, name: str, dsn: str, application_name: str, period: float) -> None:
        super().__init__(name=name, daemon=True)
        self.dsn = dsn
        self.application_name = application_name
        self.period = period
        self.errors: Counter[str] = Counter()
        self.messages: dict[str, str] = {}
        self.started_at = time.monotonic()
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=60)

    def tick(self, conn: psycopg.Connection[TupleRow]) -> bool:
        """One unit of work; True to go again at once instead of waiting."""
        raise NotImplementedError

    def run(self) -> None:
        self.started_at = time.monotonic()
        try:
            conn = psycopg.connect(
                self.dsn, autocommit=True, application_name=self.application_name, connect_timeout=10
            )
        except psycopg.Error as exc:
            self._record(exc)
            return
        with conn:
            while not self._stop_event.is_set():
                busy = False
                try:
                    busy = self.tick(conn)
                except psycopg.Error as exc:
                    self._record(exc)
                    if conn.broken:
                        return
                if not busy:
                    self._stop_event.wait(self.period)

    def _record(self, exc: psycopg.Error) -> None:
        state = exc.sqlstate or "connection"
        self.errors[state] += 1
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        detail = exc.diag.message_detail if exc.diag else None
        self.messages.setdefault(state, f"{self.name}: {first}" + (f" ({detail})" if detail else ""))


class _Sweeper(_Helper):
    def __init__(self, dsn: str, run_id: int, batch: int = 500) -> None:
        super().__init__("sweeper", dsn, _app(run_id, "sweeper"), 0.2)
        self.batch = batch
        self.expired = 0
        self.sweeps = 0

    def tick(self, conn: psycopg.Connection[TupleRow]) -> bool:
        row = conn.execute("SELECT stockpool.sweep(%s)", (self.batch,)).fetchone()
        self.sweeps += 1
        n = int(row[0]) if row else 0
        self.expired += n
        return n >= self.batch


class _Replenisher(_Helper):
    """Receives stock for keys whose on hand runs low (adjust_stock, which
    records a movement) and tops up the hot keys' pools (replenish_pool), as a
    shop's back office does, concurrently with the clients' claims."""

    def __init__(self, dsn: str, run_id: int, keys: KeyRange, hot_items: int, low: int, receive: int) -> None:
        super().__init__("replenisher", dsn, _app(run_id, "replenisher"), 0.5)
        self.keys = keys
        self.hot_items = hot_items
        self.low = low
        self.receive = receive
        self.received = 0
        self.refilled = 0

    def tick(self, conn: psycopg.Connection[TupleRow]) -> bool:
        # The ledger row itself (not the stock_levels view, which counts every
        # pool unit): cheap enough to read twice a second beside the load.
        low = conn.execute(
            "SELECT shop_id, item_id FROM stockpool.stock"
            " WHERE shop_id = ANY(%(shops)s) AND item_id BETWEEN %(item_lo)s AND %(item_hi)s"
            " AND location_id = %(location)s AND on_hand < %(low)s"
            " ORDER BY shop_id, item_id",
            {**self.keys.params, "low": self.low},
        ).fetchall()
        for shop_id, item_id in low:
            conn.execute(
                "SELECT stockpool.adjust_stock(%s, %s, %s, %s)",
                (shop_id, item_id, self.keys.location_id, self.receive),
            )
            self.received += self.receive
        for shop_id in self.keys.shop_ids:
            for item_id in range(
                self.keys.item_lo, min(self.keys.item_lo + self.hot_items, self.keys.item_hi + 1)
            ):
                row = conn.execute(
                    "SELECT stockpool.replenish_pool(%s, %s, %s)", (shop_id, item_id, self.keys.location_id)
                ).fetchone()
                self.refilled += int(row[0]) if row else 0
        return False


class _Checker(_Helper):
    """Runs the invariant checks in one snapshot every period."""

    def __init__(self, dsn: str, run_id: int, keys: KeyRange, period: float) -> None:
        super().__init__("checker", dsn, OBSERVER_APP, period)
        self.run_id = run_id
        self.keys = keys
        self.rounds: list[tuple[float, list[Check]]] = []

    def tick(self, conn: psycopg.Connection[TupleRow]) -> bool:
        if not self.rounds and time.monotonic() - self.started_at < self.period:
            return False  # first round after one period, not at time zero
        t = time.monotonic() - self.started_at
        self.rounds.append((t, _soak_round(conn, self.run_id, self.keys, final=False)))
        return False


class _SettlingWatch(_Helper):
    """Reads the settling lag (claims waiting to be folded into their ledger
    rows: how many, and the oldest one's age) every period."""

    def __init__(self, dsn: str, keys: KeyRange, period: float = 0.5) -> None:
        super().__init__("settling", dsn, OBSERVER_APP, period)
        self.keys = keys
        self.samples: list[tuple[int, float]] = []

    def tick(self, conn: psycopg.Connection[TupleRow]) -> bool:
        self.samples.append(verify.settling_lag(conn, self.keys))
        return False

    def summary(self, end: tuple[int, float]) -> dict[str, Any]:
        return {
            "samples": len(self.samples),
            "max_pending": max((n for n, _ in self.samples), default=0),
            "mean_pending": round(sum(n for n, _ in self.samples) / len(self.samples), 1)
            if self.samples
            else 0.0,
            "max_oldest_s": round(max((age for _, age in self.samples), default=0.0), 3),
            "end_pending": end[0],
            "end_oldest_s": round(end[1], 3),
        }


def _soak_round(
    conn: psycopg.Connection[TupleRow], run_id: int, keys: KeyRange, *, final: bool
) -> list[Check]:
    with verify.snapshot(conn):
        return [
            verify.invariants(conn),
            verify.ledger_history(conn, keys),
            verify.client_outcomes(conn, run_id, keys, final=final),
            verify.claims_in_ledger(conn, run_id, keys),
        ]


@dataclass(frozen=True)
class SoakOptions:
    """The soak's sizes and mix; every field has a CLI flag of the same name."""

    shops: int = 4
    items: int = 250
    stock: int = 500
    zipf: float = 1.1
    cart_pct: int = 50
    claim_pct: int = 70
    release_pct: int = 20
    ttl: int = 300
    abandon_ttl: int = 2
    hot_items: int = 5
    check_every: float = 5.0

    def validate(self, clients: int, duration: int) -> None:
        """One clear line for the first bad soak flag."""
        _validate(
            clients=(clients, 1),
            duration=(duration, 1),
            shops=(self.shops, 1),
            items=(self.items, 1),
            stock=(self.stock, 1),
            abandon_ttl=(self.abandon_ttl, 1),
            ttl=(self.ttl, 1),
            hot_items=(self.hot_items, 0),
        )
        if self.items >= ITEM_STRIDE:
            raise StockpoolError(f"--items must be below {ITEM_STRIDE}, got {self.items}")
        if not 1.001 <= self.zipf <= 1000:
            raise StockpoolError(
                f"--zipf must be between 1.001 and 1000 (pgbench random_zipfian), got {self.zipf}"
            )
        for name in ("cart_pct", "claim_pct", "release_pct"):
            pct = getattr(self, name)
            if not 0 <= pct <= 100:
                raise StockpoolError(f"--{name.replace('_', '-')} must be between 0 and 100, got {pct}")
        if self.claim_pct + self.release_pct > 100:
            raise StockpoolError(
                f"--claim-pct + --release-pct must be at most 100, got {self.claim_pct + self.release_pct}"
            )
        if self.check_every <= 0:
            raise StockpoolError(f"--check-every must be positive, got {self.check_every}")


def soak(
    dsn: str,
    clients: int = 64,
    duration: int = 60,
    *,
    harness: Harness | None = None,
    **options: Any,
) -> RunReport:
    """D seconds of reserve / cart, then claim, release or abandon, over
    shops x items keys with Zipf-hot items, with a sweeper and a replenisher.
    ``options`` are the fields of SoakOptions."""
    opts = SoakOptions(**options)
    opts.validate(clients, duration)
    with contextlib.ExitStack() as stack:
        h = harness or stack.enter_context(temporary_harness(dsn))
        return _soak(h, clients, duration, opts)
    raise AssertionError("unreachable")


def _soak(h: Harness, clients: int, duration: int, o: SoakOptions) -> RunReport:
    shops, items, stock, zipf = o.shops, o.items, o.stock, o.zipf
    cart_pct, claim_pct, release_pct = o.cart_pct, o.claim_pct, o.release_pct
    ttl, abandon_ttl, hot_items, check_every = o.ttl, o.abandon_ttl, o.hot_items, o.check_every
    h.install()
    params: dict[str, Any] = {
        "clients": clients,
        "duration_s": duration,
        "shops": shops,
        "items": items,
        "stock": stock,
        "zipf": zipf,
        "cart_pct": cart_pct,
        "claim_pct": claim_pct,
        "release_pct": release_pct,
        "ttl_s": ttl,
        "abandon_ttl_s": abandon_ttl,
        "check_every_s": check_every,
    }
    with _connect(h.dsn) as conn:
        run_id = h.new_run(conn, "soak", "stockpool", params)
        base = run_id * ITEM_STRIDE
        keys = KeyRange(tuple(range(1, shops + 1)), base + 1, base + items, LOCATION)
        with conn.transaction():
            conn.execute(
                "SELECT stockpool.set_stock(s, %s + i, %s, %s)"
                " FROM pg_catalog.generate_series(1, %s) AS s, pg_catalog.generate_series(1, %s) AS i",
                (base, LOCATION, stock, shops, items),
            )
    sweeper = _Sweeper(h.dsn, run_id)
    replenisher = _Replenisher(h.dsn, run_id, keys, hot_items, low=max(stock // 5, 1), receive=stock)
    checker = _Checker(h.dsn, run_id, keys, check_every)
    settling = _SettlingWatch(h.dsn, keys)
    m = _measure(
        h,
        run_id,
        f"soak: {clients} clients, {duration} s, {shops * items} keys",
        "race_soak",
        clients,
        seconds=duration,
        defines={
            "run": run_id,
            "shops": shops,
            "items": items,
            "shop_base": 0,
            "item_base": base,
            "zipf": zipf,
            "cart_pct": cart_pct,
            "claim_pct": claim_pct,
            "release_pct": release_pct,
            "ttl_s": ttl,
            "abandon_ttl_s": abandon_ttl,
        },
        beside=(sweeper, replenisher, checker, settling),
    )
    # The end: wait out the abandon TTL, sweep everything due, check once more.
    ending = (
        h.progress.add_task("soak: abandon TTL, final sweep, final checks", total=None)
        if h.progress
        else None
    )
    with _connect(h.dsn) as conn:
        settled_at_end = verify.settling_lag(conn, keys)
    with _connect(h.dsn, _app(run_id, "sweeper")) as conn:
        time.sleep(abandon_ttl + 0.2)
        final_sweep = 0
        while True:
            row = conn.execute("SELECT stockpool.sweep(5000)").fetchone()
            n = int(row[0]) if row else 0
            final_sweep += n
            if n == 0:
                break
    with _connect(h.dsn) as conn:
        final = _soak_round(conn, run_id, keys, final=True)
        (abandoned,) = conn.execute(
            "SELECT pg_catalog.count(*) FROM stockpool_race.outcomes AS o"
            " WHERE o.run_id = %s AND o.intent = 'abandon' AND o.reserved",
            (run_id,),
        ).fetchone() or (0,)
        counts_row = conn.execute(verify.OUTCOME_COUNTS, {"run": run_id}).fetchone() or (0, 0, 0, 0, 0)
    if h.progress is not None and ending is not None:
        h.progress.update(ending, total=1, completed=1)
    end_t = duration + abandon_ttl
    checks: list[Check] = []
    for i, final_check in enumerate(final):
        rounds = [(t, round_checks[i]) for t, round_checks in checker.rounds]
        merged = verify.merge(final_check.name, [*rounds, (end_t, final_check)])
        if merged.passed:
            merged = Check(
                final_check.name,
                True,
                f"{len(rounds)} checks during the run and one at the end, all clean; "
                f"end: {final_check.detail}",
            )
        checks.append(merged)
    checks.append(
        Check(
            "invariants checked during the run",
            len(checker.rounds) >= 1 and not checker.errors,
            f"{len(checker.rounds)} rounds every {check_every:g} s"
            + (f"; checker errors: {dict(checker.errors)}" if checker.errors else ""),
        )
    )
    checks.append(_zero_deadlocks(m))
    checks.append(_no_errors(m))
    # The back-office sessions' own failures (a deadlock victim among them
    # would otherwise show only in the deadlock counter).
    helper_errors = [
        f"{h.name} {state} x{n}: {h.messages.get(state, '')}"
        for h in (sweeper, replenisher)
        for state, n in h.errors.items()
    ]
    checks.append(
        Check("sweeper and replenisher without errors", not helper_errors, "; ".join(helper_errors) or "none")
    )
    reserved, refused, claimed, released, still_open = counts_row
    counts = {
        "checkouts": reserved + refused,
        "reserved": reserved,
        "refused": refused,
        "claimed": claimed,
        "released": released,
        "abandoned": abandoned,
        "left_open": still_open,
        "hold_lines_expired": sweeper.expired + final_sweep,
        "sweeps": sweeper.sweeps,
        "units_received": replenisher.received,
        "units_refilled": replenisher.refilled,
        "check_rounds": len(checker.rounds) + 1,
        "settling": settling.summary(settled_at_end),
    }
    return _report(
        "soak",
        "stockpool",
        clients,
        run_id,
        m,
        "one checkout: reserve, then claim or release (two transactions)",
        checks,
        counts,
        params,
    )


# --- hot -------------------------------------------------------------------------


def hot(
    dsn: str,
    clients: Sequence[int] = (1, 8, 32, 128, 512),
    duration: int = 10,
    *,
    shape: str = "stockpool",
    harness: Harness | None = None,
) -> list[RunReport]:
    """One hot key, reservations only, ``duration`` seconds at each client count."""
    if not clients:
        raise StockpoolError("--hot-clients needs at least one client count")
    for n in clients:
        _validate(hot_clients=(n, 1))
    _validate(hot_duration=(duration, 1))
    if shape not in SHAPES:
        raise StockpoolError(f"unknown shape {shape!r}", hint=f"one of {', '.join(SHAPES)}")
    with contextlib.ExitStack() as stack:
        h = harness or stack.enter_context(temporary_harness(dsn))
        h.install()
        return [_hot_step(h, n, duration, shape) for n in clients]
    raise AssertionError("unreachable")


def _hot_step(h: Harness, clients: int, duration: int, shape: str) -> RunReport:
    params = {"clients": clients, "duration_s": duration}
    with _connect(h.dsn) as conn:
        run_id = h.new_run(conn, "hot", shape, params)
        item = run_id * ITEM_STRIDE + 1
        keys = KeyRange((SHOP,), item, item, LOCATION)
        if shape == "stockpool":
            conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (SHOP, item, LOCATION, HOT_STOCK))
        else:
            conn.execute(
                "INSERT INTO stockpool_race.naive_stock (run_id, units) VALUES (%s, %s)",
                (run_id, NAIVE_HOT_STOCK),
            )
    m = _measure(
        h,
        run_id,
        f"hot{_shape_tag(shape)}: {clients} clients, {duration} s",
        "race_hot" if shape == "stockpool" else "race_naive",
        clients,
        seconds=duration,
        defines={
            "run": run_id,
            "shop": SHOP,
            "item": item,
            "location": LOCATION,
            "rollback_pct": 0,
        },
    )
    with _connect(h.dsn) as conn:
        if shape == "stockpool":
            with verify.snapshot(conn):
                row = conn.execute(
                    "SELECT on_hand, pooled, held FROM stockpool.stock_levels"
                    " WHERE shop_id = %s AND item_id = %s AND location_id = %s",
                    (SHOP, item, LOCATION),
                ).fetchone()
                on_hand, pooled, held = row or (0, 0, 0)
                invariants = verify.invariants(conn)
                ledger = verify.ledger_history(conn, keys)
            committed = m.result.log.succeeded
            checks = [
                Check(
                    "every committed reservation holds its unit",
                    held == committed,
                    f"{held} units held, {committed} reservations committed",
                ),
                Check(
                    "no oversell",
                    pooled + held <= on_hand,
                    f"pooled {pooled} + held {held} vs on_hand {on_hand}",
                ),
                _zero_deadlocks(m),
                invariants,
                ledger,
            ]
            counts: dict[str, Any] = {"on_hand": on_hand, "pooled": pooled, "held": held}
        else:
            checks, counts = _naive_checks(conn, run_id, NAIVE_HOT_STOCK, m)
    checks.append(_no_errors(m))
    return _report("hot", shape, clients, run_id, m, "one reservation transaction", checks, counts, params)


# --- the command -----------------------------------------------------------------


@dataclass
class Plan:
    """What one `stockpool race` invocation runs, validated."""

    scenarios: list[str]
    shape: str
    clients: int
    per_client: int
    units: int
    rollback_pct: int
    duration: int
    hot_clients: list[int]
    hot_duration: int
    soak_options: SoakOptions

    @property
    def max_clients(self) -> int:
        counts = [self.clients] if {"sellout", "soak"} & set(self.scenarios) else []
        if "hot" in self.scenarios:
            counts += self.hot_clients
        return max(counts, default=1)


DEFAULT_SCENARIOS = ["sellout", "soak"]
DEFAULT_RUN_SOAK_S = 30  # the soak of a bare `stockpool race` / `make race`
SOAK_S = 60


def _parse_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def make_plan(
    scenario: str | None,
    shape: str,
    clients: int,
    per_client: int,
    units: int,
    rollback_pct: int,
    duration: int | None,
    hot_clients: str,
    hot_duration: int,
    soak_options: SoakOptions,
) -> Plan:
    if shape not in SHAPES:
        raise StockpoolError(f"unknown --shape {shape!r}", hint=f"one of: {', '.join(SHAPES)}")
    if scenario is None:
        scenarios = ["sellout"] if shape == "naive" else list(DEFAULT_SCENARIOS)
        default_duration = DEFAULT_RUN_SOAK_S
    else:
        scenarios = _parse_list(scenario)
        default_duration = SOAK_S
        unknown = [s for s in scenarios if s not in SCENARIOS]
        if unknown or not scenarios:
            raise StockpoolError(
                f"unknown scenario {', '.join(unknown) or repr(scenario)}",
                hint=f"one or more of: {', '.join(SCENARIOS)}",
            )
    if shape == "naive" and "soak" in scenarios:
        raise StockpoolError(
            "--shape naive runs the sellout and hot scenarios only",
            hint="the soak needs holds, claims and releases, which the naive counter does not have",
        )
    counts: list[int] = []
    for part in _parse_list(hot_clients):
        try:
            counts.append(int(part))
        except ValueError:
            raise StockpoolError(
                f"--hot-clients must be a comma-separated list of numbers, got {hot_clients!r}"
            ) from None
    _validate(
        clients=(clients, 1), per_client=(per_client, 1), units=(units, 0), rollback_pct=(rollback_pct, 0)
    )
    if rollback_pct > 100:
        raise StockpoolError(f"--rollback-pct must be at most 100, got {rollback_pct}")
    if duration is not None:
        _validate(duration=(duration, 1))
    if "hot" in scenarios:
        if not counts:
            raise StockpoolError("--hot-clients needs at least one client count")
        for n in counts:
            _validate(hot_clients=(n, 1))
        _validate(hot_duration=(hot_duration, 1))
    return Plan(
        scenarios=scenarios,
        shape=shape,
        clients=clients,
        per_client=per_client,
        units=units,
        rollback_pct=rollback_pct,
        duration=duration if duration is not None else default_duration,
        hot_clients=counts,
        hot_duration=hot_duration,
        soak_options=soak_options,
    )


def run_plan(h: Harness, plan: Plan) -> list[RunReport]:
    reports: list[RunReport] = []
    for scenario in plan.scenarios:
        if scenario == "sellout":
            result = sellout(
                h.dsn,
                plan.clients,
                plan.per_client,
                plan.units,
                rollback_pct=plan.rollback_pct,
                shape=plan.shape,
                harness=h,
            )
            assert result.report is not None
            reports.append(result.report)
        elif scenario == "soak":
            reports.append(soak(h.dsn, plan.clients, plan.duration, harness=h, **asdict(plan.soak_options)))
        else:
            reports.extend(hot(h.dsn, plan.hot_clients, plan.hot_duration, shape=plan.shape, harness=h))
    return reports


def check_connection_budget(dsn: str, clients: int) -> None:
    """Refuse a run the server has no room for, before any client connects."""
    need = clients + HELPER_SESSIONS
    with _connect(dsn) as conn:
        row = conn.execute(
            "SELECT pg_catalog.current_setting('max_connections')::integer,"
            " CASE WHEN r.rolsuper THEN 0"
            "  ELSE pg_catalog.current_setting('superuser_reserved_connections')::integer END,"
            " (SELECT pg_catalog.count(*)::integer FROM pg_catalog.pg_stat_activity"
            "  WHERE backend_type = 'client backend')"
            " FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user"
        ).fetchone()
    if row is None:
        return
    max_connections, reserved, in_use = row
    room = max_connections - reserved - in_use + 1  # + 1: this check's own session
    if need > room:
        raise StockpoolError(
            f"the server allows {room} more connections, this run needs {need} "
            f"({clients} clients + {HELPER_SESSIONS} harness sessions)",
            hint=f"use fewer clients, or raise max_connections to at least {max_connections + need - room} "
            "(stockpool.cluster.settings_for_clients has settings sized for a client count)",
        )


@contextlib.contextmanager
def target(dsn: str | None, clients: int) -> Iterator[tuple[str, serverstats.ServerLog | None, str]]:
    """The database to race: the given DSN (deployed, with room for the run),
    or a throwaway cluster sized for the client count. Yields (dsn, server log
    or None, a description for the report)."""
    from stockpool import cluster as clusters
    from stockpool.deploy import deploy, redact

    if shutil.which("pgbench") is None:
        raise StockpoolError(
            "pgbench not found on PATH",
            hint="install postgresql-client-15 (apt-get install postgresql-client-15)",
        )
    if dsn:
        check_connection_budget(dsn, clients)
        deploy(dsn)
        yield dsn, None, redact(dsn)
        return
    settings = clusters.settings_for_clients(clients + HELPER_SESSIONS)
    settings["log_line_prefix"] = serverstats.LOG_LINE_PREFIX
    with clusters.throwaway(settings) as cl:
        deploy(cl.dsn)
        yield cl.dsn, serverstats.ServerLog(cl.logfile), "throwaway cluster"


def command(
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", envvar="STOCKPOOL_DSN", help="PostgreSQL URL; default: a throwaway cluster."),
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario",
            help="Comma-separated: sellout, soak, hot. Default: sellout and a 30 s soak "
            "(sellout only with --shape naive).",
        ),
    ] = None,
    shape: Annotated[
        str, typer.Option(help="stockpool, or naive: the negative control that must FAIL.")
    ] = "stockpool",
    clients: Annotated[int, typer.Option(help="Concurrent clients (sellout, soak).")] = 64,
    per_client: Annotated[int, typer.Option(help="sellout: reservations per client.")] = 20,
    units: Annotated[int, typer.Option(help="sellout: units on hand for the raced key.")] = 50,
    rollback_pct: Annotated[int, typer.Option(help="sellout: percent of reservations rolled back.")] = 20,
    duration: Annotated[
        int | None, typer.Option(help="soak: seconds (60; 30 in the default sellout + soak run).")
    ] = None,
    shops: Annotated[int, typer.Option(help="soak: shops.")] = 4,
    items: Annotated[int, typer.Option(help="soak: items per shop (keys = shops x items).")] = 250,
    stock: Annotated[int, typer.Option(help="soak: units on hand per key at the start.")] = 500,
    zipf: Annotated[float, typer.Option(help="soak: Zipf exponent of item popularity.")] = 1.1,
    cart_pct: Annotated[
        int, typer.Option(help="soak: percent of checkouts that are carts of 1-5 lines.")
    ] = 50,
    claim_pct: Annotated[int, typer.Option(help="soak: percent of checkouts claimed.")] = 70,
    release_pct: Annotated[int, typer.Option(help="soak: percent released (the rest abandoned).")] = 20,
    abandon_ttl: Annotated[int, typer.Option(help="soak: TTL in seconds of abandoned holds.")] = 2,
    check_every: Annotated[float, typer.Option(help="soak: seconds between invariant checks.")] = 5.0,
    hot_clients: Annotated[str, typer.Option(help="hot: comma-separated client counts.")] = "1,8,32,128,512",
    hot_duration: Annotated[int, typer.Option(help="hot: seconds per client count.")] = 10,
    sample_ms: Annotated[int, typer.Option(help="Wait-event sampling period in ms (100-250).")] = 200,
    results: Annotated[Path, typer.Option(help="Directory for the JSON report.")] = Path("results"),
) -> None:
    """Race the package under load, check every guarantee, show where contention went."""
    from stockpool.cli import console, fail
    from stockpool.report import render, write_json

    reports: list[RunReport] = []
    meta: dict[str, Any] = {}
    try:
        if not 100 <= sample_ms <= 250:
            raise StockpoolError(f"--sample-ms must be between 100 and 250, got {sample_ms}")
        soak_options = SoakOptions(
            shops=shops,
            items=items,
            stock=stock,
            zipf=zipf,
            cart_pct=cart_pct,
            claim_pct=claim_pct,
            release_pct=release_pct,
            abandon_ttl=abandon_ttl,
            check_every=check_every,
        )
        plan = make_plan(
            scenario,
            shape,
            clients,
            per_client,
            units,
            rollback_pct,
            duration,
            hot_clients,
            hot_duration,
            soak_options,
        )
        if "soak" in plan.scenarios:  # validate the soak's flags before starting anything
            soak_options.validate(clients, plan.duration)
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        with target(dsn, plan.max_clients) as (url, server_log, where):
            meta = {
                "started_at": started,
                "target": where,
                **_server_info(url),
                "scenarios": plan.scenarios,
                "shape": plan.shape,
            }
            progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            with (
                progress,
                temporary_harness(
                    url, server_log=server_log, progress=progress, sample_interval=sample_ms / 1000
                ) as h,
            ):
                reports = run_plan(h, plan)
    except StockpoolError as exc:
        fail(exc)
        return
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        fail(
            StockpoolError(
                f"database error during the race: [{exc.sqlstate or 'no SQLSTATE'}] {first}",
                hint="the server log has the details; with --dsn check the role may create a schema",
            )
        )
        return
    console = render(console, reports)
    path = write_json(results, reports, meta)
    passed = all(r.passed for r in reports)
    console.print(
        f"{'[green]PASS[/]' if passed else '[bold red]FAIL[/]'}: "
        f"{sum(len(r.checks) for r in reports)} checks over {len(reports)} runs; report: {path}"
    )
    raise typer.Exit(0 if passed else 1)


SETTINGS_REPORTED = (
    "max_connections",
    "shared_buffers",
    "fsync",
    "synchronous_commit",
    "autovacuum_naptime",
    "max_wal_size",
)


def _server_info(dsn: str) -> dict[str, Any]:
    """Server version and the settings that shape the figures, for the JSON report."""
    with _connect(dsn) as conn:
        row = conn.execute("SELECT pg_catalog.version()").fetchone()
        settings: dict[str, str] = dict(
            conn.execute(
                "SELECT name, pg_catalog.current_setting(name)"
                " FROM pg_catalog.pg_settings WHERE name = ANY(%s)",
                (list(SETTINGS_REPORTED),),
            ).fetchall()
        )
    return {"server_version": str(row[0]) if row else "unknown", "server_settings": settings}
