"""stockpool.wait_events() with real sessions, as a monitor-only login role.

One session holds a row lock on a stock row inside an open transaction, a
second (``we-blocked``) blocks on it. The monitor role sees the blocked one
through wait_events() as ``Lock:transactionid``, and not the holder (idle in
transaction, not active) nor its own backend. The negative control is why the
function exists: the same role reading pg_stat_activity itself gets NULL for
another role's state and wait event (PostgreSQL 15 shows them only to members
of pg_read_all_stats), while the superuser sees the wait there (the setup's
control). pgTAP (tests/pgtap/wait_events.sql) covers what one session can show.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from stockpool.client import Client
from support import background, scalar, wait_until_blocked

pytestmark = pytest.mark.timeout(120)

MONITOR = "test_we_monitor"  # a login role in stockpool_monitor, nothing else
SHOP, ITEM, LOCATION = 5, 7070, 1
ROW_LOCK = (
    "SELECT on_hand FROM stockpool.stock WHERE shop_id = %s AND item_id = %s AND location_id = %s FOR UPDATE"
)


def _monitor(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not scalar(conn, "SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = %s", (MONITOR,)):
            conn.execute(f"CREATE ROLE {MONITOR} LOGIN IN ROLE stockpool_monitor")
    return make_conninfo(dsn, user=MONITOR)


def _waits(conn: psycopg.Connection) -> set[tuple[str, str, int]]:
    rows = conn.execute("SELECT application_name, wait_event, backends FROM stockpool.wait_events()")
    return {(str(app), str(event), int(n)) for app, event, n in rows}


def test_a_monitor_role_sees_a_lock_wait_that_pg_stat_activity_hides_from_it(dsn: str, conns: Any) -> None:
    with Client(dsn) as client:
        client.set_stock(SHOP, ITEM, LOCATION, 10)
    admin = conns(name="we-admin")
    monitor = psycopg.connect(_monitor(dsn), autocommit=True, application_name="we-monitor")
    try:
        assert scalar(monitor, "SELECT pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')") is False
        holder = conns(name="we-holder")
        holder.execute("BEGIN")
        assert holder.execute(ROW_LOCK, (SHOP, ITEM, LOCATION)).fetchone() == (10,)
        blocked = conns(name="we-blocked")
        with background() as run:
            waiting = run(blocked.execute, ROW_LOCK, (SHOP, ITEM, LOCATION))
            wait_until_blocked(admin, blocked.info.backend_pid, waiting)

            # The setup's control: the superuser sees the wait in pg_stat_activity.
            assert admin.execute(
                "SELECT state, wait_event_type || ':' || wait_event FROM pg_catalog.pg_stat_activity"
                " WHERE application_name = 'we-blocked'"
            ).fetchall() == [("active", "Lock:transactionid")]

            seen = _waits(monitor)
            assert ("we-blocked", "Lock:transactionid", 1) in seen, seen
            apps = {app for app, _, _ in seen}
            assert "we-holder" not in apps, "idle in transaction is not active"
            assert "we-monitor" not in apps, "the caller's own backend is left out"

            # The negative control: the same role reading pg_stat_activity sees
            # the session but neither its state nor its wait event.
            assert monitor.execute(
                "SELECT state, wait_event_type, wait_event FROM pg_catalog.pg_stat_activity"
                " WHERE application_name = 'we-blocked'"
            ).fetchall() == [(None, None, None)]

            holder.execute("ROLLBACK")
            assert waiting.result(timeout=30) is not None
        # The wait is over: nothing of it is left.
        assert not [w for w in _waits(monitor) if w[0] in ("we-blocked", "we-holder")]
    finally:
        monitor.close()
