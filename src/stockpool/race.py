"""Races of the installed package under load, driven through pgbench."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import psycopg
import typer
from plumbum import local
from rich.console import Console
from rich.table import Table

from stockpool.errors import StockpoolError

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench" / "pgbench"


def pgbench_script(name: str) -> Path:
    path = BENCH_DIR / f"{name}.sql"
    if not path.exists():
        raise StockpoolError(f"pgbench script {path} not found")
    return path


@dataclass
class PgbenchRun:
    transactions: int
    failed: int
    tps: float
    output: str


def run_pgbench(
    dsn: str,
    script: Path,
    clients: int,
    *,
    transactions: int | None = None,
    seconds: int | None = None,
    defines: dict[str, object] | None = None,
    extra: tuple[str, ...] = (),
) -> PgbenchRun:
    pgbench = local["pgbench"]
    args = [
        "-n",
        "-c",
        str(clients),
        "-j",
        str(min(clients, 4)),
        "-f",
        str(script),
        "--max-tries=1",
        "--failures-detailed",
    ]
    if transactions is not None:
        args += ["-t", str(transactions)]
    if seconds is not None:
        args += ["-T", str(seconds)]
    for key, value in (defines or {}).items():
        args += ["-D", f"{key}={value}"]
    args += [*extra, dsn]
    code, out, err = pgbench.run(args, retcode=None)
    text = out + err
    if code not in (0, 2):  # 2: some transactions failed; reported, not fatal here
        raise StockpoolError(f"pgbench failed (exit {code}): {text.strip().splitlines()[-1:]}")
    processed = re.search(r"number of transactions actually processed: (\d+)", text)
    failed = re.search(r"number of failed transactions: (\d+)", text)
    tps = re.search(r"tps = ([\d.]+)", text)
    return PgbenchRun(
        transactions=int(processed.group(1)) if processed else 0,
        failed=int(failed.group(1)) if failed else 0,
        tps=float(tps.group(1)) if tps else 0.0,
        output=text,
    )


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


@dataclass
class SelloutResult:
    clients: int
    per_client: int
    units: int
    attempts: int
    failed: int
    held: int
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


SHOP, ITEM, LOCATION = 1, 1, 1


def sellout(dsn: str, clients: int = 64, per_client: int = 20, units: int = 50) -> SelloutResult:
    """C clients x R one-unit reservations race for N units of one key."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (SHOP, ITEM, LOCATION, units))
        deadlocks_before = _deadlocks(conn)
    run = run_pgbench(
        dsn,
        pgbench_script("sellout"),
        clients,
        transactions=per_client,
        defines={"shop": SHOP, "item": ITEM, "location": LOCATION},
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        deadlocks = _deadlocks(conn) - deadlocks_before
        on_hand, pooled, held = conn.execute(
            "SELECT on_hand, pooled, held FROM stockpool.stock_levels"
            " WHERE shop_id = %s AND item_id = %s AND location_id = %s",
            (SHOP, ITEM, LOCATION),
        ).fetchone() or (0, 0, 0)
        violations = conn.execute("SELECT invariant, detail FROM stockpool.check_invariants()").fetchall()
    attempts = clients * per_client
    result = SelloutResult(clients, per_client, units, attempts, run.failed, held)
    expected = min(units, attempts)
    result.checks = [
        Check("no oversell", held <= units, f"{held} held of {units}"),
        Check("no undersell", held >= expected, f"{held} held, {expected} possible"),
        Check("pooled + held = on_hand", pooled + held == on_hand, f"{pooled} + {held} vs {on_hand}"),
        Check("zero deadlocks", deadlocks == 0, f"{deadlocks} deadlocks"),
        Check(
            "no failed transactions",
            run.failed == 0 and run.transactions == attempts,
            f"{run.transactions} processed, {run.failed} failed",
        ),
        Check(
            "check_invariants() empty",
            not violations,
            "; ".join(f"{n}: {d}" for n, d in violations) or "none",
        ),
    ]
    return result


def _deadlocks(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT deadlocks FROM pg_catalog.pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def print_sellout(console: Console, result: SelloutResult) -> None:
    table = Table(
        title=f"sellout: {result.clients} clients x {result.per_client} reservations for {result.units} units"
    )
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail")
    for check in result.checks:
        table.add_row(check.name, "[green]PASS[/]" if check.passed else "[red]FAIL[/]", check.detail)
    console.print(table)


def command(
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", envvar="STOCKPOOL_DSN", help="PostgreSQL URL; default: a throwaway cluster."),
    ] = None,
    clients: Annotated[int, typer.Option(min=1, help="Concurrent pgbench clients.")] = 64,
    per_client: Annotated[int, typer.Option(min=1, help="Reservations per client.")] = 20,
    units: Annotated[int, typer.Option(min=0, help="Units on hand for the raced key.")] = 50,
) -> None:
    """The sell-out race: many clients, few units; check the guarantees afterwards."""
    from stockpool.cli import console, database, fail

    try:
        with database(dsn, clients) as url:
            result = sellout(url, clients=clients, per_client=per_client, units=units)
    except StockpoolError as exc:
        fail(exc)
        return
    print_sellout(console, result)
    raise typer.Exit(0 if result.passed else 1)
