"""The one pgbench driver: run it through plumbum, read back exactly what it did.

The race runs it in the simple protocol with progress lines; the bench in
prepared mode (``prepared=True``), with transactions counted per interval for
its soak's throughput curve (:meth:`TxnLog.per_interval`).

Every run writes pgbench's per-transaction logs (``-l``) into a directory of
its own; :func:`read_logs` parses every file in it (one per pgbench thread), so
latency percentiles are exact, not estimated. Failures are read from the same
logs (``--failures-detailed`` marks a failed transaction ``serialization`` or
``deadlock`` instead of a time), retries from their last column, and client
aborts (any error other than 40001/40P01 aborts a pgbench client) from stderr.
Progress lines (``-P 1``) are streamed to a callback while the run goes.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plumbum import local
from psycopg.conninfo import make_conninfo

from stockpool.errors import StockpoolError

# What --failures-detailed writes in the time column of a failed transaction.
FAILURE_SQLSTATES = {"serialization": "40001", "deadlock": "40P01"}

PROGRESS = re.compile(r"^progress: ([\d.]+) s, ([\d.]+) tps")
ABORT = re.compile(r"client (\d+) script (\d+) aborted in command (\d+) query \d+: (.*)$")
TPS = re.compile(r"^tps = ([\d.]+)", re.MULTILINE)
# Clients per pgbench thread at most (see threads_for).
CLIENTS_PER_THREAD = 64


@dataclass
class Abort:
    """A pgbench client that stopped on an error other than 40001/40P01."""

    client: int
    command: int
    message: str


@dataclass
class TxnLog:
    """Everything the per-transaction logs of one run say."""

    latencies_us: list[int] = field(default_factory=list)  # successful transactions, sorted
    failures: Counter[str] = field(default_factory=Counter)  # SQLSTATE -> failed transactions
    retries: int = 0  # total retries (40001/40P01 retried by --max-tries)
    retried: int = 0  # transactions that needed at least one retry
    first_start_us: int | None = None
    last_end_us: int | None = None
    ends_by_second: Counter[int] = field(default_factory=Counter)  # epoch second -> successful ends

    @property
    def succeeded(self) -> int:
        return len(self.latencies_us)

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    @property
    def elapsed_s(self) -> float:
        """First transaction's start to last transaction's end."""
        if self.first_start_us is None or self.last_end_us is None:
            return 0.0
        return max(self.last_end_us - self.first_start_us, 0) / 1e6

    def per_interval(self, interval: int) -> list[int]:
        """Successful transactions per ``interval`` seconds from the first one's end."""
        if not self.ends_by_second:
            return []
        first = min(self.ends_by_second)
        slots: Counter[int] = Counter()
        for second, n in self.ends_by_second.items():
            slots[(second - first) // interval] += n
        return [slots[i] for i in range(max(slots) + 1)]


def read_logs(log_dir: Path) -> TxnLog:
    """Parse every pgbench per-transaction log file in ``log_dir``.

    Line format (PostgreSQL 15): ``client_id transaction_no time script_no
    time_epoch time_us [schedule_lag] [retries]``; ``time`` is microseconds, or
    ``failed``/``serialization``/``deadlock``/``skipped``.
    """
    log = TxnLog()
    for path in sorted(log_dir.iterdir()):
        if not path.is_file():
            continue
        with path.open() as handle:
            for line in handle:
                parts = line.split()
                if len(parts) < 6:
                    continue
                end_us = int(parts[4]) * 1_000_000 + int(parts[5])
                if len(parts) >= 7:
                    retries = int(parts[-1])
                    log.retries += retries
                    log.retried += retries > 0
                time_field = parts[2]
                if time_field.isdigit():
                    latency = int(time_field)
                    log.latencies_us.append(latency)
                    log.ends_by_second[int(parts[4])] += 1
                    start_us = end_us - latency
                else:
                    log.failures[FAILURE_SQLSTATES.get(time_field, time_field)] += 1
                    start_us = end_us
                if log.first_start_us is None or start_us < log.first_start_us:
                    log.first_start_us = start_us
                if log.last_end_us is None or end_us > log.last_end_us:
                    log.last_end_us = end_us
    log.latencies_us.sort()
    return log


def percentile(sorted_values: Sequence[int], pct: float) -> int | None:
    """Exact nearest-rank percentile of already sorted values (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass
class PgbenchResult:
    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str
    log: TxnLog
    aborts: list[Abort]
    tps: float

    @property
    def processed(self) -> int:
        return self.log.succeeded


def _stop(proc: Any) -> None:
    """Terminate pgbench (its clients disconnect, their transactions roll back)."""
    proc.terminate()
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()


def require() -> None:
    """Fail early, with the package to install, when pgbench is not on PATH."""
    if shutil.which("pgbench") is None:
        raise StockpoolError(
            "pgbench not found on PATH",
            hint="install postgresql-client-15 (apt-get install postgresql-client-15)",
        )


def with_application_name(dsn: str, application_name: str) -> str:
    """The DSN as a conninfo string that tags every session with a name."""
    return make_conninfo(dsn, application_name=application_name)


def threads_for(clients: int, cores: int | None = None) -> int:
    """pgbench threads (-j) for a client count: one per core, and one per
    CLIENTS_PER_THREAD clients when that is more, never more than the clients.

    A pgbench thread hands all of its sockets to ppoll() on every wake-up, so
    its CPU per transaction grows with its clients: through pgbouncer at 1,000
    clients, 92-108 us per transaction with 2 threads, 43-53 with 8 and 36-38
    with 16 (the bench's stockpool cell, 10 s, getrusage of pgbench), CPU that
    a load generator on the server's machine takes from the server."""
    cores = cores or os.cpu_count() or 2
    return max(1, min(clients, max(cores, math.ceil(clients / CLIENTS_PER_THREAD))))


def run(
    dsn: str,
    script: Path,
    clients: int,
    *,
    log_dir: Path | None = None,
    transactions: int | None = None,
    seconds: int | None = None,
    defines: Mapping[str, object] | None = None,
    max_tries: int = 1,
    application_name: str | None = None,
    on_progress: Callable[[float, float], None] | None = None,
    jobs: int | None = None,
    prepared: bool = False,
    connect_each: bool = False,
) -> PgbenchResult:
    """Run pgbench once; ``on_progress(elapsed_s, tps)`` gets every -P line.
    ``prepared``: -M prepared; ``connect_each``: a new connection per
    transaction (-C).

    The per-transaction logs go to ``log_dir`` (emptied first), or to a
    temporary directory removed afterwards."""
    if (transactions is None) == (seconds is None):
        raise ValueError("give exactly one of transactions and seconds")
    argv = [
        "-n",
        *(["-M", "prepared"] if prepared else []),
        *(["-C"] if connect_each else []),
        "-c",
        str(clients),
        "-j",
        str(min(jobs or threads_for(clients), clients)),
        "-f",
        str(script),
        f"--max-tries={max_tries}",
        "--failures-detailed",
        "-P",
        "1",
        *(["-t", str(transactions)] if transactions is not None else ["-T", str(seconds)]),
        *[f"-D{key}={value}" for key, value in (defines or {}).items()],
    ]
    with contextlib.ExitStack() as cleanup:
        if log_dir is None:
            log_dir = Path(tempfile.mkdtemp(prefix="stockpool-pgbench-"))
            cleanup.callback(shutil.rmtree, log_dir, ignore_errors=True)
        log_dir.mkdir(parents=True, exist_ok=True)
        for stale in log_dir.iterdir():
            stale.unlink()
        argv += ["-l", f"--log-prefix={log_dir / 'txn'}"]
        argv.append(with_application_name(dsn, application_name) if application_name else dsn)
        return _execute(argv, log_dir, on_progress)
    raise AssertionError("unreachable")


def _execute(
    argv: list[str], log_dir: Path, on_progress: Callable[[float, float], None] | None
) -> PgbenchResult:
    """Start pgbench, stream its progress lines, parse its output and logs."""
    try:
        proc = local["pgbench"].popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except Exception as exc:  # plumbum raises CommandNotFound and OSError subclasses
        raise StockpoolError(
            f"cannot start pgbench: {exc}",
            hint="install postgresql-client-15 (apt-get install postgresql-client-15)",
        ) from exc

    err_lines: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip("\n")
            match = PROGRESS.match(line)
            if match and on_progress is not None:
                on_progress(float(match.group(1)), float(match.group(2)))
            elif not match:
                err_lines.append(line)

    reader = threading.Thread(target=read_stderr, name="pgbench-stderr", daemon=True)
    reader.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read()
        code = proc.wait()
    except BaseException:
        _stop(proc)
        raise
    reader.join()
    err = "\n".join(err_lines)
    aborts = [
        Abort(int(m.group(1)), int(m.group(3)), m.group(4).strip())
        for m in (ABORT.search(line) for line in err_lines)
        if m
    ]
    if code not in (0, 2) or (code == 2 and not aborts and "processed" not in out):
        last = [line for line in err_lines if line.strip()][-1:] or ["no output"]
        raise StockpoolError(f"pgbench failed (exit {code}): {last[0].removeprefix('pgbench: error: ')}")
    tps = TPS.search(out)
    return PgbenchResult(
        argv=argv,
        exit_code=code,
        stdout=out,
        stderr=err,
        log=read_logs(log_dir),
        aborts=aborts,
        tps=float(tps.group(1)) if tps else 0.0,
    )
