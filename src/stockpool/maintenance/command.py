"""``stockpool worker``: parse the options, set up logging, run the worker."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from stockpool.console import fail
from stockpool.errors import StockpoolError
from stockpool.maintenance.worker import Worker, WorkerOptions

LEVELS = ("debug", "info", "warning", "error")


def command(
    dsn: Annotated[
        str, typer.Option("--dsn", envvar="STOCKPOOL_DSN", help="PostgreSQL URL of the database.")
    ],
    interval: Annotated[float, typer.Option(help="Seconds between the starts of two cycles.")] = 1.0,
    budget_ms: Annotated[
        int, typer.Option(help="Time budget of one cycle (stockpool.maintain's p_budget).")
    ] = 250,
    batch: Annotated[int, typer.Option(help="Holds, keys or pools per batch (p_batch).")] = 500,
    once: Annotated[bool, typer.Option("--once", help="Run one cycle and exit (for cron).")] = False,
    log_level: Annotated[str, typer.Option(help=f"One of {', '.join(LEVELS)}.")] = "info",
) -> None:
    """Run maintenance every --interval: expire overdue holds, fold pending claims, top up pools."""
    options = WorkerOptions(interval=interval, budget_ms=budget_ms, batch=batch)
    try:
        if log_level not in LEVELS:
            raise StockpoolError(f"--log-level must be one of {', '.join(LEVELS)}, got {log_level!r}")
        options.validate()
    except StockpoolError as exc:
        fail(exc)
    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        format="%(asctime)s %(levelname)s stockpool-worker: %(message)s",
    )
    worker = Worker(dsn, options)
    try:
        if once:
            worker.run_once()
            return
        worker.install_signal_handlers()
        worker.run()
    except StockpoolError as exc:
        if once and exc.message.startswith(("cannot reach", "cannot run the maintenance cycle")):
            logging.getLogger("stockpool.worker").error("%s", exc.message)
            raise typer.Exit(1) from exc
        fail(exc)
