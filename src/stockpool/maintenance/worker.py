"""``stockpool worker``: call stockpool.maintain() every ``--interval``.

One cycle is one call of stockpool.maintain() in its own transaction. A cycle
that did something is logged in one line (what, and how long it took).
SIGTERM and SIGINT let the current cycle finish, then the worker exits 0 (a
second signal stops it at once). A
lost connection (a server restart, a failover) is retried with capped,
jittered exponential backoff, and both the loss and the reconnection are
logged. ``--once`` runs one cycle (for cron). Exit 2, with one clear line,
for bad flags, a failed authentication, a database without stockpool or a
role that may not run maintenance; exit 1 when ``--once`` cannot reach the
server.

Its role needs only EXECUTE on stockpool.maintain: the deployer's
``stockpool_worker`` role (granted maintain and sweep, nothing else).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import select
import signal
import time
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType

import psycopg
from psycopg.rows import TupleRow

from stockpool.errors import StockpoolError, first_line, redact

APPLICATION_NAME = "stockpool-worker"
LOG = logging.getLogger("stockpool.worker")
# SQLSTATE classes that no retry fixes: bad password or role (28), no such database (3D).
FATAL_CLASSES = ("28", "3D")
MAINTAIN = "stockpool.maintain(interval, integer)"


@dataclass(frozen=True)
class WorkerOptions:
    interval: float = 1.0  # seconds between the starts of two cycles
    budget_ms: int = 250  # stockpool.maintain's p_budget
    batch: int = 500  # stockpool.maintain's p_batch
    backoff_base: float = 0.5  # first reconnection delay, seconds
    backoff_cap: float = 30.0  # longest reconnection delay, seconds

    def validate(self) -> None:
        if self.interval <= 0:
            raise StockpoolError(f"--interval must be positive, got {self.interval:g}")
        if self.budget_ms <= 0:
            raise StockpoolError(f"--budget-ms must be positive, got {self.budget_ms}")
        if self.batch <= 0:
            raise StockpoolError(f"--batch must be positive, got {self.batch}")


@dataclass
class Cycle:
    expired: int
    settled: int
    refilled: int
    cooled: int
    ms: float

    @property
    def did_something(self) -> bool:
        return any((self.expired, self.settled, self.refilled, self.cooled))

    def line(self) -> str:
        return (
            f"expired {self.expired} holds, settled {self.settled} units, "
            f"refilled {self.refilled} units, cooled {self.cooled} units in {self.ms:.0f} ms"
        )


def backoff(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Seconds before reconnection attempt ``attempt`` (1, 2, ...): exponential,
    capped, with full jitter over its upper half so that workers restarted
    together do not reconnect together."""
    ceiling = min(cap, base * 2.0 ** (attempt - 1))
    return float(ceiling / 2 + rng.random() * ceiling / 2)


class Worker:
    def __init__(self, dsn: str, options: WorkerOptions, rng: random.Random | None = None) -> None:
        self.dsn = dsn
        self.options = options
        self.rng = rng or random.Random()
        self.cycles = 0
        # Stopping: a plain flag and a self-pipe. A signal handler only sets
        # the flag and writes a byte, both safe at any point of the main
        # thread (a threading.Event could deadlock on its own lock there);
        # the waits between cycles select on the pipe.
        self._stop = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    # --- signals -------------------------------------------------------------

    def stop(self) -> None:
        """Finish the current cycle, then return from run() (safe in a signal handler)."""
        self._stop = True
        with contextlib.suppress(BlockingIOError):  # the pipe is full: a wake-up is pending
            os.write(self._wake_w, b"x")

    def close(self) -> None:
        """Close the wake-up pipe, once run() has returned and nothing calls stop() again."""
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when asked to stop."""
        if not self._stop and seconds > 0:
            select.select([self._wake_r], [], [], seconds)
        return self._stop

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._stop:
            os._exit(130)  # a second signal: stop at once
        LOG.info(
            "%s: finishing the current cycle, then exiting (again to stop at once)",
            signal.Signals(signum).name,
        )
        self.stop()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    # --- connections ---------------------------------------------------------

    def connect(self) -> psycopg.Connection[TupleRow]:
        """A session that may run maintenance; StockpoolError when no retry can help."""
        try:
            # No named prepared statements: the DSN may be a transaction pooler.
            conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                application_name=APPLICATION_NAME,
                connect_timeout=10,
                prepare_threshold=None,
                # A half-open connection (a server gone without a word) is
                # noticed in about half a minute, not the kernel's hours.
                keepalives=1,
                keepalives_idle=10,
                keepalives_interval=5,
                keepalives_count=3,
                tcp_user_timeout=30000,
            )
        except psycopg.OperationalError as exc:
            if _fatal(exc):
                raise StockpoolError(
                    f"cannot connect to {redact(self.dsn)}: {first_line(exc)}",
                    hint="check the role, its password and the database name in the DSN",
                ) from exc
            raise
        try:
            _check_can_maintain(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def reconnect(self, reason: BaseException) -> psycopg.Connection[TupleRow] | None:
        """Retry until connected (None when asked to stop meanwhile)."""
        LOG.warning("connection lost (%s); reconnecting", first_line(reason))
        attempt = 0
        while not self._stop:
            attempt += 1
            delay = backoff(attempt, self.options.backoff_base, self.options.backoff_cap, self.rng)
            LOG.info("reconnection attempt %d in %.1f s", attempt, delay)
            if self._wait(delay):
                return None
            try:
                conn = self.connect()
            except psycopg.OperationalError as exc:
                LOG.info("attempt %d failed: %s", attempt, first_line(exc))
                continue
            LOG.warning("reconnected after %d attempts", attempt)
            return conn
        return None

    # --- cycles --------------------------------------------------------------

    def cycle(self, conn: psycopg.Connection[TupleRow]) -> Cycle:
        started = time.monotonic()
        row = conn.execute(
            "SELECT * FROM stockpool.maintain(%s, %s)",
            (timedelta(milliseconds=self.options.budget_ms), self.options.batch),
        ).fetchone()
        assert row is not None
        expired, settled, refilled, cooled = (int(v) for v in row)
        done = Cycle(expired, settled, refilled, cooled, (time.monotonic() - started) * 1000)
        self.cycles += 1
        if done.did_something:
            LOG.info("%s", done.line())
        else:
            LOG.debug("%s", done.line())
        return done

    def run_once(self) -> Cycle:
        try:
            with self.connect() as conn:
                return self.cycle(conn)
        except psycopg.OperationalError as exc:
            raise StockpoolError(f"cannot reach {redact(self.dsn)}: {first_line(exc)}") from exc
        except psycopg.Error as exc:
            raise StockpoolError(
                f"cannot run the maintenance cycle: [{exc.sqlstate or '?????'}] {first_line(exc)}"
            ) from exc

    def run(self) -> None:
        """Cycles every interval until SIGTERM/SIGINT (or :meth:`stop`)."""
        conn: psycopg.Connection[TupleRow] | None
        try:
            conn = self.connect()
        except psycopg.OperationalError as exc:
            conn = self.reconnect(exc)
        LOG.info(
            "started: a cycle every %g s (budget %d ms, batch %d)",
            self.options.interval,
            self.options.budget_ms,
            self.options.batch,
        )
        next_at = time.monotonic()
        while conn is not None and not self._stop:
            try:
                self.cycle(conn)
            except psycopg.OperationalError as exc:
                conn.close()
                conn = self.reconnect(exc)
                next_at = time.monotonic()
                continue
            except psycopg.Error as exc:
                LOG.error("cycle failed: [%s] %s", exc.sqlstate or "?????", first_line(exc))
            next_at += self.options.interval
            self._wait(next_at - time.monotonic())
            next_at = max(next_at, time.monotonic() - self.options.interval)
        if conn is not None:
            conn.close()
        LOG.info("stopped after %d cycles", self.cycles)


def _fatal(exc: psycopg.Error) -> bool:
    state = exc.sqlstate or ""
    if state[:2] in FATAL_CLASSES:
        return True
    # libpq reports some refusals before any SQLSTATE is known.
    text = str(exc)
    return "password authentication failed" in text or "does not exist" in text


def _check_can_maintain(conn: psycopg.Connection[TupleRow]) -> None:
    """The database has stockpool.maintain and this role may run it."""
    schema, usage, role = conn.execute(
        "SELECT pg_catalog.to_regnamespace('stockpool') IS NOT NULL,"
        " pg_catalog.to_regnamespace('stockpool') IS NOT NULL"
        "  AND pg_catalog.has_schema_privilege('stockpool', 'USAGE'), current_user"
    ).fetchone() or (False, False, "")
    if not schema:
        raise StockpoolError(
            "this database has no stockpool schema",
            hint="deploy stockpool first: stockpool deploy --dsn ...",
        )
    if usage:
        deployed, allowed = conn.execute(
            "SELECT pg_catalog.to_regprocedure(%s) IS NOT NULL,"
            " pg_catalog.to_regprocedure(%s) IS NOT NULL"
            "  AND pg_catalog.has_function_privilege(%s, 'EXECUTE')",
            (MAINTAIN, MAINTAIN, MAINTAIN),
        ).fetchone() or (False, False)
        if not deployed:
            raise StockpoolError(
                "this database's stockpool has no stockpool.maintain",
                hint="deploy this release: stockpool deploy --dsn ...",
            )
    if not usage or not allowed:
        raise StockpoolError(
            f"role {role} may not run stockpool.maintain",
            hint="run the worker as a member of stockpool_worker (GRANT stockpool_worker TO ...)",
        )
