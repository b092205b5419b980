"""No undersell, no oversell at the last unit.

A reservation may answer false only when on hand minus live (unexpired) holds
is less than the request. Units locked by an in-flight transaction are not sold
out: the reservation must wait for that transaction's outcome. Session A takes
the last unit(s) in an open transaction; B's reservation runs in a thread; the
test checks that B really waits (pg_blocking_pids names A) before A ends, then:
A rolls back -> B gets the unit; A commits -> B answers false.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from support import (
    Conns,
    background,
    checkout,
    levels,
    result,
    scalar,
    violations,
    wait_until_blocked,
)

pytestmark = pytest.mark.timeout(120)

SHOP, LOC = 1, 1
RESERVE = "SELECT stockpool.reserve_units(%s, %s, %s, %s, %s)"


def _stock(conn: psycopg.Connection, item: int, units: int, *, fill: bool) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (SHOP, item, LOC, units))
    if fill:
        conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, item, LOC))


def _race_last_units(
    conn: psycopg.Connection,
    conns: Conns,
    *,
    on_hand: int,
    a_takes: int,
    b_asks: int,
    fill: bool,
    a_ends: str,
) -> tuple[bool, Any]:
    """A holds ``a_takes`` units in flight; B asks for ``b_asks`` and must wait for A's end."""
    item = 7
    _stock(conn, item, on_hand, fill=fill)
    a = conns(autocommit=False, name="holder-a")
    b = conns(autocommit=True, name="waiter-b")
    a_checkout, b_checkout = checkout(), checkout()

    assert scalar(a, RESERVE, (SHOP, item, LOC, a_takes, a_checkout)) is True
    with background() as submit:
        answer = submit(scalar, b, RESERVE, (SHOP, item, LOC, b_asks, b_checkout))
        waits_for = wait_until_blocked(conn, b.info.backend_pid, answer)
        assert waits_for == [a.info.backend_pid]
        time.sleep(0.2)
        assert not answer.done(), "B answered while A's outcome was still open"
        a.rollback() if a_ends == "rollback" else a.commit()
        got = result(answer, timeout=20)
    return got, (item, a_checkout, b_checkout)


@pytest.mark.parametrize("fill", [True, False], ids=["unit-in-pool", "empty-pool"])
def test_waiter_gets_the_last_unit_when_holder_rolls_back(
    conn: psycopg.Connection, conns: Conns, fill: bool
) -> None:
    got, (item, _, b_checkout) = _race_last_units(
        conn, conns, on_hand=1, a_takes=1, b_asks=1, fill=fill, a_ends="rollback"
    )
    assert got is True, "undersell: B was refused a unit that A's rollback gave back"
    assert levels(conn, SHOP, item, LOC) == (1, 0, 1, 0)
    held_by = conn.execute(
        "SELECT checkout_id FROM stockpool.holds WHERE status = 'held' AND item_id = %s", (item,)
    ).fetchall()
    assert held_by == [(b_checkout,)]
    assert violations(conn) == []


@pytest.mark.parametrize("fill", [True, False], ids=["unit-in-pool", "empty-pool"])
def test_waiter_gets_false_when_holder_commits(conn: psycopg.Connection, conns: Conns, fill: bool) -> None:
    got, (item, a_checkout, _) = _race_last_units(
        conn, conns, on_hand=1, a_takes=1, b_asks=1, fill=fill, a_ends="commit"
    )
    assert got is False, "oversell: B got a unit that A holds"
    assert levels(conn, SHOP, item, LOC) == (1, 0, 1, 0)
    held_by = conn.execute(
        "SELECT checkout_id FROM stockpool.holds WHERE status = 'held' AND item_id = %s", (item,)
    ).fetchall()
    assert held_by == [(a_checkout,)]
    assert violations(conn) == []


def test_multi_unit_waiter_gets_units_when_holder_rolls_back(conn: psycopg.Connection, conns: Conns) -> None:
    """3 on hand, A holds 2 in flight, B asks 2: only 1 is free now, but 3 after A's rollback."""
    got, (item, _, _) = _race_last_units(
        conn, conns, on_hand=3, a_takes=2, b_asks=2, fill=True, a_ends="rollback"
    )
    assert got is True
    assert levels(conn, SHOP, item, LOC) == (3, 1, 2, 0)
    assert violations(conn) == []


def test_multi_unit_waiter_holds_nothing_when_holder_commits(conn: psycopg.Connection, conns: Conns) -> None:
    """All or nothing: B may see the one free unit, but must give it back when it answers false."""
    got, (item, _, b_checkout) = _race_last_units(
        conn, conns, on_hand=3, a_takes=2, b_asks=2, fill=True, a_ends="commit"
    )
    assert got is False
    assert levels(conn, SHOP, item, LOC) == (3, 1, 2, 0)
    assert scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE checkout_id = %s", (b_checkout,)) == 0
    assert violations(conn) == []


@pytest.mark.parametrize("a_ends", ["rollback", "commit"])
def test_cart_waits_for_in_flight_line(conn: psycopg.Connection, conns: Conns, a_ends: str) -> None:
    """A cart whose one line's last unit is in flight waits for it, then holds all or nothing."""
    for item in (1, 2):
        _stock(conn, item, 1, fill=True)
    a = conns(autocommit=False, name="holder-a")
    b = conns(autocommit=True, name="cart-b")
    assert scalar(a, RESERVE, (SHOP, 2, LOC, 1, checkout())) is True
    b_checkout = checkout()
    with background() as submit:
        answer = submit(
            scalar,
            b,
            "SELECT stockpool.reserve_cart(%s, %s, %s, %s, %s)",
            (SHOP, b_checkout, [2, 1], [LOC, LOC], [1, 1]),
        )
        assert wait_until_blocked(conn, b.info.backend_pid, answer) == [a.info.backend_pid]
        a.rollback() if a_ends == "rollback" else a.commit()
        got = result(answer, timeout=20)
    held = scalar(conn, "SELECT count(*) FROM stockpool.holds WHERE checkout_id = %s", (b_checkout,))
    if a_ends == "rollback":
        assert (got, held) == (True, 2)
        assert levels(conn, SHOP, 1, LOC)[1:3] == (0, 1)
    else:
        assert (got, held) == (False, 0)
        # Item 1's unit, which B had in hand on the way, is back in the pool.
        assert levels(conn, SHOP, 1, LOC)[1:3] == (1, 0)
    assert violations(conn) == []


@pytest.mark.parametrize("a_ends", ["rollback", "commit"])
def test_in_flight_refill_is_waited_for(conn: psycopg.Connection, conns: Conns, a_ends: str) -> None:
    """A refill in flight owns the key's free units (invisible to B): B waits for it, then is served."""
    item = 9
    _stock(conn, item, 1, fill=False)
    a = conns(autocommit=False, name="refiller-a")
    b = conns(autocommit=False, name="reserver-b")
    assert scalar(a, "SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, item, LOC)) == 1
    with background() as submit:
        answer = submit(scalar, b, RESERVE, (SHOP, item, LOC, 1, checkout()))
        assert wait_until_blocked(conn, b.info.backend_pid, answer) == [a.info.backend_pid]
        a.rollback() if a_ends == "rollback" else a.commit()
        assert result(answer, timeout=20) is True
    # The wait let go of its shared lock at once, not at B's commit: B's
    # transaction is still open and holds no shared advisory lock.
    shared = conn.execute(
        "SELECT count(*) FROM pg_catalog.pg_locks"
        " WHERE pid = %s AND locktype = 'advisory' AND mode = 'ShareLock'",
        (b.info.backend_pid,),
    ).fetchone()
    assert shared == (0,)
    b.commit()
    assert levels(conn, SHOP, item, LOC) == (1, 0, 1, 0)
    assert violations(conn) == []


def test_expired_unswept_hold_does_not_block_a_new_reserve(conn: psycopg.Connection) -> None:
    item = 3
    _stock(conn, item, 2, fill=True)
    old = checkout()
    assert scalar(conn, RESERVE, (SHOP, item, LOC, 2, old)) is True
    assert scalar(conn, RESERVE, (SHOP, item, LOC, 1, checkout())) is False  # still live: sold out
    # Overdue now (as if its ttl had passed); nobody sweeps.
    conn.execute(
        "UPDATE stockpool.holds SET expires_at = now() - interval '1 second' WHERE checkout_id = %s", (old,)
    )

    new = checkout()
    assert scalar(conn, RESERVE, (SHOP, item, LOC, 2, new)) is True
    assert levels(conn, SHOP, item, LOC) == (2, 0, 2, 0)
    statuses: dict[Any, str] = dict(
        conn.execute("SELECT checkout_id, status FROM stockpool.holds WHERE item_id = %s", (item,)).fetchall()
    )
    assert statuses[old] == "expired"
    assert statuses[new] == "held"
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT stockpool.claim(%s, %s)", (SHOP, old))
    assert raised.value.sqlstate == "SP004"
    assert violations(conn) == []


def test_expired_unswept_hold_does_not_block_a_cart(conn: psycopg.Connection) -> None:
    for item in (1, 2):
        _stock(conn, item, 1, fill=True)
    conn.execute(
        "SELECT stockpool.reserve_cart(%s, %s, %s, %s, %s, '200 milliseconds')",
        (SHOP, checkout(), [1, 2], [LOC, LOC], [1, 1]),
    )
    time.sleep(0.4)
    assert scalar(
        conn,
        "SELECT stockpool.reserve_cart(%s, %s, %s, %s, %s)",
        (SHOP, checkout(), [2, 1], [LOC, LOC], [1, 1]),
    )
    assert violations(conn) == []


@pytest.mark.parametrize("a_ends", ["commit", "rollback"])
def test_expired_hold_being_swept_does_not_cause_a_refusal(
    conn: psycopg.Connection, conns: Conns, a_ends: str
) -> None:
    """A sweep in flight has locked an expired hold and is putting its unit back.

    The hold is expired, so on hand minus live holds is 1: B must not be told
    "sold out". B waits for the sweeper and then gets the unit, whether the
    sweep commits (unit back in the pool) or rolls back (hold still expired,
    unswept, so B expires it itself).
    """
    item = 4
    _stock(conn, item, 1, fill=True)
    assert scalar(
        conn,
        "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s, '100 milliseconds')",
        (SHOP, item, LOC, checkout()),
    )
    time.sleep(0.3)
    sweeper = conns(autocommit=False, name="sweeper-a")
    b = conns(autocommit=True, name="reserver-b")
    assert scalar(sweeper, "SELECT stockpool.sweep()") == 1
    with background() as submit:
        answer = submit(scalar, b, RESERVE, (SHOP, item, LOC, 1, checkout()))
        # B must not answer before the sweep's outcome is known.
        assert wait_until_blocked(conn, b.info.backend_pid, answer) == [sweeper.info.backend_pid]
        sweeper.commit() if a_ends == "commit" else sweeper.rollback()
        assert result(answer, timeout=20) is True, "undersell: refused while the only hold had expired"
    assert levels(conn, SHOP, item, LOC) == (1, 0, 1, 0)
    assert violations(conn) == []
