"""Claimers of one key take different units and never wait on each other (SKIP LOCKED).

Each test keeps two or more transactions open at once and looks at what each of
them took. A claimer that waited would hit its lock_timeout (LockNotAvailable)
and fail the test; a claimer that took a unit another one holds would show up
in the intersection of the taken sets.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from support import (
    Conns,
    background,
    checkout,
    levels,
    pool_unit_ids,
    result,
    scalar,
    violations,
    wait_until_blocked,
)

pytestmark = pytest.mark.timeout(120)

SHOP, ITEM, LOC = 1, 1, 1


def _stock(conn: psycopg.Connection, units: int, *, fill: bool = True) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (SHOP, ITEM, LOC, units))
    if fill:
        added = scalar(conn, "SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, ITEM, LOC))
        assert added == units


def test_two_claimers_take_disjoint_units_without_waiting(conn: psycopg.Connection, conns: Conns) -> None:
    _stock(conn, 20)
    before = pool_unit_ids(conn, SHOP, ITEM, LOC)
    assert len(before) == 20

    a = conns(autocommit=False, lock_timeout="2s", name="claimer-a")
    b = conns(autocommit=False, lock_timeout="2s", name="claimer-b")
    assert scalar(a, "SELECT stockpool.take_units(%s, %s, %s, 5)", (SHOP, ITEM, LOC)) == 5
    # B runs while A's transaction is open and its five units are locked.
    assert scalar(b, "SELECT stockpool.take_units(%s, %s, %s, 10)", (SHOP, ITEM, LOC)) == 10

    taken_a = before - pool_unit_ids(a, SHOP, ITEM, LOC)
    taken_b = before - pool_unit_ids(b, SHOP, ITEM, LOC)
    assert len(taken_a) == 5
    assert len(taken_b) == 10
    assert not taken_a & taken_b, "two claimers took the same units"

    # Only the 5 units neither holds are left to B; then nothing, still without waiting.
    assert scalar(b, "SELECT stockpool.take_units(%s, %s, %s, 10)", (SHOP, ITEM, LOC)) == 5
    assert scalar(b, "SELECT stockpool.take_units(%s, %s, %s, 1)", (SHOP, ITEM, LOC)) == 0
    taken_b = before - pool_unit_ids(b, SHOP, ITEM, LOC)
    assert len(taken_b) == 15
    assert not taken_a & taken_b

    a.rollback()
    b.rollback()
    assert pool_unit_ids(conn, SHOP, ITEM, LOC) == before
    assert violations(conn) == []


def test_reservations_in_flight_do_not_block_each_other(conn: psycopg.Connection, conns: Conns) -> None:
    _stock(conn, 20)
    a = conns(autocommit=False, lock_timeout="2s", name="reserver-a")
    b = conns(autocommit=False, lock_timeout="2s", name="reserver-b")

    assert scalar(a, "SELECT stockpool.reserve_units(%s, %s, %s, 4, %s)", (SHOP, ITEM, LOC, checkout()))
    assert scalar(b, "SELECT stockpool.reserve_units(%s, %s, %s, 6, %s)", (SHOP, ITEM, LOC, checkout()))
    assert scalar(b, "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s)", (SHOP, ITEM, LOC, checkout()))
    assert scalar(a, "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s)", (SHOP, ITEM, LOC, checkout()))
    # Neither sees the other's uncommitted holds, and each sees its own.
    assert levels(a, SHOP, ITEM, LOC)[1:3] == (15, 5)
    assert levels(b, SHOP, ITEM, LOC)[1:3] == (13, 7)

    a.commit()
    b.commit()
    assert levels(conn, SHOP, ITEM, LOC) == (20, 8, 12, 0)
    assert violations(conn) == []


def test_many_claimers_in_flight_at_once_take_disjoint_units(dsn: str, conn: psycopg.Connection) -> None:
    """Eight transactions each hold 3 units at the same moment: 24 distinct units."""
    claimers, each = 8, 3
    _stock(conn, 40)
    before = pool_unit_ids(conn, SHOP, ITEM, LOC)
    all_in_flight = threading.Barrier(claimers, timeout=30)

    def claim() -> set[int]:
        with psycopg.connect(
            dsn, options="-c lock_timeout=5s -c statement_timeout=30s", connect_timeout=10
        ) as c:
            got = scalar(c, "SELECT stockpool.take_units(%s, %s, %s, %s)", (SHOP, ITEM, LOC, each))
            assert got == each
            taken = before - pool_unit_ids(c, SHOP, ITEM, LOC)
            all_in_flight.wait()  # every claimer's units are locked now
            c.rollback()
            return taken

    with background() as submit:
        futures = [submit(claim) for _ in range(claimers)]
        taken = [result(f, timeout=60) for f in futures]

    seen: set[int] = set()
    for units in taken:
        assert len(units) == each
        assert not units & seen, "a unit was taken by two in-flight claimers"
        seen |= units
    assert len(seen) == claimers * each
    assert pool_unit_ids(conn, SHOP, ITEM, LOC) == before


def test_concurrent_single_unit_reservations_are_all_served(dsn: str, conn: psycopg.Connection) -> None:
    """Many threads reserving one unit each from a large pool: all served, each unit held once."""
    threads, per_thread = 8, 15
    _stock(conn, 200)
    start = threading.Barrier(threads, timeout=30)

    def reserve() -> list[bool]:
        with psycopg.connect(dsn, autocommit=True, options="-c statement_timeout=30s") as c:
            start.wait()
            return [
                bool(
                    scalar(
                        c,
                        "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s)",
                        (SHOP, ITEM, LOC, checkout()),
                    )
                )
                for _ in range(per_thread)
            ]

    with background() as submit:
        answers = [a for f in [submit(reserve) for _ in range(threads)] for a in result(f, timeout=90)]

    assert answers == [True] * (threads * per_thread)
    on_hand, pooled, held, free = levels(conn, SHOP, ITEM, LOC)
    assert held == threads * per_thread
    assert scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE status = 'held'") == held
    assert pooled + held + free == on_hand == 200
    assert violations(conn) == []


def test_two_sweepers_take_disjoint_batches_without_waiting(conn: psycopg.Connection, conns: Conns) -> None:
    _stock(conn, 10)
    for _ in range(10):
        conn.execute(
            "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s, '50 milliseconds')",
            (SHOP, ITEM, LOC, checkout()),
        )
    time.sleep(0.2)
    a = conns(autocommit=False, lock_timeout="2s", name="sweeper-a")
    b = conns(autocommit=False, lock_timeout="2s", name="sweeper-b")
    assert scalar(a, "SELECT stockpool.sweep(4)") == 4
    assert scalar(b, "SELECT stockpool.sweep(100)") == 6  # skips A's batch instead of waiting
    assert scalar(b, "SELECT stockpool.sweep(100)") == 0
    a.commit()
    b.commit()
    assert scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE status = 'expired'") == 10
    assert levels(conn, SHOP, ITEM, LOC) == (10, 10, 0, 0)
    assert violations(conn) == []


def test_one_refiller_per_key_at_a_time(conn: psycopg.Connection, conns: Conns) -> None:
    """A second replenish_pool waits for the first, then finds the pool full: no double refill."""
    _stock(conn, 50, fill=False)
    conn.execute("SELECT stockpool.configure_pool(%s, %s, %s, 20)", (SHOP, ITEM, LOC))
    a = conns(autocommit=False, name="refiller-a")
    b = conns(autocommit=True, name="refiller-b")
    assert scalar(a, "SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, ITEM, LOC)) == 20
    with background() as submit:
        second = submit(scalar, b, "SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, ITEM, LOC))
        assert wait_until_blocked(conn, b.info.backend_pid, second) == [a.info.backend_pid]
        a.commit()
        assert result(second, timeout=20) == 0
    assert levels(conn, SHOP, ITEM, LOC) == (50, 20, 0, 30)
    assert violations(conn) == []


@pytest.mark.parametrize("a_ends", ["commit", "rollback"])
def test_lowering_stock_beside_an_in_flight_reservation(
    conn: psycopg.Connection, conns: Conns, a_ends: str
) -> None:
    """set_stock takes back pool units it can lock and leaves the one in flight alone:
    pool + held stays within the new on hand whichever way the reservation ends."""
    _stock(conn, 5)
    a = conns(autocommit=False, name="reserver-a")
    assert scalar(a, "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s)", (SHOP, ITEM, LOC, checkout()))
    b = conns(autocommit=True, lock_timeout="5s", name="stocktaker-b")
    assert scalar(b, "SELECT stockpool.set_stock(%s, %s, %s, 3)", (SHOP, ITEM, LOC)) == 3
    with pytest.raises(psycopg.Error) as raised:  # below the unit in flight: refused, not oversold
        b.execute("SELECT stockpool.set_stock(%s, %s, %s, 0)", (SHOP, ITEM, LOC))
    assert raised.value.sqlstate == "SP002"
    a.commit() if a_ends == "commit" else a.rollback()
    on_hand, pooled, held, free = levels(conn, SHOP, ITEM, LOC)
    assert on_hand == 3
    assert (pooled, held) == ((2, 1) if a_ends == "commit" else (3, 0))
    assert pooled + held + free == on_hand and free == 0
    assert violations(conn) == []
