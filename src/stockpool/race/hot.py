"""The hot key: one key, reservations only, over a sweep of client counts."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from stockpool.checks import Check
from stockpool.errors import StockpoolError
from stockpool.race import verify
from stockpool.race.harness import (
    HOT_STOCK,
    ITEM_STRIDE,
    LOCATION,
    NAIVE_HOT_STOCK,
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
from stockpool.race.sellout import naive_checks
from stockpool.race.verify import KeyRange
from stockpool.server.target import connect


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
        validate(hot_clients=(n, 1))
    validate(hot_duration=(duration, 1))
    if shape not in SHAPES:
        raise StockpoolError(f"unknown shape {shape!r}", hint=f"one of {', '.join(SHAPES)}")
    with contextlib.ExitStack() as stack:
        h = harness or stack.enter_context(temporary_harness(dsn))
        h.install()
        return [_hot_step(h, n, duration, shape) for n in clients]
    raise AssertionError("unreachable")


def _hot_step(h: Harness, clients: int, duration: int, shape: str) -> RunReport:
    params = {"clients": clients, "duration_s": duration}
    with connect(h.dsn) as conn:
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
    m = measure(
        h,
        run_id,
        f"hot{shape_tag(shape)}: {clients} clients, {duration} s",
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
    with connect(h.dsn) as conn:
        if shape == "stockpool":
            checks, counts = _hot_checks(conn, keys, m)
        else:
            checks, counts = naive_checks(conn, run_id, NAIVE_HOT_STOCK, m)
    checks.append(no_errors(m))
    return make_report(
        "hot", shape, clients, run_id, m, "one reservation transaction", checks, counts, params
    )


def _hot_checks(
    conn: psycopg.Connection[TupleRow], keys: KeyRange, m: Measured
) -> tuple[list[Check], dict[str, Any]]:
    """Every committed reservation holds its unit, nothing oversold, in one snapshot."""
    with verify.snapshot(conn):
        row = conn.execute(
            "SELECT on_hand, pooled, held FROM stockpool.stock_levels"
            " WHERE shop_id = %s AND item_id = %s AND location_id = %s",
            (SHOP, keys.item_lo, LOCATION),
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
        Check("no oversell", pooled + held <= on_hand, f"pooled {pooled} + held {held} vs on_hand {on_hand}"),
        zero_deadlocks(m),
        invariants,
        ledger,
    ]
    return checks, {"on_hand": on_hand, "pooled": pooled, "held": held}
