"""Shared fixtures: one throwaway cluster per session, a fresh database per test.

pytest-postgresql does the database work: ``stockpool_template`` is a template
database with stockpool deployed once, and every test that asks for ``dsn`` or
``conn`` gets its own database cloned from it (CREATE DATABASE ... TEMPLATE),
dropped afterwards. The server itself comes from stockpool.server.cluster, because it
must run as the postgres OS user when the tests run as root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from pytest_postgresql import factories

from stockpool.install.deploy import deploy
from stockpool.server import cluster as clusters
from stockpool.server import stats as serverstats


@dataclass
class Server:
    """What pytest-postgresql's ``depends_on`` reads from a base fixture."""

    host: str
    port: int
    user: str
    password: str | None
    options: str
    maintenance_dbname: str
    template_dbname: str | None
    cluster: clusters.Cluster

    def dsn(self, dbname: str) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    settings = clusters.settings_for_clients(200)
    settings["fsync"] = "off"  # throwaway test data: commit cost is not under test here
    settings["log_line_prefix"] = serverstats.LOG_LINE_PREFIX  # race tests read errors and deadlocks
    with clusters.throwaway(settings) as cl:
        yield Server("127.0.0.1", cl.port, clusters.SERVER_USER, None, "", "postgres", None, cl)


def _deploy_loader(host: str, port: int, user: str, dbname: str, **_: Any) -> None:
    deploy(f"postgresql://{user}@{host}:{port}/{dbname}")


stockpool_template = factories.postgresql_noproc(
    dbname="stockpool", load=[_deploy_loader], depends_on="pg_server"
)
stockpool_db = factories.postgresql("stockpool_template")


@pytest.fixture
def dsn(stockpool_db: psycopg.Connection, pg_server: Server) -> str:
    """DSN of this test's own freshly deployed database."""
    dbname = stockpool_db.info.dbname
    return pg_server.dsn(dbname)


@pytest.fixture
def server_log(pg_server: Server) -> serverstats.ServerLog:
    """The test server's log (its prefix names the application and SQLSTATE of
    every error, so a run can report its own errors and any deadlock's cycle)."""
    return serverstats.ServerLog(pg_server.cluster.logfile)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to this test's database."""
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture
def connect(dsn: str) -> Iterator[Callable[..., psycopg.Connection]]:
    """Open extra connections to this test's database; all closed afterwards."""
    opened: list[psycopg.Connection] = []

    def _open(autocommit: bool = False) -> psycopg.Connection:
        c = psycopg.connect(dsn, autocommit=autocommit)
        opened.append(c)
        return c

    yield _open
    for c in opened:
        c.close()


@pytest.fixture
def empty_db(pg_server: Server) -> Iterator[str]:
    """DSN of an empty database (nothing deployed), dropped afterwards."""
    name = "stockpool_empty"
    admin = pg_server.dsn("postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {name}")
    yield pg_server.dsn(name)
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def conns(dsn: str) -> Iterator[Any]:
    """Open connections that cannot hang a run (statement_timeout; see support.py); all closed afterwards."""
    from support import Conns

    opened = Conns(dsn)
    yield opened
    opened.close_all()
