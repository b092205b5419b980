"""The side-by-side strategy benchmark behind ``stockpool bench`` and ``make bench``.

Every strategy is a pgbench script (bench/pgbench/bench_<name>.sql) that
reserves one unit of one hot key per transaction. A run measures each strategy
at each client count in pgbench's prepared mode, on a fresh copy of a template
database (stockpool deployed, the harness's ``bench`` schema from
bench/pgbench/bench_setup.sql), after VACUUM and CHECKPOINT. While a cell runs,
a thread samples pg_stat_activity every 200 ms for the wait events of the
cell's backends. Latency percentiles come from pgbench's per-transaction logs;
what a strategy really reserved is counted from its tables afterwards, so a
cell that sold out or lost clients is flagged rather than reported as fast.

Besides the strategies: the counter's transaction shapes (committed, failed,
retries and drift), stockpool.reserve_cart with 5 lines across 5 hot keys, and
a soak of the hot key with the dead-tuple ratio of the pool partitions sampled
every 10 s. Results are written as JSON, a markdown report and a PNG chart
(stockpool.benchreport); ratios are always to the same run's ceiling.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import re
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer
from plumbum import local
from psycopg import sql
from psycopg.conninfo import make_conninfo

from stockpool import checkouts, cpumeter, pgbench
from stockpool import cluster as clusters
from stockpool.deploy import deploy
from stockpool.errors import StockpoolError
from stockpool.sampler import WaitSampler
from stockpool.serverstats import wait_for_sessions_gone

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench" / "pgbench"
RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"

STRATEGIES = ("ceiling", "counter", "counter_hold", "skip_locked", "pool", "sharded", "stockpool")
SHAPES = ("naive", "locked", "atomic", "serializable")
DEFAULT_CLIENTS = (1, 8, 32, 128, 512)
CATALOGUE_CLIENTS = (1, 8, 32, 128)
CATALOGUE_KEYS = 20_000
# Units per key: the 500 for a uniform catalogue; a Zipf catalogue's
# hottest keys would sell out within a cell, so they get deep stock.
CATALOGUE_PER_KEY = {"uniform": 500, "zipf": 100_000}
# Strategies that record a hold, as stockpool does: the bar compares against them.
HOLD_STRATEGIES = ("counter_hold", "pool")
# Units of stock where a strategy is a counter or a stockpool key: never sold out.
BIG_STOCK = 2_000_000_000
# Strategies with one row per unit get this many rows at least, and twice what
# the same run's ceiling did in a cell's time.
MIN_UNIT_ROWS = 50_000
MAX_UNIT_ROWS = 6_000_000
CART_LINES = 5
SERIALIZABLE_TRIES = 10
SAMPLE_INTERVAL = 0.2
SOAK_SAMPLE_INTERVAL = 10.0
TEMPLATE_DB = "stockpool_bench_template"
CELL_DB = "stockpool_bench"


@dataclass
class Cell:
    """One pgbench run: a strategy (or shape, or cart) at one client count."""

    kind: str  # strategy | shape | cart | checkout | catalogue
    name: str
    clients: int
    seconds: int
    transactions: int = 0
    tps: float = 0.0
    failed: int = 0
    retried: int = 0
    retries: int = 0
    aborted: int = 0
    units_per_transaction: int = 1
    units_available: int = 0
    reserved: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    wait_samples: int = 0
    waits: dict[str, int] = field(default_factory=dict)
    # checkout cells: the same samples per statement (reserve, claim, release)
    waits_by_statement: dict[str, dict[str, int]] = field(default_factory=dict)
    drift: dict[str, int] | None = None
    # catalogue cells: what the pool holds at the end, and the keys touched
    pool_rows: int | None = None
    pool_bytes: int | None = None
    keys_touched: int | None = None
    invariant_violations: int | None = None
    # CPU microseconds per unit of the server (all its processes) and of
    # pgbench; None when the server is not on this machine.
    cpu_server_us: float | None = None
    cpu_client_us: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def cpu_us(self) -> float | None:
        """All CPU (server and pgbench) per unit."""
        if self.cpu_server_us is None or self.cpu_client_us is None:
            return None
        return self.cpu_server_us + self.cpu_client_us

    @property
    def rate(self) -> float:
        """Reservations (units) per second, discounted by what was not really reserved."""
        expected = self.transactions * self.units_per_transaction
        if self.kind == "shape" or expected == 0:
            return self.tps * self.units_per_transaction
        share = min(1.0, self.reserved / expected)
        return self.tps * self.units_per_transaction * share

    @property
    def valid(self) -> bool:
        return self.aborted == 0 and self.transactions > 0 and not self.notes

    def top_wait(self) -> tuple[str, float] | None:
        """The most sampled wait event (CPU excluded) and its share of active samples."""
        total = sum(self.waits.values())
        events = [(n, c) for n, c in self.waits.items() if n != "CPU"]
        if not total or not events:
            return None
        name, count = max(events, key=lambda e: e[1])
        return name, count / total

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rate"] = round(self.rate, 1)
        data["cpu_us"] = round(self.cpu_us, 1) if self.cpu_us is not None else None
        data["valid"] = self.valid
        top = self.top_wait()
        data["top_wait"] = {"event": top[0], "share": round(top[1], 3)} if top else None
        return data


@dataclass
class SoakSample:
    elapsed: float
    live: int
    dead: int
    autovacuums: int

    @property
    def dead_ratio(self) -> float:
        total = self.live + self.dead
        return self.dead / total if total else 0.0


@dataclass
class Soak:
    clients: int
    seconds: int
    transactions: int = 0
    tps: float = 0.0
    aborted: int = 0
    reserved: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    samples: list[SoakSample] = field(default_factory=list)
    tps_by_interval: list[float] = field(default_factory=list)
    waits: dict[str, int] = field(default_factory=dict)
    invariant_violations: int | None = None

    @property
    def max_dead_ratio(self) -> float:
        return max((s.dead_ratio for s in self.samples), default=0.0)

    @property
    def mean_dead_ratio(self) -> float:
        if not self.samples:
            return 0.0
        return sum(s.dead_ratio for s in self.samples) / len(self.samples)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["samples"] = [{**asdict(s), "dead_ratio": round(s.dead_ratio, 4)} for s in self.samples]
        data["max_dead_ratio"] = round(self.max_dead_ratio, 4)
        data["mean_dead_ratio"] = round(self.mean_dead_ratio, 4)
        return data


@dataclass
class BenchConfig:
    clients: list[int]
    seconds: int
    strategies: list[str]
    shapes: list[str]
    shape_clients: list[int]
    cart: bool
    checkouts: bool
    soak_seconds: int
    soak_clients: int
    jobs: int
    catalogue_keys: int = 0  # 0: no catalogue cells
    catalogue_clients: list[int] = field(default_factory=lambda: list(CATALOGUE_CLIENTS))


@dataclass
class BenchRun:
    config: BenchConfig
    machine: dict[str, Any]
    started: str
    finished: str = ""
    cells: list[Cell] = field(default_factory=list)
    soak: Soak | None = None

    def cell(self, kind: str, name: str, clients: int) -> Cell | None:
        for c in self.cells:
            if (c.kind, c.name, c.clients) == (kind, name, clients):
                return c
        return None

    def as_json(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "machine": self.machine,
            "started": self.started,
            "finished": self.finished,
            "cells": [c.as_json() for c in self.cells],
            "soak": self.soak.as_json() if self.soak else None,
        }


# --- pgbench ---------------------------------------------------------------


@dataclass
class CellRun:
    """What one pgbench cell did, read from its output and per-transaction logs."""

    transactions: int
    tps: float
    failed: int
    retried: int
    retries: int
    aborted: int
    log: pgbench.TxnLog
    per_interval: list[int]


def _int(pattern: str, text: str) -> int:
    match = re.search(pattern, text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def run_cell(
    dsn: str,
    script: Path,
    clients: int,
    seconds: int,
    *,
    jobs: int,
    application_name: str,
    max_tries: int = 1,
    interval: int | None = None,
    defines: dict[str, object] | None = None,
) -> CellRun:
    """Run one pgbench cell in prepared mode (-M prepared) for ``seconds``.

    stockpool.pgbench.run drives the race in pgbench's simple protocol; the
    bench needs prepared mode, so it starts pgbench itself and reads the logs
    with the same parser. With ``interval``, successful transactions are also
    counted per interval of that many seconds (the soak's throughput curve).
    """
    logdir = Path(tempfile.mkdtemp(prefix="stockpool-bench-log-"))
    try:
        args = [
            "-n",
            "-M",
            "prepared",
            "-c",
            str(clients),
            "-j",
            str(max(1, min(clients, jobs))),
            "-T",
            str(seconds),
            "-f",
            str(script),
            f"--max-tries={max_tries}",
            "--failures-detailed",
            "-l",
            f"--log-prefix={logdir / 'txn'}",
            *[f"-D{k}={v}" for k, v in (defines or {}).items()],
            pgbench.with_application_name(dsn, application_name),
        ]
        code, out, err = local["pgbench"].run(args, retcode=None)
        text = out + err
        if code not in (0, 2) or "tps = " not in text:
            tail = [line for line in text.strip().splitlines() if line.strip()][-3:]
            raise StockpoolError(f"pgbench failed on {script.name} (exit {code}): {' | '.join(tail)}")
        tps = re.search(r"^tps = ([\d.]+)", text, re.MULTILINE)
        return CellRun(
            transactions=_int(r"number of transactions actually processed: (\d+)", text),
            tps=float(tps.group(1)) if tps else 0.0,
            failed=_int(r"number of failed transactions: (\d+)", text),
            retried=_int(r"number of transactions retried: (\d+)", text),
            retries=_int(r"total number of retries: (\d+)", text),
            aborted=len(re.findall(r"client \d+ script \d+ aborted", text)),
            log=pgbench.read_logs(logdir),
            per_interval=_per_interval(logdir, interval) if interval else [],
        )
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


def _per_interval(logdir: Path, interval: int) -> list[int]:
    """Successful transactions per ``interval`` seconds, from the logs' epoch column."""
    ends: Counter[int] = Counter()
    for path in logdir.iterdir():
        with path.open() as log:
            for line in log:
                parts = line.split()
                if len(parts) >= 6 and parts[2].isdigit():
                    ends[int(parts[4])] += 1
    if not ends:
        return []
    first = min(ends)
    slots: Counter[int] = Counter()
    for epoch, n in ends.items():
        slots[(epoch - first) // interval] += n
    return [slots[i] for i in range(max(slots) + 1)]


def _ms(sorted_us: Sequence[int], pct: float) -> float | None:
    value = pgbench.percentile(sorted_us, pct)
    return round(value / 1000.0, 3) if value is not None else None


# --- wait events and pool health ---------------------------------------------

POOL_HEALTH = """
SELECT coalesce(sum(s.n_live_tup), 0)::bigint,
       coalesce(sum(s.n_dead_tup), 0)::bigint,
       coalesce(sum(s.autovacuum_count), 0)::bigint
FROM pg_catalog.pg_inherits AS i
JOIN pg_catalog.pg_stat_user_tables AS s ON s.relid = i.inhrelid
WHERE i.inhparent = 'stockpool.pool_units'::pg_catalog.regclass
    AND s.n_live_tup + s.n_dead_tup > 0
"""


class Sampler(threading.Thread):
    """Calls ``probe`` with its own connection every ``interval`` s until stopped."""

    def __init__(
        self, dsn: str, interval: float, probe: Callable[[psycopg.Connection[Any], float], None]
    ) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.interval = interval
        self.probe = probe
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                started = time.monotonic()
                while not self.stopping.wait(self.interval):
                    self.probe(conn, time.monotonic() - started)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)


@contextlib.contextmanager
def sampling(
    dsn: str, interval: float, probe: Callable[[psycopg.Connection[Any], float], None]
) -> Iterator[Sampler]:
    sampler = Sampler(dsn, interval, probe)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()


# --- databases ---------------------------------------------------------------


def with_dbname(dsn: str, dbname: str) -> str:
    return make_conninfo(dsn, dbname=dbname)


class Workspace:
    """The template database and the per-cell copies of it on one server."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.template_dsn = with_dbname(admin_dsn, TEMPLATE_DB)
        self.cell_dsn = with_dbname(admin_dsn, CELL_DB)

    def _admin(self, *statements: sql.Composed) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            for stmt in statements:
                conn.execute(stmt)

    def create_template(self) -> None:
        try:
            self._admin(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(CELL_DB)),
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE_DB)),
                sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE_DB)),
            )
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StockpoolError(
                "the bench needs to create its own databases on this server",
                hint="run it as a role with CREATEDB, or without --dsn on a throwaway cluster",
            ) from exc
        deploy(self.template_dsn)
        with psycopg.connect(self.template_dsn, autocommit=True) as conn:
            conn.execute((BENCH_DIR / "bench_setup.sql").read_bytes())

    def fresh(self, strategy: str, clients: int, units: int, per_key: int = 500) -> str:
        """A new copy of the template laid out for one cell, vacuumed and checkpointed."""
        self._admin(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(CELL_DB)),
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(CELL_DB), sql.Identifier(TEMPLATE_DB)
            ),
        )
        with psycopg.connect(self.cell_dsn, autocommit=True) as conn:
            conn.execute("SELECT bench.prepare(%s, %s, %s, %s)", (strategy, clients, units, per_key))
            conn.execute("VACUUM (ANALYZE)")
            conn.execute("CHECKPOINT")
        return self.cell_dsn

    def drop(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self._admin(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(CELL_DB)),
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE_DB)),
            )


# --- the run -----------------------------------------------------------------


def script(name: str) -> Path:
    path = BENCH_DIR / f"bench_{name}.sql"
    if not path.exists():
        raise StockpoolError(f"pgbench script {path} not found")
    return path


class Bench:
    def __init__(
        self,
        admin_dsn: str,
        config: BenchConfig,
        log: Callable[[str], None],
        cpu: cpumeter.ServerCPU | None = None,
    ) -> None:
        self.workspace = Workspace(admin_dsn)
        self.cpu = cpu  # the server's CPU meter, when it runs on this machine
        self.config = config
        self.log = log
        self.run = BenchRun(config=config, machine={}, started=_now())

    def units_for(self, strategy: str, clients: int) -> int:
        if strategy in ("skip_locked", "sharded"):
            ceiling = self.run.cell("strategy", "ceiling", clients)
            guess = 2 * (ceiling.tps if ceiling else 20_000) * self.config.seconds
            return int(min(MAX_UNIT_ROWS, max(MIN_UNIT_ROWS, guess)))
        return BIG_STOCK

    def measure(self, kind: str, name: str, clients: int, seconds: int) -> Cell:
        if kind == "checkout":
            prepare_as, path = checkouts.prepare_as(name), script(f"checkout_{name}")
        else:
            prepare_as = "cart" if kind == "cart" else name
            path = script(prepare_as)
        units = self.units_for(name, clients)
        dsn = self.workspace.fresh(prepare_as, clients, units)
        tag = f"stockpool-bench-{name}-{clients}"
        cpu_before = self.cpu.read() if self.cpu else None
        statements = checkouts.STATEMENTS if kind == "checkout" else ()
        with WaitSampler(self.workspace.admin_dsn, tag, SAMPLE_INTERVAL, statements) as waits:
            result = run_cell(
                dsn,
                path,
                clients,
                seconds,
                jobs=self.config.jobs,
                application_name=tag,
                max_tries=SERIALIZABLE_TRIES if name == "serializable" else 1,
            )
        latencies = result.log.latencies_us
        cell = Cell(
            kind=kind,
            name=name,
            clients=clients,
            seconds=seconds,
            transactions=result.transactions,
            tps=result.tps,
            failed=result.failed,
            retried=result.retried,
            retries=result.retries,
            aborted=result.aborted,
            units_per_transaction=CART_LINES if kind == "cart" or name == "cart_claim" else 1,
            units_available=units,
            p50_ms=_ms(latencies, 50),
            p99_ms=_ms(latencies, 99),
            mean_ms=round(sum(latencies) / len(latencies) / 1000.0, 3) if latencies else None,
            wait_samples=waits.profile.samples,
            waits=dict(waits.profile.counts),
            waits_by_statement={k: dict(v) for k, v in waits.profile.by_statement.items()},
        )
        with psycopg.connect(dsn, autocommit=True) as conn:
            if self.cpu is not None and cpu_before is not None:
                # pgbench's backends exit after it does: count them whole.
                wait_for_sessions_gone(conn, tag)
                per_unit = cpumeter.per_unit_us(
                    cpu_before, self.cpu.read(), cell.transactions * cell.units_per_transaction
                )
                if per_unit is not None:
                    cell.cpu_server_us, cell.cpu_client_us = (round(v, 1) for v in per_unit)
            counted_as = name if kind == "checkout" else prepare_as
            cell.reserved = int(_scalar(conn, "SELECT bench.reserved(%s)", (counted_as,)))
            if kind == "shape":
                row = conn.execute("SELECT sold, decremented, drift FROM bench.shape_drift()").fetchone()
                if row:
                    cell.drift = {"sold": int(row[0]), "decremented": int(row[1]), "drift": int(row[2])}
            if prepare_as in ("stockpool", "cart"):
                cell.invariant_violations = int(
                    _scalar(conn, "SELECT count(*) FROM stockpool.check_invariants()")
                )
        flag_problems(cell)
        return cell

    def measure_catalogue(self, name: str, clients: int, seconds: int) -> Cell:
        """One catalogue cell: N keys, a key drawn per reservation. Cold: a fresh
        copy, every reservation a key's first touches. Warm: the same workload
        run once for as long beforehand, then measured on the same database."""
        strategy, dist, phase = name.split(":")
        prepare_as = f"catalogue_{strategy}"
        keys = self.config.catalogue_keys
        dsn = self.workspace.fresh(prepare_as, clients, keys, CATALOGUE_PER_KEY[dist])
        path = script(f"catalogue_{strategy}_{dist}")
        tag = f"stockpool-bench-{strategy}-{dist}-{phase}-{clients}"
        defines: dict[str, object] = {"keys": keys}
        reserved_before = 0
        if phase == "warm":
            run_cell(
                dsn,
                path,
                clients,
                seconds,
                jobs=self.config.jobs,
                application_name=tag + "-warmup",
                defines=defines,
            )
            with psycopg.connect(dsn, autocommit=True) as conn:
                wait_for_sessions_gone(conn, tag + "-warmup")
                reserved_before = int(_scalar(conn, "SELECT bench.reserved(%s)", (prepare_as,)))
        cpu_before = self.cpu.read() if self.cpu else None
        with WaitSampler(self.workspace.admin_dsn, tag, SAMPLE_INTERVAL) as waits:
            result = run_cell(
                dsn, path, clients, seconds, jobs=self.config.jobs, application_name=tag, defines=defines
            )
        latencies = result.log.latencies_us
        cell = Cell(
            kind="catalogue",
            name=name,
            clients=clients,
            seconds=seconds,
            transactions=result.transactions,
            tps=result.tps,
            failed=result.failed,
            aborted=result.aborted,
            units_available=keys * CATALOGUE_PER_KEY[dist],
            p50_ms=_ms(latencies, 50),
            p99_ms=_ms(latencies, 99),
            mean_ms=round(sum(latencies) / len(latencies) / 1000.0, 3) if latencies else None,
            wait_samples=waits.profile.samples,
            waits=dict(waits.profile.counts),
        )
        with psycopg.connect(dsn, autocommit=True) as conn:
            if self.cpu is not None and cpu_before is not None:
                wait_for_sessions_gone(conn, tag)
                per_unit = cpumeter.per_unit_us(cpu_before, self.cpu.read(), cell.transactions)
                if per_unit is not None:
                    cell.cpu_server_us, cell.cpu_client_us = (round(v, 1) for v in per_unit)
            cell.reserved = int(_scalar(conn, "SELECT bench.reserved(%s)", (prepare_as,))) - reserved_before
            if strategy == "stockpool":
                row = conn.execute("SELECT * FROM bench.catalogue_footprint()").fetchone()
                if row:
                    cell.pool_rows, cell.pool_bytes, cell.keys_touched = (int(v) for v in row)
                cell.invariant_violations = int(
                    _scalar(conn, "SELECT count(*) FROM stockpool.check_invariants()")
                )
        flag_problems(cell)
        return cell

    def soak(self) -> Soak:
        seconds, clients = self.config.soak_seconds, self.config.soak_clients
        soak = Soak(clients=clients, seconds=seconds)
        dsn = self.workspace.fresh("stockpool", clients, BIG_STOCK)
        tag = "stockpool-bench-soak"

        def health(conn: psycopg.Connection[Any], elapsed: float) -> None:
            row = conn.execute(POOL_HEALTH).fetchone()
            if row:
                soak.samples.append(SoakSample(round(elapsed, 1), int(row[0]), int(row[1]), int(row[2])))

        with (
            sampling(dsn, SOAK_SAMPLE_INTERVAL, health),
            WaitSampler(self.workspace.admin_dsn, tag, 1.0) as waits,
        ):
            result = run_cell(
                dsn,
                script("stockpool"),
                clients,
                seconds,
                jobs=self.config.jobs,
                application_name=tag,
                interval=int(SOAK_SAMPLE_INTERVAL),
            )
        soak.p50_ms = _ms(result.log.latencies_us, 50)
        soak.p99_ms = _ms(result.log.latencies_us, 99)
        soak.transactions, soak.tps, soak.aborted = result.transactions, result.tps, result.aborted
        # The last interval is usually cut short by the end of the run.
        soak.tps_by_interval = [
            round(n / SOAK_SAMPLE_INTERVAL, 1)
            for slot, n in enumerate(result.per_interval)
            if (slot + 1) * SOAK_SAMPLE_INTERVAL <= seconds
        ]
        soak.waits = dict(waits.profile.counts)
        with psycopg.connect(dsn, autocommit=True) as conn:
            soak.reserved = int(_scalar(conn, "SELECT bench.reserved('stockpool')"))
            soak.invariant_violations = int(
                _scalar(conn, "SELECT count(*) FROM stockpool.check_invariants()")
            )
        return soak

    def execute(self) -> BenchRun:
        cfg = self.config
        self.log("preparing the template database (stockpool + bench schema)")
        self.workspace.create_template()
        with psycopg.connect(self.workspace.template_dsn, autocommit=True) as conn:
            self.run.machine = machine(conn)
        plan: list[tuple[str, str, int]] = []
        for clients in cfg.clients:
            plan += [("strategy", s, clients) for s in cfg.strategies]
            if cfg.cart:
                plan.append(("cart", "reserve_cart", clients))
            if cfg.checkouts:
                plan += [("checkout", c, clients) for c in checkouts.CHECKOUTS]
        for clients in cfg.shape_clients:
            plan += [("shape", s, clients) for s in cfg.shapes]
        if cfg.catalogue_keys:
            for clients in cfg.catalogue_clients:
                plan += [
                    ("catalogue", catalogue_name(strategy, dist, phase), clients)
                    for dist in ("uniform", "zipf")
                    for phase in ("cold", "warm")
                    for strategy in ("counter_hold", "stockpool")
                ]
        try:
            for number, (kind, name, clients) in enumerate(plan, start=1):
                if kind == "catalogue":
                    cell = self.measure_catalogue(name, clients, cfg.seconds)
                else:
                    cell = self.measure(kind, name, clients, cfg.seconds)
                self.run.cells.append(cell)
                self.log(_cell_line(number, len(plan), cell))
            if cfg.soak_seconds > 0:
                self.log(f"soak: stockpool at {cfg.soak_clients} clients for {cfg.soak_seconds} s")
                self.run.soak = self.soak()
        finally:
            self.run.finished = _now()
            self.run.machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
            self.workspace.drop()
        return self.run


def catalogue_name(strategy: str, dist: str, phase: str) -> str:
    return f"{strategy}:{dist}:{phase}"


def flag_problems(cell: Cell) -> None:
    """Note what makes a cell's figure untrustworthy (it then shows as invalid)."""
    if cell.aborted:
        cell.notes.append(f"{cell.aborted} pgbench clients aborted")
    if cell.kind != "shape":
        expected = cell.transactions * cell.units_per_transaction
        # A run ends with up to one transaction per client in flight.
        if cell.reserved < expected - cell.clients * cell.units_per_transaction:
            cell.notes.append(f"reserved {cell.reserved} of {expected} (sold out or refused)")
    if cell.invariant_violations:
        cell.notes.append(f"check_invariants: {cell.invariant_violations} violations")


def _cell_line(number: int, total: int, cell: Cell) -> str:
    top = cell.top_wait()
    wait = f"{top[0]} {top[1]:.0%}" if top else "-"
    p99 = f"{cell.p99_ms:.1f}" if cell.p99_ms is not None else "-"
    flag = "" if cell.valid else f"  [{'; '.join(cell.notes) or 'invalid'}]"
    return (
        f"[{number}/{total}] {cell.name:>13} x {cell.clients:>3}: {cell.rate:>9.0f}/s  "
        f"p99 {p99:>8} ms  {wait}{flag}"
    )


def _scalar(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query.encode(), params).fetchone()
    return row[0] if row else None


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# --- machine -----------------------------------------------------------------


def machine(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What the numbers were measured on."""
    settings = {
        name: str(_scalar(conn, f"SELECT current_setting('{name}')"))
        for name in (
            "max_connections",
            "shared_buffers",
            "fsync",
            "synchronous_commit",
            "wal_level",
            "autovacuum_naptime",
            "autovacuum_max_workers",
            "max_wal_size",
        )
    }
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "server_version": str(_scalar(conn, "SELECT version()")),
        "pgbench": _pgbench_version(),
        "settings": settings,
        "git_commit": _git_commit(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }


def _cpu_model() -> str:
    lscpu = shutil.which("lscpu")
    if lscpu:
        out = subprocess.run([lscpu], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _pgbench_version() -> str:
    code, out, _ = local["pgbench"].run(["--version"], retcode=None)
    return str(out).strip() if code == 0 else "unknown"


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() or None


# --- resources ---------------------------------------------------------------


def raise_fd_limit(clients: int) -> None:
    """pgbench keeps a socket per client (and a log per thread): lift the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = clients + 256
    if soft >= need:
        return
    target = hard if hard == resource.RLIM_INFINITY else min(hard, max(need, 65536))
    if target != resource.RLIM_INFINITY and target < need:
        raise StockpoolError(
            f"{clients} clients need about {need} open files, the hard limit is {hard}",
            hint="raise it (ulimit -Hn, /etc/security/limits.conf) or run fewer clients",
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def check_server(dsn: str, clients: int) -> None:
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            max_connections = int(_scalar(conn, "SELECT current_setting('max_connections')::integer"))
    except psycopg.OperationalError as exc:
        raise StockpoolError(
            f"cannot connect to the bench server: {str(exc).strip().splitlines()[0]}",
            hint="check the DSN and that the server is up, or run without --dsn",
        ) from exc
    if max_connections < clients + 10:
        raise StockpoolError(
            f"max_connections is {max_connections}, the bench needs {clients} clients plus a few",
            hint=f"set max_connections >= {clients + 30} on that server, or run without --dsn",
        )


# --- command line --------------------------------------------------------------


def _int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(f"{what}: comma-separated integers expected, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise typer.BadParameter(f"{what}: positive integers expected, got {text!r}")
    return values


def _name_list(text: str, known: Sequence[str], what: str) -> list[str]:
    if text.strip() in ("", "none"):
        return []
    if text.strip() == "all":
        return list(known)
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise typer.BadParameter(f"{what}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return [n for n in known if n in names]  # canonical order


def command(
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            envvar="STOCKPOOL_DSN",
            help="A server to bench on (needs CREATEDB; the bench makes its own databases). "
            "Default: a throwaway cluster sized for the largest client count.",
        ),
    ] = None,
    clients: Annotated[str, typer.Option(help="Client counts, comma-separated.")] = ",".join(
        map(str, DEFAULT_CLIENTS)
    ),
    seconds: Annotated[int, typer.Option(min=1, help="Seconds per cell.")] = 15,
    strategies: Annotated[
        str, typer.Option(help=f"Strategies ('all' or some of {', '.join(STRATEGIES)}).")
    ] = "all",
    shapes: Annotated[
        str, typer.Option(help=f"Counter shapes ('all', 'none' or some of {', '.join(SHAPES)}).")
    ] = "all",
    shape_clients: Annotated[
        str | None, typer.Option(help="Client counts for the counter shapes (default: --clients).")
    ] = None,
    cart: Annotated[bool, typer.Option(help="Measure reserve_cart, 5 lines across 5 hot keys.")] = True,
    checkout: Annotated[
        bool,
        typer.Option(
            help="Measure whole checkouts: reserve then claim or release (stockpool, counter+hold), "
            "and a 5-line cart then claim."
        ),
    ] = True,
    catalogue_keys: Annotated[
        int,
        typer.Option(
            min=0,
            help="Catalogue cells: this many keys, one drawn per reservation (uniform and Zipf, "
            "first touches and warm), stockpool against counter+hold (0: none).",
        ),
    ] = CATALOGUE_KEYS,
    catalogue_clients: Annotated[str, typer.Option(help="Client counts for the catalogue cells.")] = ",".join(
        map(str, CATALOGUE_CLIENTS)
    ),
    soak_seconds: Annotated[int, typer.Option(min=0, help="Soak of the hot key (0: none).")] = 600,
    soak_clients: Annotated[int, typer.Option(min=1, help="Clients for the soak.")] = 128,
    jobs: Annotated[int, typer.Option(min=1, help="pgbench threads (-j).")] = max(2, os.cpu_count() or 2),
    out: Annotated[Path, typer.Option(help="Directory for the JSON, markdown and PNG.")] = RESULTS_DIR,
    publish: Annotated[
        bool, typer.Option(help="Also write the run to results/published/ (the README's copy).")
    ] = False,
) -> None:
    """Side-by-side benchmark of reservation strategies on one hot key."""
    from stockpool import benchreport
    from stockpool.cli import console, fail

    client_list = _int_list(clients, "--clients")
    chosen = _name_list(strategies, STRATEGIES, "--strategies")
    if "ceiling" not in chosen:
        chosen.insert(0, "ceiling")  # every ratio is to the same run's ceiling
    config = BenchConfig(
        clients=client_list,
        seconds=seconds,
        strategies=chosen,
        shapes=_name_list(shapes, SHAPES, "--shapes"),
        shape_clients=_int_list(shape_clients, "--shape-clients") if shape_clients else client_list,
        cart=cart,
        checkouts=checkout,
        catalogue_keys=catalogue_keys,
        catalogue_clients=_int_list(catalogue_clients, "--catalogue-clients"),
        soak_seconds=soak_seconds,
        soak_clients=soak_clients,
        jobs=jobs,
    )
    most = max(
        [
            *config.clients,
            *config.shape_clients,
            *(config.catalogue_clients if catalogue_keys else []),
            config.soak_clients if soak_seconds else 1,
        ]
    )
    try:
        benchreport.require_chart_library()
        raise_fd_limit(most)
        with _server(dsn, most) as (admin_dsn, cpu):
            check_server(admin_dsn, most)
            bench = Bench(
                admin_dsn, config, lambda line: console.print(line, highlight=False, soft_wrap=True), cpu
            )
            run = bench.execute()
    except StockpoolError as exc:
        fail(exc)
        return
    paths = benchreport.write(run, out, publish=publish)
    benchreport.print_summary(console, run)
    for path in paths:
        console.print(f"wrote {path}")


@contextlib.contextmanager
def _server(dsn: str | None, clients: int) -> Iterator[tuple[str, cpumeter.ServerCPU | None]]:
    """The admin DSN, and the server's CPU meter when it is our own cluster."""
    if dsn:
        yield dsn, None
        return
    with clusters.throwaway(clusters.settings_for_clients(clients)) as cl:
        yield cl.dsn, cpumeter.ServerCPU.of_datadir(cl.datadir)
