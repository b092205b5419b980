"""Where the time went: pg_stat_activity sampled while a run is going.

A thread with its own connection reads the active backends of one run (those
whose application_name starts with the run's tag) every ``interval`` seconds
and counts them per ``wait_event_type:wait_event``, ``CPU`` when a backend is
active and waits for nothing. The report is the average number of backends in
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

import psycopg

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


class WaitSampler:
    """Context manager: samples while the block runs, the profile afterwards."""

    def __init__(
        self,
        dsn: str,
        tag: str,
        interval: float = 0.2,
        statements: Sequence[tuple[str, str]] = (),
    ) -> None:
        if not 0.01 <= interval <= 10:
            raise ValueError("sampling interval must be between 10 ms and 10 s")
        self.dsn = dsn
        self.pattern = tag.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        self.labels = [label for label, _ in statements]
        self.patterns = [pattern for _, pattern in statements]
        self.interval = interval
        self.profile = WaitProfile()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wait-sampler", daemon=True)

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            conn = psycopg.connect(
                self.dsn, autocommit=True, application_name="stockpool-observer", connect_timeout=10
            )
        except psycopg.Error:
            self.profile.errors += 1
            return
        with conn:
            next_at = time.monotonic()
            while not self._stop.is_set():
                try:
                    rows = conn.execute(
                        SAMPLE, {"pattern": self.pattern, "labels": self.labels, "patterns": self.patterns}
                    ).fetchall()
                except psycopg.Error:
                    self.profile.errors += 1
                    if conn.broken:
                        return
                else:
                    self.profile.samples += 1
                    for event, statement, backends in rows:
                        self.profile.counts[str(event)] += int(backends)
                        if statement:
                            per = self.profile.by_statement.setdefault(str(statement), Counter())
                            per[str(event)] += int(backends)
                next_at += self.interval
                self._stop.wait(max(0.0, next_at - time.monotonic()))
