"""Where the time went: pg_stat_activity sampled while a run is going.

A thread with its own connection reads the active backends of one run (those
whose application_name starts with the run's tag) every ``interval`` seconds
and counts them per ``wait_event_type:wait_event``, ``CPU`` when a backend is
active and waits for nothing. The report is the average number of backends in
each state per sample: 12.5 on ``LWLock:BufferContent`` means that, on
average, twelve and a half of the run's backends were queued on a buffer lock.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType

import psycopg

SAMPLE = """
SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') AS event,
       pg_catalog.count(*)::integer AS backends
FROM pg_catalog.pg_stat_activity AS a
WHERE a.state = 'active'
    AND a.application_name LIKE %s
    AND a.pid <> pg_catalog.pg_backend_pid()
GROUP BY 1
"""


@dataclass
class WaitProfile:
    samples: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    errors: int = 0

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

    def __init__(self, dsn: str, tag: str, interval: float = 0.2) -> None:
        if not 0.01 <= interval <= 10:
            raise ValueError("sampling interval must be between 10 ms and 10 s")
        self.dsn = dsn
        self.pattern = tag.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
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
                    rows = conn.execute(SAMPLE, (self.pattern,)).fetchall()
                except psycopg.Error:
                    self.profile.errors += 1
                    if conn.broken:
                        return
                else:
                    self.profile.samples += 1
                    for event, backends in rows:
                        self.profile.counts[str(event)] += int(backends)
                next_at += self.interval
                self._stop.wait(max(0.0, next_at - time.monotonic()))
