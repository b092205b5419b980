"""A throwaway primary's streaming standby, and what a failover does to the pair.

:func:`standby_of` clones a running throwaway primary with pg_basebackup
(``-R``: the standby connects back to the primary, ``-X stream``: the WAL of
the backup comes along) into a throwaway cluster of its own, on its own port,
starts it as a hot standby and waits until the primary's
``pg_stat_replication`` shows it streaming. Synchronous, the primary's
``synchronous_standby_names`` names it, so that every commit waits until the
standby has flushed the commit's WAL (``synchronous_commit = on``) before the
client hears of it, and :func:`standby_of` returns once the primary reports
it ``sync``; asynchronous, the primary commits without waiting. On exit the
primary's ``synchronous_standby_names`` is emptied again, also when the
setup failed half-way.

The standby's own ``synchronous_standby_names`` is empty: once promoted it
must not wait for a standby it does not have.

``Cluster.crash`` (every server process SIGKILLed at once), :func:`promote`
and :func:`cut_off` (the standby stops receiving WAL, as behind a network
partition: an asynchronous standby falls behind while the primary goes on
committing) are the steps of a failover test. :func:`multi_host_dsn` is the
DSN a client gives libpq to follow the primary across a failover.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow

from stockpool.errors import StockpoolError
from stockpool.server.cluster import SERVER_USER, Cluster, throwaway

STANDBY_NAME = "stockpool_standby"
STREAMING = """
SELECT pg_catalog.count(*) > 0
FROM pg_catalog.pg_stat_replication
WHERE application_name = %s
    AND state = 'streaming'
"""
# sync_state is judged with the synchronous_standby_names of the session that
# asks, so this also waits until that session took the reload; it must see
# synchronous_commit on too. (Backends wait once the checkpointer, idle and
# woken by the same reload, has set the shared flag they read: milliseconds.
# test_failover.py shows a commit waiting; the failover soak, cut off, too.)
SYNCHRONOUS = """
SELECT pg_catalog.count(*) > 0
    AND pg_catalog.current_setting('synchronous_commit') = 'on'
FROM pg_catalog.pg_stat_replication
WHERE application_name = %s
    AND sync_state = 'sync'
"""


def _connect(cluster: Cluster) -> psycopg.Connection[TupleRow]:
    return psycopg.connect(cluster.dsn, autocommit=True, connect_timeout=10)


def multi_host_dsn(clusters: Sequence[Cluster], dbname: str = "postgres", **params: str) -> str:
    """One DSN for several servers, tried in order; libpq takes the first that
    accepts writes (``target_session_attrs=read-write``): the primary before a
    failover, the promoted standby after it."""
    return make_conninfo(
        "",
        host=",".join("127.0.0.1" for _ in clusters),
        port=",".join(str(c.port) for c in clusters),
        user=SERVER_USER,
        dbname=dbname,
        target_session_attrs="read-write",
        **params,
    )


def _until(
    check: psycopg.Connection[TupleRow], query: str, params: Sequence[object], what: str, standby: Cluster
) -> None:
    """Poll ``query`` on ``check`` until it returns true; after 60 s, one clear
    error with the standby's log as its hint."""
    deadline = time.monotonic() + 60
    while not (check.execute(query, params).fetchone() or (False,))[0]:
        if time.monotonic() > deadline:
            raise StockpoolError(f"the standby is not {what} after 60 s", hint=standby.log_hint())
        time.sleep(0.05)


def _clone(primary: Cluster, standby: Cluster) -> None:
    """The standby's data directory: a base backup of the primary, then its own settings."""
    standby.run_tool(
        "pg_basebackup",
        "--pgdata",
        str(standby.datadir),
        "--host",
        "127.0.0.1",
        "--port",
        str(primary.port),
        "--username",
        SERVER_USER,
        "--wal-method",
        "stream",
        "--write-recovery-conf",
        "--checkpoint",
        "fast",
        "--no-sync",
    )
    standby.configure()


@contextlib.contextmanager
def standby_of(primary: Cluster, *, synchronous: bool, name: str = STANDBY_NAME) -> Iterator[Cluster]:
    """A streaming hot standby of ``primary``, synchronous or not; stopped and
    deleted on exit. ``primary`` goes back to committing alone on exit."""
    settings = {
        # A hot standby needs at least the primary's sizes (max_connections, locks).
        **primary.settings,
        "hot_standby": "on",
        # The walreceiver's application_name, which synchronous_standby_names matches.
        "cluster_name": f"'{name}'",
        "synchronous_standby_names": "''",
    }
    with throwaway(settings, create=lambda standby: _clone(primary, standby)) as standby:
        try:
            with _connect(primary) as conn:
                _until(conn, STREAMING, (name,), "streaming", standby)
                if synchronous:
                    _set(conn, synchronous_standby_names=f"FIRST 1 ({name})", synchronous_commit="on")
                    _until(conn, SYNCHRONOUS, (name,), "synchronous", standby)
            yield standby
        finally:
            if synchronous and primary.running():
                # Commits on a primary that outlives its standby must not wait for it.
                with contextlib.suppress(psycopg.OperationalError), _connect(primary) as conn:
                    _set(conn, synchronous_standby_names="")


def _set(conn: psycopg.Connection[TupleRow], **settings: str) -> None:
    """ALTER SYSTEM each setting, then reload."""
    for key, value in settings.items():
        conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(key), sql.Literal(value)))
    conn.execute("SELECT pg_catalog.pg_reload_conf()")


def promote(standby: Cluster, timeout: int = 60) -> float:
    """Promote ``standby`` (it replays every WAL record it has first); the
    seconds until it accepts writes."""
    started = time.monotonic()
    with _connect(standby) as conn:
        row = conn.execute("SELECT pg_catalog.pg_promote(true, %s)", (timeout,)).fetchone()
    if not row or not row[0]:
        raise StockpoolError(f"the standby did not finish its promotion within {timeout} s")
    return time.monotonic() - started


def cut_off(standby: Cluster) -> str:
    """Stop ``standby`` receiving WAL (its walreceiver ends and none starts:
    an empty ``primary_conninfo``), as behind a network partition; what it
    received stays. Returns the last WAL position it received."""
    with _connect(standby) as conn:
        _set(conn, primary_conninfo="")
        _until(
            conn,
            "SELECT pg_catalog.count(*) = 0 FROM pg_catalog.pg_stat_wal_receiver",
            (),
            "cut off from its primary",
            standby,
        )
        row = conn.execute("SELECT pg_catalog.pg_last_wal_receive_lsn()::text").fetchone()
    return str(row[0]) if row else ""


def lag_bytes(primary: Cluster, standby: Cluster) -> int:
    """How far (bytes of WAL) ``standby`` has received less than ``primary`` has written."""
    with _connect(primary) as conn:
        row = conn.execute("SELECT pg_catalog.pg_current_wal_lsn()::text").fetchone()
    written = str(row[0]) if row else "0/0"
    with _connect(standby) as conn:
        row = conn.execute(
            "SELECT pg_catalog.pg_wal_lsn_diff(%s::pg_lsn, pg_catalog.pg_last_wal_receive_lsn())::bigint",
            (written,),
        ).fetchone()
    return max(int(row[0]), 0) if row and row[0] is not None else 0
