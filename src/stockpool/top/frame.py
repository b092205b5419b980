"""What one frame of ``stockpool top`` shows, read from the database.

A :class:`Snapshot` is one read of stockpool.metrics() and
stockpool.hot_keys(), in one short transaction. Both are SECURITY DEFINER
functions that the deployer grants to stockpool_monitor: they see every
session of the database (the owner role is a member of pg_read_all_stats),
so the sessions by application and state come from metrics() too.

Wait events are sampled several times a frame (:func:`sample_waits`) from
stockpool.wait_events(), a SECURITY DEFINER function of the monitor role's
too: pg_stat_activity itself shows another role's wait event only to a
member of pg_read_all_stats, so a plain monitor role reading it would see
none of the application's waits.

Every session here is autocommit, has no named prepared statements (the DSN
may be a transaction pooler) and names itself ``stockpool-top``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import psycopg
from psycopg.rows import TupleRow

from stockpool.errors import StockpoolError, first_line, redact

APPLICATION_NAME = "stockpool-top"
# SQLSTATE classes no retry fixes: bad password or role (28), no such database (3D).
FATAL_CLASSES = ("28", "3D")
# One read must not hang a frame: metrics() passes over every ledger row.
STATEMENT_TIMEOUT = "10s"
MONITOR_FUNCTIONS = ("stockpool.metrics()", "stockpool.hot_keys(integer)", "stockpool.wait_events()")
MONITOR_HINT = "run top as a member of stockpool_monitor (GRANT stockpool_monitor TO ...)"

Labels = tuple[str, str, str]  # (relation, application_name, state), '' where a figure has none

METRICS = """
SELECT m.metric, m.kind, m.relation, m.application_name, m.state, m.value
FROM stockpool.metrics() AS m
"""

HOT_KEYS = """
SELECT h.shop_id, h.item_id, h.location_id, h.on_hand, h.pooled, h.held, h.free,
       h.unsettled, h.pool_target,
       EXTRACT(EPOCH FROM pg_catalog.now() - h.refilled_at)::double precision,
       h.live_holds
FROM stockpool.hot_keys(%s) AS h
"""

# Active client backends of this database other than top's own, by wait
# event ('CPU': waiting for nothing), every application's together.
WAITS = """
SELECT w.wait_event, pg_catalog.sum(w.backends)::integer AS backends
FROM stockpool.wait_events() AS w
GROUP BY w.wait_event
"""


@dataclass(frozen=True)
class HotKey:
    shop_id: int
    item_id: int
    location_id: int
    on_hand: int
    pooled: int
    held: int
    free: int
    unsettled: int
    pool_target: int
    refilled_ago: float | None  # seconds since the key's last refill; None: never
    live_holds: int


@dataclass
class Snapshot:
    """One read of metrics() and hot_keys(): ``figures[metric][labels] = value``."""

    taken_at: float  # time.monotonic() when read
    clock: datetime  # the server's now()
    kinds: dict[str, str]
    figures: dict[str, dict[Labels, float]]
    hot_keys: list[HotKey]

    def value(self, metric: str) -> float | None:
        """A figure without labels; None when metrics() has no such row."""
        rows = self.figures.get(metric)
        return None if not rows else rows.get(("", "", ""))

    def counter(self, metric: str) -> float | None:
        return self.value(metric) if self.kinds.get(metric) == "counter" else None

    def by_relation(self, metric: str) -> dict[str, float]:
        return {labels[0]: v for labels, v in self.figures.get(metric, {}).items()}

    def by_application(self, metric: str) -> dict[str, float]:
        return {labels[1]: v for labels, v in self.figures.get(metric, {}).items()}

    def sessions(self) -> dict[tuple[str, str], int]:
        """Sessions of the database by (application_name, state)."""
        return {(labels[1], labels[2]): int(v) for labels, v in self.figures.get("sessions", {}).items()}


@dataclass
class Waits:
    """wait_events() over the samples of one frame."""

    samples: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    error: str | None = None  # the last sample's error, if it failed

    def add(self, rows: list[tuple[str, int]]) -> None:
        self.samples += 1
        for event, backends in rows:
            self.counts[event] += backends

    def top(self, n: int) -> list[tuple[str, float]]:
        """The n most common events with their average backends per sample."""
        if not self.samples:
            return []
        return [(event, count / self.samples) for event, count in self.counts.most_common(n)]


def connect(dsn: str) -> psycopg.Connection[TupleRow]:
    """A session for top. StockpoolError when no retry can help (bad role,
    password or database); psycopg.OperationalError when one might."""
    try:
        return psycopg.connect(
            dsn,
            autocommit=True,
            application_name=APPLICATION_NAME,
            connect_timeout=10,
            prepare_threshold=None,  # the DSN may be a transaction pooler
            # A server gone without a word is noticed in seconds, not hours.
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
        )
    except psycopg.OperationalError as exc:
        state = exc.sqlstate or ""
        text = str(exc)
        if state[:2] in FATAL_CLASSES or "password authentication failed" in text or "does not exist" in text:
            raise StockpoolError(
                f"cannot connect to {redact(dsn)}: {first_line(exc)}",
                hint="check the role, its password and the database name in the DSN",
            ) from exc
        raise


def check_can_read(conn: psycopg.Connection[TupleRow]) -> str:
    """The database has stockpool's metrics and this role may read them;
    returns the role's name."""
    role, schema, usage = conn.execute(
        "SELECT current_user::text, pg_catalog.to_regnamespace('stockpool') IS NOT NULL,"
        " pg_catalog.to_regnamespace('stockpool') IS NOT NULL"
        "  AND pg_catalog.has_schema_privilege('stockpool', 'USAGE')"
    ).fetchone() or ("", False, False)
    if not schema:
        raise StockpoolError(
            "this database has no stockpool schema",
            hint="deploy stockpool first (stockpool deploy --dsn ...), or point --dsn at its database",
        )
    if not usage:
        raise StockpoolError(f"role {role} may not read stockpool's metrics", hint=MONITOR_HINT)
    for function in MONITOR_FUNCTIONS:
        deployed, allowed = conn.execute(
            "SELECT pg_catalog.to_regprocedure(%s) IS NOT NULL,"
            " coalesce(pg_catalog.has_function_privilege(pg_catalog.to_regprocedure(%s), 'EXECUTE'), false)",
            (function, function),
        ).fetchone() or (False, False)
        if not deployed:
            raise StockpoolError(
                f"this database's stockpool has no {function}",
                hint="deploy this release: stockpool deploy --dsn ...",
            )
        if not allowed:
            raise StockpoolError(f"role {role} may not run {function}", hint=MONITOR_HINT)
    return str(role)


def read_snapshot(conn: psycopg.Connection[TupleRow], keys: int) -> Snapshot:
    """metrics() and hot_keys(keys) in one short read-only transaction."""
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        conn.execute("SELECT pg_catalog.set_config('statement_timeout', %s, true)", (STATEMENT_TIMEOUT,))
        clock_row = conn.execute("SELECT pg_catalog.now()").fetchone()
        metric_rows = conn.execute(METRICS).fetchall()
        key_rows = conn.execute(HOT_KEYS, (keys,)).fetchall()
    taken_at = time.monotonic()
    kinds: dict[str, str] = {}
    figures: dict[str, dict[Labels, float]] = {}
    for metric, kind, relation, application, state, value in metric_rows:
        kinds[metric] = kind
        figures.setdefault(metric, {})[(relation or "", application or "", state or "")] = float(value)
    hot = [
        HotKey(
            shop_id=int(r[0]),
            item_id=int(r[1]),
            location_id=int(r[2]),
            on_hand=int(r[3]),
            pooled=int(r[4]),
            held=int(r[5]),
            free=int(r[6]),
            unsettled=int(r[7]),
            pool_target=int(r[8]),
            refilled_ago=None if r[9] is None else float(r[9]),
            live_holds=int(r[10]),
        )
        for r in key_rows
    ]
    assert clock_row is not None
    return Snapshot(taken_at, clock_row[0], kinds, figures, hot)


def sample_waits(conn: psycopg.Connection[TupleRow], waits: Waits) -> None:
    """Add one sample of wait_events() to ``waits``; a failed sample is
    noted in ``waits.error`` (a lost connection is raised)."""
    try:
        rows = conn.execute(WAITS).fetchall()
    except psycopg.Error as exc:
        if conn.broken or conn.closed:
            raise
        waits.error = f"[{exc.sqlstate or '?????'}] {first_line(exc)}"
        return
    waits.add([(str(event), int(n)) for event, n in rows])
