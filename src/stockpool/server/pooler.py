"""A throwaway PgBouncer in transaction mode in front of a server.

The harness runs the pooler every PostgreSQL production uses (one server
process per connection makes thousands of direct clients expensive): Debian
12's pgbouncer 1.18, in transaction pooling, which gives a client a server
connection for one transaction at a time and has no server-side prepared
statements in that mode (1.21 added them). Clients of a transaction pooler
must therefore not use named prepared statements: pgbench runs in its simple
protocol, psycopg sessions with ``prepare_threshold=None``.

The server pool is sized to the machine: ``2 x CPU cores + 4`` server
connections (with 2 cores: 8). More active server processes than cores only
queue on the CPU and on the WAL flush, which is what the pooler is there to
avoid; the clients beyond it wait in the pooler instead (SHOW POOLS:
``cl_waiting``).

Two things a pgbouncer started by a harness must not have: a pipe for its
stderr that nobody reads (it logs there too, and blocks once the pipe is
full: with a line per login, at about 400 clients), and the default
open-files limit of 1024 (pgbouncer needs a descriptor per client and per
server connection). Its stderr goes to a file, it logs no line per
connection, and its limit is raised for the clients it is for. As root it
is started as the server's OS user directly, not through ``runuser``,
which resets that limit and holds every stop for two seconds.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import shutil
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


def pool_size(cpus: int | None = None) -> int:
    """Server connections per database and user: 2 x CPU cores + 4."""
    return 2 * (cpus or os.cpu_count() or 2) + 4


@dataclass(frozen=True)
class Pooler:
    dsn: str  # the server's DSN with host and port of the pooler
    admin_dsn: str  # pgbouncer's admin console (SHOW STATS, SHOW POOLS)
    pool_size: int
    logfile: Path


def through(dsn: str, port: int) -> str:
    return make_conninfo(dsn, host="127.0.0.1", port=str(port))


@contextlib.contextmanager
def pgbouncer(server_dsn: str, clients: int) -> Iterator[Pooler]:
    """Start pgbouncer in front of ``server_dsn`` for ``clients`` clients; stop it afterwards."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        raise StockpoolError("pgbouncer not found", hint="apt-get install pgbouncer (Debian 12: 1.18)")
    info = conninfo_to_dict(server_dsn)
    user = str(info.get("user") or SERVER_USER)
    root = Path(tempfile.mkdtemp(prefix="stockpool-pgbouncer-"))
    port = free_port()
    size = pool_size()
    # The server may want the DSN's password: pgbouncer sends it from here.
    password = str(info.get("password") or "").replace('"', '""')
    (root / "userlist.txt").write_text(f'"{user}" "{password}"\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={info.get('host') or '127.0.0.1'} port={info.get('port') or 5432}\n"
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
    run_as: str | None = None
    if os.geteuid() == 0:  # pgbouncer refuses root
        run_as = SERVER_USER
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
            yield Pooler(pooled, make_conninfo(pooled, dbname="pgbouncer"), size, root / "pgbouncer.log")
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
