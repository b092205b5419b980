"""CPU seconds spent by a local PostgreSQL server and by pgbench.

Throughput on a shared machine moves with whatever else runs on it; the CPU a
design spends per reservation moves much less, so the bench reports it beside
every rate. The server's share is read from /proc: the postmaster's own time,
the time of its live (or not yet reaped) children, and the time of the
children it has reaped (cutime/cstime), so a backend that exits between two
readings is still counted. pgbench's share is this process's reaped children
(getrusage RUSAGE_CHILDREN), which is pgbench when only pgbench ran.

Only a server on this machine can be measured: with a DSN to a remote server
the bench leaves the figure out.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    return text.rsplit(")", 1)[1].split()


def _ticks(fields: list[str], with_children: bool) -> int:
    # After "(comm)": state=0 ppid=1 ... utime=11 stime=12 cutime=13 cstime=14.
    own = int(fields[11]) + int(fields[12])
    return own + (int(fields[13]) + int(fields[14]) if with_children else 0)


@dataclass(frozen=True)
class Reading:
    server: float  # CPU seconds of the postmaster and all its children so far
    clients: float  # CPU seconds of this process's reaped children so far


class ServerCPU:
    """CPU seconds of one local postmaster and its children."""

    def __init__(self, postmaster_pid: int) -> None:
        self.pid = postmaster_pid
        self.hz = os.sysconf("SC_CLK_TCK")

    @classmethod
    def of_datadir(cls, datadir: Path) -> ServerCPU | None:
        """The meter of the server running on ``datadir``, or None if unreadable."""
        try:
            pid = int((datadir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        meter = cls(pid)
        return meter if _stat_fields(pid) is not None else None

    def _postmaster(self) -> list[str]:
        fields = _stat_fields(self.pid)
        if fields is None:
            raise ProcessLookupError(f"postmaster {self.pid} is gone")
        return fields

    def server_seconds(self) -> float:
        # A child reaped between reading the postmaster and scanning its
        # children would be in neither: read again until nothing was reaped.
        for _ in range(5):
            before = self._postmaster()
            ticks = _ticks(before, with_children=True)
            for entry in PROC.iterdir():
                if not entry.name.isdigit():
                    continue
                child = _stat_fields(int(entry.name))
                if child is not None and child[1] == str(self.pid):
                    ticks += _ticks(child, with_children=True)
            if self._postmaster()[13:15] == before[13:15]:
                break
        return ticks / self.hz

    def read(self) -> Reading:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return Reading(server=self.server_seconds(), clients=usage.ru_utime + usage.ru_stime)


def per_unit_us(before: Reading, after: Reading, units: int) -> tuple[float, float] | None:
    """(server, client) CPU microseconds per unit between two readings."""
    if units <= 0:
        return None
    return (
        (after.server - before.server) / units * 1e6,
        (after.clients - before.clients) / units * 1e6,
    )
