"""``stockpool bench``: parse the options into a configuration, run every
cell on the target server, write and show the reports."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from stockpool.bench import chart, report, routed
from stockpool.bench.machine import raise_fd_limit
from stockpool.bench.model import (
    CATALOGUE_CLIENTS,
    CATALOGUE_KEYS,
    DEFAULT_CLIENTS,
    POOLED_CLIENTS,
    RESULTS_DIR,
    SEAT_UNITS,
    SHAPES,
    STRATEGIES,
    BenchConfig,
)
from stockpool.bench.runner import Bench
from stockpool.console import console, fail
from stockpool.errors import StockpoolError
from stockpool.server import pgbench
from stockpool.server.placement import PLACEMENTS
from stockpool.server.placement import placement as placement_of
from stockpool.server.pooler import POOLERS
from stockpool.server.target import target

# The bench's own sessions beside pgbench's clients: its admin session, the
# wait sampler, the pool-health probe, and a few to spare.
BENCH_SESSIONS = 10


def _int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(f"{what}: comma-separated integers expected, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise typer.BadParameter(f"{what}: positive integers expected, got {text!r}")
    return values


def _name_list(text: str, known: Sequence[str], what: str) -> list[str]:
    if text.strip() in ("", "none"):
        return []
    if text.strip() == "all":
        return list(known)
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise typer.BadParameter(f"{what}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return [n for n in known if n in names]  # canonical order


def _router_bench(dsn: str | None, clients: list[int], seconds: int, nodes: int, out: Path) -> None:
    if dsn:
        fail(StockpoolError("--nodes runs on a router and nodes of its own, not on --dsn"))
    try:
        pgbench.require()
        raise_fd_limit(max(clients))
        with tempfile.TemporaryDirectory(prefix="stockpool-router-bench-") as tmp:
            run = routed.router_bench(
                clients, seconds, nodes, lambda line: console.print(line, highlight=False), Path(tmp)
            )
    except StockpoolError as exc:
        fail(exc)
    for path in routed.write(run, out):
        console.print(f"wrote {path}")


def only_seats(config: BenchConfig) -> None:
    """``--seats-only``: the seats cells, and the ceiling and counted stockpool
    cells they are compared with, nothing else."""
    config.clients = list(config.seat_clients)
    config.strategies = ["ceiling", "stockpool"]
    config.shapes, config.shape_clients = [], []
    config.cart = config.checkouts = False
    config.catalogue_keys = 0
    config.pooler = "none"
    config.soak_seconds = 0


def command(
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            envvar="STOCKPOOL_DSN",
            help="A server to bench on (needs CREATEDB; the bench makes its own databases). "
            "Default: a throwaway cluster sized for the largest client count.",
        ),
    ] = None,
    clients: Annotated[str, typer.Option(help="Client counts, comma-separated.")] = ",".join(
        map(str, DEFAULT_CLIENTS)
    ),
    seconds: Annotated[int, typer.Option(min=1, help="Seconds per cell.")] = 15,
    strategies: Annotated[
        str, typer.Option(help=f"Strategies ('all' or some of {', '.join(STRATEGIES)}).")
    ] = "all",
    shapes: Annotated[
        str, typer.Option(help=f"Counter shapes ('all', 'none' or some of {', '.join(SHAPES)}).")
    ] = "all",
    shape_clients: Annotated[
        str | None, typer.Option(help="Client counts for the counter shapes (default: --clients).")
    ] = None,
    cart: Annotated[bool, typer.Option(help="Measure reserve_cart, 5 lines across 5 hot keys.")] = True,
    checkout: Annotated[
        bool,
        typer.Option(
            help="Measure whole checkouts: reserve then claim or release (stockpool, counter+hold), "
            "and a 5-line cart then claim."
        ),
    ] = True,
    catalogue_keys: Annotated[
        int,
        typer.Option(
            min=0,
            help="Catalogue cells: this many keys, one drawn per reservation (uniform and Zipf, "
            "first touches and warm), stockpool against counter+hold (0: none).",
        ),
    ] = CATALOGUE_KEYS,
    catalogue_clients: Annotated[str, typer.Option(help="Client counts for the catalogue cells.")] = ",".join(
        map(str, CATALOGUE_CLIENTS)
    ),
    pooler: Annotated[
        str,
        typer.Option(
            help="'pgbouncer': also measure stockpool through a throwaway pgbouncer in transaction "
            "mode at --pooled-clients, beside the direct cells of the same counts ('none': not).",
        ),
    ] = "none",
    pooled_clients: Annotated[str, typer.Option(help="Client counts for the pooled cells.")] = ",".join(
        map(str, POOLED_CLIENTS)
    ),
    placement: Annotated[
        str,
        typer.Option(
            help="Cores of the throwaway server and the client side: 'shared' (all on every core), "
            "'split' (server on half the cores; pgbench and pgbouncer on the rest: the application "
            "and its pooler on machines of their own) or 'host' (server and pgbouncer on half, "
            "pgbench on the rest: pgbouncer on the database host).",
        ),
    ] = "shared",
    seats: Annotated[
        bool,
        typer.Option(
            help="Measure a ticket drop on one hot named key: reserve_named of 1 seat and of 4 adjacent "
            "seats, reserve_labels of a random free pick, and the cloakroom shape."
        ),
    ] = True,
    seat_clients: Annotated[
        str | None, typer.Option(help="Client counts for the seats cells (default: --clients).")
    ] = None,
    seat_units: Annotated[
        int, typer.Option(min=8, help="Seats of the hot named key (the 4-adjacent cell's, and the least).")
    ] = SEAT_UNITS,
    seats_only: Annotated[
        bool,
        typer.Option(
            "--seats-only",
            help="Only the seats cells, with the ceiling and counted stockpool cells of the same client "
            "counts (no other strategy, shape, cart, checkout, catalogue, pooler or soak).",
        ),
    ] = False,
    soak_seconds: Annotated[int, typer.Option(min=0, help="Soak of the hot key (0: none).")] = 600,
    soak_clients: Annotated[int, typer.Option(min=1, help="Clients for the soak.")] = 128,
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="pgbench threads (-j); default: one per core, or one per 64 clients when that is more "
            "(a pgbench thread polls all of its sockets on every wake-up).",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Directory for the JSON, markdown and PNG.")] = RESULTS_DIR,
    publish: Annotated[
        bool, typer.Option(help="Also write the run to results/published/ (the README's copy).")
    ] = False,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes",
            min=1,
            max=8,
            help="Measure only the PL/Proxy router's cost per call: reserve_units on a node directly "
            "and through a router in front of N throwaway nodes, beside the node's ceiling, at --clients.",
        ),
    ] = None,
) -> None:
    """Side-by-side benchmark of reservation strategies on one hot key."""
    client_list = _int_list(clients, "--clients")
    if nodes is not None:
        _router_bench(dsn, client_list, seconds, nodes, out)
        return
    if pooler not in POOLERS:
        raise typer.BadParameter(f"--pooler: one of {', '.join(POOLERS)}, got {pooler!r}")
    if placement not in PLACEMENTS:
        raise typer.BadParameter(f"--placement: one of {', '.join(PLACEMENTS)}, got {placement!r}")
    if placement != "shared" and dsn:
        raise typer.BadParameter(
            f"--placement {placement} pins a throwaway cluster's processes to cores; with --dsn "
            "the server is not this machine's to place (use the default, shared)"
        )
    chosen = _name_list(strategies, STRATEGIES, "--strategies")
    if "ceiling" not in chosen:
        chosen.insert(0, "ceiling")  # every ratio is to the same run's ceiling
    config = BenchConfig(
        clients=client_list,
        seconds=seconds,
        strategies=chosen,
        shapes=_name_list(shapes, SHAPES, "--shapes"),
        shape_clients=_int_list(shape_clients, "--shape-clients") if shape_clients else client_list,
        cart=cart,
        checkouts=checkout,
        catalogue_keys=catalogue_keys,
        catalogue_clients=_int_list(catalogue_clients, "--catalogue-clients"),
        pooler=pooler,
        pooled_clients=_int_list(pooled_clients, "--pooled-clients"),
        soak_seconds=soak_seconds,
        soak_clients=soak_clients,
        jobs=jobs,
        seat_clients=(_int_list(seat_clients, "--seat-clients") if seat_clients else client_list)
        if seats or seats_only
        else [],
        seat_units=seat_units,
        placement=placement,
    )
    if seats_only:
        only_seats(config)
    try:
        placement_of(placement)  # at least two cores, before any cluster starts
        chart.require_chart_library()
        pgbench.require()
        most = config.most_clients
        raise_fd_limit(most)
        detail = f"{most} clients + {BENCH_SESSIONS} bench sessions"
        with target(dsn, most + BENCH_SESSIONS, detail=detail) as server:
            bench = Bench(
                server.dsn,
                config,
                lambda line: console.print(line, highlight=False, soft_wrap=True),
                server.cpu,
            )
            run = bench.execute()
    except StockpoolError as exc:
        fail(exc)
    paths = report.write(run, out, publish=publish)
    report.print_summary(console, run)
    for path in paths:
        console.print(f"wrote {path}")
