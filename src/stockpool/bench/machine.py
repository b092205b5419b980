"""What the numbers were measured on: the machine, the server and its
settings, pgbench, the commit; and the open-files limit a run needs."""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import shutil
import subprocess
from pathlib import Path
from typing import Any

import psycopg
from plumbum import local

from stockpool.errors import StockpoolError
from stockpool.server import stats


def machine(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "server_version": stats.server_version(conn),
        "pgbench": _pgbench_version(),
        "settings": stats.server_settings(conn),
        "git_commit": _git_commit(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }


def _cpu_model() -> str:
    lscpu = shutil.which("lscpu")
    if lscpu:
        out = subprocess.run([lscpu], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _pgbench_version() -> str:
    code, out, _ = local["pgbench"].run(["--version"], retcode=None)
    return str(out).strip() if code == 0 else "unknown"


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() or None


def raise_fd_limit(clients: int) -> None:
    """pgbench keeps a socket per client (and a log per thread): lift the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = clients + 256
    if soft >= need:
        return
    target = hard if hard == resource.RLIM_INFINITY else min(hard, max(need, 65536))
    if target != resource.RLIM_INFINITY and target < need:
        raise StockpoolError(
            f"{clients} clients need about {need} open files, the hard limit is {hard}",
            hint="raise it (ulimit -Hn, /etc/security/limits.conf) or run fewer clients",
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
