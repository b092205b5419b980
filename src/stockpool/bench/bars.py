"""The bench's bars: what stockpool must reach in a run, each a Check.

:func:`bar` is the hot key's (stockpool.reserve_units against the ceiling and
the other strategies), :func:`checkout_bar` the claims' (a claim costs what a
release does), :func:`catalogue_bar` the catalogue's (a key nobody contends
costs what a counter costs), :func:`pooled_bar` the pooler's (behind
pgbouncer, a thousand clients keep stockpool's best direct rate),
:func:`seats_bar` the named units' (one seat costs about what a counted unit
does and beats the cloakroom's shape);
:func:`every_bar` all of them.
"""

from __future__ import annotations

from stockpool.bench import checkouts
from stockpool.bench.figures import fmt, ratio, times
from stockpool.bench.model import HOLD_STRATEGIES, BenchRun, Cell
from stockpool.checks import Check

BAR_FLOOR = 0.5  # x ceiling throughput, at every client count from 8 up
BAR_SHARDED = 0.9  # x sharded throughput
BAR_P99 = 3.0  # x ceiling p99 at 512 clients
BAR_COLLAPSE = 0.7  # throughput at 512 / at 32
SOAK_DEAD_RATIO = 0.2


def bar(run: BenchRun) -> list[Check]:
    """The issue's bar for stockpool.reserve_units, checked on this run."""
    counts = sorted({c.clients for c in run.cells if c.kind == "strategy" and c.name == "stockpool"})
    checks = _floor_check(run, counts)
    for other in (*hold_strategies(run), "sharded"):
        checks += _versus_check(run, counts, other)
    checks += _tail_checks(run, counts)
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


def _strategy_rate(run: BenchRun, name: str, clients: int) -> float | None:
    cell = run.cell("strategy", name, clients)
    return cell.rate if cell and cell.valid else None


def _floor_check(run: BenchRun, counts: list[int]) -> list[Check]:
    """stockpool >= BAR_FLOOR x the ceiling from 8 clients up."""
    floor = [n for n in counts if n >= 8]
    if not floor:
        return []
    bad, worst = [], None
    for n in floor:
        r = ratio(_strategy_rate(run, "stockpool", n), _strategy_rate(run, "ceiling", n))
        worst = r if worst is None or (r is not None and r < worst) else worst
        if r is None or r < BAR_FLOOR:
            bad.append(f"{n}: {times(r)}")
    return [
        Check(
            f">= {BAR_FLOOR} x ceiling at {', '.join(map(str, floor))} clients",
            not bad,
            "lowest " + times(worst) + ("" if not bad else "; short at " + ", ".join(bad)),
        )
    ]


def _versus_check(run: BenchRun, counts: list[int], other: str) -> list[Check]:
    """stockpool against another strategy at every client count both ran."""
    factor = BAR_SHARDED if other == "sharded" else 1.0
    bad, details = [], []
    for n in counts:
        r = ratio(_strategy_rate(run, "stockpool", n), _strategy_rate(run, other, n))
        if r is None:
            continue
        details.append(f"{n}: {r:.2f}x")
        if r < factor:
            bad.append(str(n))
    if not details:
        return []
    return [Check(f">= {factor:g} x {other} at every client count", not bad, ", ".join(details))]


def _tail_checks(run: BenchRun, counts: list[int]) -> list[Check]:
    """p99 at 512 clients against the ceiling's, and no collapse from 32 to 512."""
    checks: list[Check] = []
    if 512 in counts:
        checks.append(
            _p99_check(
                f"p99 at 512 clients <= {BAR_P99:g} x ceiling's",
                run.cell("strategy", "stockpool", 512),
                run.cell("strategy", "ceiling", 512),
                BAR_P99,
            )
        )
    if 512 in counts and 32 in counts:
        r = ratio(_strategy_rate(run, "stockpool", 512), _strategy_rate(run, "stockpool", 32))
        checks.append(
            Check(
                f"no collapse: 512 clients >= {BAR_COLLAPSE} x 32 clients",
                r is not None and r >= BAR_COLLAPSE,
                times(r),
            )
        )
    return checks


def _p99_check(name: str, cell: Cell | None, ceiling: Cell | None, limit: float) -> Check:
    """A cell's p99 against the ceiling's, at most ``limit`` times it."""
    r = ratio(cell.p99_ms if cell else None, ceiling.p99_ms if ceiling else None)
    return Check(
        name,
        r is not None and r <= limit,
        f"{fmt(cell.p99_ms if cell else None, 1)} ms vs "
        f"{fmt(ceiling.p99_ms if ceiling else None, 1)} ms: {times(r)}",
    )


def hold_strategies(run: BenchRun) -> list[str]:
    return [s for s in HOLD_STRATEGIES if s in run.config.strategies]


def claim_waits(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    top = checkouts.statement_waits(cell, "claim")
    return ", ".join(f"{event} {share:.0%}" for event, share in top) or "-"


def checkout_rate(run: BenchRun, name: str, clients: int) -> float | None:
    cell = run.cell("checkout", name, clients)
    return cell.tps if cell and cell.valid else None


def checkout_counts(run: BenchRun) -> list[int]:
    return sorted({c.clients for c in run.cells if c.kind == "checkout"})


def _claim_ratio_check(run: BenchRun, name: str, other: str, floor: float, counts: list[int]) -> Check:
    """stockpool's claim checkouts against another checkout cell at ``counts``, each >= floor."""
    bad, details = [], []
    for n in counts:
        r = ratio(checkout_rate(run, "stockpool_claim", n), checkout_rate(run, other, n))
        details.append(f"{n}: {times(r)}")
        if r is None or r < floor:
            bad.append(str(n))
    return Check(name, not bad, ", ".join(details))


def checkout_bar(run: BenchRun) -> list[Check]:
    """Issue 9's bar: a claim costs what a release does and never queues on the ledger row."""
    counts = checkout_counts(run)
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
        seen.append(f"{n}: {claim_waits(cell)}")
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


CATALOGUE_VS_COUNTER = 0.7  # uniform catalogue: stockpool >= this x counter+hold at 1, 8 and 32 clients
CATALOGUE_UNIFORM_UPTO = 32
CATALOGUE_ZIPF_FROM = 32  # Zipf catalogue: stockpool >= counter+hold from this many clients
CATALOGUE_ROWS_PER_KEY = 16  # pool rows per key touched after a cold run


def catalogue_rate(run: BenchRun, strategy: str, dist: str, phase: str, clients: int) -> float | None:
    cell = run.cell("catalogue", f"{strategy}:{dist}:{phase}", clients)
    return cell.rate if cell and cell.valid else None


def catalogue_counts(run: BenchRun) -> list[int]:
    return sorted({c.clients for c in run.cells if c.kind == "catalogue"})


def rows_per_key(cell: Cell | None) -> float | None:
    if cell is None or cell.pool_rows is None or not cell.keys_touched:
        return None
    return cell.pool_rows / cell.keys_touched


def catalogue_bar(run: BenchRun) -> list[Check]:
    """Issue 10's bar: a key nobody contends costs what a counter costs."""
    counts = catalogue_counts(run)
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
                catalogue_rate(run, "stockpool", dist, phase, n),
                catalogue_rate(run, "counter_hold", dist, phase, n),
            )
            details.append(f"{n}: {times(r)}")
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
            per_key = rows_per_key(run.cell("catalogue", f"stockpool:{dist}:cold", n))
            details.append(f"{dist} {n}: {fmt(per_key, 2)}")
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


POOLED_VS_DIRECT = 0.8  # through pgbouncer at 512 and 1,000 clients: x stockpool's best direct rate
POOLED_FROM = 512
POOLED_P99 = 3.0  # p99 through pgbouncer at 512 clients: x the direct ceiling's p99 at 512


def pooled_counts(run: BenchRun) -> list[int]:
    return sorted({c.clients for c in run.cells if c.kind == "pooled"})


def pooled_cell(run: BenchRun, clients: int) -> Cell | None:
    return next((c for c in run.cells if c.kind == "pooled" and c.clients == clients), None)


def best_direct(run: BenchRun) -> Cell | None:
    """stockpool's best direct cell of the run (any client count)."""
    cells = [c for c in run.cells if c.kind == "strategy" and c.name == "stockpool" and c.valid]
    return max(cells, key=lambda c: c.rate, default=None)


def pooled_bar(run: BenchRun) -> list[Check]:
    """Issue 12's bar: behind pgbouncer, many clients keep the direct best rate and a sane tail."""
    counts = pooled_counts(run)
    if not counts:
        return []
    best = best_direct(run)
    checks: list[Check] = []
    many = [n for n in counts if n >= POOLED_FROM]
    if many:
        bad, details = [], []
        for n in many:
            cell = pooled_cell(run, n)
            r = ratio(cell.rate if cell and cell.valid else None, best.rate if best else None)
            details.append(f"{n}: {times(r)}")
            if r is None or r < POOLED_VS_DIRECT:
                bad.append(str(n))
        reference = f" (best direct: {fmt(best.rate)}/s at {best.clients})" if best else ""
        checks.append(
            Check(
                f"pgbouncer: >= {POOLED_VS_DIRECT:g} x stockpool's best direct rate at "
                f"{', '.join(map(str, many))} clients",
                not bad,
                ", ".join(details) + reference,
            )
        )
    if POOLED_FROM in counts:
        checks.append(
            _p99_check(
                f"pgbouncer: p99 at {POOLED_FROM} clients <= {POOLED_P99:g} x the direct ceiling's",
                pooled_cell(run, POOLED_FROM),
                run.cell("strategy", "ceiling", POOLED_FROM),
                POOLED_P99,
            )
        )
    return checks


SEATS_VS_COUNTED = 0.8  # reserve_named of 1 seat: x counted reserve_units, at 8 clients and up
SEATS_COUNTED_FROM = 8
SEATS_VS_CLOAKROOM = 2.0  # reserve_named of 1 seat: x the cloakroom shape, from 32 clients up
SEATS_CLOAKROOM_FROM = 32


def seat_counts(run: BenchRun) -> list[int]:
    return sorted({c.clients for c in run.cells if c.kind == "seats"})


def seat_rate(run: BenchRun, name: str, clients: int) -> float | None:
    cell = run.cell("seats", name, clients)
    return cell.rate if cell and cell.valid else None


def _seat_ratio_check(run: BenchRun, name: str, counts: list[int], floor: float, versus: str) -> Check:
    """reserve_named of 1 seat against counted stockpool or the cloakroom at each of ``counts``."""
    bad, details = [], []
    for n in counts:
        reference = (
            _strategy_rate(run, "stockpool", n) if versus == "stockpool" else seat_rate(run, versus, n)
        )
        r = ratio(seat_rate(run, "named_1", n), reference)
        details.append(f"{n}: {times(r)}")
        if r is None or r < floor:
            bad.append(str(n))
    return Check(name, not bad, ", ".join(details))


def seats_bar(run: BenchRun) -> list[Check]:
    """Issue 15's bar: one seat of a hot named key costs about what one counted
    unit does, and beats the cloakroom's lowest-position-first shape; the
    adjacent case never answers NULL while a block is left."""
    counts = seat_counts(run)
    if not counts:
        return []
    checks: list[Check] = []
    counted = [n for n in counts if n >= SEATS_COUNTED_FROM]
    if counted:
        checks.append(
            _seat_ratio_check(
                run,
                f"seats: reserve_named of 1 >= {SEATS_VS_COUNTED:g} x counted reserve_units at "
                f"{', '.join(map(str, counted))} clients",
                counted,
                SEATS_VS_COUNTED,
                "stockpool",
            )
        )
    crowded = [n for n in counts if n >= SEATS_CLOAKROOM_FROM]
    if crowded:
        checks.append(
            _seat_ratio_check(
                run,
                f"seats: reserve_named of 1 >= {SEATS_VS_CLOAKROOM:g} x the cloakroom shape at "
                f"{', '.join(map(str, crowded))} clients",
                crowded,
                SEATS_VS_CLOAKROOM,
                "cloakroom",
            )
        )
    # 4 adjacent: a refused call while a block of 4 is still free at the end
    # (no release, no rollback in the cell: blocks only disappear) is an undersell.
    bad, details = [], []
    for n in counts:
        shown = []
        for name, when in (("named_4_adjacent", "at the start"), ("named_4_near", "near sellout")):
            cell = run.cell("seats", name, n)
            figures = (cell.seats if cell else None) or {}
            if not figures:
                bad.append(f"{n} {when}: not measured")
                continue
            refused = figures["calls"] - figures["reserved_calls"]
            blocks = figures["free_blocks_at_end"]
            before = figures.get("free_blocks_at_start")
            shown.append(
                f"{when} {_share(figures['success'])} of {figures['calls']:,} calls held"
                + (
                    f" ({before:,} blocks free before, {blocks:,} after)"
                    if before is not None
                    else f" ({blocks:,} blocks free after)"
                )
            )
            if refused and blocks:
                bad.append(f"{n} {when}: {refused:,} refused with {blocks:,} blocks free")
        details.append(f"{n}: " + ", ".join(shown))
    checks.append(
        Check(
            "seats: 4 adjacent refused only when no block of 4 is free",
            not bad,
            "; ".join(bad) if bad else "; ".join(details),
        )
    )
    return checks


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def every_bar(run: BenchRun) -> list[Check]:
    """Every bar of the run, in the report's order."""
    return [*bar(run), *checkout_bar(run), *catalogue_bar(run), *pooled_bar(run), *seats_bar(run)]
