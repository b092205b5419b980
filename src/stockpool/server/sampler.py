"""Periodic sessions beside a run, and where the time went.

:class:`Periodic` is the one periodic worker of the toolkit: a thread with a
session of its own that does one thing every period until stopped (the wait
sampler below, the bench's pool-health probe, the race's sweeper,
replenisher, invariant checker and settling watch). Errors are counted by
SQLSTATE, never raised into the run.

:class:`WaitSampler`: pg_stat_activity sampled while a run is going. It reads
the active backends of one run (those whose application_name starts with
the run's tag) every ``interval`` seconds and counts them per
``wait_event_type:wait_event``, ``CPU`` when a backend is active and waits
for nothing. The report is the average number of backends in
each state per sample: 12.5 on ``LWLock:BufferContent`` means that, on
average, twelve and a half of the run's backends were queued on a buffer lock.

With ``statements`` (label, regular expression) pairs, each backend is also
counted under the label of the first expression its current query matches
(``by_statement``), so that a run of two statements (reserve, then claim)
tells which of them waited on what.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import psycopg
from psycopg.rows import TupleRow

from stockpool.errors import first_line

OBSERVER_APP = "stockpool-observer"

SAMPLE = """
SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') AS event,
       coalesce((SELECT l.label
                 FROM ROWS FROM (pg_catalog.unnest(%(labels)s::text[]),
                                 pg_catalog.unnest(%(patterns)s::text[]))
                     WITH ORDINALITY AS l (label, pattern, n)
                 WHERE a.query ~ l.pattern
                 ORDER BY l.n
                 LIMIT 1), '') AS statement,
       pg_catalog.count(*)::integer AS backends
FROM pg_catalog.pg_stat_activity AS a
WHERE a.state = 'active'
    AND a.application_name LIKE %(pattern)s
    AND a.pid <> pg_catalog.pg_backend_pid()
GROUP BY 1, 2
"""


@dataclass
class WaitProfile:
    samples: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    by_statement: dict[str, Counter[str]] = field(default_factory=dict)

    def top(self, n: int = 5) -> list[tuple[str, float]]:
        """The n most common states with their average backends per sample."""
        if not self.samples:
            return []
        return [(event, count / self.samples) for event, count in self.counts.most_common(n)]

    def as_json(self, n: int = 10) -> dict[str, object]:
        return {
            "samples": self.samples,
            "avg_backends": {event: round(avg, 3) for event, avg in self.top(n)},
        }


class Periodic(threading.Thread):
    """A session of its own that calls :meth:`tick` every ``period`` seconds.

    Ticks start ``start_after`` seconds in, then ``period`` after the end of
    the previous one (with ``fixed_rate``, ``period`` after its start, as
    samples should be); a tick that returns True is followed at once by the
    next. A database error is counted
    under its SQLSTATE (``errors``, first message in ``messages``) and the
    work goes on, unless the connection is gone. Use it as a context manager,
    or :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        name: str,
        dsn: str,
        period: float,
        *,
        application_name: str = OBSERVER_APP,
        start_after: float = 0.0,
        fixed_rate: bool = False,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.dsn = dsn
        self.period = period
        self.application_name = application_name
        self.start_after = start_after
        self.fixed_rate = fixed_rate
        self.errors: Counter[str] = Counter()
        self.messages: dict[str, str] = {}
        self.started_at = time.monotonic()
        self._stopping = threading.Event()

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
        """One round of work, ``elapsed`` seconds after the start; True to go again at once."""
        raise NotImplementedError

    def run(self) -> None:
        self.started_at = time.monotonic()
        try:
            # No named prepared statements: the session may go through a
            # transaction pooler (pgbouncer 1.18 has none in that mode).
            conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                application_name=self.application_name,
                connect_timeout=10,
                prepare_threshold=None,
            )
        except psycopg.Error as exc:
            self._record(exc)
            return
        with conn:
            next_at = self.started_at + self.start_after
            while not self._stopping.wait(max(0.0, next_at - time.monotonic())):
                busy = False
                try:
                    busy = self.tick(conn, time.monotonic() - self.started_at)
                except psycopg.Error as exc:
                    self._record(exc)
                    if conn.broken:
                        return
                if busy:
                    next_at = time.monotonic()
                elif self.fixed_rate:
                    next_at = max(next_at + self.period, time.monotonic())
                else:
                    next_at = time.monotonic() + self.period

    def _record(self, exc: psycopg.Error) -> None:
        state = exc.sqlstate or "connection"
        self.errors[state] += 1
        detail = exc.diag.message_detail if exc.diag else None
        self.messages.setdefault(
            state, f"{self.name}: {first_line(exc)}" + (f" ({detail})" if detail else "")
        )

    def stop(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout=60)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class WaitSampler(Periodic):
    """Samples the wait events of one run's backends while the block runs;
    the profile afterwards."""

    def __init__(
        self,
        dsn: str,
        tag: str,
        interval: float = 0.2,
        statements: Sequence[tuple[str, str]] = (),
    ) -> None:
        if not 0.01 <= interval <= 10:
            raise ValueError("sampling interval must be between 10 ms and 10 s")
        super().__init__("wait-sampler", dsn, interval, fixed_rate=True)
        self.pattern = tag.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        self.labels = [label for label, _ in statements]
        self.patterns = [pattern for _, pattern in statements]
        self.profile = WaitProfile()

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
        rows = conn.execute(
            SAMPLE, {"pattern": self.pattern, "labels": self.labels, "patterns": self.patterns}
        ).fetchall()
        self.profile.samples += 1
        for event, statement, backends in rows:
            self.profile.counts[str(event)] += int(backends)
            if statement:
                per = self.profile.by_statement.setdefault(str(statement), Counter())
                per[str(event)] += int(backends)
        return False

    def stop(self) -> None:
        super().stop()
        self.profile.errors = sum(self.errors.values())
