"""Reports of a bench run: the bar checks, a markdown report, JSON and a PNG chart.

Every ratio is to the ceiling of the same run at the same client count, so a
busy or slow machine moves both sides of it. Absolute figures are what this
machine did during this run and nothing more.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table

from stockpool import checkouts
from stockpool.errors import StockpoolError

if TYPE_CHECKING:
    from stockpool.bench import BenchRun, Cell

PUBLISHED = "published"
BAR_FLOOR = 0.5  # x ceiling throughput, at every client count from 8 up
BAR_SHARDED = 0.9  # x sharded throughput
BAR_P99 = 3.0  # x ceiling p99 at 512 clients
BAR_COLLAPSE = 0.7  # throughput at 512 / at 32
SOAK_DEAD_RATIO = 0.2


@dataclass
class Check:
    name: str
    passed: bool | None  # None: not measured in this run
    detail: str


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def _fmt(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def bar(run: BenchRun) -> list[Check]:
    """The issue's bar for stockpool.reserve_units, checked on this run."""
    checks: list[Check] = []
    counts = sorted({c.clients for c in run.cells if c.kind == "strategy" and c.name == "stockpool"})

    def rate(name: str, clients: int) -> float | None:
        cell = run.cell("strategy", name, clients)
        return cell.rate if cell and cell.valid else None

    floor = [n for n in counts if n >= 8]
    if floor:
        bad, worst = [], None
        for n in floor:
            r = ratio(rate("stockpool", n), rate("ceiling", n))
            worst = r if worst is None or (r is not None and r < worst) else worst
            if r is None or r < BAR_FLOOR:
                bad.append(f"{n}: {_x(r)}")
        checks.append(
            Check(
                f">= {BAR_FLOOR} x ceiling at {', '.join(map(str, floor))} clients",
                not bad,
                "lowest " + _x(worst) + ("" if not bad else "; short at " + ", ".join(bad)),
            )
        )
    for other in (*_hold_strategies(run), "sharded"):
        factor = BAR_SHARDED if other == "sharded" else 1.0
        bad, details = [], []
        for n in counts:
            r = ratio(rate("stockpool", n), rate(other, n))
            if r is None:
                continue
            details.append(f"{n}: {r:.2f}x")
            if r < factor:
                bad.append(str(n))
        if details:
            checks.append(
                Check(
                    f">= {factor:g} x {other} at every client count",
                    not bad,
                    ", ".join(details),
                )
            )
    top = 512 if 512 in counts else None
    if top:
        sp, ce = run.cell("strategy", "stockpool", top), run.cell("strategy", "ceiling", top)
        r = ratio(sp.p99_ms if sp else None, ce.p99_ms if ce else None)
        checks.append(
            Check(
                f"p99 at {top} clients <= {BAR_P99:g} x ceiling's",
                r is not None and r <= BAR_P99,
                f"{_fmt(sp.p99_ms if sp else None, 1)} ms vs "
                f"{_fmt(ce.p99_ms if ce else None, 1)} ms: {_x(r)}",
            )
        )
    if 512 in counts and 32 in counts:
        r = ratio(rate("stockpool", 512), rate("stockpool", 32))
        checks.append(
            Check(
                f"no collapse: 512 clients >= {BAR_COLLAPSE} x 32 clients",
                r is not None and r >= BAR_COLLAPSE,
                _x(r),
            )
        )
    if run.soak:
        checks.append(
            Check(
                f"soak: pool dead ratio < {SOAK_DEAD_RATIO:.0%} every 10 s",
                run.soak.max_dead_ratio < SOAK_DEAD_RATIO if run.soak.samples else None,
                f"max {run.soak.max_dead_ratio:.1%}, mean {run.soak.mean_dead_ratio:.1%} "
                f"over {len(run.soak.samples)} samples",
            )
        )
    return checks


def _hold_strategies(run: BenchRun) -> list[str]:
    from stockpool.bench import HOLD_STRATEGIES

    return [s for s in HOLD_STRATEGIES if s in run.config.strategies]


def _wait(cell: Cell) -> str:
    top = cell.top_wait()
    return f"{top[0]} {top[1]:.0%}" if top else "-"


def _strategy_rows(run: BenchRun) -> list[list[str]]:
    rows = []
    for clients in run.config.clients:
        ceiling = run.cell("strategy", "ceiling", clients)
        for name in run.config.strategies:
            cell = run.cell("strategy", name, clients)
            if not cell:
                continue
            rows.append(
                [
                    name + ("" if cell.valid else " (!)"),
                    str(clients),
                    _fmt(cell.rate),
                    _x(ratio(cell.rate, ceiling.rate if ceiling else None)),
                    _fmt(cell.p50_ms, 2),
                    _x(ratio(cell.p50_ms, ceiling.p50_ms if ceiling else None)),
                    _fmt(cell.p99_ms, 2),
                    _x(ratio(cell.p99_ms, ceiling.p99_ms if ceiling else None)),
                    _fmt(cell.cpu_us),
                    _x(ratio(cell.cpu_us, ceiling.cpu_us if ceiling else None)),
                    _wait(cell),
                ]
            )
    return rows


STRATEGY_HEADER = [
    "strategy",
    "clients",
    "reservations/s",
    "x ceiling",
    "p50 ms",
    "x ceiling",
    "p99 ms",
    "x ceiling",
    "CPU µs per reservation",
    "x ceiling",
    "top wait event (share of active samples)",
]


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def markdown(run: BenchRun, chart_name: str | None) -> str:
    m = run.machine
    cfg = run.config
    lines = [
        f"# stockpool bench, {run.started}",
        "",
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu_model')}), {m.get('memory_gib')} GiB RAM, "
        f"Linux {m.get('kernel')}; {str(m.get('server_version', '')).split(' on ')[0]}; "
        f"{m.get('pgbench')}. Load average at start {m.get('load_average_start')}, "
        f"at end {m.get('load_average_end')}.",
        "",
        f"Settings: {', '.join(f'{k}={v}' for k, v in (m.get('settings') or {}).items())}.",
        "",
        f"Each cell: {cfg.seconds} s of pgbench -M prepared ({cfg.jobs} threads) on a fresh copy of "
        "the database, after VACUUM and CHECKPOINT. One unit of one hot key per transaction. "
        "Ratios are to the ceiling of this run at the same client count. "
        "Wait events: pg_stat_activity of the cell's active backends sampled every 200 ms; "
        "CPU (active, no wait event) is left out of the top event but counted in its share. "
        "CPU per reservation: CPU time of every server process (from /proc) and of pgbench "
        "(getrusage) during the cell, over the units its transactions asked for ('-' for a server "
        "on another machine): a figure "
        "that other load on a shared machine moves much less than throughput. "
        "(!) marks a cell whose transactions did not all reserve or whose clients aborted.",
        "",
    ]
    if chart_name:
        lines += [f"![throughput and p99 against clients]({chart_name})", ""]
    lines += ["## Strategies", ""]
    lines += _md_table(STRATEGY_HEADER, _strategy_rows(run))
    lines += ["", "## The bar for stockpool.reserve_units", ""]
    lines += _md_table(
        ["check", "result", "detail"],
        [[c.name, _verdict(c.passed), c.detail] for c in bar(run)],
    )
    lines += checkout_markdown(run)
    lines += catalogue_markdown(run)
    shapes = [c for c in run.cells if c.kind == "shape"]
    if shapes:
        lines += [
            "",
            "## The counter's transaction shapes",
            "",
            "Sold: units clients were told they got (a sales row each); left the counter: what the "
            "counter went down by. Drift = sold - left: units sold that were not there.",
            "",
        ]
        rows = []
        for c in shapes:
            d = c.drift or {}
            rows.append(
                [
                    c.name + ("" if c.aborted == 0 else " (!)"),
                    str(c.clients),
                    _fmt(c.tps),
                    str(c.transactions),
                    str(c.failed),
                    str(c.retries),
                    str(d.get("sold", "-")),
                    str(d.get("decremented", "-")),
                    str(d.get("drift", "-")),
                    _fmt(c.p99_ms, 2),
                    _wait(c),
                ]
            )
        lines += _md_table(
            [
                "shape",
                "clients",
                "committed/s",
                "committed",
                "failed",
                "retries",
                "sold",
                "left the counter",
                "drift",
                "p99 ms",
                "top wait event",
            ],
            rows,
        )
    carts = [c for c in run.cells if c.kind == "cart"]
    if carts:
        lines += [
            "",
            f"## reserve_cart: {5} lines across 5 hot keys",
            "",
            "Units per second of the cart against single-line stockpool.reserve_units in the same run.",
            "",
        ]
        rows = []
        for c in carts:
            single = run.cell("strategy", "stockpool", c.clients)
            rows.append(
                [
                    str(c.clients) + ("" if c.valid else " (!)"),
                    _fmt(c.tps),
                    _fmt(c.rate),
                    _fmt(single.rate if single else None),
                    _x(ratio(c.rate, single.rate if single else None)),
                    _fmt(c.p50_ms, 2),
                    _fmt(c.p99_ms, 2),
                    _wait(c),
                ]
            )
        lines += _md_table(
            [
                "clients",
                "carts/s",
                "units/s",
                "single-line units/s",
                "cart / single",
                "p50 ms",
                "p99 ms",
                "top wait event",
            ],
            rows,
        )
    if run.soak:
        s = run.soak
        lines += [
            "",
            f"## Soak: the hot key for {s.seconds} s at {s.clients} clients",
            "",
            f"{_fmt(s.tps)} reservations/s over the soak (p50 {_fmt(s.p50_ms, 2)} ms, "
            f"p99 {_fmt(s.p99_ms, 2)} ms), {s.reserved} units held, check_invariants: "
            f"{s.invariant_violations} violations. Dead ratio of the pool partitions "
            "(n_dead_tup / (n_live_tup + n_dead_tup), pg_stat_user_tables) every 10 s: "
            f"max {s.max_dead_ratio:.1%}, mean {s.mean_dead_ratio:.1%}.",
            "",
        ]
        rows = []
        for i, sample in enumerate(s.samples):
            tps = s.tps_by_interval[i] if i < len(s.tps_by_interval) else None
            rows.append(
                [
                    f"{sample.elapsed:.0f}",
                    str(sample.live),
                    str(sample.dead),
                    f"{sample.dead_ratio:.1%}",
                    str(sample.autovacuums),
                    _fmt(tps),
                ]
            )
        lines += _md_table(["t s", "live", "dead", "dead ratio", "autovacuums", "reservations/s"], rows)
    return "\n".join(lines) + "\n"


def _claim_waits(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    top = checkouts.statement_waits(cell, "claim")
    return ", ".join(f"{event} {share:.0%}" for event, share in top) or "-"


def _checkout_rate(run: BenchRun, name: str, clients: int) -> float | None:
    cell = run.cell("checkout", name, clients)
    return cell.tps if cell and cell.valid else None


def _checkout_counts(run: BenchRun) -> list[int]:
    return sorted({c.clients for c in run.cells if c.kind == "checkout"})


def _claim_ratio_check(run: BenchRun, name: str, other: str, floor: float, counts: list[int]) -> Check:
    """stockpool's claim checkouts against another checkout cell at ``counts``, each >= floor."""
    bad, details = [], []
    for n in counts:
        r = ratio(_checkout_rate(run, "stockpool_claim", n), _checkout_rate(run, other, n))
        details.append(f"{n}: {_x(r)}")
        if r is None or r < floor:
            bad.append(str(n))
    return Check(name, not bad, ", ".join(details))


def checkout_bar(run: BenchRun) -> list[Check]:
    """Issue 9's bar: a claim costs what a release does and never queues on the ledger row."""
    counts = _checkout_counts(run)
    if not counts:
        return []
    checks = [
        _claim_ratio_check(
            run,
            f"checkout: reserve+claim >= {checkouts.CLAIM_VS_RELEASE:g} x reserve+release "
            f"at {', '.join(map(str, counts))}",
            "stockpool_release",
            checkouts.CLAIM_VS_RELEASE,
            counts,
        )
    ]
    queued, seen = [], []
    for n in counts:
        cell = run.cell("checkout", "stockpool_claim", n)
        top = [event for event, _ in checkouts.statement_waits(cell, "claim")] if cell else []
        queued += [f"{n}: {event}" for event in top if event in checkouts.QUEUEING_WAITS]
        seen.append(f"{n}: {_claim_waits(cell)}")
    checks.append(
        Check(
            "checkout: neither Lock:transactionid nor Lock:tuple among claim's top 3 wait events",
            not queued,
            "; ".join(queued) if queued else "claim's top 3: " + "; ".join(seen),
        )
    )
    from_n = [n for n in counts if n >= checkouts.COUNTER_FROM]
    if from_n:
        checks.append(
            _claim_ratio_check(
                run,
                f"checkout: reserve+claim >= {checkouts.CLAIM_VS_COUNTER:g} x counter+hold's "
                f"from {checkouts.COUNTER_FROM} clients",
                "counter_hold_claim",
                checkouts.CLAIM_VS_COUNTER,
                from_n,
            )
        )
    return checks


CHECKOUT_HEADER = [
    "clients",
    "stockpool claim checkouts/s",
    "x ceiling",
    "release checkouts/s",
    "x ceiling",
    "claim / release",
    "counter+hold claim/s",
    "counter+hold release/s",
    "stockpool / counter+hold (claim)",
    "5-line cart + claim/s",
    "claim p99 ms",
    "claim's top waits (share of its samples)",
    "counter+hold claim's top waits",
]


def checkout_rows(run: BenchRun) -> list[list[str]]:
    out = []
    for n in _checkout_counts(run):
        ceiling = run.cell("strategy", "ceiling", n)
        top = ceiling.tps if ceiling else None
        rate = {name: _checkout_rate(run, name, n) for name in checkouts.CHECKOUTS}
        mark = {}
        for name in checkouts.CHECKOUTS:
            cell = run.cell("checkout", name, n)
            mark[name] = "" if cell is None or cell.valid else " (!)"
        claim = run.cell("checkout", "stockpool_claim", n)
        out.append(
            [
                str(n),
                _fmt(rate["stockpool_claim"]) + mark["stockpool_claim"],
                _x(ratio(rate["stockpool_claim"], top)),
                _fmt(rate["stockpool_release"]) + mark["stockpool_release"],
                _x(ratio(rate["stockpool_release"], top)),
                _x(ratio(rate["stockpool_claim"], rate["stockpool_release"])),
                _fmt(rate["counter_hold_claim"]) + mark["counter_hold_claim"],
                _fmt(rate["counter_hold_release"]) + mark["counter_hold_release"],
                _x(ratio(rate["stockpool_claim"], rate["counter_hold_claim"])),
                _fmt(rate["cart_claim"]) + mark["cart_claim"],
                _fmt(claim.p99_ms if claim else None, 2),
                _claim_waits(claim),
                _claim_waits(run.cell("checkout", "counter_hold_claim", n)),
            ]
        )
    return out


def checkout_markdown(run: BenchRun) -> list[str]:
    """The whole-checkout section of the markdown report (empty without checkout cells)."""
    if not _checkout_counts(run):
        return []
    lines = [
        "",
        "## Whole checkouts: reserve, then claim or release",
        "",
        "One pgbench transaction is one checkout: reserve one unit of the hot key, then claim it "
        "(payment succeeded) or release it (payment failed), two transactions. A checkout can reach "
        "0.5x the ceiling at most. counter+hold's claim marks the hold claimed and lowers on hand on "
        "the key's counter row; its release gives the unit back to the same row. The cart is "
        "reserve_cart of 5 lines across 5 hot keys, then its claim. Wait events are split by the "
        "statement the sampled backend was running.",
        "",
    ]
    lines += _md_table(CHECKOUT_HEADER, checkout_rows(run))
    lines += ["", "### The bar for claims", ""]
    lines += _md_table(
        ["check", "result", "detail"], [[c.name, _verdict(c.passed), c.detail] for c in checkout_bar(run)]
    )
    return lines


CATALOGUE_VS_COUNTER = 0.7  # uniform catalogue: stockpool >= this x counter+hold at 1, 8 and 32 clients
CATALOGUE_UNIFORM_UPTO = 32
CATALOGUE_ZIPF_FROM = 32  # Zipf catalogue: stockpool >= counter+hold from this many clients
CATALOGUE_ROWS_PER_KEY = 16  # pool rows per key touched after a cold run


def _catalogue_rate(run: BenchRun, strategy: str, dist: str, phase: str, clients: int) -> float | None:
    cell = run.cell("catalogue", f"{strategy}:{dist}:{phase}", clients)
    return cell.rate if cell and cell.valid else None


def _catalogue_counts(run: BenchRun) -> list[int]:
    return sorted({c.clients for c in run.cells if c.kind == "catalogue"})


def _rows_per_key(cell: Cell | None) -> float | None:
    if cell is None or cell.pool_rows is None or not cell.keys_touched:
        return None
    return cell.pool_rows / cell.keys_touched


def catalogue_bar(run: BenchRun) -> list[Check]:
    """Issue 10's bar: a key nobody contends costs what a counter costs."""
    counts = _catalogue_counts(run)
    if not counts:
        return []
    checks: list[Check] = []
    for dist, phase in (("uniform", "cold"), ("uniform", "warm"), ("zipf", "cold"), ("zipf", "warm")):
        if dist == "uniform":
            upto = [n for n in counts if n <= CATALOGUE_UNIFORM_UPTO]
            floor, label = CATALOGUE_VS_COUNTER, f"at {', '.join(map(str, upto))}"
        else:
            upto = [n for n in counts if n >= CATALOGUE_ZIPF_FROM]
            floor, label = 1.0, f"at {', '.join(map(str, upto))}"
        if not upto:
            continue
        bad, details = [], []
        for n in upto:
            r = ratio(
                _catalogue_rate(run, "stockpool", dist, phase, n),
                _catalogue_rate(run, "counter_hold", dist, phase, n),
            )
            details.append(f"{n}: {_x(r)}")
            if r is None or r < floor:
                bad.append(str(n))
        checks.append(
            Check(
                f"catalogue {dist}, {phase}: >= {floor:g} x counter+hold {label}", not bad, ", ".join(details)
            )
        )
    bad, details = [], []
    for dist in ("uniform", "zipf"):
        for n in counts:
            per_key = _rows_per_key(run.cell("catalogue", f"stockpool:{dist}:cold", n))
            details.append(f"{dist} {n}: {_fmt(per_key, 2)}")
            if per_key is None or per_key > CATALOGUE_ROWS_PER_KEY:
                bad.append(f"{dist} {n}")
    checks.append(
        Check(
            f"catalogue, first touches: <= {CATALOGUE_ROWS_PER_KEY} pool rows per key touched",
            not bad,
            ", ".join(details),
        )
    )
    return checks


CATALOGUE_HEADER = [
    "keys",
    "clients",
    "first touches or warm",
    "counter+hold res/s",
    "x ceiling",
    "stockpool res/s",
    "x ceiling",
    "stockpool / counter+hold",
    "pool rows at the end",
    "pool MB",
    "keys touched",
    "pool rows per key touched",
    "stockpool CPU µs per reservation",
    "stockpool top wait event",
]


def catalogue_rows(run: BenchRun) -> list[list[str]]:
    out = []
    for dist in ("uniform", "zipf"):
        for n in _catalogue_counts(run):
            ceiling = run.cell("strategy", "ceiling", n)
            top = ceiling.rate if ceiling else None
            for phase in ("cold", "warm"):
                sp = run.cell("catalogue", f"stockpool:{dist}:{phase}", n)
                ch = run.cell("catalogue", f"counter_hold:{dist}:{phase}", n)
                if sp is None and ch is None:
                    continue
                sp_rate = _catalogue_rate(run, "stockpool", dist, phase, n)
                ch_rate = _catalogue_rate(run, "counter_hold", dist, phase, n)
                out.append(
                    [
                        f"{run.config.catalogue_keys:,} {dist}",
                        str(n),
                        "first touches" if phase == "cold" else "warm",
                        _fmt(ch_rate) + ("" if ch is None or ch.valid else " (!)"),
                        _x(ratio(ch_rate, top)),
                        _fmt(sp_rate) + ("" if sp is None or sp.valid else " (!)"),
                        _x(ratio(sp_rate, top)),
                        _x(ratio(sp_rate, ch_rate)),
                        _fmt(sp.pool_rows if sp else None),
                        _fmt(sp.pool_bytes / 1e6 if sp and sp.pool_bytes is not None else None, 1),
                        _fmt(sp.keys_touched if sp else None),
                        _fmt(_rows_per_key(sp), 2),
                        _fmt(sp.cpu_us if sp else None),
                        _wait(sp) if sp else "-",
                    ]
                )
    return out


def catalogue_markdown(run: BenchRun) -> list[str]:
    """The catalogue section of the markdown report (empty without catalogue cells)."""
    if not _catalogue_counts(run):
        return []
    lines = [
        "",
        "## A whole catalogue: one key drawn per reservation",
        "",
        f"{run.config.catalogue_keys:,} keys; each reservation takes one unit of a key drawn uniformly or "
        "by Zipf (exponent 1.1), stockpool.reserve_units against counter+hold (a conditional UPDATE of "
        "the key's counter row plus a hold row, one statement). Units per key: "
        + ", ".join(f"{d} {u:,}" for d, u in _catalogue_per_key().items())
        + ". First touches: a fresh copy of the database, no key reserved before. Warm: the same "
        "workload run once for as long beforehand, then measured on the same database. Pool rows "
        "and MB (every leaf of stockpool.pool_units) at the end of the stockpool cell.",
        "",
    ]
    lines += _md_table(CATALOGUE_HEADER, catalogue_rows(run))
    lines += ["", "### The bar for a catalogue", ""]
    lines += _md_table(
        ["check", "result", "detail"], [[c.name, _verdict(c.passed), c.detail] for c in catalogue_bar(run)]
    )
    return lines


def _catalogue_per_key() -> dict[str, int]:
    from stockpool.bench import CATALOGUE_PER_KEY

    return dict(CATALOGUE_PER_KEY)


def _verdict(passed: bool | None) -> str:
    return "n/a" if passed is None else ("PASS" if passed else "FAIL")


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


def write(run: BenchRun, out: Path, publish: bool = False) -> list[Path]:
    """bench-<stamp>.json/.md/.png under ``out``; with ``publish`` also results/published/."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = run.started.replace(":", "").replace("-", "").replace("+0000", "Z")[:15]
    base = out / f"bench-{stamp}"
    png = base.with_suffix(".png")
    chart(run, png)
    data = run.as_json()
    data["bar"] = [
        {"check": c.name, "passed": c.passed, "detail": c.detail}
        for c in [*bar(run), *checkout_bar(run), *catalogue_bar(run)]
    ]
    json_path = base.with_suffix(".json")
    json_path.write_text(json.dumps(data, indent=2) + "\n")
    md_path = base.with_suffix(".md")
    md_path.write_text(markdown(run, png.name))
    paths = [json_path, md_path, png]
    if publish:
        target = out / PUBLISHED if out.name != PUBLISHED else out
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(json_path, target / "bench.json")
        shutil.copyfile(png, target / "bench.png")
        (target / "bench.md").write_text(markdown(run, "bench.png"))
        (target / "machine.md").write_text(machine_markdown(run))
        paths += [target / "bench.json", target / "bench.md", target / "bench.png", target / "machine.md"]
    return paths


def machine_markdown(run: BenchRun) -> str:
    m = run.machine
    lines = ["# The machine of the published bench run", ""]
    for key in (
        "nproc",
        "cpu_model",
        "memory_gib",
        "kernel",
        "server_version",
        "pgbench",
        "python",
        "git_commit",
        "load_average_start",
        "load_average_end",
    ):
        lines.append(f"- {key}: {m.get(key)}")
    lines.append(f"- run: {run.started} to {run.finished}")
    lines += ["", "Server settings:", ""]
    lines += [f"- {k} = {v}" for k, v in (m.get("settings") or {}).items()]
    return "\n".join(lines) + "\n"


def print_summary(console: Console, run: BenchRun) -> None:
    """The strategy table (compact: the markdown report has every column) and the bar."""
    table = Table(
        title="one hot key, one unit per transaction (x: ratio to this run's ceiling)", box=box.SIMPLE
    )
    for name, justify in (
        ("strategy", "left"),
        ("clients", "right"),
        ("res/s", "right"),
        ("x", "right"),
        ("p99 ms", "right"),
        ("x", "right"),
        ("top wait", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in _strategy_rows(run):
        table.add_row(row[0], row[1], row[2], row[3], row[6], row[7], row[10])
    console.print(table)
    checks = Table(title="the bar for stockpool.reserve_units", box=box.SIMPLE)
    for name in ("check", "result", "detail"):
        checks.add_column(name)
    for c in [*bar(run), *checkout_bar(run), *catalogue_bar(run)]:
        colour = {True: "green", False: "red", None: "yellow"}[c.passed]
        checks.add_row(c.name, f"[{colour}]{_verdict(c.passed)}[/]", c.detail)
    console.print(checks)
