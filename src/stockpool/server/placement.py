"""Which of this machine's cores the server, the pooler and the load run on.

The bench's client side (pgbench, and pgbouncer for the pooled cells) runs on
the machine of the throwaway server it measures. Sharing the cores is the
default (``shared``): every cell is measured as it runs. It charges the
pooled cells with more than the direct ones, though: pgbench in the simple
protocol and pgbouncer burn CPU on the cores the server needs (78-91 µs per
reservation against 24-33 µs for pgbench alone, direct; docs/commands.md),
where a production pooler and its application run on machines of their own,
or the pooler alone on the database host. The other placements give the
server the same cores in every cell:

- ``split``: the server on the first half of the cores, pgbench and pgbouncer
  on the other half (the application and its pooler on machines of their own);
- ``host``: the server and pgbouncer on the first half, pgbench on the other
  (pgbouncer on the database host, as Debian packages it).

A placement is CPU affinity (sched_setaffinity): the postmaster and every
server process running, whose affinity the backends forked later inherit;
this process, whose affinity pgbench and pgbouncer inherit; and pgbouncer,
moved to the server's cores under ``host``. It needs a server on this
machine (a throwaway cluster) and at least two cores.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from stockpool.errors import StockpoolError
from stockpool.server.cluster import children

PLACEMENTS = ("shared", "split", "host")


@dataclass(frozen=True)
class Placement:
    name: str
    server: frozenset[int]  # cores of the postmaster and its server processes
    clients: frozenset[int]  # cores of pgbench
    pooler: frozenset[int]  # cores of pgbouncer

    def describe(self) -> str:
        """For reports: where each part runs."""
        if self.name == "shared":
            return f"shared: server, pgbench and pgbouncer on cores {_cores(self.server)}"
        where = "pgbouncer with the server" if self.name == "host" else "pgbouncer with pgbench"
        return f"{self.name}: server on {_cores(self.server)}, pgbench on {_cores(self.clients)} ({where})"


def _cores(cores: Iterable[int]) -> str:
    ordered = sorted(cores)
    return ("core " if len(ordered) == 1 else "cores ") + ",".join(map(str, ordered))


def placement(name: str, cpus: Iterable[int] | None = None) -> Placement:
    """The placement ``name`` on ``cpus`` (default: the cores this process may use)."""
    if name not in PLACEMENTS:
        raise StockpoolError(f"placement: one of {', '.join(PLACEMENTS)}, got {name!r}")
    available = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    every = frozenset(available)
    if name == "shared":
        return Placement(name, every, every, every)
    if len(available) < 2:
        raise StockpoolError(
            f"placement {name} needs at least 2 cores, this process may use {len(available)}",
            hint="use the default placement, shared",
        )
    half = len(available) // 2
    server, clients = frozenset(available[:half]), frozenset(available[half:])
    return Placement(name, server, clients, server if name == "host" else clients)


def pin(pid: int, cores: frozenset[int]) -> None:
    """Move one process to ``cores`` (one that has exited meanwhile is skipped)."""
    with contextlib.suppress(ProcessLookupError):
        os.sched_setaffinity(pid, cores)


@contextlib.contextmanager
def placed(where: Placement, postmaster_pid: int | None) -> Iterator[None]:
    """Run the block under ``where``: the server (the postmaster and its
    processes) and this process pinned to their cores, every core given back
    afterwards. ``shared`` changes nothing; the others need the postmaster."""
    if where.name == "shared":
        yield
        return
    if postmaster_pid is None:
        raise StockpoolError(
            f"placement {where.name} needs a server on this machine",
            hint="run without --dsn (on a throwaway cluster), or with the default placement, shared",
        )
    mine = os.sched_getaffinity(0)
    everything = frozenset(mine | where.server | where.clients)
    for pid in [postmaster_pid, *children(postmaster_pid)]:
        pin(pid, where.server)
    os.sched_setaffinity(0, where.clients)
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)
        for pid in [postmaster_pid, *children(postmaster_pid)]:
            pin(pid, everything)
