"""The soak: D seconds of a shop's mix over many keys with a few hot ones
(Zipf): reserve one line or a cart, then claim, release or walk away, while a
sweeper and a replenisher run beside the clients; invariants are checked at
intervals during the run and at the end, and the settling lag (claims not yet
folded into their ledger rows) is watched throughout.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from stockpool.checks import Check
from stockpool.errors import StockpoolError
from stockpool.race import verify
from stockpool.race.harness import (
    ITEM_STRIDE,
    LOCATION,
    Harness,
    app_name,
    make_report,
    measure,
    no_errors,
    temporary_harness,
    validate,
    zero_deadlocks,
)
from stockpool.race.report import RunReport
from stockpool.race.verify import KeyRange
from stockpool.server.sampler import Periodic
from stockpool.server.target import connect


class Sweeper(Periodic):
    """Expires overdue holds, as a scheduled sweep() does in production."""

    def __init__(self, dsn: str, run_id: int, batch: int = 500) -> None:
        super().__init__("sweeper", dsn, 0.2, application_name=app_name(run_id, "sweeper"))
        self.batch = batch
        self.expired = 0
        self.sweeps = 0

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
        row = conn.execute("SELECT stockpool.sweep(%s)", (self.batch,)).fetchone()
        self.sweeps += 1
        n = int(row[0]) if row else 0
        self.expired += n
        return n >= self.batch


class Replenisher(Periodic):
    """Receives stock for keys whose on hand runs low (adjust_stock, which
    records a movement) and tops up the hot keys' pools (replenish_pool), as a
    shop's back office does, concurrently with the clients' claims."""

    def __init__(self, dsn: str, run_id: int, keys: KeyRange, hot_items: int, low: int, receive: int) -> None:
        super().__init__("replenisher", dsn, 0.5, application_name=app_name(run_id, "replenisher"))
        self.keys = keys
        self.hot_items = hot_items
        self.low = low
        self.receive = receive
        self.received = 0
        self.refilled = 0

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
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


class Checker(Periodic):
    """Runs the invariant checks in one snapshot every period (the first
    round after one period, not at time zero)."""

    def __init__(self, dsn: str, run_id: int, keys: KeyRange, period: float) -> None:
        super().__init__("checker", dsn, period, start_after=period)
        self.run_id = run_id
        self.keys = keys
        self.rounds: list[tuple[float, list[Check]]] = []

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
        self.rounds.append((elapsed, soak_round(conn, self.run_id, self.keys, final=False)))
        return False


class SettlingWatch(Periodic):
    """Reads the settling lag (claims waiting to be folded into their ledger
    rows: how many, and the oldest one's age) every period."""

    def __init__(self, dsn: str, keys: KeyRange, period: float = 0.5) -> None:
        super().__init__("settling", dsn, period)
        self.keys = keys
        self.samples: list[tuple[int, float]] = []

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
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


def soak_round(
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

    def params(self, clients: int, duration: int) -> dict[str, Any]:
        """The run's parameters, as its report records them."""
        return {
            "clients": clients,
            "duration_s": duration,
            "shops": self.shops,
            "items": self.items,
            "stock": self.stock,
            "zipf": self.zipf,
            "cart_pct": self.cart_pct,
            "claim_pct": self.claim_pct,
            "release_pct": self.release_pct,
            "ttl_s": self.ttl,
            "abandon_ttl_s": self.abandon_ttl,
            "check_every_s": self.check_every,
        }

    def defines(self, run_id: int, keys: KeyRange) -> dict[str, object]:
        """The pgbench variables of race_soak.sql: the mix as the report records it, and the keys."""
        mix = self.params(0, 0)
        shared = ("shops", "items", "zipf", "cart_pct", "claim_pct", "release_pct", "ttl_s", "abandon_ttl_s")
        return {"run": run_id, "shop_base": 0, "item_base": keys.item_lo - 1, **{k: mix[k] for k in shared}}

    def validate(self, clients: int, duration: int) -> None:
        """One clear line for the first bad soak flag."""
        validate(
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
    h.install()
    params = o.params(clients, duration)
    run_id, keys = stock_keys(h, o, params)
    sweeper = Sweeper(h.clients, run_id)
    replenisher = Replenisher(h.clients, run_id, keys, o.hot_items, low=max(o.stock // 5, 1), receive=o.stock)
    checker = Checker(h.dsn, run_id, keys, o.check_every)
    settling = SettlingWatch(h.dsn, keys)
    m = measure(
        h,
        run_id,
        f"soak: {clients} clients, {duration} s, {o.shops * o.items} keys",
        "race_soak",
        clients,
        seconds=duration,
        defines=o.defines(run_id, keys),
        beside=(sweeper, replenisher, checker, settling),
    )
    end = _finish(h, run_id, keys, o.abandon_ttl)
    checks = _merged_rounds(checker, end.checks, duration + o.abandon_ttl)
    checks += [
        Check(
            "invariants checked during the run",
            len(checker.rounds) >= 1 and not checker.errors,
            f"{len(checker.rounds)} rounds every {o.check_every:g} s"
            + (f"; checker errors: {dict(checker.errors)}" if checker.errors else ""),
        ),
        zero_deadlocks(m),
        no_errors(m),
        back_office_errors(sweeper, replenisher),
    ]
    reserved, refused, claimed, released, still_open = end.outcomes
    counts = {
        "checkouts": reserved + refused,
        "reserved": reserved,
        "refused": refused,
        "claimed": claimed,
        "released": released,
        "abandoned": end.abandoned,
        "left_open": still_open,
        "hold_lines_expired": sweeper.expired + end.swept,
        "sweeps": sweeper.sweeps,
        "units_received": replenisher.received,
        "units_refilled": replenisher.refilled,
        "check_rounds": len(checker.rounds) + 1,
        "settling": settling.summary(end.settling),
    }
    return make_report(
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


def stock_keys(h: Harness, o: SoakOptions, params: dict[str, Any]) -> tuple[int, KeyRange]:
    """A new run, and its shops x items keys with ``stock`` units each."""
    with connect(h.dsn) as conn:
        run_id = h.new_run(conn, "soak", "stockpool", params)
        base = run_id * ITEM_STRIDE
        keys = KeyRange(tuple(range(1, o.shops + 1)), base + 1, base + o.items, LOCATION)
        with conn.transaction():
            conn.execute(
                "SELECT stockpool.set_stock(s, %s + i, %s, %s)"
                " FROM pg_catalog.generate_series(1, %s) AS s, pg_catalog.generate_series(1, %s) AS i",
                (base, LOCATION, o.stock, o.shops, o.items),
            )
    return run_id, keys


@dataclass
class _End:
    """What the end of a soak found."""

    settling: tuple[int, float]  # pending claims and the oldest one's age, as the clients stopped
    swept: int  # hold lines the final sweep expired
    checks: list[Check]  # the final round
    abandoned: int
    outcomes: tuple[int, int, int, int, int]  # reserved, refused, claimed, released, still open


def _finish(h: Harness, run_id: int, keys: KeyRange, abandon_ttl: int) -> _End:
    """Wait out the abandon TTL, sweep everything due, check once more."""
    ending = (
        h.progress.add_task("soak: abandon TTL, final sweep, final checks", total=None)
        if h.progress
        else None
    )
    with connect(h.dsn) as conn:
        settling = verify.settling_lag(conn, keys)
    with connect(h.dsn, app_name(run_id, "sweeper")) as conn:
        time.sleep(abandon_ttl + 0.2)
        swept = 0
        while True:
            row = conn.execute("SELECT stockpool.sweep(5000)").fetchone()
            n = int(row[0]) if row else 0
            swept += n
            if n == 0:
                break
    with connect(h.dsn) as conn:
        final = soak_round(conn, run_id, keys, final=True)
        (abandoned,) = conn.execute(
            "SELECT pg_catalog.count(*) FROM stockpool_race.outcomes AS o"
            " WHERE o.run_id = %s AND o.intent = 'abandon' AND o.reserved",
            (run_id,),
        ).fetchone() or (0,)
        outcomes = conn.execute(verify.OUTCOME_COUNTS, {"run": run_id}).fetchone() or (0, 0, 0, 0, 0)
    if h.progress is not None and ending is not None:
        h.progress.update(ending, total=1, completed=1)
    return _End(settling, swept, final, int(abandoned), tuple(int(v) for v in outcomes))  # type: ignore[arg-type]


def _merged_rounds(checker: Checker, final: list[Check], end_t: float) -> list[Check]:
    """Each check of the final round, merged with its rounds during the run."""
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
    return checks


def back_office_errors(*helpers: Periodic) -> Check:
    """The back-office sessions' own failures (a deadlock victim among them
    would otherwise show only in the deadlock counter)."""
    errors = [
        f"{helper.name} {state} x{n}: {helper.messages.get(state, '')}"
        for helper in helpers
        for state, n in helper.errors.items()
    ]
    return Check("sweeper and replenisher without errors", not errors, "; ".join(errors) or "none")
