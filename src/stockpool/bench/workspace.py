"""The bench's databases: a template with stockpool and the harness's
``bench`` schema (pgbench/bench_setup.sql), and a fresh copy of it laid out
for each cell."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from stockpool.bench.model import CELL_DB, TEMPLATE_DB
from stockpool.errors import StockpoolError
from stockpool.install.deploy import deploy

PGBENCH_DIR = Path(__file__).resolve().parent / "pgbench"


def with_dbname(dsn: str, dbname: str) -> str:
    return make_conninfo(dsn, dbname=dbname)


class Workspace:
    """The template database and the per-cell copies of it on one server."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.template_dsn = with_dbname(admin_dsn, TEMPLATE_DB)
        self.cell_dsn = with_dbname(admin_dsn, CELL_DB)

    def _admin(self, *statements: sql.Composed) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            for stmt in statements:
                conn.execute(stmt)

    def create_template(self) -> None:
        try:
            self._admin(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(CELL_DB)),
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE_DB)),
                sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE_DB)),
            )
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StockpoolError(
                "the bench needs to create its own databases on this server",
                hint="run it as a role with CREATEDB, or without --dsn on a throwaway cluster",
            ) from exc
        deploy(self.template_dsn)
        with psycopg.connect(self.template_dsn, autocommit=True) as conn:
            conn.execute((PGBENCH_DIR / "bench_setup.sql").read_bytes())

    def fresh(
        self,
        strategy: str,
        clients: int,
        units: int,
        per_key: int = 500,
        settings: Mapping[str, str] | None = None,
    ) -> str:
        """A new copy of the template laid out for one cell, vacuumed and
        checkpointed. ``settings``: server settings of this copy alone
        (ALTER DATABASE), checked from a session of it."""
        settings = settings or {}
        self._admin(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(CELL_DB)),
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(CELL_DB), sql.Identifier(TEMPLATE_DB)
            ),
            *(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    sql.Identifier(CELL_DB), sql.Identifier(name), sql.Literal(value)
                )
                for name, value in settings.items()
            ),
        )
        with psycopg.connect(self.cell_dsn, autocommit=True) as conn:
            for name, value in settings.items():
                row = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
                if not row or row[0] != value:
                    raise StockpoolError(
                        f"the cell's sessions see {name} = {row[0] if row else None}, not {value}"
                    )
            conn.execute("SELECT bench.prepare(%s, %s, %s, %s)", (strategy, clients, units, per_key))
            conn.execute("VACUUM (ANALYZE)")
            conn.execute("CHECKPOINT")
        return self.cell_dsn

    def drop(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self._admin(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(CELL_DB)),
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE_DB)),
            )


def script(name: str) -> Path:
    path = PGBENCH_DIR / f"bench_{name}.sql"
    if not path.exists():
        raise StockpoolError(f"pgbench script {path} not found")
    return path
