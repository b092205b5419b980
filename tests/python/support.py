"""Helpers for the multi-connection suites: connections that cannot hang a run,
reading a key's levels, watching one backend wait on another, deadlock counts.

Every connection opened here carries a statement_timeout, so a step that waits
forever fails the test (with QueryCanceled) instead of blocking the run; the
threads that drive those connections are always joined with a timeout too.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")

# Long enough for any single step on a busy 2-core machine, short enough that
# a lost wake-up shows up as a failure.
STATEMENT_TIMEOUT = "30s"


def open_conn(
    dsn: str,
    *,
    autocommit: bool = True,
    name: str = "stockpool-test",
    lock_timeout: str | None = None,
    statement_timeout: str = STATEMENT_TIMEOUT,
) -> psycopg.Connection:
    options = f"-c statement_timeout={statement_timeout}"
    if lock_timeout is not None:
        options += f" -c lock_timeout={lock_timeout}"
    return psycopg.connect(
        dsn, autocommit=autocommit, application_name=name, options=options, connect_timeout=10
    )


class Conns:
    """Opens connections for one test and closes all of them afterwards."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._opened: list[psycopg.Connection] = []

    def __call__(self, **kwargs: Any) -> psycopg.Connection:
        conn = open_conn(self.dsn, **kwargs)
        self._opened.append(conn)
        return conn

    def close_all(self) -> None:
        for conn in self._opened:
            conn.close()
        self._opened.clear()


def checkout() -> uuid.UUID:
    return uuid.uuid4()


def scalar(conn: psycopg.Connection, query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None, query
    return row[0]


def levels(conn: psycopg.Connection, shop: int, item: int, location: int) -> tuple[int, int, int, int]:
    """(on_hand, pooled, held, free) of one key, read in one snapshot."""
    row = conn.execute(
        "SELECT on_hand, pooled, held, free FROM stockpool.stock_levels"
        " WHERE shop_id = %s AND item_id = %s AND location_id = %s",
        (shop, item, location),
    ).fetchone()
    assert row is not None, f"no stock key ({shop}, {item}, {location})"
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def violations(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT shop_id, item_id, location_id, invariant, detail FROM stockpool.check_invariants()"
        " ORDER BY 1, 2, 3, 4, 5"
    ).fetchall()


def pool_unit_ids(conn: psycopg.Connection, shop: int, item: int, location: int) -> set[int]:
    rows = conn.execute(
        "SELECT unit_id FROM stockpool.pool_units WHERE shop_id = %s AND item_id = %s AND location_id = %s",
        (shop, item, location),
    ).fetchall()
    return {int(r[0]) for r in rows}


def deadlocks(conn: psycopg.Connection) -> int:
    conn.execute("SELECT pg_catalog.pg_stat_clear_snapshot()")
    return int(
        scalar(
            conn,
            "SELECT deadlocks FROM pg_catalog.pg_stat_database WHERE datname = pg_catalog.current_database()",
        )
    )


def backend_pids(conn: psycopg.Connection) -> set[int]:
    """Every other backend connected to this connection's database."""
    rows = conn.execute(
        "SELECT pid FROM pg_catalog.pg_stat_activity"
        " WHERE datname = pg_catalog.current_database() AND pid <> pg_catalog.pg_backend_pid()"
    ).fetchall()
    return {int(r[0]) for r in rows}


def wait_until_idle(conn: psycopg.Connection, baseline: set[int], timeout: float = 10) -> None:
    """Wait until every backend not in ``baseline`` has left this database.

    A backend flushes its statistics (deadlocks among them) when it exits, so
    reading pg_stat_database after this sees every deadlock the others met.
    """
    deadline = time.monotonic() + timeout
    while True:
        left = backend_pids(conn) - baseline
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"backends {sorted(left)} still connected after {timeout}s")
        time.sleep(0.05)


def blockers(observer: psycopg.Connection, pid: int) -> list[int]:
    return [int(p) for p in scalar(observer, "SELECT pg_catalog.pg_blocking_pids(%s)", (pid,))]


def wait_until_blocked(
    observer: psycopg.Connection, pid: int, future: Future[Any] | None = None, timeout: float = 15
) -> list[int]:
    """Wait until backend ``pid`` waits on a lock; return the pids it waits for.

    Fails if the backend's call finishes first (``future`` done): a call that
    was supposed to wait answered without waiting.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = blockers(observer, pid)
        if found:
            return found
        if future is not None and future.done():
            raise AssertionError(f"expected backend {pid} to wait, but its call returned {future.result()!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"backend {pid} did not start waiting within {timeout}s")
        time.sleep(0.02)


@contextmanager
def background() -> Iterator[Callable[..., Future[Any]]]:
    """Run calls on worker threads; the pool is shut down (not waited on forever)."""
    pool = ThreadPoolExecutor(max_workers=16)
    try:
        yield pool.submit
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def result(future: Future[T], timeout: float = 30) -> T:
    return future.result(timeout=timeout)
