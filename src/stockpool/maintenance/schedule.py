"""``stockpool deploy --schedule``: the maintenance cycle as a pg_cron job.

pg_cron keeps its jobs in the database named by ``cron.database_name`` and
runs each one in the database and as the role recorded with it
(cron.schedule_in_database). Debian 12's postgresql-15-cron is pg_cron 1.4,
whose schedules are cron expressions: once a minute at most. That suits
expiring holds whose TTL is minutes; for a finer cycle run ``stockpool
worker`` (every second by default) instead or as well.

The job runs ``SELECT * FROM stockpool.maintain()`` as ``run_as``: by default
the role that deploys, better a LOGIN role that is a member of
stockpool_worker (pg_cron on PostgreSQL 15 needs a role that may log in).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow

from stockpool.errors import StockpoolError, first_line

EVERY_MINUTE = "* * * * *"
COMMAND = "SELECT * FROM stockpool.maintain()"
MAINTAIN = "stockpool.maintain(interval, integer)"


@dataclass(frozen=True)
class Job:
    jobid: int
    name: str
    database: str
    username: str
    schedule: str
    command: str

    def line(self) -> str:
        return (
            f"pg_cron job {self.jobid} '{self.name}' runs {self.command} in {self.database} as "
            f"{self.username} every minute (pg_cron 1.4: once a minute at most; "
            "run `stockpool worker` for a finer cycle)"
        )


def job_name(database: str) -> str:
    return f"stockpool-maintain:{database}"


def schedule(dsn: str, run_as: str | None = None) -> Job:
    """Register (or update) the maintenance job for the database of ``dsn``."""
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise StockpoolError(f"cannot connect: {first_line(exc)}") from exc
    with conn:
        database, cron_db, role = _where(conn, run_as)
        _check_role(conn, role)
    try:
        cron = psycopg.connect(make_conninfo(dsn, dbname=cron_db), autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise StockpoolError(f"cannot connect to pg_cron's database {cron_db}: {first_line(exc)}") from exc
    with cron:
        try:
            cron.execute("CREATE EXTENSION IF NOT EXISTS pg_cron")
            # pg_cron names a job per (name, user): a job of this name left
            # under another role (an earlier --schedule-as) would keep running.
            cron.execute(
                "SELECT cron.unschedule(j.jobid) FROM cron.job AS j"
                " WHERE j.jobname = %s AND j.username <> %s",
                (job_name(database), role),
            )
            row = cron.execute(
                "SELECT cron.schedule_in_database(%s, %s, %s, %s, %s)",
                (job_name(database), EVERY_MINUTE, COMMAND, database, role),
            ).fetchone()
        except psycopg.Error as exc:
            raise StockpoolError(
                f"cannot schedule the maintenance job in {cron_db}: [{exc.sqlstate}] {first_line(exc)}",
                hint="deploy --schedule as a superuser, or ask the DBA to grant pg_cron's functions",
            ) from exc
        assert row is not None
        return Job(int(row[0]), job_name(database), database, role, EVERY_MINUTE, COMMAND)


def _where(conn: psycopg.Connection[TupleRow], run_as: str | None) -> tuple[str, str, str]:
    """This database, pg_cron's database, and the role the job runs as."""
    row = conn.execute(
        "SELECT pg_catalog.current_database(), pg_catalog.current_setting('cron.database_name', true),"
        " current_user"
    ).fetchone()
    assert row is not None
    database, cron_db, user = (str(v) if v is not None else None for v in row)
    if not cron_db:
        raise StockpoolError(
            "pg_cron is not loaded on this server, so --schedule cannot register the maintenance cycle",
            hint="add pg_cron to shared_preload_libraries and restart (package postgresql-15-cron), "
            "or run `stockpool worker --dsn ...` instead",
        )
    assert database is not None and user is not None
    return database, cron_db, run_as or user


def _check_role(conn: psycopg.Connection[TupleRow], role: str) -> None:
    row = conn.execute(
        "SELECT r.rolcanlogin,"
        " pg_catalog.has_schema_privilege(r.rolname, 'stockpool', 'USAGE')"
        "  AND pg_catalog.has_function_privilege(r.rolname, %s, 'EXECUTE')"
        " FROM pg_catalog.pg_roles AS r WHERE r.rolname = %s",
        (MAINTAIN, role),
    ).fetchone()
    if row is None:
        raise StockpoolError(f"--schedule-as: role {role} does not exist")
    can_login, may_maintain = row
    if not can_login:
        raise StockpoolError(
            f"--schedule-as: role {role} cannot log in, "
            "and pg_cron on PostgreSQL 15 runs jobs as a login role",
            hint="CREATE ROLE maintainer LOGIN IN ROLE stockpool_worker; then --schedule-as maintainer",
        )
    if not may_maintain:
        raise StockpoolError(
            f"--schedule-as: role {role} may not run stockpool.maintain",
            hint=f"GRANT stockpool_worker TO {role}",
        )
