"""The bench's chart: throughput and p99 against clients, one line per strategy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stockpool.bench.model import BenchRun
from stockpool.errors import StockpoolError

# One colour per strategy, none shared: stockpool's red is its own.
CHART_COLORS = {
    "ceiling": "black",
    "counter": "tab:blue",
    "counter_hold": "tab:orange",
    "skip_locked": "tab:green",
    "pool": "tab:brown",
    "sharded": "tab:purple",
    "stockpool": "tab:red",
}


def require_chart_library() -> None:
    """Fail before measuring anything when the chart could not be drawn at the end."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise StockpoolError(
            "the bench draws its chart with matplotlib, which is not installed",
            hint="pip install 'stockpool[bench]' (make bench installs it)",
        )


def chart(run: BenchRun, path: Path) -> None:
    """Throughput against clients, and p99 on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    for name in run.config.strategies:
        cells = sorted(
            (c for c in run.cells if c.kind == "strategy" and c.name == name), key=lambda c: c.clients
        )
        if not cells:
            continue
        style: dict[str, Any] = {
            "linewidth": 1.6,
            "marker": "o",
            "markersize": 4,
            "color": CHART_COLORS.get(name, "tab:gray"),
        }
        if name == "ceiling":
            style.update(linestyle="--")
        if name == "stockpool":
            style.update(linewidth=3.0)
        xs = [c.clients for c in cells]
        left.plot(xs, [c.rate for c in cells], label=name, **style)
        right.plot(xs, [c.p99_ms or float("nan") for c in cells], label=name, **style)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(run.config.clients, [str(c) for c in run.config.clients])
        ax.set_xlabel("clients")
        ax.grid(True, which="both", alpha=0.3)
    left.set_ylabel("reservations / s")
    left.set_title("throughput, one hot key")
    right.set_yscale("log")
    right.set_ylabel("p99 latency, ms (log)")
    right.set_title("p99 latency")
    left.legend(fontsize=8)
    m = run.machine
    fig.suptitle(
        f"stockpool bench {run.started[:10]}: {m.get('nproc')} CPUs, "
        f"{str(m.get('server_version', '')).split(' on ')[0]}, {run.config.seconds} s per cell",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
