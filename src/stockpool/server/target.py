"""The database a command runs on, and the one way to connect to it.

:func:`target` gives every command (race, bench, exec) its server: the one
named by ``--dsn``, checked for room for the run's sessions, or a throwaway
cluster sized for them, with its log (errors by SQLSTATE, deadlock reports)
and its CPU meter, which only a cluster on this machine has.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
from psycopg.rows import TupleRow

from stockpool.errors import StockpoolError, first_line, redact
from stockpool.server import cluster as clusters
from stockpool.server.cpumeter import ServerCPU
from stockpool.server.sampler import OBSERVER_APP
from stockpool.server.stats import LOG_LINE_PREFIX, ServerLog


def connect(dsn: str, application_name: str = OBSERVER_APP) -> psycopg.Connection[TupleRow]:
    """An autocommit session, or a StockpoolError that says why not."""
    try:
        return psycopg.connect(dsn, autocommit=True, application_name=application_name, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise StockpoolError(
            f"cannot connect: {first_line(exc)}",
            hint="check the DSN and that the server is up, or run without --dsn on a throwaway cluster",
        ) from exc


def check_room(dsn: str, sessions: int, detail: str = "") -> None:
    """Refuse a run the server has no room for, before any client connects."""
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT pg_catalog.current_setting('max_connections')::integer,"
            " CASE WHEN r.rolsuper THEN 0"
            "  ELSE pg_catalog.current_setting('superuser_reserved_connections')::integer END,"
            " (SELECT pg_catalog.count(*)::integer FROM pg_catalog.pg_stat_activity"
            "  WHERE backend_type = 'client backend')"
            " FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user"
        ).fetchone()
    if row is None:
        return
    max_connections, reserved, in_use = row
    room = max_connections - reserved - in_use + 1  # + 1: this check's own session
    if sessions > room:
        raise StockpoolError(
            f"the server allows {room} more connections, this run needs {sessions}"
            + (f" ({detail})" if detail else ""),
            hint="use fewer clients, or raise max_connections to at least "
            f"{max_connections + sessions - room} "
            "(stockpool.server.cluster.settings_for_clients has settings sized for a client count)",
        )


@dataclass
class Target:
    """A server to run on, and what only a cluster of our own can tell."""

    dsn: str
    where: str  # for reports: the DSN without its password, or "throwaway cluster"
    server_log: ServerLog | None = None
    cpu: ServerCPU | None = None


@contextlib.contextmanager
def target(
    dsn: str | None,
    sessions: int,
    *,
    prepare: Callable[[str], object] | None = None,
    detail: str = "",
) -> Iterator[Target]:
    """The given server (with room for ``sessions``), or a throwaway cluster
    sized for them, removed afterwards. ``prepare(dsn)`` runs first (the
    callers deploy stockpool there); ``detail`` says what the sessions are."""
    if dsn:
        check_room(dsn, sessions, detail)
        if prepare is not None:
            prepare(dsn)
        yield Target(dsn, redact(dsn))
        return
    settings = clusters.settings_for_clients(sessions)
    settings["log_line_prefix"] = LOG_LINE_PREFIX
    with clusters.throwaway(settings) as cl:
        if prepare is not None:
            prepare(cl.dsn)
        yield Target(cl.dsn, "throwaway cluster", ServerLog(cl.logfile), ServerCPU.of_datadir(cl.datadir))
