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

Two things a pgbouncer started by a harness must not inherit: a pipe for
its stderr that nobody reads (it logs there too, and blocks once the pipe
is full: with a line per login, at about 400 clients), and the open-files
limit of 1024 that ``runuser`` resets to (pgbouncer needs a descriptor per
client and per server connection). Its stderr goes to a file, it logs no
line per connection, and its limit is raised for the clients it is for.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from stockpool.errors import StockpoolError
from stockpool.server.cluster import SERVER_USER, free_port, wait_ready

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
    (root / "userlist.txt").write_text(f'"{user}" ""\n')
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
        "log_connections = 0\n"
        "log_disconnections = 0\n"
        f"logfile = {root / 'pgbouncer.log'}\n"
        f"pidfile = {root / 'pgbouncer.pid'}\n"
    )
    files = open_files(clients, size)
    argv = ["prlimit", f"--nofile={files}:", "--", binary, str(root / "pgbouncer.ini")]
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        for path in (root, *root.iterdir()):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        argv = ["runuser", "-u", SERVER_USER, "--", *argv]
    stderr = root / "stderr.log"
    with stderr.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        pooled = through(server_dsn, port)
        try:
            wait_ready(pooled, timeout=20, exited=lambda: _exited(proc, stderr))
        except psycopg.OperationalError as exc:
            raise StockpoolError("pgbouncer did not accept connections within 20 s") from exc
        yield Pooler(pooled, make_conninfo(pooled, dbname="pgbouncer"), size, root / "pgbouncer.log")
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def open_files(clients: int, servers: int) -> int:
    """pgbouncer's open-files limit: a descriptor per client and per server
    connection, its listening sockets and logs, and room to spare; never above
    the hard limit this process may grant."""
    wanted = clients + 2 * servers + 128
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def _exited(proc: subprocess.Popen[str], stderr: Path) -> str | None:
    """Why pgbouncer is gone (its last line on stderr), or None while it runs."""
    if proc.poll() is None:
        return None
    err = stderr.read_text(errors="replace").strip().splitlines()
    return f"pgbouncer exited at start: {err[-1] if err else proc.returncode}"
