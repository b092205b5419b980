"""The sellout: C clients race for N units of one key, demand well above
supply; a share of the transactions roll back after reserving. Afterwards
exactly N units are held, each by a reservation a client saw committed.
``shape="naive"`` races the negative control instead (read a counter, decide
in the client, write it back): its checks must FAIL, which proves they can.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from stockpool.checks import Check
from stockpool.errors import StockpoolError
from stockpool.race import verify
from stockpool.race.harness import (
    ITEM_STRIDE,
    LOCATION,
    SHAPES,
    SHOP,
    Harness,
    Measured,
    make_report,
    measure,
    no_errors,
    shape_tag,
    temporary_harness,
    validate,
    zero_deadlocks,
)
from stockpool.race.report import RunReport
from stockpool.race.verify import KeyRange
from stockpool.server.target import connect


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
    validate(
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
    with connect(h.dsn) as conn:
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
    m = measure(
        h,
        run_id,
        f"sellout{shape_tag(shape)}: {clients} clients x {per_client} for {units} units",
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
    with connect(h.dsn) as conn:
        if shape == "stockpool":
            checks, counts = _sellout_checks(conn, run_id, keys, units, m)
            held = int(counts["held"])
        else:
            checks, counts = naive_checks(conn, run_id, units, m)
            held = int(counts["sold"])
    checks.append(no_errors(m, attempts))
    report = make_report(
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
        zero_deadlocks(m),
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


def naive_checks(
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
        zero_deadlocks(m),
    ]
    return checks, {"units": units, "sold": sold, "counter": left}
