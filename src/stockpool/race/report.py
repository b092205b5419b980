"""The race report: one :class:`RunReport` per pgbench run, as rich tables in
the terminal and as JSON under results/."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from stockpool.checks import Check, verdict
from stockpool.server.pgbench import TxnLog, percentile

PERCENTILES = (50, 95, 99)


def latency_ms(log: TxnLog) -> dict[str, float | None]:
    """p50/p95/p99/max in milliseconds, exact, from every successful transaction."""
    values = log.latencies_us
    out: dict[str, float | None] = {}
    for pct in PERCENTILES:
        value = percentile(values, pct)
        out[f"p{pct}"] = None if value is None else value / 1000
    out["max"] = values[-1] / 1000 if values else None
    return out


@dataclass
class RunReport:
    scenario: str
    shape: str
    clients: int
    run_id: int
    elapsed_s: float
    transactions: int  # pgbench transactions that completed
    reservations: int  # reservation calls among them
    latency_ms: dict[str, float | None]
    latency_of: str  # what one measured latency covers
    errors: dict[str, int] = field(default_factory=dict)
    error_messages: dict[str, str] = field(default_factory=dict)
    failed: int = 0
    retries: int = 0
    aborted_clients: int = 0
    waits: dict[str, Any] = field(default_factory=dict)
    pool: dict[str, Any] = field(default_factory=dict)
    wal_bytes: int = 0
    checks: list[Check] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def reservations_per_s(self) -> float:
        return self.reservations / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def wal_bytes_per_reservation(self) -> float | None:
        return self.wal_bytes / self.reservations if self.reservations else None

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "shape": self.shape,
            "clients": self.clients,
            "run_id": self.run_id,
            "passed": self.passed,
            "elapsed_s": round(self.elapsed_s, 3),
            "transactions": self.transactions,
            "reservations": self.reservations,
            "reservations_per_s": round(self.reservations_per_s, 1),
            "latency_ms": self.latency_ms,
            "latency_of": self.latency_of,
            "errors_by_sqlstate": self.errors,
            "error_messages": self.error_messages,
            "failed_transactions": self.failed,
            "retries": self.retries,
            "aborted_clients": self.aborted_clients,
            "wait_events": self.waits,
            "pool": self.pool,
            "autovacuum_runs": self.pool.get("autovacuum_runs", 0),
            "wal_bytes": self.wal_bytes,
            "wal_bytes_per_reservation": (
                None if self.wal_bytes_per_reservation is None else round(self.wal_bytes_per_reservation, 1)
            ),
            "checks": [c.as_json() for c in self.checks],
            "counts": self.counts,
            "params": self.params,
        }


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _size(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB"):
        if abs(value) < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _verdict(passed: bool | None) -> str:
    text = verdict(passed)
    return {"PASS": "[green]PASS[/]", "FAIL": "[bold red]FAIL[/]"}.get(text, text)


def _label(r: RunReport) -> str:
    return r.scenario + ("" if r.shape == "stockpool" else f" ({r.shape})")


def render(console: Console, reports: Sequence[RunReport]) -> Console:
    """Two summary tables (load and latency; server side), then each run's checks.
    Returns the console it printed on.

    Written to a file or a pipe (CI logs), the tables get 120 columns instead
    of rich's 80, so that no figure is cut.
    """
    if not console.is_terminal and console.width < 120:
        console = Console(width=120, file=console.file, no_color=console.no_color)
    console.print(_load_table(reports))
    console.print(_server_table(reports))
    for r in reports:
        console.print(_checks_table(r))
    return console


def _load_table(reports: Sequence[RunReport]) -> Table:
    load = Table(title="stockpool race: load and latency", title_justify="left", box=box.SIMPLE_HEAD)
    for name in (
        "run",
        "clients",
        "res/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "errors",
        "retries",
        "checks",
    ):
        load.add_column(name, justify="left" if name in ("run", "errors", "checks") else "right")
    for r in reports:
        errors = ", ".join(f"{k} x{v}" for k, v in sorted(r.errors.items())) or "none"
        load.add_row(
            _label(r),
            str(r.clients),
            f"{r.reservations_per_s:,.0f}",
            _ms(r.latency_ms.get("p50")),
            _ms(r.latency_ms.get("p95")),
            _ms(r.latency_ms.get("p99")),
            _ms(r.latency_ms.get("max")),
            errors,
            str(r.retries),
            _verdict(r.passed),
        )
    return load


def _server_table(reports: Sequence[RunReport]) -> Table:
    server = Table(title="stockpool race: server side", title_justify="left", box=box.SIMPLE_HEAD)
    for name in (
        "run",
        "clients",
        "top wait events (avg backends)",
        "pool dead",
        "dead %",
        "autovac",
        "WAL/res",
    ):
        server.add_column(name, justify="left" if name in ("run",) or name.startswith("top") else "right")
    for r in reports:
        top = list(r.waits.get("avg_backends", {}).items())[:3]
        pool = r.shape == "stockpool" and bool(r.pool)
        server.add_row(
            _label(r),
            str(r.clients),
            ", ".join(f"{event} {avg:.1f}" for event, avg in top) or "-",
            f"{r.pool['dead_tuples']:,}" if pool else "-",
            f"{r.pool['dead_ratio']:.1%}" if pool else "-",
            str(r.pool.get("autovacuum_runs", 0)) if pool else "-",
            _size(r.wal_bytes_per_reservation),
        )
    return server


def _checks_table(r: RunReport) -> Table:
    """One run's checks, then what was measured, in dim lines."""
    table = Table(
        title=f"{_label(r)} @ {r.clients} clients: {'PASS' if r.passed else 'FAIL'}",
        title_justify="left",
        show_header=False,
        box=None,
        padding=(0, 1),
    )
    table.add_column("", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("")
    for check in r.checks:
        table.add_row(_verdict(check.passed), check.name, check.detail)
    top = r.waits.get("avg_backends", {})
    if top:
        waits = ", ".join(f"{event} {avg:.2f}" for event, avg in list(top.items())[:5])
        table.add_row("", "[dim]wait events[/]", f"[dim]{waits} ({r.waits.get('samples', 0)} samples)[/]")
    table.add_row(
        "",
        "[dim]measured[/]",
        f"[dim]{r.transactions:,} transactions in {r.elapsed_s:.1f} s; one latency = {r.latency_of}[/]",
    )
    lag = r.counts.get("settling")
    if lag:
        table.add_row(
            "",
            "[dim]settling lag[/]",
            f"[dim]claims waiting to be folded into their ledger rows: at most {lag['max_pending']:,} "
            f"(mean {lag['mean_pending']:,}), the oldest {lag['max_oldest_s']:.2f} s old, "
            f"in {lag['samples']} looks; {lag['end_pending']:,} when the clients stopped[/]",
        )
    for state, message in sorted(r.error_messages.items()):
        table.add_row("", f"[dim]{state}[/]", f"[dim]{message}[/]")
    return table


def write_json(results_dir: Path, reports: Sequence[RunReport], meta: dict[str, Any]) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = results_dir / f"race-{stamp}.json"
    n = 1
    while path.exists():
        n += 1
        path = results_dir / f"race-{stamp}-{n}.json"
    document = {
        **meta,
        "passed": all(r.passed for r in reports),
        "runs": [r.as_json() for r in reports],
    }
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return path
