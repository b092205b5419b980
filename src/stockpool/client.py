"""A small Python client for the stockpool API, with safe retries.

Retry rules (the same for callers in any language):

- 40001 (serialization_failure) and 40P01 (deadlock_detected): the server rolled
  the whole transaction back, nothing happened; every call may be retried.
- SP020 (through a PL/Proxy router, docs/nodes.md: the shop's partition is
  moving to another node): the call was refused before it ran; retry it.
- A lost connection (no SQLSTATE, class 08, or 57P01/57P02/57P03 admin shutdown /
  crash / cannot connect now): the outcome is unknown, the call may or may not
  have committed. Only idempotent calls are retried: reserve_units and
  reserve_cart with the same checkout id (a retry of a committed reserve is a
  no-op that returns true), claim and release (a retry returns the first
  outcome), set_stock (absolute), sweep and replenish_pool (they only move units
  that still need moving). adjust_stock is not idempotent and is never retried
  after a lost connection: re-read the ledger (stock_levels) and decide.
- Every other error (22xxx bad input, SPxxx stockpool conditions) is an answer,
  not a fault: it is raised at once.

Backoff is capped exponential with full jitter: attempt n sleeps a uniform
random time in [0, min(cap, base * 2**n)].

Behind a transaction pooler (pgbouncer in transaction mode, 1.18 as in Debian
12) a session must not use named prepared statements: the next transaction
may run on another server connection, which never saw them. psycopg prepares
a statement after its fifth execution by default, so the client turns that
off when it is told it goes through a pooler (``pooled=True``) or, by
default, when it detects one: the port the server listens on differs from
the port it connected to (:func:`behind_pooler`).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import psycopg
from psycopg import sql

T = TypeVar("T")

KEY = ("bigint", "bigint", "bigint")
KEY_INT = (*KEY, "integer")
RETRY_ALWAYS = frozenset({"40001", "40P01", "SP020"})
CONNECTION_LOST = frozenset({"57P01", "57P02", "57P03"})


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    base: float = 0.02
    cap: float = 1.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap, self.base * (2**attempt)))


def is_connection_lost(exc: BaseException) -> bool:
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in CONNECTION_LOST


def is_retryable(exc: BaseException, idempotent: bool) -> bool:
    if isinstance(exc, psycopg.Error) and exc.sqlstate in RETRY_ALWAYS:
        return True
    return idempotent and is_connection_lost(exc)


def behind_pooler(conn: psycopg.Connection) -> bool:
    """True when something (a pooler, a proxy) sits between this session and
    the server: the server listens on another port than the one connected to.
    The server's ``port`` setting, not the port of its end of the connection:
    a pooler that reaches the server through its Unix socket (Debian's
    pgbouncer does) leaves that end without a port."""
    row = conn.execute("SELECT pg_catalog.current_setting('port')").fetchone()
    server_port = row[0] if row else None
    try:
        client_port = int(conn.info.port)
    except (TypeError, ValueError):
        return False
    return server_port is not None and int(server_port) != client_port


class Client:
    """Calls the stockpool functions, one autocommit statement each, with retries.

    ``connect`` opens a new connection (default: ``psycopg.connect(dsn,
    autocommit=True)``); the client reconnects after a lost connection.
    ``pooled``: True when the DSN is a transaction pooler, False when it is
    the server, None (default) to detect it on each new connection.
    """

    def __init__(
        self,
        dsn: str,
        retry: RetryPolicy | None = None,
        connect: Callable[[], psycopg.Connection] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        pooled: bool | None = None,
    ) -> None:
        self.dsn = dsn
        self.retry = retry or RetryPolicy()
        self._connect = connect or (lambda: psycopg.connect(dsn, autocommit=True))
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._conn: psycopg.Connection | None = None
        self.retries = 0
        self.pooled = pooled

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            conn = self._connect()
            if self.pooled or (self.pooled is None and behind_pooler(conn)):
                conn.prepare_threshold = None
            self._conn = conn
        return self._conn

    def _call(self, function: str, args: Sequence[Any], idempotent: bool, types: Sequence[str] = ()) -> Any:
        casts = list(types) or ["bigint"] * len(args)
        query = sql.SQL("SELECT stockpool.{}({})").format(
            sql.Identifier(function),
            sql.SQL(", ").join(sql.SQL("{}::{}").format(sql.Placeholder(), sql.SQL(t)) for t in casts),
        )
        attempt = 0
        while True:
            try:
                row = self._connection().execute(query, args).fetchone()
                return row[0] if row else None
            except psycopg.Error as exc:
                if isinstance(exc, psycopg.OperationalError):
                    self.close()
                if attempt + 1 >= self.retry.attempts or not is_retryable(exc, idempotent):
                    raise
                self._sleep(self.retry.delay(attempt, self._rng))
                attempt += 1
                self.retries += 1

    def set_stock(self, shop_id: int, item_id: int, location_id: int, on_hand: int) -> int:
        return int(self._call("set_stock", (shop_id, item_id, location_id, on_hand), True, KEY_INT))

    def adjust_stock(self, shop_id: int, item_id: int, location_id: int, delta: int) -> int:
        return int(self._call("adjust_stock", (shop_id, item_id, location_id, delta), False, KEY_INT))

    def reserve_units(
        self,
        shop_id: int,
        item_id: int,
        location_id: int,
        quantity: int,
        checkout_id: uuid.UUID,
        ttl: timedelta = timedelta(minutes=15),
    ) -> bool:
        args = (shop_id, item_id, location_id, quantity, checkout_id, ttl)
        types = (*KEY, "integer", "uuid", "interval")
        return bool(self._call("reserve_units", args, True, types))

    def reserve_cart(
        self,
        shop_id: int,
        checkout_id: uuid.UUID,
        lines: Sequence[tuple[int, int, int]],
        ttl: timedelta = timedelta(minutes=15),
    ) -> bool:
        items = [line[0] for line in lines]
        locations = [line[1] for line in lines]
        quantities = [line[2] for line in lines]
        args = (shop_id, checkout_id, items, locations, quantities, ttl)
        types = ("bigint", "uuid", "bigint[]", "bigint[]", "integer[]", "interval")
        return bool(self._call("reserve_cart", args, True, types))

    def claim(self, shop_id: int, checkout_id: uuid.UUID) -> int:
        return int(self._call("claim", (shop_id, checkout_id), True, ("bigint", "uuid")))

    def release(self, shop_id: int, checkout_id: uuid.UUID) -> int:
        return int(self._call("release", (shop_id, checkout_id), True, ("bigint", "uuid")))

    def sweep(self, batch: int = 500) -> int:
        return int(self._call("sweep", (batch,), True, ("integer",)))

    def replenish_pool(self, shop_id: int, item_id: int, location_id: int, cap: int | None = None) -> int:
        return int(self._call("replenish_pool", (shop_id, item_id, location_id, cap), True, KEY_INT))
