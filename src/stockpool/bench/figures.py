"""How the bench reports write figures: ratios, numbers, wait events."""

from __future__ import annotations

from stockpool.bench.model import Cell


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def fmt(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def top_wait(cell: Cell) -> str:
    top = cell.top_wait()
    return f"{top[0]} {top[1]:.0%}" if top else "-"
