"""Server-side figures: WAL, deadlocks, pool health, errors, settings.

:class:`Snapshot` is taken before and after a run; the difference gives WAL
bytes written, deadlocks and autovacuum runs on the pool partitions. Pool
health (dead tuples and the dead ratio of every leaf partition of
stockpool.pool_units) is read at the end. :class:`ServerLog` reads the errors
of one run, by SQLSTATE, from the log of a cluster the harness started itself
(its log_line_prefix carries the application name and the SQLSTATE).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import TupleRow

# log_line_prefix of harness-started clusters: ServerLog parses it.
LOG_LINE_PREFIX = "'%m [%p] app=%a sqlstate=%e '"
# Any line of a report: "<time> [pid] app=<name> sqlstate=<code> LEVEL:  message".
LOG_LINE = re.compile(
    r"^.*? \[(?P<pid>\d+)\] app=(?P<app>.*?) sqlstate=(?P<state>[0-9A-Z]{5}) "
    r"(?P<level>[A-Z]+):\s+(?P<message>.*)$"
)
REPORT_PARTS = ("DETAIL", "HINT", "QUERY", "CONTEXT", "LOCATION", "STATEMENT")

POOL_PARTITIONS = """
SELECT c.relname, s.n_live_tup, s.n_dead_tup, s.autovacuum_count, s.vacuum_count
FROM pg_catalog.pg_inherits AS i
JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
JOIN pg_catalog.pg_stat_user_tables AS s ON s.relid = c.oid
WHERE i.inhparent = pg_catalog.to_regclass('stockpool.pool_units')
ORDER BY c.relname
"""


@dataclass
class PartitionHealth:
    name: str
    live: int
    dead: int
    autovacuums: int
    vacuums: int

    @property
    def dead_ratio(self) -> float:
        total = self.live + self.dead
        return self.dead / total if total else 0.0


@dataclass
class Snapshot:
    wal_lsn: str
    deadlocks: int
    partitions: dict[str, PartitionHealth] = field(default_factory=dict)

    @property
    def dead(self) -> int:
        return sum(p.dead for p in self.partitions.values())

    @property
    def live(self) -> int:
        return sum(p.live for p in self.partitions.values())

    @property
    def autovacuums(self) -> int:
        return sum(p.autovacuums for p in self.partitions.values())


def take(conn: psycopg.Connection[TupleRow]) -> Snapshot:
    conn.execute("SELECT pg_catalog.pg_stat_clear_snapshot()")
    lsn_row = conn.execute("SELECT pg_catalog.pg_current_wal_lsn()::text").fetchone()
    dl_row = conn.execute(
        "SELECT deadlocks FROM pg_catalog.pg_stat_database WHERE datname = pg_catalog.current_database()"
    ).fetchone()
    parts = {
        str(name): PartitionHealth(str(name), int(live), int(dead), int(av), int(vac))
        for name, live, dead, av, vac in conn.execute(POOL_PARTITIONS).fetchall()
    }
    return Snapshot(
        wal_lsn=str(lsn_row[0]) if lsn_row else "0/0",
        deadlocks=int(dl_row[0]) if dl_row else 0,
        partitions=parts,
    )


def wal_bytes(conn: psycopg.Connection[TupleRow], before: Snapshot, after: Snapshot) -> int:
    row = conn.execute(
        "SELECT pg_catalog.pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint", (after.wal_lsn, before.wal_lsn)
    ).fetchone()
    return int(row[0]) if row else 0


def pool_health(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    total = after.live + after.dead
    worst = max(after.partitions.values(), key=lambda p: p.dead_ratio, default=None)
    return {
        "dead_tuples": after.dead,
        "live_tuples": after.live,
        "dead_ratio": round(after.dead / total, 4) if total else 0.0,
        "worst_partition": (
            {"name": worst.name, "dead_ratio": round(worst.dead_ratio, 4), "dead_tuples": worst.dead}
            if worst
            else None
        ),
        "autovacuum_runs": after.autovacuums - before.autovacuums,
        "partitions": {
            name: {
                "live": p.live,
                "dead": p.dead,
                "dead_ratio": round(p.dead_ratio, 4),
                "autovacuum_runs": p.autovacuums
                - (before.partitions[name].autovacuums if name in before.partitions else 0),
            }
            for name, p in after.partitions.items()
        },
    }


def wait_for_sessions_gone(conn: psycopg.Connection[TupleRow], pattern: str, timeout: float = 10.0) -> None:
    """Wait until no session whose application_name matches LIKE ``pattern`` is
    left, so that their statistics have been flushed (a backend flushes at exit)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity WHERE application_name LIKE %s",
            (pattern,),
        ).fetchone()
        if not row or not row[0]:
            break
        time.sleep(0.1)
    # Give the last exiting backends' statistics a moment to land.
    time.sleep(0.3)


class ServerLog:
    """The errors one run caused, read from a harness-started cluster's log."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _lines_since(self, offset: int) -> list[str]:
        """The log's lines written after ``offset`` (none if it cannot be read)."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(offset)
                return handle.read().decode(errors="replace").splitlines()
        except OSError:
            return []

    def errors_since(self, offset: int, app_prefix: str) -> tuple[Counter[str], dict[str, str]]:
        """SQLSTATE -> count, and SQLSTATE -> first message, for sessions whose
        application name starts with ``app_prefix``."""
        counts: Counter[str] = Counter()
        first: dict[str, str] = {}
        for line in self._lines_since(offset):
            match = LOG_LINE.match(line)
            if match is None or match.group("level") not in ("ERROR", "FATAL"):
                continue
            if match.group("app").startswith(app_prefix):
                state = match.group("state")
                counts[state] += 1
                first.setdefault(state, match.group("message").strip())
        return counts, first

    def deadlocks_since(self, offset: int) -> list[str]:
        """The server's account of every deadlock since ``offset``, whoever the
        victim was: the ERROR line with its DETAIL (the cycle: who waited for
        what, and each process's statement), CONTEXT and STATEMENT, one string
        per deadlock."""
        reports: list[list[str]] = []
        pid: str | None = None
        for line in self._lines_since(offset):
            match = LOG_LINE.match(line)
            if match is None:
                if pid is not None and line[:1] in ("\t", " "):
                    reports[-1].append(line.strip())  # a multi-line DETAIL goes on
                else:
                    pid = None
                continue
            if match.group("state") == "40P01" and match.group("level") == "ERROR":
                pid = match.group("pid")
                reports.append([f"ERROR: {match.group('message').strip()}"])
            elif pid is not None and match.group("pid") == pid and match.group("level") in REPORT_PARTS:
                reports[-1].append(f"{match.group('level')}: {match.group('message').strip()}")
            else:
                pid = None
        return [" | ".join(parts) for parts in reports]


# The settings that shape the figures: every report names them.
REPORTED_SETTINGS = (
    "max_connections",
    "shared_buffers",
    "fsync",
    "synchronous_commit",
    "wal_level",
    "autovacuum_naptime",
    "autovacuum_max_workers",
    "max_wal_size",
)


def server_settings(
    conn: psycopg.Connection[Any], names: Sequence[str] = REPORTED_SETTINGS
) -> dict[str, str]:
    """The server's version and the named settings, as strings (the one settings reader)."""
    rows = conn.execute(
        "SELECT name, pg_catalog.current_setting(name) FROM pg_catalog.pg_settings"
        " WHERE name = ANY(%(names)s) ORDER BY pg_catalog.array_position(%(names)s, name)",
        {"names": list(names)},
    ).fetchall()
    return {str(name): str(value) for name, value in rows}


def server_version(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_catalog.version()").fetchone()
    return str(row[0]) if row else "unknown"
