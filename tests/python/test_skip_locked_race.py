"""PostgreSQL's SKIP LOCKED can wait, and a maintenance step gives its work up
when it does (docs/locking.md, "SKIP LOCKED can wait").

A row lock taken SKIP LOCKED that finds the row being updated by a transaction
checks that transaction with ConditionalXactLockTableWait. If it committed in
between, the lock goes on to the newer versions of the row
(heap_lock_updated_tuple), and waits for whoever locked them, whatever the
wait policy. The window is a few instructions wide; under load it closed a
cycle about once in 24 soak runs: a sweep holding its batch of hold rows
waited for a buyer whose near-sellout path waited for one of those rows.

These tests open the window on purpose: gdb stops the sweeping backend in
ConditionalXactLockTableWait while the row's updater commits and a buyer locks
the row's new version and then waits for the sweep's batch. Then the sweep
goes on.

- The negative control runs a bare batch (the sweep's own statement, FOR
  UPDATE SKIP LOCKED) in place of the sweep: PostgreSQL finds the cycle and
  cancels one side with 40P01. So the choreography reaches the race.
- sweep() and maintain() give the step up after 50 ms (lock_timeout, in a
  subtransaction), count it in maintenance_yields_total, and the buyer gets
  its unit from the overdue holds it expires itself.
- set_stock, which expires overdue holds the same way while it holds the
  key's refill lock and ledger row, gives that expiry up: SP002.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import errors

from support import Conns, background, levels, result, scalar, violations, wait_until_blocked

SHOP, ITEM, LOC = 1, 77, 1
# The buyer's _expire_key locks overdue holds in checkout_id order, the sweep
# its batch in expires_at order: LATE expires first but sorts last.
EARLY = uuid.UUID("00000000-0000-0000-0000-000000000001")
LATE = uuid.UUID("ffffffff-0000-0000-0000-000000000000")

# The sweep's batch as _expire_due takes it, without _maintain_step around it.
BARE_BATCH = """
WITH due AS (
    SELECT h.shop_id, h.checkout_id, h.item_id, h.location_id
    FROM stockpool.holds AS h
    WHERE h.status = 'held' AND h.expires_at <= now()
    ORDER BY h.expires_at
    LIMIT 500
    FOR UPDATE SKIP LOCKED
)
UPDATE stockpool.holds AS h
SET status = 'expired', updated_at = now()
FROM due
WHERE (h.shop_id, h.checkout_id, h.item_id, h.location_id)
    = (due.shop_id, due.checkout_id, due.item_id, due.location_id)
"""


class Stopped:
    """gdb attached to one backend, with a breakpoint on a function of the
    server: ``hit()`` waits until the backend stops there, ``go()`` lets it
    run on and detaches."""

    def __init__(self, pid: int, function: str) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.gdb = subprocess.Popen(
            ["gdb", "-q", "-nx", "-p", str(pid), "-ex", f"break {function}", "-ex", "continue"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        self._until("Continuing.", 30)

    def _read(self) -> None:
        assert self.gdb.stdout is not None
        for line in self.gdb.stdout:
            self.lines.put(line)

    def _until(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            seen.append(line)
            if text in line:
                return
        raise AssertionError(f"gdb never said {text!r}: {''.join(seen)[-2000:]}")

    def hit(self) -> None:
        self._until("Breakpoint 1,", 30)

    def go(self) -> None:
        if self.gdb.poll() is None:
            assert self.gdb.stdin is not None
            self.gdb.stdin.write("delete\ndetach\nquit\n")
            self.gdb.stdin.flush()
            self.gdb.wait(timeout=30)


@contextmanager
def stopped(pid: int, function: str) -> Iterator[Stopped]:
    s = Stopped(pid, function)
    try:
        yield s
    finally:
        s.go()


YIELDS = "SELECT value FROM stockpool.metrics() WHERE metric = 'maintenance_yields_total'"


def _yields_after(conn: psycopg.Connection, before: float) -> float:
    """maintenance_yields_total once it moved from ``before`` (a backend's
    function counts reach the statistics within a second or so of its call,
    at once when it exits), or as it stands after 10 s."""
    deadline = time.monotonic() + 10
    while scalar(conn, YIELDS) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    return float(scalar(conn, YIELDS))


def _two_overdue_holds(conn: psycopg.Connection) -> None:
    """A key sold out to two holds that are overdue and not yet swept."""
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 2)", (SHOP, ITEM, LOC))
    for checkout, ttl in ((LATE, "100 milliseconds"), (EARLY, "200 milliseconds")):
        assert scalar(
            conn,
            "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s, %s)",
            (SHOP, ITEM, LOC, checkout, ttl),
        )
    time.sleep(0.3)


def _race(conn: psycopg.Connection, conns: Conns, sweeping: str, quantity: int = 1) -> tuple[object, object]:
    """The race, with ``sweeping`` as the sweeper's statement; returns what
    the sweeper's and the buyer's statements returned or raised. The buyer
    asks for ``quantity`` units of the key."""
    updater = conns(autocommit=False, name="updater")
    sweeper = conns(autocommit=True, name="sweeper")
    buyer = conns(autocommit=True, name="buyer")
    # The buyer waits first; its own deadlock check must not come before the
    # sweeper's 50 ms are up, however long gdb takes to let the sweeper go.
    buyer.execute("SET deadlock_timeout = '10s'")
    # EARLY's row being updated: the sweep's lock on it finds the updater
    # in progress, and checks it again once the breakpoint lets it go.
    updater.execute("UPDATE stockpool.holds SET updated_at = now() WHERE checkout_id = %s", (EARLY,))

    def run(c: psycopg.Connection, query: str, params: tuple[object, ...] = ()) -> object:
        try:
            cur = c.execute(query, params)
            row = cur.fetchone() if cur.description else None
            return row[0] if row is not None else cur.rowcount
        except psycopg.Error as e:
            return e

    with background() as submit, stopped(sweeper.info.backend_pid, "ConditionalXactLockTableWait") as gdb:
        swept = submit(run, sweeper, sweeping)
        gdb.hit()  # LATE locked, EARLY's updater being checked
        updater.commit()
        bought = submit(
            run,
            buyer,
            "SELECT stockpool.reserve_units(%s, %s, %s, %s, %s)",
            (SHOP, ITEM, LOC, quantity, uuid.uuid4()),
        )
        # The buyer expired EARLY's new version and waits for LATE, in the sweep's batch.
        assert wait_until_blocked(conn, buyer.info.backend_pid, bought) == [sweeper.info.backend_pid]
        gdb.go()
        answers = result(swept, timeout=60), result(bought, timeout=60)
    sweeper.close()  # its function counts reach the server's statistics when it exits
    return answers


def test_control_a_bare_skip_locked_batch_deadlocks(conn: psycopg.Connection, conns: Conns) -> None:
    _two_overdue_holds(conn)
    swept, bought = _race(conn, conns, BARE_BATCH)
    raised = [r for r in (swept, bought) if isinstance(r, errors.DeadlockDetected)]
    assert len(raised) == 1, (swept, bought)


@pytest.mark.parametrize(
    "sweeping", ["SELECT stockpool.sweep(500)", "SELECT expired FROM stockpool.maintain()"]
)
def test_a_maintenance_step_that_waits_gives_its_batch_up(
    conn: psycopg.Connection, conns: Conns, sweeping: str
) -> None:
    before = scalar(conn, YIELDS)
    _two_overdue_holds(conn)
    swept, bought = _race(conn, conns, sweeping)
    assert (swept, bought) == (0, True)
    assert _yields_after(conn, before) == before + 1
    # The buyer expired both overdue holds and took one of their units.
    statuses = conn.execute(
        "SELECT checkout_id, status FROM stockpool.holds WHERE item_id = %s AND checkout_id IN (%s, %s)",
        (ITEM, EARLY, LATE),
    ).fetchall()
    assert sorted(s for _, s in statuses) == ["expired", "expired"]
    on_hand, pooled, held, free = levels(conn, SHOP, ITEM, LOC)
    assert (on_hand, held) == (2, 1) and pooled + free == 1
    assert violations(conn) == []


def test_a_step_behind_a_table_lock_gives_up_and_the_others_run(
    conn: psycopg.Connection, conns: Conns
) -> None:
    """The same rule for any wait: a sweep whose settle step would queue behind
    a table lock (a migration's, say) gives that step up after 50 ms; the
    expiry before it stands."""
    _two_overdue_holds(conn)
    before = scalar(conn, YIELDS)
    migrating = conns(autocommit=False, name="migration")
    migrating.execute("LOCK TABLE stockpool.pending_claims IN ACCESS EXCLUSIVE MODE")
    sweeper = conns(autocommit=True, name="sweeper", lock_timeout="5s")
    started = time.monotonic()
    assert scalar(sweeper, "SELECT stockpool.sweep(500)") == 2
    assert time.monotonic() - started < 4  # not the caller's own 5 s lock_timeout
    sweeper.close()
    migrating.rollback()  # metrics() reads pending_claims too
    assert _yields_after(conn, before) == before + 1  # the settle step; expire and cool ran
    assert scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE status = 'expired'") == 2
    assert levels(conn, SHOP, ITEM, LOC) == (2, 0, 0, 2)
    assert violations(conn) == []


def _one_overdue_hold_beside_a_live_one(conn: psycopg.Connection) -> None:
    """Three units: EARLY's one overdue and unswept, LATE's two live."""
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 3)", (SHOP, ITEM, LOC))
    assert scalar(
        conn,
        "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s, '100 milliseconds')",
        (SHOP, ITEM, LOC, EARLY),
    )
    assert scalar(conn, "SELECT stockpool.reserve_units(%s, %s, %s, 2, %s)", (SHOP, ITEM, LOC, LATE))
    time.sleep(0.2)


def test_a_cycle_count_whose_expiry_would_wait_expires_nothing(
    conn: psycopg.Connection, conns: Conns
) -> None:
    """set_stock expires overdue holds under the key's refill lock and ledger
    row; that step gives up after 50 ms instead of waiting with them held.
    Here what it would wait for is a table lock (SHARE on holds: reads go on,
    writes queue), the one wait a test can set up without gdb: EARLY's hold is
    left alone, so LATE's two live units and EARLY's one are more than 2:
    SP002 at once, not the caller's own lock_timeout (55P03 after 5 s). The
    same count without the lock expires EARLY's hold and goes through."""
    _one_overdue_hold_beside_a_live_one(conn)
    migrating = conns(autocommit=False, name="migration")
    migrating.execute("LOCK TABLE stockpool.holds IN SHARE MODE")
    counter = conns(autocommit=True, name="stocktaker", lock_timeout="5s")
    started = time.monotonic()
    with pytest.raises(psycopg.Error) as raised:
        counter.execute("SELECT stockpool.set_stock(%s, %s, %s, 2)", (SHOP, ITEM, LOC))
    assert raised.value.sqlstate == "SP002"
    assert time.monotonic() - started < 4
    migrating.rollback()
    assert scalar(counter, "SELECT stockpool.set_stock(%s, %s, %s, 2)", (SHOP, ITEM, LOC)) == 2
    assert scalar(conn, "SELECT status FROM stockpool.holds WHERE checkout_id = %s", (EARLY,)) == "expired"
    assert violations(conn) == []


def test_a_cycle_count_leaves_the_callers_lock_timeout_as_it_was(
    conn: psycopg.Connection, conns: Conns
) -> None:
    """The expiry's 50 ms is its own: after set_stock the caller's transaction
    has its lock_timeout back, whether the expiry ran or gave up."""
    _one_overdue_hold_beside_a_live_one(conn)
    counter = conns(autocommit=False, name="stocktaker")
    counter.execute("SET LOCAL lock_timeout = '5s'")
    assert scalar(counter, "SELECT stockpool.set_stock(%s, %s, %s, 2)", (SHOP, ITEM, LOC)) == 2
    assert scalar(counter, "SELECT count(*) FROM stockpool.holds WHERE status = 'expired'") == 1
    assert scalar(counter, "SHOW lock_timeout") == "5s"
    counter.rollback()
    migrating = conns(autocommit=False, name="migration")
    migrating.execute("LOCK TABLE stockpool.holds IN SHARE MODE")
    counter.execute("SET LOCAL lock_timeout = '5s'")
    counter.execute("SAVEPOINT count")
    with pytest.raises(psycopg.Error) as raised:
        counter.execute("SELECT stockpool.set_stock(%s, %s, %s, 2)", (SHOP, ITEM, LOC))
    assert raised.value.sqlstate == "SP002"
    counter.execute("ROLLBACK TO SAVEPOINT count")
    assert scalar(counter, "SHOW lock_timeout") == "5s"
    counter.rollback()
    migrating.rollback()


def test_a_cycle_count_in_the_race_gives_its_expiry_up(conn: psycopg.Connection, conns: Conns) -> None:
    """The race itself against set_stock: lowering the sold-out key to 1 makes
    it expire the overdue holds (LATE, then EARLY, in expiry order) while it
    holds the key's refill lock and ledger row; the buyer, which sees no free
    unit and so does not queue for the refill lock, locks EARLY's new version
    and waits for LATE. set_stock gives its expiry up: SP002, as if both
    holds were locked; the buyer then expires both and gets its unit."""
    _two_overdue_holds(conn)
    counted, bought = _race(conn, conns, f"SELECT stockpool.set_stock({SHOP}, {ITEM}, {LOC}, 1)")
    assert isinstance(counted, psycopg.Error) and counted.sqlstate == "SP002", counted
    assert bought is True
    assert levels(conn, SHOP, ITEM, LOC) == (2, 1, 1, 0)
    assert violations(conn) == []
