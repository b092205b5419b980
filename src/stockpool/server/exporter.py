"""Throwaway Prometheus exporters on free loopback ports.

- :func:`postgres_exporter`: Debian 12's prometheus-postgres-exporter 0.11
  against a database, with stockpool's custom queries
  (``monitoring/postgres_exporter/queries.yaml``, which exposes every row of
  ``stockpool.metrics()``);
- :func:`pgbouncer_exporter`: Debian 12's prometheus-pgbouncer-exporter 1.7
  against a pgbouncer's admin console, through the launcher in
  ``monitoring/pgbouncer_exporter`` (the packaged one stops at start against
  pgbouncer >= 1.8; ``compat=False`` runs it as packaged, to show that).

Each yields an :class:`Exporter` once its ``/metrics`` answers, and is stopped
and its files removed on the way out. Both run as the calling user (as root
too: neither refuses it), listening on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from stockpool.errors import StockpoolError
from stockpool.server import daemon
from stockpool.server.cluster import SERVER_USER, free_port

# The repository's monitoring folder (queries, scrape configuration, rules, dashboard).
MONITORING = Path(__file__).resolve().parents[3] / "monitoring"
PGBOUNCER_EXPORTER_PACKAGE = Path("/usr/lib/python3/dist-packages/prometheus_pgbouncer_exporter")
START_TIMEOUT = 20.0


def monitoring_dir() -> Path:
    """The monitoring folder of the checkout this package runs from."""
    if not (MONITORING / "prometheus.yml").exists():
        raise StockpoolError(
            f"no monitoring folder at {MONITORING}",
            hint="the exporter and Prometheus harnesses run from a stockpool checkout (pip install -e .)",
        )
    return MONITORING


@dataclass(frozen=True)
class Exporter:
    """A running exporter."""

    name: str
    port: int
    logfile: Path

    @property
    def target(self) -> str:
        """host:port, as a scrape configuration's target."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"

    def scrape(self) -> str:
        """One scrape: the exposition text."""
        return daemon.http_get(self.url, timeout=10).decode()


def _binary(*names: str, package: str) -> str:
    for name in names:
        if found := shutil.which(name):
            return found
    hint = f"apt-get install {package} (or scripts/bootstrap-system)"
    raise StockpoolError(f"{names[0]} not found", hint=hint)


def exporter_dsn(dsn: str) -> str:
    """``dsn`` as postgres_exporter's driver (lib/pq) takes it: key=value,
    ``sslmode=disable`` unless the DSN says otherwise (lib/pq defaults to
    require, which a server without TLS refuses), and an application_name
    that names the exporter's session in pg_stat_activity (and in
    stockpool_sessions)."""
    info = conninfo_to_dict(dsn)
    info.setdefault("sslmode", "disable")
    info.setdefault("application_name", "postgres_exporter")
    return make_conninfo(**{k: str(v) for k, v in info.items() if v is not None})


@contextlib.contextmanager
def _serving(name: str, argv: list[str], port: int, root: Path, env: dict[str, str]) -> Iterator[Exporter]:
    """Run an exporter whose files live in ``root`` until it answers; remove ``root`` afterwards."""
    try:
        with daemon.running(name, argv, root / "stderr.log", env=env) as proc:
            exporter = Exporter(name, port, proc.stderr)
            daemon.wait_http(exporter.url, START_TIMEOUT, proc.exited)
            yield exporter
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def postgres_exporter(dsn: str, queries: Path | None = None) -> Iterator[Exporter]:
    """postgres_exporter against ``dsn`` with stockpool's queries (or ``queries``).

    The role in ``dsn`` should be the one production uses: a member of
    stockpool_monitor and pg_monitor."""
    binary = _binary(
        "prometheus-postgres-exporter", "postgres_exporter", package="prometheus-postgres-exporter"
    )
    queries = queries or monitoring_dir() / "postgres_exporter" / "queries.yaml"
    port = free_port()
    argv = [
        binary,
        f"--web.listen-address=127.0.0.1:{port}",
        f"--extend.query-path={queries}",
        "--log.level=warn",
    ]
    env = {**os.environ, "DATA_SOURCE_NAME": exporter_dsn(dsn)}
    root = Path(tempfile.mkdtemp(prefix="stockpool-postgres-exporter-"))
    with _serving("postgres_exporter", argv, port, root, env) as exporter:
        yield exporter


@contextlib.contextmanager
def pgbouncer_exporter(admin_dsn: str, compat: bool = True) -> Iterator[Exporter]:
    """The pgbouncer exporter against the admin console ``admin_dsn``
    (``dbname=pgbouncer``; its user must be in pgbouncer's admin_users or
    stats_users)."""
    if not PGBOUNCER_EXPORTER_PACKAGE.exists():
        raise StockpoolError(
            "prometheus-pgbouncer-exporter not found",
            hint="apt-get install prometheus-pgbouncer-exporter (or scripts/bootstrap-system)",
        )
    launcher = (
        str(monitoring_dir() / "pgbouncer_exporter" / "prometheus-pgbouncer-exporter")
        if compat
        else _binary("prometheus-pgbouncer-exporter", package="prometheus-pgbouncer-exporter")
    )
    info = conninfo_to_dict(admin_dsn)
    port = free_port()
    argv = [
        launcher,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--pgbouncer-host",
        str(info.get("host") or "127.0.0.1"),
        "--pgbouncer-port",
        str(info.get("port") or 6432),
        "--pgbouncer-user",
        str(info.get("user") or SERVER_USER),
    ]
    env = dict(os.environ)
    if info.get("password"):
        env["PGPASSWORD"] = str(info["password"])
    root = Path(tempfile.mkdtemp(prefix="stockpool-pgbouncer-exporter-"))
    with _serving("pgbouncer exporter", argv, port, root, env) as exporter:
        yield exporter
