"""``stockpool race``: parse the options into a plan, run it on the target
database, show and save the report. Exit 0 when every check passed, 1 when
one failed, 2 for bad flags or a database that cannot be used."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from stockpool.console import console, fail
from stockpool.errors import StockpoolError, first_line
from stockpool.install.deploy import deploy
from stockpool.race.failover import HOLD_BACK, FailoverOptions, failover
from stockpool.race.harness import HELPER_SESSIONS, SCENARIOS, SHAPES, Harness, temporary_harness, validate
from stockpool.race.hot import hot
from stockpool.race.nodes import race_nodes
from stockpool.race.report import RunReport, render, write_json
from stockpool.race.seats import MIN_SEATS, seats
from stockpool.race.sellout import sellout
from stockpool.race.soak import SoakOptions, soak
from stockpool.route.layout import throwaway_layout
from stockpool.server import pgbench, stats
from stockpool.server.cluster import settings_for_clients
from stockpool.server.pooler import POOL_SIZE_RULE, POOLERS, pgbouncer
from stockpool.server.target import connect, target

DEFAULT_SCENARIOS = ["sellout", "soak"]
DEFAULT_RUN_SOAK_S = 30  # the soak of a bare `stockpool race` / `make race`
SOAK_S = 60
FAILOVER_S = 20


@dataclass
class Plan:
    """What one `stockpool race` invocation runs, validated."""

    scenarios: list[str]
    shape: str
    clients: int
    per_client: int
    units: int
    rollback_pct: int
    duration: int
    hot_clients: list[int]
    hot_duration: int
    soak_options: SoakOptions
    sample_ms: int = 200
    pooler: str = "none"
    seat_count: int = 0  # seats: the named key's seats (0: 8 per client)

    @property
    def max_clients(self) -> int:
        counts = [self.clients] if {"sellout", "soak", "seats"} & set(self.scenarios) else []
        if "hot" in self.scenarios:
            counts += self.hot_clients
        return max(counts, default=1)


def _parse_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _scenarios(scenario: str | None, shape: str) -> tuple[list[str], int]:
    """The scenarios to run and the soak's default duration."""
    if shape not in SHAPES:
        raise StockpoolError(f"unknown --shape {shape!r}", hint=f"one of: {', '.join(SHAPES)}")
    if scenario is None:
        return (["sellout"] if shape == "naive" else list(DEFAULT_SCENARIOS)), DEFAULT_RUN_SOAK_S
    scenarios = _parse_list(scenario)
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown or not scenarios:
        raise StockpoolError(
            f"unknown scenario {', '.join(unknown) or repr(scenario)}",
            hint=f"one or more of: {', '.join(SCENARIOS)}",
        )
    if shape == "naive" and "soak" in scenarios:
        raise StockpoolError(
            "--shape naive runs the sellout and hot scenarios only",
            hint="the soak needs holds, claims and releases, which the naive counter does not have",
        )
    return scenarios, SOAK_S


def _hot_clients(text: str) -> list[int]:
    try:
        return [int(part) for part in _parse_list(text)]
    except ValueError:
        raise StockpoolError(
            f"--hot-clients must be a comma-separated list of numbers, got {text!r}"
        ) from None


def make_plan(
    scenario: str | None,
    shape: str,
    clients: int,
    per_client: int,
    units: int,
    rollback_pct: int,
    duration: int | None,
    hot_clients: str,
    hot_duration: int,
    soak_options: SoakOptions,
    sample_ms: int = 200,
    pooler: str = "none",
    seat_count: int = 0,
) -> Plan:
    """Every flag checked before anything starts: one clear line for the first bad one."""
    scenarios, default_duration = _scenarios(scenario, shape)
    counts = _hot_clients(hot_clients)
    validate(
        clients=(clients, 1), per_client=(per_client, 1), units=(units, 0), rollback_pct=(rollback_pct, 0)
    )
    if rollback_pct > 100:
        raise StockpoolError(f"--rollback-pct must be at most 100, got {rollback_pct}")
    if duration is not None:
        validate(duration=(duration, 1))
    validate(seats=(seat_count, MIN_SEATS if seat_count else 0))
    if "hot" in scenarios:
        if not counts:
            raise StockpoolError("--hot-clients needs at least one client count")
        for n in counts:
            validate(hot_clients=(n, 1))
        validate(hot_duration=(hot_duration, 1))
    if not 100 <= sample_ms <= 250:
        raise StockpoolError(f"--sample-ms must be between 100 and 250, got {sample_ms}")
    if pooler not in POOLERS:
        raise StockpoolError(f"unknown --pooler {pooler!r}", hint=f"one of: {', '.join(POOLERS)}")
    plan = Plan(
        scenarios=scenarios,
        shape=shape,
        clients=clients,
        per_client=per_client,
        units=units,
        rollback_pct=rollback_pct,
        duration=duration if duration is not None else default_duration,
        hot_clients=counts,
        hot_duration=hot_duration,
        soak_options=soak_options,
        sample_ms=sample_ms,
        pooler=pooler,
        seat_count=seat_count,
    )
    if "soak" in plan.scenarios:
        soak_options.validate(clients, plan.duration)
    return plan


def run_plan(h: Harness, plan: Plan) -> list[RunReport]:
    reports: list[RunReport] = []
    for scenario in plan.scenarios:
        if scenario == "sellout":
            result = sellout(
                h.dsn,
                plan.clients,
                plan.per_client,
                plan.units,
                rollback_pct=plan.rollback_pct,
                shape=plan.shape,
                harness=h,
            )
            assert result.report is not None
            reports.append(result.report)
        elif scenario == "seats":
            reports += seats(
                h.dsn,
                plan.clients,
                plan.per_client,
                plan.seat_count,
                rollback_pct=plan.rollback_pct,
                shape=plan.shape,
                harness=h,
            )
        elif scenario == "soak":
            reports.append(soak(h.dsn, plan.clients, plan.duration, harness=h, **asdict(plan.soak_options)))
        else:
            reports.extend(hot(h.dsn, plan.hot_clients, plan.hot_duration, shape=plan.shape, harness=h))
    return reports


def execute(plan: Plan, dsn: str | None) -> tuple[list[RunReport], dict[str, Any]]:
    """Run the plan on the target database, with a progress bar; the reports
    and what they were measured on."""
    pgbench.require()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    sessions = plan.max_clients + HELPER_SESSIONS
    detail = f"{plan.max_clients} clients + {HELPER_SESSIONS} harness sessions"
    with target(dsn, sessions, prepare=deploy, detail=detail) as server:
        with connect(server.dsn) as conn:
            meta = {
                "started_at": started,
                "target": server.where,
                "server_version": stats.server_version(conn),
                "server_settings": stats.server_settings(conn),
                "scenarios": plan.scenarios,
                "shape": plan.shape,
            }
        with contextlib.ExitStack() as stack:
            clients = server.dsn
            if plan.pooler == "pgbouncer":
                pooled = stack.enter_context(pgbouncer(server.dsn, sessions))
                clients = pooled.dsn
                meta["pooler"] = (
                    f"pgbouncer, transaction mode, {pooled.pool_size} server connections "
                    f"({POOL_SIZE_RULE}) to {pooled.server}; clients, sweeper and replenisher go through it"
                )
            return _run_with_progress(plan, server.dsn, clients, server.server_log), meta
    raise AssertionError("unreachable")


def nodes_options(dsn: str | None, scenario: str | None, shape: str, pooler: str, nodes: int) -> None:
    """``--nodes``' run, checked: the soak, on a router and nodes of its own."""
    if dsn:
        raise StockpoolError(
            "--nodes runs on a router and nodes of its own, not on --dsn",
            hint="run it without --dsn (and without STOCKPOOL_DSN)",
        )
    if scenario not in (None, "soak") or shape != "stockpool" or pooler != "none":
        raise StockpoolError("--nodes runs the soak only: no other --scenario, --shape or --pooler")
    validate(nodes=(nodes, 1))
    if nodes > 8:
        raise StockpoolError(f"--nodes must be at most 8 on one machine, got {nodes}")


def execute_nodes(plan: Plan, nodes: int) -> tuple[list[RunReport], dict[str, Any]]:
    """The soak through a PL/Proxy router in front of N throwaway nodes."""
    pgbench.require()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    settings = settings_for_clients(plan.clients + HELPER_SESSIONS + 2 * nodes)
    settings["log_line_prefix"] = stats.LOG_LINE_PREFIX
    with throwaway_layout(nodes, settings) as lay, _progress() as progress:
        with connect(lay.router.dsn) as conn:
            meta = {
                "started_at": started,
                "target": f"throwaway PL/Proxy router in front of {nodes} throwaway nodes",
                "server_version": stats.server_version(conn),
                "scenarios": ["soak"],
                "shape": plan.shape,
                "nodes": lay.report.partitions,
            }
        report = race_nodes(
            lay,
            plan.clients,
            plan.duration,
            plan.soak_options,
            server_log=stats.ServerLog(lay.router.logfile),
            progress=progress,
            sample_interval=plan.sample_ms / 1000,
        )
    return [report], meta


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def failover_options(
    dsn: str | None,
    scenario: str | None,
    shape: str,
    pooler: str,
    clients: int,
    duration: int | None,
    async_standby: bool,
) -> FailoverOptions:
    """``--failover``'s run, checked: it kills its primary, so it runs on a
    primary and a standby of its own and nothing else."""
    if dsn:
        raise StockpoolError(
            "--failover kills its primary: it runs on a primary and a standby of its own, not on --dsn",
            hint="run it without --dsn (and without STOCKPOOL_DSN)",
        )
    if scenario is not None or shape != "stockpool" or pooler != "none":
        raise StockpoolError("--failover runs alone: no --scenario, --shape or --pooler")
    opts = FailoverOptions(
        clients=clients,
        duration=duration if duration is not None else FAILOVER_S,
        synchronous=not async_standby,
        hold_back=HOLD_BACK if async_standby else None,
    )
    opts.validate()
    return opts


def execute_failover(opts: FailoverOptions) -> tuple[list[RunReport], dict[str, Any]]:
    """The failover soak under a progress bar; its report and what it ran on."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with _progress() as progress:
        result = failover(opts, progress)
    kind = "synchronous" if opts.synchronous else "asynchronous (cut off before the kill)"
    meta = {
        "started_at": started,
        "target": f"throwaway primary and {kind} streaming standby",
        "server_version": result.server_version,
        "scenarios": ["failover"],
        "shape": result.report.shape,
    }
    return [result.report], meta


def _run_with_progress(
    plan: Plan, dsn: str, clients: str, server_log: stats.ServerLog | None
) -> list[RunReport]:
    """The plan's runs under a progress bar on the terminal."""
    progress = _progress()
    with (
        progress,
        temporary_harness(
            dsn,
            server_log=server_log,
            progress=progress,
            sample_interval=plan.sample_ms / 1000,
            client_dsn=clients,
        ) as h,
    ):
        return run_plan(h, plan)


def command(
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", envvar="STOCKPOOL_DSN", help="PostgreSQL URL; default: a throwaway cluster."),
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario",
            help="Comma-separated: sellout, soak, hot, seats. Default: sellout and a 30 s soak "
            "(sellout only with --shape naive).",
        ),
    ] = None,
    shape: Annotated[
        str, typer.Option(help="stockpool, or naive: the negative control that must FAIL.")
    ] = "stockpool",
    clients: Annotated[int, typer.Option(help="Concurrent clients (sellout, soak, seats).")] = 64,
    per_client: Annotated[int, typer.Option(help="sellout, seats: reservations per client.")] = 20,
    units: Annotated[int, typer.Option(help="sellout: units on hand for the raced key.")] = 50,
    seat_count: Annotated[
        int, typer.Option("--seats", help="seats: seats of the raced named key (0: 8 per client).")
    ] = 0,
    rollback_pct: Annotated[
        int, typer.Option(help="sellout, seats: percent of reservations rolled back.")
    ] = 20,
    duration: Annotated[
        int | None, typer.Option(help="soak: seconds (60; 30 in the default sellout + soak run).")
    ] = None,
    shops: Annotated[int, typer.Option(help="soak: shops.")] = 4,
    items: Annotated[int, typer.Option(help="soak: items per shop (keys = shops x items).")] = 250,
    stock: Annotated[int, typer.Option(help="soak: units on hand per key at the start.")] = 500,
    zipf: Annotated[float, typer.Option(help="soak: Zipf exponent of item popularity.")] = 1.1,
    cart_pct: Annotated[
        int, typer.Option(help="soak: percent of checkouts that are carts of 1-5 lines.")
    ] = 50,
    claim_pct: Annotated[int, typer.Option(help="soak: percent of checkouts claimed.")] = 70,
    release_pct: Annotated[int, typer.Option(help="soak: percent released (the rest abandoned).")] = 20,
    abandon_ttl: Annotated[int, typer.Option(help="soak: TTL in seconds of abandoned holds.")] = 2,
    check_every: Annotated[float, typer.Option(help="soak: seconds between invariant checks.")] = 5.0,
    hot_clients: Annotated[str, typer.Option(help="hot: comma-separated client counts.")] = "1,8,32,128,512",
    hot_duration: Annotated[int, typer.Option(help="hot: seconds per client count.")] = 10,
    sample_ms: Annotated[int, typer.Option(help="Wait-event sampling period in ms (100-250).")] = 200,
    pooler: Annotated[
        str,
        typer.Option(
            help="none, or pgbouncer: clients go through a throwaway pgbouncer in transaction mode."
        ),
    ] = "none",
    run_failover: Annotated[
        bool,
        typer.Option(
            "--failover",
            help="Kill the primary mid-run and promote its synchronous standby (clusters of its own; "
            "--clients Python clients and a worker, --duration s, 20 by default; the soak's other "
            "flags do not apply); every acknowledged outcome must be on the new primary.",
        ),
    ] = False,
    async_standby: Annotated[
        bool,
        typer.Option(
            "--async-standby",
            help=f"--failover's negative control: an asynchronous standby cut off {HOLD_BACK:g} s before "
            "the kill loses commits; must FAIL and list them.",
        ),
    ] = False,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes",
            help="Run the soak through a PL/Proxy router in front of N throwaway nodes (shops on every "
            "node); every check on every node, plus placement.",
        ),
    ] = None,
    results: Annotated[Path, typer.Option(help="Directory for the JSON report.")] = Path("results"),
) -> None:
    """Race the package under load, check every guarantee, show where contention went."""
    soak_options = SoakOptions(
        shops=shops,
        items=items,
        stock=stock,
        zipf=zipf,
        cart_pct=cart_pct,
        claim_pct=claim_pct,
        release_pct=release_pct,
        abandon_ttl=abandon_ttl,
        check_every=check_every,
    )
    try:
        if async_standby and not run_failover:
            raise StockpoolError("--async-standby is --failover's negative control", hint="add --failover")
        if run_failover:
            opts = failover_options(dsn, scenario, shape, pooler, clients, duration, async_standby)
            reports, meta = execute_failover(opts)
        elif nodes is not None:
            nodes_options(dsn, scenario, shape, pooler, nodes)
            plan = make_plan(
                "soak",
                shape,
                clients,
                per_client,
                units,
                rollback_pct,
                duration if duration is not None else DEFAULT_RUN_SOAK_S,
                hot_clients,
                hot_duration,
                soak_options,
                sample_ms,
            )
            reports, meta = execute_nodes(plan, nodes)
        else:
            plan = make_plan(
                scenario,
                shape,
                clients,
                per_client,
                units,
                rollback_pct,
                duration,
                hot_clients,
                hot_duration,
                soak_options,
                sample_ms,
                pooler,
                seat_count,
            )
            reports, meta = execute(plan, dsn)
    except StockpoolError as exc:
        fail(exc)
    except psycopg.Error as exc:
        fail(
            StockpoolError(
                f"database error during the race: [{exc.sqlstate or 'no SQLSTATE'}] {first_line(exc)}",
                hint="the server log has the details; with --dsn check the role may create a schema",
            )
        )
    shown = render(console, reports)
    path = write_json(results, reports, meta)
    passed = all(r.passed for r in reports)
    shown.print(
        f"{'[green]PASS[/]' if passed else '[bold red]FAIL[/]'}: "
        f"{sum(len(r.checks) for r in reports)} checks over {len(reports)} runs; report: {path}"
    )
    raise typer.Exit(0 if passed else 1)
