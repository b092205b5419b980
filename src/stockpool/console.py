"""What the commands share: the terminal, the one way to fail, common options."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from stockpool.errors import StockpoolError

console = Console()
err_console = Console(stderr=True)

DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar="STOCKPOOL_DSN",
        help="PostgreSQL URL; without it a throwaway cluster is started and removed.",
    ),
]


def fail(exc: StockpoolError) -> NoReturn:
    """Print the error and its hint on stderr, exit 2."""
    # soft_wrap: one line per message whatever the terminal width; escape: the
    # text comes from servers and users and may hold [brackets].
    err_console.print(f"[bold red]error:[/] {escape(exc.message)}", soft_wrap=True)
    if exc.hint:
        err_console.print(f"[dim]hint: {escape(exc.hint)}[/]", soft_wrap=True)
    raise typer.Exit(2)
