"""The ``stockpool`` command line. Each command parses its options and
delegates: deploy and exec here, race and bench in their own packages."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Annotated

import typer
from psycopg.conninfo import conninfo_to_dict

from stockpool.bench.command import command as bench_command
from stockpool.console import DsnOption, console, err_console, fail
from stockpool.errors import StockpoolError
from stockpool.install.deploy import Roles, deploy
from stockpool.maintenance.command import command as worker_command
from stockpool.maintenance.schedule import schedule as maintenance_schedule
from stockpool.race.command import command as race_command
from stockpool.route.command import command as move_command
from stockpool.route.deploy import deploy_router
from stockpool.server.target import target
from stockpool.top.command import command as top_command

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="stockpool: inventory reservations inside PostgreSQL.",
)


@app.command("deploy")
def deploy_cmd(
    dsn: Annotated[str, typer.Option("--dsn", envvar="STOCKPOOL_DSN", help="PostgreSQL URL.")],
    owner_role: Annotated[str, typer.Option(help="Role that owns the objects.")] = "stockpool_owner",
    app_role: Annotated[str, typer.Option(help="Role allowed to call the API.")] = "stockpool_app",
    monitor_role: Annotated[
        str, typer.Option(help="Role allowed to read health views.")
    ] = "stockpool_monitor",
    worker_role: Annotated[
        str, typer.Option(help="Role allowed to run maintenance (maintain, sweep) and nothing else.")
    ] = "stockpool_worker",
    lock_wait: Annotated[str, typer.Option(help="How long to wait for another deployer.")] = "60s",
    schedule: Annotated[
        bool,
        typer.Option(
            "--schedule", help="Also register the maintenance cycle as a pg_cron job (every minute)."
        ),
    ] = False,
    schedule_as: Annotated[
        str | None,
        typer.Option(
            help="Login role the pg_cron job runs as (a member of the worker role). Default: yours."
        ),
    ] = None,
    nodes: Annotated[
        str | None,
        typer.Option(
            "--nodes",
            help="Comma-separated node URLs: --dsn is then a PL/Proxy router in front of them "
            "(docs/nodes.md). Every node is deployed too.",
        ),
    ] = None,
    connect_timeout: Annotated[
        int, typer.Option(help="With --nodes: seconds the router waits to connect to a node.", min=1)
    ] = 2,
) -> None:
    """Apply pending migrations and re-apply every function (idempotent)."""
    roles = Roles(owner_role, app_role, monitor_role, worker_role)
    if nodes is not None:
        if schedule:
            fail(
                StockpoolError(
                    "--schedule goes with a node's URL, not the router's: deploy each node with it"
                )
            )
        try:
            routed = deploy_router(
                dsn, [n.strip() for n in nodes.split(",") if n.strip()], roles, connect_timeout
            )
        except StockpoolError as exc:
            fail(exc)
        for line in routed.node_reports:
            console.print(line, soft_wrap=True)
        served = "; ".join(f"{node} {len(parts)}" for node, parts in routed.partitions.items())
        console.print(
            f"router: {routed.functions} functions and {routed.views} views routed; "
            f"partitions per node: {served}"
            + (" (new map)" if routed.new_map else " (map kept: `stockpool move` moves partitions)"),
            soft_wrap=True,
        )
        return
    try:
        report = deploy(dsn, roles, lock_wait=lock_wait)
        job = maintenance_schedule(dsn, schedule_as) if schedule else None
    except StockpoolError as exc:
        fail(exc)
    applied = ", ".join(report.applied) or "none"
    console.print(
        f"migrations applied: {applied}; already applied: {len(report.skipped)}; "
        f"functions and views re-applied: {report.functions}",
        soft_wrap=True,
    )
    if job is not None:
        console.print(job.line(), soft_wrap=True)


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
        # A server of its own is sized for --clients; a given one only needs a session.
        with target(dsn, 1 if dsn else clients, prepare=deploy) as server:
            env = {**os.environ, **pg_env(server.dsn), "STOCKPOOL_DSN": server.dsn}
            code = subprocess.run(ctx.args, env=env, check=False).returncode
    except StockpoolError as exc:
        fail(exc)
    raise typer.Exit(code)


app.command("race")(race_command)
app.command("bench")(bench_command)
app.command("worker")(worker_command)
app.command("top")(top_command)
app.command("move")(move_command)


def pg_env(url: str) -> dict[str, str]:
    """libpq's PG* variables for a URL, for the tools exec runs."""
    info = conninfo_to_dict(url)
    mapping = {
        "host": "PGHOST",
        "port": "PGPORT",
        "user": "PGUSER",
        "dbname": "PGDATABASE",
        "password": "PGPASSWORD",
    }
    return {env: str(info[key]) for key, env in mapping.items() if info.get(key)}


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
