"""``stockpool move``: parse the options, move one partition, report."""

from __future__ import annotations

from typing import Annotated

import typer

from stockpool.console import console, fail
from stockpool.errors import StockpoolError
from stockpool.route.move import move


def command(
    dsn: Annotated[str, typer.Option("--dsn", envvar="STOCKPOOL_DSN", help="PostgreSQL URL of the router.")],
    partition: Annotated[int, typer.Option("--partition", help="The logical partition to move, 0..63.")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="URL of the node that will serve it (registered by deploy --nodes); its user, a superuser, "
            "is also used on the source node.",
        ),
    ],
    drain_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds to wait for router transactions older than the fence; then the move is undone."
        ),
    ] = 10.0,
) -> None:
    """Move a partition's shops to another node while the others keep selling.

    An unfinished move (an earlier run that died) is resumed first."""
    try:
        report = move(dsn, partition, to, drain_timeout=drain_timeout)
    except StockpoolError as exc:
        fail(exc)
    for resumed in report.resumed:
        console.print(f"resumed an unfinished move: {resumed}", soft_wrap=True)
    console.print(report.line(), soft_wrap=True)
