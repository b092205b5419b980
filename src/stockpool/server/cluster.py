"""Throwaway PostgreSQL clusters built from the local server binaries.

Every command that needs a database and gets no DSN runs on one of these: a
fresh data directory in a temp folder, a free loopback port, settings tuned for
the job, and removal afterwards, also on Ctrl-C, SIGTERM or failure. As root
(initdb and postgres refuse to run as root) the server runs as the ``postgres``
OS user through ``runuser``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from stockpool.errors import StockpoolError

SERVER_USER = "postgres"
IPC_RMID = 0  # shmctl: remove the segment (Linux)

# Settings for a throwaway test/bench server: durable enough to be honest
# about commit cost (fsync stays on), sized for a 2-core machine.
BASE_SETTINGS: dict[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "shared_buffers": "'512MB'",
    "max_wal_size": "'4GB'",
    "checkpoint_timeout": "'30min'",
    "log_min_messages": "'warning'",
    "log_checkpoints": "off",
    "autovacuum_naptime": "'1s'",
    "autovacuum_vacuum_cost_delay": "0",
    "track_io_timing": "on",
    # stockpool.metrics()' activity counters are function call counts.
    "track_functions": "'pl'",
    "deadlock_timeout": "'1s'",
}


def as_server_user(argv: list[str]) -> list[str]:
    """``argv`` run as the server's OS user (initdb and postgres refuse root)."""
    if _as_root():
        return ["runuser", "-u", SERVER_USER, "--", *argv]
    return argv


def find_bindir() -> Path:
    """The PostgreSQL server bin directory: pg_config, then PATH, then Debian's layout."""
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if out.returncode == 0 and (candidate / "initdb").exists():
            return candidate
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise StockpoolError(
        "no PostgreSQL server binaries found (initdb)",
        hint="install postgresql-15 (apt-get install postgresql-15) or put its bin directory on PATH",
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_root() -> bool:
    return os.geteuid() == 0


@dataclass
class Cluster:
    """A running throwaway cluster. Use :func:`throwaway` to get one."""

    bindir: Path
    root: Path
    port: int
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def logfile(self) -> Path:
        return self.root / "server.log"

    @property
    def dsn(self) -> str:
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/postgres"

    def dsn_for(self, dbname: str) -> str:
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/{dbname}"

    def _cmd(self, tool: str, *args: str) -> list[str]:
        return as_server_user([str(self.bindir / tool), *args])

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        # A session of its own: a Ctrl-C at the terminal reaches only us, and
        # we stop the server in order instead of racing its own shutdown. If we
        # are interrupted, the whole group goes: killing ``runuser`` alone would
        # leave initdb writing into a directory we are about to remove.
        proc = subprocess.Popen(
            self._cmd(tool, *args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except BaseException:
            _end_group(proc)
            raise
        if proc.returncode != 0:
            raise StockpoolError(
                f"{tool} failed: {(stderr or stdout).strip().splitlines()[-1:]}", hint=self.log_hint()
            )

    def log_hint(self) -> str | None:
        """The tail of the server log, as an error's hint (None when there is no log yet)."""
        log = self.logfile.read_text(errors="replace")[-2000:] if self.logfile.exists() else ""
        return f"server log tail:\n{log}" if log else None

    def init(self) -> None:
        self._run(
            "initdb",
            "-D",
            str(self.datadir),
            "-U",
            SERVER_USER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        self.configure()

    def configure(self) -> None:
        """Append this cluster's settings to postgresql.auto.conf (a later
        line wins, so this also re-points a copied data directory)."""
        lines = {
            **BASE_SETTINGS,
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            **self.settings,
        }
        with (self.datadir / "postgresql.auto.conf").open("a") as conf:
            for key, value in lines.items():
                conf.write(f"{key} = {value}\n")

    def run_tool(self, tool: str, *args: str, timeout: float = 120) -> None:
        """Run one of the server's tools (pg_basebackup, pg_ctl) as the server's OS user."""
        self._run(tool, *args, timeout=timeout)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-l", str(self.logfile), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.datadir),
            "-l",
            str(self.logfile),
            "-w",
            "-t",
            "60",
            "-m",
            "fast",
            "restart",
        )

    def running(self) -> bool:
        pid_file = self.datadir / "postmaster.pid"
        return pid_file.exists()

    def postmaster_pid(self) -> int:
        return int((self.datadir / "postmaster.pid").read_text().splitlines()[0])

    def crash(self, timeout: float = 10) -> None:
        """SIGKILL the postmaster and every server process at once, as a
        machine that loses power; return once none is left.

        Each server process leads a session of its own, so they are found by
        parent: the postmaster is stopped first, so it forks no new one
        meanwhile, and it is killed whatever happens (an interrupt after the
        SIGSTOP must not leave it frozen). What only the next start of this
        data directory would clear goes too, as with a power loss: the lock
        file (``running()`` is then False, and nothing ever signals its pid,
        which another process may reuse) and the SysV shared memory segment."""
        if not self.running():
            raise StockpoolError(f"no server runs on {self.datadir}: nothing to crash")
        lock = (self.datadir / "postmaster.pid").read_text().splitlines()
        postmaster = int(lock[0])
        server: list[int] = []
        try:
            with contextlib.suppress(ProcessLookupError):
                os.kill(postmaster, signal.SIGSTOP)
            server = children(postmaster)
            for pid in server:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(postmaster, signal.SIGKILL)
        server.append(postmaster)
        deadline = time.monotonic() + timeout
        while any(pid in server and state != "Z" for pid, state, _, _ in _processes()):
            if time.monotonic() > deadline:
                raise StockpoolError(
                    f"server processes of {self.datadir} still run {timeout:g} s after SIGKILL"
                )
            time.sleep(0.01)
        (self.datadir / "postmaster.pid").unlink(missing_ok=True)
        _remove_segment(lock)


def _remove_segment(lock: list[str]) -> None:
    """Remove the SysV shared memory segment a dead postmaster's lock file
    names (line 7: key and id), which nothing else would ever remove."""
    fields = lock[6].split() if len(lock) > 6 else []
    if len(fields) == 2 and fields[1].isdigit():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmctl(int(fields[1]), IPC_RMID, None)  # gone already: EINVAL, nothing to do


def children(parent_pid: int) -> list[int]:
    """The processes ``parent_pid`` started and that still run: a
    postmaster's are the server processes."""
    return [pid for pid, _, parent, _ in _processes() if parent == parent_pid]


def _processes() -> Iterator[tuple[int, str, int, int]]:
    """Every process: its pid, state, parent and process group, from /proc."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            yield int(stat.parent.name), fields[0], int(fields[1]), int(fields[2])


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies do not count:
    an orphan's reaper may never come in a container)."""
    return any(group == pgid and state != "Z" for _, state, _, group in _processes())


def _end_group(proc: subprocess.Popen[str], grace: float = 10) -> None:
    """Stop a tool started in a session of its own, and everything it started.

    SIGTERM first (initdb removes its half-made data directory on it), then
    SIGKILL; return once no process of the group is left. pg_ctl's postmaster
    runs in a session of its own, so it is not touched here."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    sig = signal.SIGTERM
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)
        if not _group_alive(proc.pid):
            return
        if sig == signal.SIGTERM and time.monotonic() > deadline:
            sig = signal.SIGKILL
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            deadline = time.monotonic() + grace
        elif sig == signal.SIGKILL and time.monotonic() > deadline:
            return


def _make_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="stockpool-pg-"))
    if _as_root():
        entry = pwd.getpwnam(SERVER_USER)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    root.chmod(0o700)
    return root


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so the cleanup below always runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def throwaway(
    settings: Mapping[str, str] | None = None,
    keep: bool = False,
    create: Callable[[Cluster], None] = Cluster.init,
) -> Iterator[Cluster]:
    """Start a throwaway cluster; stop and delete it on exit, whatever happens.
    ``create`` makes its data directory (default: initdb; a standby's is a
    base backup of its primary, see replica.py)."""
    cluster = Cluster(
        bindir=find_bindir(), root=_make_root(), port=free_port(), settings=dict(settings or {})
    )
    with _terminate_as_interrupt():
        try:
            create(cluster)
            cluster.start()
            yield cluster
        finally:
            if cluster.running():
                with contextlib.suppress(StockpoolError, subprocess.TimeoutExpired):
                    cluster.stop("immediate")
            if not keep:
                shutil.rmtree(cluster.root, ignore_errors=True)


def settings_for_clients(clients: int) -> dict[str, str]:
    """Server settings for a run of ``clients`` concurrent sessions plus helpers."""
    max_connections = max(100, clients + 30)
    return {
        "max_connections": str(max_connections),
        # Each backend's lock table slots scale with max_connections already;
        # keep per-transaction room for a cart's locks.
        "max_locks_per_transaction": "128",
    }


def wait_ready(dsn: str, timeout: float = 30, exited: Callable[[], str | None] | None = None) -> None:
    """Wait until ``dsn`` answers a query; psycopg's OperationalError after
    ``timeout``. ``exited`` names why the process behind it is gone (then a
    StockpoolError at once), or returns None while it runs."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        if exited is not None and (reason := exited()) is not None:
            raise StockpoolError(reason)
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
