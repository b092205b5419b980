"""``stockpool top``: parse the options, run the live view (or one frame)."""

from __future__ import annotations

from typing import Annotated

import typer

from stockpool.console import console, fail
from stockpool.errors import StockpoolError
from stockpool.top.watch import Top, TopOptions


def command(
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", envvar="STOCKPOOL_DSN", help="PostgreSQL URL of the database to watch."),
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between two frames.")] = 1.0,
    once: Annotated[
        bool, typer.Option("--once", help="Print one frame and exit (rates over --interval, at most 1 s).")
    ] = False,
    keys: Annotated[int, typer.Option("--keys", help="Hot keys shown.")] = 10,
) -> None:
    """A live view: rates, hot keys, holds, dead tuples, wait events, sessions (monitor role)."""
    options = TopOptions(interval=interval, keys=keys, warmup=min(interval, 1.0))
    try:
        if not dsn:
            raise StockpoolError(
                "stockpool top needs --dsn (or STOCKPOOL_DSN)", hint="stockpool top --dsn postgresql://..."
            )
        options.validate()
    except StockpoolError as exc:
        fail(exc)
    top = Top(dsn, options, console)
    try:
        if once:
            console.print(top.once())
            return
        top.run()
    except StockpoolError as exc:
        fail(exc)
    except KeyboardInterrupt:
        return
