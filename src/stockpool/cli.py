"""The ``stockpool`` command line: deploy, race, run a command on a throwaway cluster."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from stockpool import cluster as clusters
from stockpool.deploy import Roles, deploy
from stockpool.errors import StockpoolError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="stockpool: inventory reservations inside PostgreSQL.",
)
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


def fail(exc: StockpoolError) -> None:
    # soft_wrap: one line per message whatever the terminal width; escape: the
    # text comes from servers and users and may hold [brackets].
    err_console.print(f"[bold red]error:[/] {escape(exc.message)}", soft_wrap=True)
    if exc.hint:
        err_console.print(f"[dim]hint: {escape(exc.hint)}[/]", soft_wrap=True)
    raise typer.Exit(2)


@contextlib.contextmanager
def database(dsn: str | None, clients: int = 64, roles: Roles | None = None) -> Iterator[str]:
    """A DSN with stockpool deployed: the given one, or a throwaway cluster's."""
    if dsn:
        deploy(dsn, roles=roles)
        yield dsn
        return
    with clusters.throwaway(clusters.settings_for_clients(clients)) as cl:
        deploy(cl.dsn, roles=roles)
        yield cl.dsn


@app.command("deploy")
def deploy_cmd(
    dsn: Annotated[str, typer.Option("--dsn", envvar="STOCKPOOL_DSN", help="PostgreSQL URL.")],
    owner_role: Annotated[str, typer.Option(help="Role that owns the objects.")] = "stockpool_owner",
    app_role: Annotated[str, typer.Option(help="Role allowed to call the API.")] = "stockpool_app",
    monitor_role: Annotated[
        str, typer.Option(help="Role allowed to read health views.")
    ] = "stockpool_monitor",
    lock_wait: Annotated[str, typer.Option(help="How long to wait for another deployer.")] = "60s",
) -> None:
    """Apply pending migrations and re-apply every function (idempotent)."""
    try:
        report = deploy(dsn, Roles(owner_role, app_role, monitor_role), lock_wait=lock_wait)
    except StockpoolError as exc:
        fail(exc)
        return
    applied = ", ".join(report.applied) or "none"
    console.print(
        f"migrations applied: {applied}; already applied: {len(report.skipped)}; "
        f"functions and views re-applied: {report.functions}",
        soft_wrap=True,
    )


@app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_cmd(
    ctx: typer.Context,
    dsn: DsnOption = None,
    clients: Annotated[int, typer.Option(help="Size the throwaway server for this many clients.")] = 64,
) -> None:
    """Run a command (after --) with PG* variables pointing at a deployed database."""
    if not ctx.args:
        fail(StockpoolError("nothing to run", hint="stockpool exec -- pg_prove tests/pgtap"))
    try:
        with database(dsn, clients) as url:
            env = {**os.environ, **_pg_env(url), "STOCKPOOL_DSN": url}
            code = subprocess.run(ctx.args, env=env, check=False).returncode
    except StockpoolError as exc:
        fail(exc)
        return
    raise typer.Exit(code)


def _pg_env(url: str) -> dict[str, str]:
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(url)
    mapping = {
        "host": "PGHOST",
        "port": "PGPORT",
        "user": "PGUSER",
        "dbname": "PGDATABASE",
        "password": "PGPASSWORD",
    }
    return {env: str(info[key]) for key, env in mapping.items() if info.get(key)}


def _register_commands() -> None:
    """Commands that live in their own modules register here."""
    from stockpool import bench, race

    app.command("race")(race.command)
    app.command("bench")(bench.command)


_register_commands()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`stockpool race | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


if __name__ == "__main__":
    main()
