"""The refresh loop of ``stockpool top``.

Every ``interval`` seconds: read a snapshot, render it against the previous
one, and between frames sample stockpool.wait_events() every 200 ms
(:data:`WAIT_SAMPLE_PERIOD`). A lost connection does not end the view: the
frame keeps the last figures under a red line that says so, and top
reconnects with capped exponential backoff (the first frame after it shows
rates as ``-``: the outage is not averaged in). A read that fails on a live
connection (a statement timeout, a privilege revoked meanwhile) is shown the
same way and retried on the next frame.

The first connection is different: a server that cannot be reached, a
database without stockpool or a role that may not read its metrics is a
StockpoolError (exit 2, one line), before any screen is drawn.

SIGINT and SIGTERM stop the view (KeyboardInterrupt, which the command turns
into exit 0); the alternate screen is restored on the way out.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from datetime import datetime
from types import FrameType

import psycopg
from psycopg.rows import TupleRow
from rich.console import Console, RenderableType
from rich.live import Live

from stockpool.errors import StockpoolError, first_line, redact
from stockpool.top.frame import Snapshot, Waits, check_can_read, connect, read_snapshot, sample_waits
from stockpool.top.view import Status, render

WAIT_SAMPLE_PERIOD = 0.2
BACKOFF_BASE = 0.5
BACKOFF_CAP = 5.0
NOTE_SECONDS = 10.0  # how long a reconnection stays noted in the header
MAX_KEYS = 1000


@dataclass(frozen=True)
class TopOptions:
    interval: float = 1.0  # seconds between two frames
    keys: int = 10  # hot keys shown
    warmup: float = 1.0  # --once: seconds between its two reads (rates need two)

    def validate(self) -> None:
        if not self.interval > 0:
            raise StockpoolError(f"--interval must be positive, got {self.interval:g}")
        if not 1 <= self.keys <= MAX_KEYS:
            raise StockpoolError(f"--keys must be between 1 and {MAX_KEYS}, got {self.keys}")


@dataclass
class _Session:
    """The connection of the live view, and what its loss has done."""

    conn: psycopg.Connection[TupleRow] | None = None
    attempts: int = 0
    retry_at: float = 0.0
    lost_at: datetime | None = None
    reason: str = ""
    waits: Waits = field(default_factory=Waits)
    note_until: float = 0.0


class Top:
    def __init__(self, dsn: str, options: TopOptions, console: Console) -> None:
        self.dsn = dsn
        self.options = options
        self.console = console
        self.status = Status(where=redact(dsn), interval=options.interval)

    def open(self) -> psycopg.Connection[TupleRow]:
        """A checked session (StockpoolError when no retry can help)."""
        conn = connect(self.dsn)
        try:
            self.status.role = check_can_read(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def first_connection(self) -> psycopg.Connection[TupleRow]:
        try:
            return self.open()
        except psycopg.Error as exc:
            raise StockpoolError(
                f"cannot connect to {redact(self.dsn)}: {first_line(exc)}",
                hint="check the DSN and that the server is up",
            ) from exc

    # --- --once ---------------------------------------------------------------

    def once(self) -> RenderableType:
        """One frame: two reads ``warmup`` apart (so that rates are rates),
        wait events sampled between them."""
        with self.first_connection() as conn:
            try:
                prev = read_snapshot(conn, self.options.keys)
                waits = Waits()
                deadline = time.monotonic() + self.options.warmup
                while True:
                    sample_waits(conn, waits)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    time.sleep(min(WAIT_SAMPLE_PERIOD, left))
                cur = read_snapshot(conn, self.options.keys)
            except psycopg.Error as exc:
                raise StockpoolError(
                    f"cannot read stockpool's metrics: [{exc.sqlstate or '?????'}] {first_line(exc)}"
                ) from exc
        return render(prev, cur, waits, self.status, self.console)

    # --- the live view ----------------------------------------------------------

    def run(self) -> None:
        """Frames until SIGINT or SIGTERM (KeyboardInterrupt)."""
        signal.signal(signal.SIGTERM, _interrupt)
        session = _Session(conn=self.first_connection())
        prev: Snapshot | None = None
        cur: Snapshot | None = None
        fresh = False  # cur was read on the current connection: a baseline for rates
        try:
            with _Screen(self.console) as show:
                next_at = time.monotonic()
                while True:
                    if session.conn is None:
                        self._reconnect(session)
                        fresh = False
                    shown_waits = session.waits
                    if session.conn is not None:
                        try:
                            snapshot = read_snapshot(session.conn, self.options.keys)
                        except psycopg.Error as exc:
                            self._failed(session, exc, "reading stockpool's metrics")
                        else:
                            prev, cur = (cur if fresh else None), snapshot
                            fresh = True
                            session.waits = Waits()
                            self.status.problem = self.status.hint = None
                            if time.monotonic() >= session.note_until:
                                self.status.note = None
                    show(render(prev, cur, shown_waits, self.status, self.console))
                    next_at = max(next_at + self.options.interval, time.monotonic())
                    self._sample_until(session, next_at)
        finally:
            if session.conn is not None:
                session.conn.close()

    def _sample_until(self, session: _Session, until: float) -> None:
        """Sample wait events until ``until`` (or just wait, while disconnected)."""
        while time.monotonic() < until:
            if session.conn is not None:
                try:
                    sample_waits(session.conn, session.waits)
                except psycopg.Error as exc:
                    self._failed(session, exc, "sampling wait events")
            time.sleep(min(WAIT_SAMPLE_PERIOD, max(0.0, until - time.monotonic())))

    def _failed(self, session: _Session, exc: psycopg.Error, doing: str) -> None:
        conn = session.conn
        if conn is not None and (conn.broken or conn.closed):
            conn.close()
            session.conn = None
            session.lost_at = datetime.now()
            session.reason = first_line(exc)
            session.attempts = 0
            session.retry_at = time.monotonic()
            self._lost(session)
        else:
            self.status.problem = f"{doing} failed: [{exc.sqlstate or '?????'}] {first_line(exc)}"
            self.status.hint = "retrying every frame"

    def _lost(self, session: _Session, detail: str = "") -> None:
        when = f"{session.lost_at:%H:%M:%S}" if session.lost_at else "?"
        attempts = f"; {session.attempts} attempts so far" if session.attempts else ""
        self.status.problem = f"connection lost at {when}: {session.reason}; reconnecting{attempts}"
        self.status.hint = detail or "the figures below are from before the loss"

    def _reconnect(self, session: _Session) -> None:
        """One attempt when its backoff delay has passed."""
        now = time.monotonic()
        if now < session.retry_at:
            return
        session.attempts += 1
        delay = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** (session.attempts - 1))
        session.retry_at = now + delay
        try:
            session.conn = self.open()
        except (psycopg.Error, StockpoolError) as exc:
            detail = exc.message if isinstance(exc, StockpoolError) else first_line(exc)
            self._lost(session, f"attempt {session.attempts}: {detail}; next in {delay:g} s")
            return
        session.waits = Waits()
        session.attempts = 0
        lost = f"{session.lost_at:%H:%M:%S}" if session.lost_at else "?"
        self.status.note = (
            f"reconnected at {datetime.now():%H:%M:%S}; the connection was lost at {lost}: {session.reason}"
        )
        session.note_until = time.monotonic() + NOTE_SECONDS


class _Screen:
    """Where frames go: a live alternate screen on a terminal, one frame
    after another otherwise (a pipe, a file)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live: Live | None = None

    def __enter__(self) -> _Screen:
        if self.console.is_terminal:
            self.live = Live(console=self.console, screen=True, auto_refresh=False, redirect_stderr=False)
            self.live.__enter__()
        return self

    def __call__(self, frame: RenderableType) -> None:
        if self.live is not None:
            self.live.update(frame, refresh=True)
        else:
            self.console.print(frame)
            self.console.print()

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)
