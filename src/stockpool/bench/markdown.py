"""The bench's markdown report: the strategies, the bars, whole checkouts,
the catalogue, stockpool through a pooler, the counter's shapes, carts and
the soak, each a section."""

from __future__ import annotations

from stockpool.bench import checkouts
from stockpool.bench.bars import (
    bar,
    best_direct,
    catalogue_bar,
    catalogue_counts,
    catalogue_rate,
    checkout_bar,
    checkout_counts,
    checkout_rate,
    claim_waits,
    pooled_bar,
    pooled_cell,
    pooled_counts,
    rows_per_key,
    seat_counts,
    seats_bar,
)
from stockpool.bench.figures import fmt, ratio, times, top_wait
from stockpool.bench.model import CATALOGUE_PER_KEY, NEAR_SELLOUT, BenchRun, Cell
from stockpool.checks import Check, verdict
from stockpool.server import pgbench
from stockpool.server.pooler import POOL_SIZE_RULE


def strategy_rows(run: BenchRun) -> list[list[str]]:
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
                    fmt(cell.rate),
                    times(ratio(cell.rate, ceiling.rate if ceiling else None)),
                    fmt(cell.p50_ms, 2),
                    times(ratio(cell.p50_ms, ceiling.p50_ms if ceiling else None)),
                    fmt(cell.p99_ms, 2),
                    times(ratio(cell.p99_ms, ceiling.p99_ms if ceiling else None)),
                    fmt(cell.cpu_us),
                    times(ratio(cell.cpu_us, ceiling.cpu_us if ceiling else None)),
                    top_wait(cell),
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


def _threads(jobs: int | None) -> str:
    if jobs:
        return f"{jobs} threads"
    return f"one thread per core, or per {pgbench.CLIENTS_PER_THREAD} clients when that is more"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _checks_table(checks: list[Check]) -> list[str]:
    """A bar's checks as a table: check, result, detail."""
    return _md_table(["check", "result", "detail"], [[c.name, verdict(c.passed), c.detail] for c in checks])


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
        f"Each cell: {cfg.seconds} s of pgbench -M prepared ({_threads(cfg.jobs)}) on a fresh copy of "
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
    lines += _md_table(STRATEGY_HEADER, strategy_rows(run))
    lines += ["", "## The bar for stockpool.reserve_units", ""]
    lines += _checks_table(bar(run))
    lines += checkout_markdown(run)
    lines += catalogue_markdown(run)
    lines += pooled_markdown(run)
    lines += seats_markdown(run)
    lines += _shapes_markdown(run)
    lines += _carts_markdown(run)
    lines += _soak_markdown(run)
    return "\n".join(lines) + "\n"


def _shapes_markdown(run: BenchRun) -> list[str]:
    """The counter's transaction shapes (empty without shape cells)."""
    shapes = [c for c in run.cells if c.kind == "shape"]
    if shapes:
        lines = [
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
                    fmt(c.tps),
                    str(c.transactions),
                    str(c.failed),
                    str(c.retries),
                    str(d.get("sold", "-")),
                    str(d.get("decremented", "-")),
                    str(d.get("drift", "-")),
                    fmt(c.p99_ms, 2),
                    top_wait(c),
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
        return lines
    return []


def _carts_markdown(run: BenchRun) -> list[str]:
    """reserve_cart against single-line reservations (empty without cart cells)."""
    carts = [c for c in run.cells if c.kind == "cart"]
    if carts:
        lines = [
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
                    fmt(c.tps),
                    fmt(c.rate),
                    fmt(single.rate if single else None),
                    times(ratio(c.rate, single.rate if single else None)),
                    fmt(c.p50_ms, 2),
                    fmt(c.p99_ms, 2),
                    top_wait(c),
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
        return lines
    return []


def _soak_markdown(run: BenchRun) -> list[str]:
    """The soak of the hot key (empty without a soak)."""
    if run.soak:
        s = run.soak
        lines = [
            "",
            f"## Soak: the hot key for {s.seconds} s at {s.clients} clients",
            "",
            f"{fmt(s.tps)} reservations/s over the soak (p50 {fmt(s.p50_ms, 2)} ms, "
            f"p99 {fmt(s.p99_ms, 2)} ms), {s.reserved} units held, check_invariants: "
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
                    fmt(tps),
                ]
            )
        lines += _md_table(["t s", "live", "dead", "dead ratio", "autovacuums", "reservations/s"], rows)
        return lines
    return []


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
    for n in checkout_counts(run):
        ceiling = run.cell("strategy", "ceiling", n)
        top = ceiling.tps if ceiling else None
        rate = {name: checkout_rate(run, name, n) for name in checkouts.CHECKOUTS}
        mark = {}
        for name in checkouts.CHECKOUTS:
            cell = run.cell("checkout", name, n)
            mark[name] = "" if cell is None or cell.valid else " (!)"
        claim = run.cell("checkout", "stockpool_claim", n)
        out.append(
            [
                str(n),
                fmt(rate["stockpool_claim"]) + mark["stockpool_claim"],
                times(ratio(rate["stockpool_claim"], top)),
                fmt(rate["stockpool_release"]) + mark["stockpool_release"],
                times(ratio(rate["stockpool_release"], top)),
                times(ratio(rate["stockpool_claim"], rate["stockpool_release"])),
                fmt(rate["counter_hold_claim"]) + mark["counter_hold_claim"],
                fmt(rate["counter_hold_release"]) + mark["counter_hold_release"],
                times(ratio(rate["stockpool_claim"], rate["counter_hold_claim"])),
                fmt(rate["cart_claim"]) + mark["cart_claim"],
                fmt(claim.p99_ms if claim else None, 2),
                claim_waits(claim),
                claim_waits(run.cell("checkout", "counter_hold_claim", n)),
            ]
        )
    return out


def checkout_markdown(run: BenchRun) -> list[str]:
    """The whole-checkout section of the markdown report (empty without checkout cells)."""
    if not checkout_counts(run):
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
    lines += _checks_table(checkout_bar(run))
    return lines


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
        for n in catalogue_counts(run):
            ceiling = run.cell("strategy", "ceiling", n)
            top = ceiling.rate if ceiling else None
            for phase in ("cold", "warm"):
                sp = run.cell("catalogue", f"stockpool:{dist}:{phase}", n)
                ch = run.cell("catalogue", f"counter_hold:{dist}:{phase}", n)
                if sp is None and ch is None:
                    continue
                sp_rate = catalogue_rate(run, "stockpool", dist, phase, n)
                ch_rate = catalogue_rate(run, "counter_hold", dist, phase, n)
                out.append(
                    [
                        f"{run.config.catalogue_keys:,} {dist}",
                        str(n),
                        "first touches" if phase == "cold" else "warm",
                        fmt(ch_rate) + ("" if ch is None or ch.valid else " (!)"),
                        times(ratio(ch_rate, top)),
                        fmt(sp_rate) + ("" if sp is None or sp.valid else " (!)"),
                        times(ratio(sp_rate, top)),
                        times(ratio(sp_rate, ch_rate)),
                        fmt(sp.pool_rows if sp else None),
                        fmt(sp.pool_bytes / 1e6 if sp and sp.pool_bytes is not None else None, 1),
                        fmt(sp.keys_touched if sp else None),
                        fmt(rows_per_key(sp), 2),
                        fmt(sp.cpu_us if sp else None),
                        top_wait(sp) if sp else "-",
                    ]
                )
    return out


def catalogue_markdown(run: BenchRun) -> list[str]:
    """The catalogue section of the markdown report (empty without catalogue cells)."""
    if not catalogue_counts(run):
        return []
    lines = [
        "",
        "## A whole catalogue: one key drawn per reservation",
        "",
        f"{run.config.catalogue_keys:,} keys; each reservation takes one unit of a key drawn uniformly or "
        "by Zipf (exponent 1.1), stockpool.reserve_units against counter+hold (a conditional UPDATE of "
        "the key's counter row plus a hold row, one statement). Units per key: "
        + ", ".join(f"{d} {u:,}" for d, u in CATALOGUE_PER_KEY.items())
        + ". First touches: a fresh copy of the database, no key reserved before. Warm: the same "
        "workload run once for as long beforehand, then measured on the same database. Pool rows "
        "and MB (every leaf of stockpool.pool_units) at the end of the stockpool cell.",
        "",
    ]
    lines += _md_table(CATALOGUE_HEADER, catalogue_rows(run))
    lines += ["", "### The bar for a catalogue", ""]
    lines += _checks_table(catalogue_bar(run))
    return lines


POOLED_HEADER = [
    "clients",
    "direct res/s",
    "x ceiling",
    "through pgbouncer res/s",
    "x best direct",
    "p99 ms direct",
    "p99 ms pooled",
    "ceiling p99 ms",
    "pgbouncer wait per transaction ms",
    "clients waiting (mean / max)",
    "server connections busy (max)",
    "CPU µs per reservation direct / pooled",
    "pooled top wait event",
]


def pooled_rows(run: BenchRun) -> list[list[str]]:
    best = best_direct(run)
    out = []
    for n in pooled_counts(run):
        direct, ceiling, pooled = (
            run.cell("strategy", "stockpool", n),
            run.cell("strategy", "ceiling", n),
            pooled_cell(run, n),
        )
        figures = (pooled.pooler if pooled else None) or {}
        out.append(
            [
                str(n),
                fmt(direct.rate if direct else None) + ("" if direct is None or direct.valid else " (!)"),
                times(ratio(direct.rate if direct else None, ceiling.rate if ceiling else None)),
                fmt(pooled.rate if pooled else None) + ("" if pooled is None or pooled.valid else " (!)"),
                times(ratio(pooled.rate if pooled else None, best.rate if best else None)),
                fmt(direct.p99_ms if direct else None, 1),
                fmt(pooled.p99_ms if pooled else None, 1),
                fmt(ceiling.p99_ms if ceiling else None, 1),
                fmt(figures.get("avg_wait_ms"), 2),
                f"{fmt(figures.get('cl_waiting_mean'))} / {fmt(figures.get('cl_waiting_max'))}",
                f"{fmt(figures.get('sv_active_max'))} of {fmt(figures.get('pool_size'))}",
                f"{fmt(direct.cpu_us if direct else None)} / {fmt(pooled.cpu_us if pooled else None)}",
                top_wait(pooled) if pooled else "-",
            ]
        )
    return out


def pooled_markdown(run: BenchRun) -> list[str]:
    """The pooler section of the markdown report (empty without pooled cells)."""
    if not pooled_counts(run):
        return []
    best = best_direct(run)
    lines = [
        "",
        "## Through PgBouncer",
        "",
        "stockpool.reserve_units through a throwaway pgbouncer (transaction pooling, "
        f"{run.config.pooler}; server pool of {POOL_SIZE_RULE} connections), beside the direct "
        "cells of the same counts. Through the pooler pgbench runs in the simple protocol "
        "(pgbouncer 1.18 keeps no prepared statements in transaction mode), directly in prepared "
        "mode. Best direct: stockpool's highest direct rate of this run"
        + (f" ({fmt(best.rate)}/s at {best.clients} clients)" if best else "")
        + ". pgbouncer's figures: SHOW STATS (time clients waited for a server connection, over "
        "the transactions of the cell) and SHOW POOLS sampled every 200 ms. CPU per reservation: "
        "the pooled cell's client share is pgbench's and pgbouncer's. Cores (--placement): "
        + str(run.machine.get("placement", "shared"))
        + ".",
        "",
    ]
    lines += _md_table(POOLED_HEADER, pooled_rows(run))
    lines += ["", "### The bar behind a pooler", ""]
    lines += _checks_table(pooled_bar(run))
    if run.config.placement == "shared":
        lines += [
            "",
            "On shared cores the pooled cells' client side (pgbench's connections in the simple protocol, "
            "and pgbouncer) runs on the server's cores and takes the CPU the direct cells leave to the "
            "server: `--placement split` measures the pooler path with the server's cores its own "
            "(docs/commands.md, Through PgBouncer).",
        ]
    return lines


SEATS_HEADER = [
    "clients",
    "ceiling res/s",
    "counted reserve_units x ceiling",
    "reserve_named 1 res/s",
    "x ceiling",
    "/ counted",
    "/ cloakroom",
    "CPU µs per reservation (named 1 / counted / cloakroom)",
    "reserve_labels pick res/s",
    "x ceiling",
    "picks held",
    "cloakroom res/s",
    "x ceiling",
    "4 adjacent seats/s",
    "x ceiling",
    "4 adjacent calls held",
    "4 adjacent near sellout: calls/s",
    "calls held",
    "blocks of 4 free before / after",
    "top wait event (named 1 / cloakroom)",
]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _seat_cell(run: BenchRun, name: str, n: int) -> tuple[Cell | None, float | None, str]:
    """A seats cell, its rate when valid, and '(!)' when not."""
    cell = run.cell("seats", name, n)
    rate = cell.rate if cell and cell.valid else None
    return cell, rate, "" if cell is None or cell.valid else " (!)"


def seats_rows(run: BenchRun) -> list[list[str]]:
    out = []
    for n in seat_counts(run):
        ceiling = run.cell("strategy", "ceiling", n)
        counted = run.cell("strategy", "stockpool", n)
        top = ceiling.rate if ceiling else None
        counted_rate = counted.rate if counted and counted.valid else None
        one, one_rate, one_mark = _seat_cell(run, "named_1", n)
        pick, pick_rate, pick_mark = _seat_cell(run, "labels_pick", n)
        cloak, cloak_rate, cloak_mark = _seat_cell(run, "cloakroom", n)
        block, block_rate, block_mark = _seat_cell(run, "named_4_adjacent", n)
        figures = (block.seats if block else None) or {}
        near = run.cell("seats", "named_4_near", n)
        near_figures = (near.seats if near else None) or {}
        out.append(
            [
                str(n),
                fmt(top),
                times(ratio(counted_rate, top)),
                fmt(one_rate) + one_mark,
                times(ratio(one_rate, top)),
                times(ratio(one_rate, counted_rate)),
                times(ratio(one_rate, cloak_rate)),
                " / ".join(fmt(c.cpu_us if c else None) for c in (one, counted, cloak)),
                fmt(pick_rate) + pick_mark,
                times(ratio(pick_rate, top)),
                _pct(((pick.seats if pick else None) or {}).get("success")),
                fmt(cloak_rate) + cloak_mark,
                times(ratio(cloak_rate, top)),
                fmt(block_rate) + block_mark,
                times(ratio(block_rate, top)),
                _pct(figures.get("success")),
                fmt(near.tps if near else None) + ("" if near is None or near.valid else " (!)"),
                _pct(near_figures.get("success")),
                " / ".join(fmt(near_figures.get(k)) for k in ("free_blocks_at_start", "free_blocks_at_end")),
                f"{top_wait(one) if one else '-'} / {top_wait(cloak) if cloak else '-'}",
            ]
        )
    return out


def seats_markdown(run: BenchRun) -> list[str]:
    """The seats section of the markdown report (empty without seats cells)."""
    if not seat_counts(run):
        return []
    lines = [
        "",
        "## Seats: a ticket drop on one hot named key",
        "",
        "One named key of seats in rows of 20 (an aisle between rows), one call per transaction: "
        "stockpool.reserve_named of 1 seat, of 4 adjacent seats, and reserve_labels of a random free "
        "pick (the first free seat at or after a random position, read from the key's free units, "
        "then reserved: false when another buyer took it first), beside the cloakroom shape (a plain "
        "table of seats: ORDER BY position FOR UPDATE SKIP LOCKED LIMIT 1, then UPDATE) and the "
        "counted stockpool.reserve_units of this run. The 1-seat, pick and cloakroom cells get "
        f"max({run.config.seat_units:,}, 1.5 x what the ceiling did in a cell's time) seats, so that "
        f"none sells out while measured; the 4-adjacent cells run on {run.config.seat_units:,} seats: at "
        "the drop's start (all free), and near sellout (each row first cut into groups of 1-4 seats "
        f"from its first seat, each group held with probability {NEAR_SELLOUT:g} by reserve_labels, so a "
        "few blocks of 4 free seats are left among scattered gaps). Calls held: the share of calls "
        "answered with a block. No block of 4 may be left free at the end of a cell in which a call "
        "was refused (nothing is released in a cell, so blocks only disappear).",
        "",
    ]
    lines += _md_table(SEATS_HEADER, seats_rows(run))
    lines += ["", "### The bar for seats", ""]
    lines += _checks_table(seats_bar(run))
    return lines
