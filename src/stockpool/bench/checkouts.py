"""The bench's whole-checkout cells: reserve one unit of the hot key, then claim
or release it, in the two transactions a shop makes (one pgbench transaction =
one checkout), for stockpool and for the counter with a hold row, plus a
5-line stockpool cart then its claim.

A checkout can reach at most half of the ceiling (two commits against one), so
claims are judged against releases of the same run: a claim costs what a
release does when it does not queue on the key's ledger row. Wait events are
split by statement, so a claim that waits is seen as such. The bar is in
bench/bars.py, the report section in bench/markdown.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stockpool.bench.model import Cell

CHECKOUTS = (
    "stockpool_claim",
    "stockpool_release",
    "counter_hold_claim",
    "counter_hold_release",
    "cart_claim",
)

# (label, regular expression over pg_stat_activity.query), first match wins.
STATEMENTS = (
    ("claim", r"stockpool\.claim\(|status = 'claimed'"),
    ("release", r"stockpool\.release\(|status = 'released'"),
    ("reserve", r"stockpool\.reserve_|available - 1"),
)

CLAIM_VS_RELEASE = 0.9  # stockpool claim checkouts >= this x release checkouts
CLAIM_VS_COUNTER = 3.0  # stockpool claim checkouts >= this x counter+hold's, from 32 clients
COUNTER_FROM = 32
QUEUEING_WAITS = ("Lock:transactionid", "Lock:tuple")


def prepare_as(name: str) -> str:
    """The strategy whose starting state a checkout cell needs."""
    return {"cart_claim": "cart"}.get(name, name.rsplit("_", 1)[0])


def statement_waits(cell: Cell, statement: str, n: int = 3) -> list[tuple[str, float]]:
    """A statement's n most sampled wait events (CPU, no wait, left out), each with
    its share of all of the statement's active samples (CPU included)."""
    counts = cell.waits_by_statement.get(statement, {})
    total = sum(counts.values())
    waits = [(event, count) for event, count in counts.items() if event != "CPU"]
    ranked = sorted(waits, key=lambda e: (-e[1], e[0]))[:n]
    return [(event, count / total) for event, count in ranked] if total else []
