"""What a bench run is made of: its configuration, its cells, its soak, and
the constants the runner and the reports share."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Where `stockpool bench` writes its reports unless told otherwise (the working
# directory's results/, like `stockpool race`).
RESULTS_DIR = Path("results")

STRATEGIES = ("ceiling", "counter", "counter_hold", "skip_locked", "pool", "sharded", "stockpool")
SHAPES = ("naive", "locked", "atomic", "serializable")
DEFAULT_CLIENTS = (1, 8, 32, 128, 512)
CATALOGUE_CLIENTS = (1, 8, 32, 128)
CATALOGUE_KEYS = 20_000
POOLED_CLIENTS = (128, 512, 1000)
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
# Seats (issue 15): one hot named key; the cells, and the two whose calls may
# rightly be refused (no block free near sellout; a pick another buyer took).
SEAT_CELLS = ("named_1", "named_4_adjacent", "named_4_near", "labels_pick", "cloakroom")
SEAT_REFUSALS = ("named_4_adjacent", "named_4_near", "labels_pick")
SEAT_ADJACENT = ("named_4_adjacent", "named_4_near")
SEAT_UNITS = 50_000
SEAT_BLOCK = 4  # the adjacent cells: seats per call
NEAR_SELLOUT = 0.9  # named_4_near: groups of 1-4 seats held with this probability before the cell
CART_LINES = 5
SERIALIZABLE_TRIES = 10
SAMPLE_INTERVAL = 0.2
SOAK_SAMPLE_INTERVAL = 10.0
TEMPLATE_DB = "stockpool_bench_template"
CELL_DB = "stockpool_bench"


@dataclass
class Cell:
    """One pgbench run: a strategy (or shape, or cart) at one client count."""

    kind: str  # strategy | shape | cart | checkout | catalogue | pooled
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
    # pooled cells: what pgbouncer said (server/pooler.PoolerFigures.as_json)
    pooler: dict[str, Any] | None = None
    # seats cells: calls, success rates, what is left free (runner.seat_figures)
    seats: dict[str, Any] | None = None
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
    jobs: int | None  # pgbench threads; None: pgbench.threads_for(clients)
    catalogue_keys: int = 0  # 0: no catalogue cells
    catalogue_clients: list[int] = field(default_factory=lambda: list(CATALOGUE_CLIENTS))
    pooler: str = "none"  # pgbouncer: stockpool through it too, beside the direct cells
    pooled_clients: list[int] = field(default_factory=lambda: list(POOLED_CLIENTS))
    seat_clients: list[int] = field(default_factory=list)  # empty: no seats cells
    seat_units: int = SEAT_UNITS
    placement: str = "shared"  # server/placement.py: which cores the server, pgbouncer and pgbench use

    @property
    def most_clients(self) -> int:
        """The largest client count of any cell: what the server must have room for."""
        return max(
            [
                *self.clients,
                *self.shape_clients,
                *(self.catalogue_clients if self.catalogue_keys else []),
                *(self.pooled_clients if self.pooler != "none" else []),
                *self.seat_clients,
                self.soak_clients if self.soak_seconds else 1,
            ]
        )


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


def catalogue_name(strategy: str, dist: str, phase: str) -> str:
    return f"{strategy}:{dist}:{phase}"


def flag_problems(cell: Cell) -> None:
    """Note what makes a cell's figure untrustworthy (it then shows as invalid)."""
    if cell.aborted:
        cell.notes.append(f"{cell.aborted} pgbench clients aborted")
    if cell.kind != "shape" and not (cell.kind == "seats" and cell.name in SEAT_REFUSALS):
        expected = cell.transactions * cell.units_per_transaction
        # A run ends with up to one transaction per client in flight.
        if cell.reserved < expected - cell.clients * cell.units_per_transaction:
            cell.notes.append(f"reserved {cell.reserved} of {expected} (sold out or refused)")
    if cell.invariant_violations:
        cell.notes.append(f"check_invariants: {cell.invariant_violations} violations")
