"""The bench's runner: every cell of a run, one after the other.

A cell is one pgbench run in prepared mode on a fresh copy of the template
database (bench/workspace.py), after VACUUM and CHECKPOINT. While it runs a
thread samples the wait events of the cell's backends every 200 ms. Latency
percentiles come from pgbench's per-transaction logs; what a strategy really
reserved is counted from its tables afterwards, so a cell that sold out or
lost clients is flagged rather than reported as fast.

With a pooler (``--pooler pgbouncer``), stockpool is also measured through a
throwaway pgbouncer in transaction mode (server/pooler.py) at the pooled
client counts, beside the direct ceiling and stockpool cells of the same
counts. Those cells run pgbench in the simple protocol (pgbouncer 1.18 keeps
no prepared statements in that mode) and record pgbouncer's SHOW STATS and
SHOW POOLS; their client CPU is pgbench's and pgbouncer's together.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from stockpool.bench import checkouts
from stockpool.bench.machine import machine
from stockpool.bench.model import (
    BIG_STOCK,
    CART_LINES,
    CATALOGUE_PER_KEY,
    MAX_UNIT_ROWS,
    MIN_UNIT_ROWS,
    NEAR_SELLOUT,
    SAMPLE_INTERVAL,
    SEAT_ADJACENT,
    SEAT_BLOCK,
    SEAT_CELLS,
    SERIALIZABLE_TRIES,
    SOAK_SAMPLE_INTERVAL,
    BenchConfig,
    BenchRun,
    Cell,
    Soak,
    SoakSample,
    catalogue_name,
    flag_problems,
)
from stockpool.bench.workspace import Workspace, script
from stockpool.server import cpumeter, pgbench, pooler
from stockpool.server.placement import pin, placed, placement
from stockpool.server.sampler import Periodic, WaitSampler
from stockpool.server.stats import wait_for_sessions_gone

POOL_HEALTH = """
SELECT coalesce(sum(s.n_live_tup), 0)::bigint,
       coalesce(sum(s.n_dead_tup), 0)::bigint,
       coalesce(sum(s.autovacuum_count), 0)::bigint
FROM pg_catalog.pg_inherits AS i
JOIN pg_catalog.pg_stat_user_tables AS s ON s.relid = i.inhrelid
WHERE i.inhparent = 'stockpool.pool_units'::pg_catalog.regclass
    AND s.n_live_tup + s.n_dead_tup > 0
"""


class PoolHealth(Periodic):
    """The pool partitions' live and dead tuples, every period from one period on."""

    def __init__(self, dsn: str, period: float) -> None:
        super().__init__("pool-health", dsn, period, start_after=period)
        self.samples: list[SoakSample] = []

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
        row = conn.execute(POOL_HEALTH).fetchone()
        if row:
            self.samples.append(SoakSample(round(elapsed, 1), int(row[0]), int(row[1]), int(row[2])))
        return False


# Throughput seats cells get at least this many seats, and 1.5 x what the
# same run's ceiling did in a cell's time (a key sold out mid-cell would
# measure refusals), at most SEAT_MAX_UNITS.
SEAT_MAX_UNITS = 1_000_000
NEAR_SELLOUT_ROWS = 100  # rows sold per transaction before the near-sellout cell
SEATS_PER_ROW, ROW_STRIDE = 20, 22  # bench.seats(): rows of 20, an aisle between rows


def seat_span(units: int) -> int:
    """The highest position of bench.seats(units)."""
    last = units - 1
    return last // SEATS_PER_ROW * ROW_STRIDE + last % SEATS_PER_ROW + 1


def seat_figures(cell: Cell, units: int, free_seats: int, free_blocks: int) -> dict[str, Any]:
    """A seats cell's calls, the share of them that held seats, and what is
    left free at the end (seats, and blocks of the cell's seats per call)."""
    calls = cell.transactions
    reserved_calls = cell.reserved // cell.units_per_transaction
    return {
        "units": units,
        "calls": calls,
        "reserved_calls": reserved_calls,
        "success": round(reserved_calls / calls, 4) if calls else None,
        "free_at_end": free_seats,
        "free_blocks_at_end": free_blocks,
        "fill_at_end": round(1 - free_seats / units, 4) if units else None,
    }


def _ms(sorted_us: Sequence[int], pct: float) -> float | None:
    value = pgbench.percentile(sorted_us, pct)
    return round(value / 1000.0, 3) if value is not None else None


def _scalar(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query.encode(), params).fetchone()
    return row[0] if row else None


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _cell(
    kind: str, name: str, clients: int, seconds: int, result: pgbench.PgbenchResult, waits: WaitSampler
) -> Cell:
    """A cell with what pgbench and the wait sampler saw."""
    log = result.log
    latencies = log.latencies_us
    return Cell(
        kind=kind,
        name=name,
        clients=clients,
        seconds=seconds,
        transactions=log.succeeded,
        tps=result.tps,
        failed=log.failed,
        retried=log.retried,
        retries=log.retries,
        aborted=len(result.aborts),
        p50_ms=_ms(latencies, 50),
        p99_ms=_ms(latencies, 99),
        mean_ms=round(sum(latencies) / len(latencies) / 1000.0, 3) if latencies else None,
        wait_samples=waits.profile.samples,
        waits=dict(waits.profile.counts),
        waits_by_statement={k: dict(v) for k, v in waits.profile.by_statement.items()},
    )


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
        self.placement = placement(config.placement)

    def units_for(self, strategy: str, clients: int) -> int:
        if strategy in ("skip_locked", "sharded"):
            ceiling = self.run.cell("strategy", "ceiling", clients)
            guess = 2 * (ceiling.tps if ceiling else 20_000) * self.config.seconds
            return int(min(MAX_UNIT_ROWS, max(MIN_UNIT_ROWS, guess)))
        return BIG_STOCK

    def _pgbench(
        self,
        dsn: str,
        path: Path,
        clients: int,
        tag: str,
        *,
        max_tries: int = 1,
        defines: dict[str, object] | None = None,
        seconds: int | None = None,
        prepared: bool = True,
    ) -> pgbench.PgbenchResult:
        return pgbench.run(
            dsn,
            path,
            clients,
            seconds=seconds or self.config.seconds,
            jobs=self.config.jobs or pgbench.threads_for(clients),
            application_name=tag,
            max_tries=max_tries,
            defines=defines,
            prepared=prepared,
        )

    def _measured(
        self,
        kind: str,
        name: str,
        clients: int,
        dsn: str,
        path: Path,
        tag: str,
        *,
        max_tries: int = 1,
        defines: dict[str, object] | None = None,
        prepared: bool = True,
    ) -> tuple[Cell, cpumeter.Reading | None]:
        """One timed pgbench run under the wait sampler: its cell, and the CPU
        meter's reading from before it."""
        cpu_before = self.cpu.read() if self.cpu else None
        statements = checkouts.STATEMENTS if kind == "checkout" else ()
        with WaitSampler(self.workspace.admin_dsn, tag, SAMPLE_INTERVAL, statements) as waits:
            result = self._pgbench(
                dsn, path, clients, tag, max_tries=max_tries, defines=defines, prepared=prepared
            )
        return _cell(kind, name, clients, self.config.seconds, result, waits), cpu_before

    def _cpu(
        self, conn: psycopg.Connection[Any], cell: Cell, tag: str, before: cpumeter.Reading | None
    ) -> None:
        """CPU per unit, once pgbench's backends have exited (they are counted whole)."""
        if self.cpu is None or before is None:
            return
        wait_for_sessions_gone(conn, tag)
        per_unit = cpumeter.per_unit_us(
            before, self.cpu.read(), cell.transactions * cell.units_per_transaction
        )
        if per_unit is not None:
            cell.cpu_server_us, cell.cpu_client_us = (round(v, 1) for v in per_unit)

    def _through_pooler(
        self, name: str, clients: int, dsn: str, path: Path, tag: str
    ) -> tuple[Cell, cpumeter.Reading | None]:
        """A pooled cell: pgbench's clients through a throwaway pgbouncer in
        transaction mode, in the simple protocol (no named prepared statements
        through it), with pgbouncer's own figures."""
        with pooler.pgbouncer(dsn, clients) as bouncer, pooler.PoolWatch(bouncer, SAMPLE_INTERVAL) as watch:
            if self.placement.pooler != self.placement.clients:
                pin(bouncer.pid, self.placement.pooler)
            cell, cpu_before = self._measured("pooled", name, clients, bouncer.dsn, path, tag, prepared=False)
        cell.pooler = {"pool_size": bouncer.pool_size, "server": bouncer.server, **watch.figures.as_json()}
        return cell, cpu_before

    def measure(self, kind: str, name: str, clients: int) -> Cell:
        """A strategy, shape, cart, checkout or pooled cell."""
        if kind == "checkout":
            prepare_as, path = checkouts.prepare_as(name), script(f"checkout_{name}")
        else:
            prepare_as = {"cart": "cart", "pooled": "stockpool"}.get(kind, name)
            path = script(prepare_as)
        units = self.units_for(name, clients)
        dsn = self.workspace.fresh(prepare_as, clients, units)
        tag = f"stockpool-bench-{name}-{clients}"
        tries = SERIALIZABLE_TRIES if name == "serializable" else 1
        if kind == "pooled":
            cell, cpu_before = self._through_pooler(name, clients, dsn, path, tag)
        else:
            cell, cpu_before = self._measured(kind, name, clients, dsn, path, tag, max_tries=tries)
        cell.units_per_transaction = CART_LINES if kind == "cart" or name == "cart_claim" else 1
        cell.units_available = units
        with psycopg.connect(dsn, autocommit=True) as conn:
            self._cpu(conn, cell, tag, cpu_before)
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

    def seat_units_for(self, name: str, clients: int) -> int:
        """The seats of a seats cell: --seat-units for the adjacent cells (the
        drop as it is); for the others at least that, and 1.5 x what the same
        run's ceiling did in a cell's time, so that none sells out while measured."""
        if name in SEAT_ADJACENT:
            return self.config.seat_units
        ceiling = self.run.cell("strategy", "ceiling", clients)
        guess = 1.5 * (ceiling.tps if ceiling else 20_000) * self.config.seconds
        return int(min(SEAT_MAX_UNITS, max(self.config.seat_units, guess)))

    def _near_sellout(self, dsn: str, units: int) -> dict[str, int]:
        """Sell the key the way a drop leaves it near sellout (bench.near_sellout,
        NEAR_SELLOUT_ROWS rows per transaction), then VACUUM and CHECKPOINT."""
        rows = -(-units // SEATS_PER_ROW)
        held = 0
        with psycopg.connect(dsn, autocommit=True) as conn:
            for first in range(0, rows, NEAR_SELLOUT_ROWS):
                last = min(first + NEAR_SELLOUT_ROWS, rows) - 1
                held += int(
                    _scalar(conn, "SELECT bench.near_sellout(%s, %s, %s)", (first, last, NEAR_SELLOUT))
                )
            row = conn.execute(
                "SELECT free_seats, free_blocks FROM bench.seat_figures(%s)", (SEAT_BLOCK,)
            ).fetchone()
            conn.execute("VACUUM (ANALYZE)")
            conn.execute("CHECKPOINT")
        free, blocks = row if row else (0, 0)
        return {"held_at_start": held, "free_at_start": int(free), "free_blocks_at_start": int(blocks)}

    def measure_seats(self, name: str, clients: int) -> Cell:
        """One seats cell: a fresh copy with one hot named key (or the
        cloakroom's seats), one call per transaction; named_4_near on a key
        sold near sellout first."""
        units = self.seat_units_for(name, clients)
        prepare_as = "cloakroom" if name == "cloakroom" else "named"
        dsn = self.workspace.fresh(prepare_as, clients, units)
        before = self._near_sellout(dsn, units) if name == "named_4_near" else {}
        tag = f"stockpool-bench-{name}-{clients}"
        path = script("named_4_adjacent" if name in SEAT_ADJACENT else name)
        defines: dict[str, object] = {"span": seat_span(units)}
        cell, cpu_before = self._measured("seats", name, clients, dsn, path, tag, defines=defines)
        cell.units_per_transaction = SEAT_BLOCK if name in SEAT_ADJACENT else 1
        cell.units_available = units - before.get("held_at_start", 0)
        with psycopg.connect(dsn, autocommit=True) as conn:
            self._cpu(conn, cell, tag, cpu_before)
            cell.reserved = int(_scalar(conn, "SELECT bench.reserved(%s)", (prepare_as,)))
            cell.reserved -= before.get("held_at_start", 0)
            if prepare_as == "named":
                row = conn.execute(
                    "SELECT free_seats, free_blocks FROM bench.seat_figures(%s)",
                    (cell.units_per_transaction,),
                ).fetchone()
                free, blocks = row if row else (0, 0)
                cell.invariant_violations = int(
                    _scalar(conn, "SELECT count(*) FROM stockpool.check_invariants()")
                )
            else:
                free = blocks = units - cell.reserved
        cell.seats = {**seat_figures(cell, units, int(free), int(blocks)), **before}
        flag_problems(cell)
        return cell

    def measure_catalogue(self, name: str, clients: int) -> Cell:
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
            self._pgbench(dsn, path, clients, tag + "-warmup", defines=defines)
            with psycopg.connect(dsn, autocommit=True) as conn:
                wait_for_sessions_gone(conn, tag + "-warmup")
                reserved_before = int(_scalar(conn, "SELECT bench.reserved(%s)", (prepare_as,)))
        cell, cpu_before = self._measured("catalogue", name, clients, dsn, path, tag, defines=defines)
        cell.units_available = keys * CATALOGUE_PER_KEY[dist]
        with psycopg.connect(dsn, autocommit=True) as conn:
            self._cpu(conn, cell, tag, cpu_before)
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
        with (
            PoolHealth(dsn, SOAK_SAMPLE_INTERVAL) as health,
            WaitSampler(self.workspace.admin_dsn, tag, 1.0) as waits,
        ):
            result = self._pgbench(dsn, script("stockpool"), clients, tag, seconds=seconds)
        soak.samples = health.samples
        soak.p50_ms = _ms(result.log.latencies_us, 50)
        soak.p99_ms = _ms(result.log.latencies_us, 99)
        soak.transactions, soak.tps, soak.aborted = result.log.succeeded, result.tps, len(result.aborts)
        # The last interval is usually cut short by the end of the run.
        soak.tps_by_interval = [
            round(n / SOAK_SAMPLE_INTERVAL, 1)
            for slot, n in enumerate(result.log.per_interval(int(SOAK_SAMPLE_INTERVAL)))
            if (slot + 1) * SOAK_SAMPLE_INTERVAL <= seconds
        ]
        soak.waits = dict(waits.profile.counts)
        with psycopg.connect(dsn, autocommit=True) as conn:
            soak.reserved = int(_scalar(conn, "SELECT bench.reserved('stockpool')"))
            soak.invariant_violations = int(
                _scalar(conn, "SELECT count(*) FROM stockpool.check_invariants()")
            )
        return soak

    def plan(self) -> list[tuple[str, str, int]]:
        """Every cell of the run, in order: (kind, name, clients)."""
        cfg = self.config
        plan: list[tuple[str, str, int]] = []
        pooled = cfg.pooled_clients if cfg.pooler != "none" else []
        for clients in cfg.clients:
            plan += [("strategy", s, clients) for s in cfg.strategies]
            if clients in pooled:
                plan.append(("pooled", cfg.pooler, clients))
            if cfg.cart:
                plan.append(("cart", "reserve_cart", clients))
            if cfg.checkouts:
                plan += [("checkout", c, clients) for c in checkouts.CHECKOUTS]
            if clients in cfg.seat_clients:
                plan += self._seat_plan(clients)
        for clients in pooled:
            if clients not in cfg.clients:
                # The pooled cell beside the direct ones it is compared with.
                plan += [("strategy", s, clients) for s in ("ceiling", "stockpool")]
                plan.append(("pooled", cfg.pooler, clients))
        for clients in cfg.seat_clients:
            if clients not in cfg.clients:
                plan += self._seat_plan(clients)
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
        return plan

    def _seat_plan(self, clients: int) -> list[tuple[str, str, int]]:
        """The seats cells at one client count, after the ceiling and the
        counted stockpool cells they are compared with (when not run already)."""
        cfg = self.config
        done = cfg.strategies if clients in cfg.clients else []
        plan = [("strategy", s, clients) for s in ("ceiling", "stockpool") if s not in done]
        return plan + [("seats", name, clients) for name in SEAT_CELLS]

    def execute(self) -> BenchRun:
        self.log("preparing the template database (stockpool + bench schema)")
        self.workspace.create_template()
        with psycopg.connect(self.workspace.template_dsn, autocommit=True) as conn:
            self.run.machine = machine(conn)
        self.run.machine["placement"] = self.placement.describe()
        plan = self.plan()
        try:
            with placed(self.placement, self.cpu.pid if self.cpu else None):
                for number, (kind, name, clients) in enumerate(plan, start=1):
                    if kind == "catalogue":
                        cell = self.measure_catalogue(name, clients)
                    elif kind == "seats":
                        cell = self.measure_seats(name, clients)
                    else:
                        cell = self.measure(kind, name, clients)
                    self.run.cells.append(cell)
                    self.log(_cell_line(number, len(plan), cell))
                if self.config.soak_seconds > 0:
                    soak = self.config
                    self.log(f"soak: stockpool at {soak.soak_clients} clients for {soak.soak_seconds} s")
                    self.run.soak = self.soak()
        finally:
            self.run.finished = _now()
            self.run.machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
            self.workspace.drop()
        return self.run


def _cell_line(number: int, total: int, cell: Cell) -> str:
    top = cell.top_wait()
    wait = f"{top[0]} {top[1]:.0%}" if top else "-"
    p99 = f"{cell.p99_ms:.1f}" if cell.p99_ms is not None else "-"
    flag = "" if cell.valid else f"  [{'; '.join(cell.notes) or 'invalid'}]"
    return (
        f"[{number}/{total}] {cell.name:>13} x {cell.clients:>3}: {cell.rate:>9.0f}/s  "
        f"p99 {p99:>8} ms  {wait}{flag}"
    )
