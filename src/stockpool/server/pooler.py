"""A throwaway PgBouncer in transaction mode in front of a server.

The harness runs the pooler every PostgreSQL production uses (one server
process per connection makes thousands of direct clients expensive): Debian
12's pgbouncer 1.18, in transaction pooling, which gives a client a server
connection for one transaction at a time and has no server-side prepared
statements in that mode (1.21 added them). Clients of a transaction pooler
must therefore not use named prepared statements: pgbench runs in its simple
protocol, psycopg sessions with ``prepare_threshold=None``.

The server pool is sized to the machine: ``2 x CPU cores + 4`` server
connections (with 2 cores: 8); the clients beyond it wait in the pooler
(SHOW POOLS: ``cl_waiting``). A reservation spends most of its time waiting
for its commit's WAL flush, and more connections let more commits share a
flush: on the 2-core machine, through pgbouncer at 512 and 1,000 clients
against stockpool's best direct rate, alternated (docs/commands.md), 8
connections did 0.59-0.65x and 16 0.65-0.73x with every process on both
cores, 0.90-0.94x and 0.91-1.01x with the server on a core of its own. 16 is
not the default: with it, the race through pgbouncer counted a deadlock in
one CI run of three, not seen again since (docs/operations.md, Pool size).

Two things a pgbouncer started by a harness must not have: a pipe for its
stderr that nobody reads (it logs there too, and blocks once the pipe is
full: with a line per login, at about 400 clients), and the default
open-files limit of 1024 (pgbouncer needs a descriptor per client and per
server connection). Its stderr goes to a file, it logs no line per
connection, and its limit is raised for the clients it is for. As root it
is started as the server's OS user directly, not through ``runuser``,
which resets that limit and holds every stop for two seconds.

A pgbouncer on the server's machine reaches it through the server's Unix
socket, as Debian's own pgbouncer is set up to: loopback TCP costs every
transaction's round trips more CPU on the cores the server needs. Through
pgbouncer at 1,000 clients the socket gave 1.03-1.16x the TCP rate in 7
alternated rounds, at 512 clients 0.88-1.07x, median 1.01
(docs/commands.md). The socket is used only when a connection through it
reaches the same postmaster and the OS user pgbouncer runs as may enter its
directory; otherwise the DSN's host and port.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

from stockpool.errors import StockpoolError
from stockpool.server import daemon
from stockpool.server.cluster import SERVER_USER, free_port, wait_ready
from stockpool.server.sampler import Periodic

POOLERS = ("none", "pgbouncer")
# pool_size's rule in words, for the reports that name it.
POOL_SIZE_RULE = "2 x CPU cores + 4"


def pool_size(cpus: int | None = None) -> int:
    """Server connections per database and user: POOL_SIZE_RULE."""
    return 2 * (cpus or os.cpu_count() or 2) + 4


@dataclass(frozen=True)
class Pooler:
    dsn: str  # the server's DSN with host and port of the pooler
    admin_dsn: str  # pgbouncer's admin console (SHOW STATS, SHOW POOLS)
    pool_size: int
    logfile: Path
    server: str  # where pgbouncer reaches the server: a socket directory or host, and the port
    pid: int  # pgbouncer's process


LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Where a server's socket usually is when it will not say (the setting is
# readable by superusers and pg_read_all_settings only): Debian's, then the default.
SOCKET_DIRS = ("/var/run/postgresql", "/tmp")


def dsn_address(dsn: str) -> tuple[str, str]:
    """The host (127.0.0.1 when none) and port (5432) of ``dsn``."""
    info = conninfo_to_dict(dsn)
    return str(info.get("host") or "127.0.0.1"), str(info.get("port") or 5432)


def server_address(dsn: str, user: str | None = None) -> tuple[str, str]:
    """Host and port for pgbouncer's connections to the server of ``dsn``:
    the server's unix socket directory when the server is on this machine
    (a loopback DSN, a socket of its port that the OS user ``user`` may
    enter, and a connection through it that reaches the same postmaster),
    else the DSN's own host and port."""
    host, port = dsn_address(dsn)
    # hostaddr wins over host in libpq: a probe "through the socket" would go
    # over TCP to wherever it points, and prove nothing.
    if host not in LOOPBACK or conninfo_to_dict(dsn).get("hostaddr"):
        return host, port
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            started = conn.execute("SELECT pg_catalog.pg_postmaster_start_time()").fetchone()
            try:
                row = conn.execute("SELECT pg_catalog.current_setting('unix_socket_directories')").fetchone()
                listed = [d.strip().strip('"') for d in str(row[0] if row else "").split(",")]
            except psycopg.errors.InsufficientPrivilege:
                listed = list(SOCKET_DIRS)
        for directory in listed:
            socket = Path(directory) / f".s.PGSQL.{port}"
            if not directory.startswith("/") or " " in directory or not _usable(socket, user):
                continue
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(make_conninfo(dsn, host=directory), connect_timeout=5) as probe,
            ):
                if probe.execute("SELECT pg_catalog.pg_postmaster_start_time()").fetchone() == started:
                    return directory, port
    except psycopg.Error:
        pass
    return host, port


def _usable(socket: Path, user: str | None) -> bool:
    """``socket`` is a socket that the OS user ``user`` (this process's when
    None) may connect to: every directory above it searchable, the socket
    writable, by owner, group or others' bits."""
    try:
        if not stat.S_ISSOCK(socket.stat().st_mode):
            return False
        if user is None:
            return os.access(socket, os.W_OK)
        entry = pwd.getpwnam(user)
        if entry.pw_uid == 0:
            return True
        groups = set(os.getgrouplist(user, entry.pw_gid))

        def allowed(path: Path, bits: tuple[int, int, int]) -> bool:
            st = path.stat()
            if st.st_uid == entry.pw_uid:
                return bool(st.st_mode & bits[0])
            if st.st_gid in groups:
                return bool(st.st_mode & bits[1])
            return bool(st.st_mode & bits[2])

        search = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
        write = (stat.S_IWUSR, stat.S_IWGRP, stat.S_IWOTH)
        return all(allowed(d, search) for d in socket.parents) and allowed(socket, write)
    except (OSError, KeyError):
        return False


def through(dsn: str, port: int) -> str:
    """``dsn`` with the pooler's address on loopback (any hostaddr dropped:
    libpq would connect there instead)."""
    params = {k: v for k, v in conninfo_to_dict(dsn).items() if k != "hostaddr"}
    return make_conninfo("", **{**params, "host": "127.0.0.1", "port": str(port)})


@contextlib.contextmanager
def pgbouncer(
    server_dsn: str, clients: int, socket: bool = True, size: int | None = None
) -> Iterator[Pooler]:
    """Start pgbouncer in front of ``server_dsn`` for ``clients`` clients; stop
    it afterwards. ``socket``: reach a server on this machine through its Unix
    socket (:func:`server_address`); False keeps the DSN's host and port.
    ``size``: server connections (default :func:`pool_size`)."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        raise StockpoolError("pgbouncer not found", hint="apt-get install pgbouncer (Debian 12: 1.18)")
    info = conninfo_to_dict(server_dsn)
    user = str(info.get("user") or SERVER_USER)
    run_as = SERVER_USER if os.geteuid() == 0 else None  # pgbouncer refuses root
    server_host, server_port = server_address(server_dsn, run_as) if socket else dsn_address(server_dsn)
    root = Path(tempfile.mkdtemp(prefix="stockpool-pgbouncer-"))
    port = free_port()
    size = size or pool_size()
    # The server may want the DSN's password: pgbouncer sends it from here.
    password = str(info.get("password") or "").replace('"', '""')
    (root / "userlist.txt").write_text(f'"{user}" "{password}"\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server_host} port={server_port}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        f"unix_socket_dir = {root}\n"
        "auth_type = trust\n"
        f"auth_file = {root / 'userlist.txt'}\n"
        f"admin_users = {user}\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {size}\n"
        "reserve_pool_size = 0\n"
        f"max_client_conn = {clients + 100}\n"
        "max_db_connections = 0\n"
        "server_reset_query =\n"
        "ignore_startup_parameters = extra_float_digits\n"
        # After a failed server login pgbouncer refuses clients for this long
        # (15 s by default): a restarted server is back within a second here.
        "server_login_retry = 1\n"
        "log_connections = 0\n"
        "log_disconnections = 0\n"
        f"logfile = {root / 'pgbouncer.log'}\n"
        f"pidfile = {root / 'pgbouncer.pid'}\n"
    )
    files = open_files(clients, size)
    argv = ["prlimit", f"--nofile={files}:", "--", binary, str(root / "pgbouncer.ini")]
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        for path in (root, *root.iterdir()):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    try:
        with daemon.running("pgbouncer", argv, root / "stderr.log", user=run_as) as bouncer:
            pooled = through(server_dsn, port)
            try:
                wait_ready(pooled, timeout=20, exited=bouncer.exited)
            except psycopg.OperationalError as exc:
                raise StockpoolError("pgbouncer did not accept connections within 20 s") from exc
            yield Pooler(
                pooled,
                make_conninfo(pooled, dbname="pgbouncer"),
                size,
                root / "pgbouncer.log",
                f"[{server_host}]:{server_port}" if ":" in server_host else f"{server_host}:{server_port}",
                bouncer.proc.pid,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def open_files(clients: int, servers: int) -> int:
    """pgbouncer's open-files limit: a descriptor per client and per server
    connection, its listening sockets and logs, and room to spare; never above
    the hard limit this process may grant."""
    wanted = clients + 2 * servers + 128
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


@dataclass
class PoolerFigures:
    """What pgbouncer says of one run on one database: its transactions and
    the time clients waited for a server connection (SHOW STATS, before and
    after), and the clients waiting as SHOW POOLS was sampled."""

    transactions: int = 0
    wait_us: int = 0
    samples: int = 0
    cl_waiting_max: int = 0
    cl_waiting_sum: int = 0
    sv_active_max: int = 0

    @property
    def avg_wait_ms(self) -> float | None:
        """Average wait for a server connection per transaction."""
        return self.wait_us / self.transactions / 1000.0 if self.transactions else None

    @property
    def cl_waiting_mean(self) -> float | None:
        return self.cl_waiting_sum / self.samples if self.samples else None

    def as_json(self) -> dict[str, object]:
        wait, mean = self.avg_wait_ms, self.cl_waiting_mean
        return {
            "transactions": self.transactions,
            "avg_wait_ms": round(wait, 3) if wait is not None else None,
            "cl_waiting_max": self.cl_waiting_max,
            "cl_waiting_mean": round(mean, 1) if mean is not None else None,
            "sv_active_max": self.sv_active_max,
            "samples": self.samples,
        }


def _show(conn: psycopg.Connection[TupleRow], what: str, database: str) -> dict[str, object] | None:
    """The row of SHOW POOLS or SHOW STATS for ``database`` (the admin
    console answers the simple protocol only: no parameters)."""
    cur = conn.execute(f"SHOW {what}")
    names = [column.name for column in cur.description or ()]
    for row in cur.fetchall():
        values = dict(zip(names, row, strict=True))
        if values.get("database") == database:
            return values
    return None


def totals(admin_dsn: str, database: str) -> tuple[int, int]:
    """SHOW STATS' total transactions and total client wait (µs) for ``database``."""
    with psycopg.connect(admin_dsn, autocommit=True, prepare_threshold=None) as conn:
        row = _show(conn, "STATS", database) or {}
    return int(str(row.get("total_xact_count", 0))), int(str(row.get("total_wait_time", 0)))


class PoolWatch(Periodic):
    """SHOW POOLS of one database every ``period`` seconds, and SHOW STATS
    at the start and the end: :attr:`figures` once stopped."""

    def __init__(self, pooler: Pooler, period: float) -> None:
        super().__init__("pool-watch", pooler.admin_dsn, period, fixed_rate=True)
        self.database = str(conninfo_to_dict(pooler.dsn).get("dbname") or SERVER_USER)
        self.figures = PoolerFigures()
        self._start = (0, 0)

    def start(self) -> None:
        self._start = totals(self.dsn, self.database)
        super().start()

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
        row = _show(conn, "POOLS", self.database)
        if row is not None:
            waiting = int(str(row["cl_waiting"]))
            f = self.figures
            f.samples += 1
            f.cl_waiting_sum += waiting
            f.cl_waiting_max = max(f.cl_waiting_max, waiting)
            f.sv_active_max = max(f.sv_active_max, int(str(row["sv_active"])))
        return False

    def stop(self) -> None:
        super().stop()
        transactions, wait_us = totals(self.dsn, self.database)
        self.figures.transactions = transactions - self._start[0]
        self.figures.wait_us = wait_us - self._start[1]
