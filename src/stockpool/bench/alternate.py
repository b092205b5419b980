"""Two cells compared by alternation, as the measurement scripts do it.

A single cell moves by tens of percent from one minute to the next on a
shared machine; two cells run in turn, round after round, with neither side
always first, share that drift, and the ratios of their rounds compare them
(scripts/claim-vs-release, scripts/sql-ab).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable


def alternate(
    order: tuple[str, ...],
    rate: Callable[[str], float],
    rounds: int,
    label: str,
) -> list[dict[str, float]]:
    """``rounds`` rounds of the cells named in ``order``, each round starting
    one cell further on (two cells: in that order in even rounds, reversed in
    odd ones; every cell starts as often as the others when the rounds are a
    multiple of the cells). ``rate(name)`` measures one cell. Each cell is
    printed as it ends; returns each round's rates by name."""
    measured: list[dict[str, float]] = []
    for r in range(rounds):
        rates: dict[str, float] = {}
        start = r % len(order)
        for name in order[start:] + order[:start]:
            rates[name] = rate(name)
            print(f"{label}, round {r + 1}, {name}: {rates[name]:,.0f}/s", flush=True)  # noqa: T201
        measured.append(rates)
    return measured


def report(
    label: str, measured: list[dict[str, float]], numerator: str, denominator: str, note: str = ""
) -> list[float]:
    """Prints ``numerator / denominator`` per round and the median, and
    ``note`` in brackets after them; returns the ratios."""
    ratios = [rates[numerator] / rates[denominator] for rates in measured]
    print(  # noqa: T201
        f"{label}: {numerator} / {denominator} {[round(x, 2) for x in ratios]}, "
        f"median {statistics.median(ratios):.2f}{f' ({note})' if note else ''}",
        flush=True,
    )
    return ratios
