"""Retries are safe: reserve, cart, claim and release give the first outcome again.

A client that lost the reply to a committed call retries it, possibly while a
second copy of the call is still running. Sequential retries and retries fired
from several connections at once must hold, claim and release exactly once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from support import background, checkout, levels, result, scalar, violations, wait_until_blocked

pytestmark = pytest.mark.timeout(120)

SHOP, ITEM, LOC = 1, 1, 1
RESERVE = "SELECT stockpool.reserve_units(%s, %s, %s, %s, %s)"
CART = "SELECT stockpool.reserve_cart(%s, %s, %s, %s, %s)"


def _stock(conn: psycopg.Connection, units: int, item: int = ITEM) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (SHOP, item, LOC, units))
    conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, item, LOC))


def _holds(conn: psycopg.Connection, cart: Any) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT item_id, quantity, status FROM stockpool.holds WHERE checkout_id = %s ORDER BY item_id",
        (cart,),
    ).fetchall()


def _claim_movements(conn: psycopg.Connection, cart: Any) -> list[tuple[Any, ...]]:
    """The cart's claim movements once its claims are folded: a pooled key's
    claim is pending until a sweep (or one claim in 16) folds it."""
    conn.execute("SELECT stockpool.sweep()")
    assert conn.execute(
        "SELECT count(*) FROM stockpool.pending_claims WHERE checkout_id = %s", (cart,)
    ).fetchone() == (0,)
    return conn.execute(
        "SELECT item_id, delta FROM stockpool.movements WHERE checkout_id = %s ORDER BY item_id", (cart,)
    ).fetchall()


def _at_once(dsn: str, copies: int, call: Callable[[psycopg.Connection], Any]) -> list[Any]:
    """Run ``call`` on ``copies`` connections released together; return every outcome."""
    start = threading.Barrier(copies, timeout=30)

    def one() -> Any:
        with psycopg.connect(dsn, autocommit=True, options="-c statement_timeout=30s") as c:
            start.wait()
            try:
                return call(c)
            except psycopg.Error as exc:
                return exc.sqlstate

    with background() as submit:
        futures = [submit(one) for _ in range(copies)]
        return [result(f, timeout=60) for f in futures]


def test_reserve_retried_holds_once(conn: psycopg.Connection) -> None:
    _stock(conn, 10)
    cart = checkout()
    assert scalar(conn, RESERVE, (SHOP, ITEM, LOC, 3, cart)) is True
    after_first = levels(conn, SHOP, ITEM, LOC)
    assert scalar(conn, RESERVE, (SHOP, ITEM, LOC, 3, cart)) is True
    assert levels(conn, SHOP, ITEM, LOC) == after_first == (10, 7, 3, 0)
    assert _holds(conn, cart) == [(ITEM, 3, "held")]
    # A retry with a different quantity is not a retry: refused, nothing changes.
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(RESERVE, (SHOP, ITEM, LOC, 4, cart))
    assert raised.value.sqlstate == "SP007"
    assert levels(conn, SHOP, ITEM, LOC) == after_first


def test_reserve_retried_concurrently_holds_once(dsn: str, conn: psycopg.Connection) -> None:
    _stock(conn, 10)
    cart = checkout()
    outcomes = _at_once(dsn, 6, lambda c: scalar(c, RESERVE, (SHOP, ITEM, LOC, 2, cart)))
    assert outcomes == [True] * 6
    assert _holds(conn, cart) == [(ITEM, 2, "held")]
    assert levels(conn, SHOP, ITEM, LOC) == (10, 8, 2, 0)
    assert violations(conn) == []


def test_reserve_retry_renews_an_expired_unswept_hold_without_taking_again(conn: psycopg.Connection) -> None:
    _stock(conn, 5)
    cart = checkout()
    conn.execute(
        "SELECT stockpool.reserve_units(%s, %s, %s, 2, %s, '100 milliseconds')", (SHOP, ITEM, LOC, cart)
    )
    time.sleep(0.3)
    assert scalar(conn, RESERVE, (SHOP, ITEM, LOC, 2, cart)) is True
    assert levels(conn, SHOP, ITEM, LOC) == (5, 3, 2, 0)
    assert scalar(conn, "SELECT expires_at > now() + interval '10 minutes' FROM stockpool.holds") is True
    assert scalar(conn, "SELECT stockpool.claim(%s, %s)", (SHOP, cart)) == 2


def test_reserve_retry_meeting_a_sweep_reserves_again(conn: psycopg.Connection, conns: Any) -> None:
    """The retry finds the hold held but overdue, and a sweeper expires it
    right then: the retry waits for the sweeper, sees the hold expired (its
    units back in the pool) and takes a new one, instead of stretching an
    expired row and answering "held" for units it no longer has.
    The sweeper's session locks the row first, so that the retry's look finds
    it still held and the retry's renewal is what waits."""
    _stock(conn, 5)
    cart = checkout()
    conn.execute(
        "SELECT stockpool.reserve_units(%s, %s, %s, 2, %s, '100 milliseconds')", (SHOP, ITEM, LOC, cart)
    )
    time.sleep(0.3)
    sweeper = conns(autocommit=False, name="sweeper")
    sweeper.execute("SELECT 1 FROM stockpool.holds WHERE checkout_id = %s FOR UPDATE", (cart,))
    buyer = conns(autocommit=True, name="retrying-buyer")
    with background() as submit:
        answer = submit(scalar, buyer, RESERVE, (SHOP, ITEM, LOC, 2, cart))
        assert wait_until_blocked(conn, buyer.info.backend_pid, answer) == [sweeper.info.backend_pid]
        assert scalar(sweeper, "SELECT stockpool.sweep(10)") == 1  # its own lock: not skipped
        sweeper.commit()
        assert result(answer, timeout=20) is True
    assert _holds(conn, cart) == [(ITEM, 2, "held")]
    assert levels(conn, SHOP, ITEM, LOC) == (5, 3, 2, 0)
    assert scalar(conn, "SELECT stockpool.claim(%s, %s)", (SHOP, cart)) == 2
    assert violations(conn) == []


def test_claim_retried_returns_the_same_number_and_deducts_once(conn: psycopg.Connection) -> None:
    _stock(conn, 10)
    _stock(conn, 10, item=2)
    cart = checkout()
    assert scalar(conn, CART, (SHOP, cart, [2, ITEM], [LOC, LOC], [3, 1])) is True
    assert scalar(conn, "SELECT stockpool.claim(%s, %s)", (SHOP, cart)) == 4
    for _ in range(3):
        assert scalar(conn, "SELECT stockpool.claim(%s, %s)", (SHOP, cart)) == 4
    assert levels(conn, SHOP, ITEM, LOC)[0] == 9
    assert levels(conn, SHOP, 2, LOC)[0] == 7
    assert _claim_movements(conn, cart) == [(ITEM, -1), (2, -3)]
    # Claimed stock is not given back by a stray release.
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT stockpool.release(%s, %s)", (SHOP, cart))
    assert raised.value.sqlstate == "SP006"
    assert violations(conn) == []


def test_claim_retried_concurrently_deducts_once(dsn: str, conn: psycopg.Connection) -> None:
    _stock(conn, 10)
    cart = checkout()
    assert scalar(conn, RESERVE, (SHOP, ITEM, LOC, 3, cart)) is True
    outcomes = _at_once(dsn, 6, lambda c: scalar(c, "SELECT stockpool.claim(%s, %s)", (SHOP, cart)))
    assert outcomes == [3] * 6
    assert levels(conn, SHOP, ITEM, LOC) == (7, 7, 0, 0)
    assert _claim_movements(conn, cart) == [(ITEM, -3)]
    assert _holds(conn, cart) == [(ITEM, 3, "claimed")]
    assert violations(conn) == []


def test_release_retried_returns_the_same_number_and_gives_back_once(conn: psycopg.Connection) -> None:
    _stock(conn, 10)
    cart = checkout()
    assert scalar(conn, RESERVE, (SHOP, ITEM, LOC, 4, cart)) is True
    assert scalar(conn, "SELECT stockpool.release(%s, %s)", (SHOP, cart)) == 4
    for _ in range(3):
        assert scalar(conn, "SELECT stockpool.release(%s, %s)", (SHOP, cart)) == 4
    assert levels(conn, SHOP, ITEM, LOC) == (10, 10, 0, 0)
    # A released checkout cannot be claimed by a late "payment succeeded".
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT stockpool.claim(%s, %s)", (SHOP, cart))
    assert raised.value.sqlstate == "SP005"
    assert violations(conn) == []


def test_release_retried_concurrently_gives_back_once(dsn: str, conn: psycopg.Connection) -> None:
    _stock(conn, 10)
    cart = checkout()
    assert scalar(conn, RESERVE, (SHOP, ITEM, LOC, 4, cart)) is True
    outcomes = _at_once(dsn, 6, lambda c: scalar(c, "SELECT stockpool.release(%s, %s)", (SHOP, cart)))
    assert outcomes == [4] * 6
    assert levels(conn, SHOP, ITEM, LOC) == (10, 10, 0, 0)
    assert violations(conn) == []


def test_claim_and_release_racing_one_wins_and_the_other_says_so(dsn: str, conn: psycopg.Connection) -> None:
    _stock(conn, 10)
    cart = checkout()
    assert scalar(conn, RESERVE, (SHOP, ITEM, LOC, 2, cart)) is True

    def claim_or_release(c: psycopg.Connection) -> Any:
        which = "claim" if c.info.backend_pid % 2 else "release"
        return which, scalar(c, f"SELECT stockpool.{which}(%s, %s)", (SHOP, cart))

    outcomes = _at_once(dsn, 6, claim_or_release)
    on_hand = levels(conn, SHOP, ITEM, LOC)[0]
    status = _holds(conn, cart)[0][2]
    if status == "claimed":
        assert on_hand == 8
        assert all(o == ("claim", 2) or o == "SP006" for o in outcomes), outcomes
    else:
        assert status == "released" and on_hand == 10
        assert all(o == ("release", 2) or o == "SP005" for o in outcomes), outcomes
    assert violations(conn) == []


def test_cart_retried_holds_once_whatever_the_line_order(conn: psycopg.Connection) -> None:
    for item in (1, 2, 3):
        _stock(conn, 10, item=item)
    cart = checkout()
    assert scalar(conn, CART, (SHOP, cart, [1, 2, 3], [LOC] * 3, [1, 2, 3])) is True
    before = [levels(conn, SHOP, item, LOC) for item in (1, 2, 3)]
    # The same cart: retried as is, in another order, and with a key split over two lines.
    assert scalar(conn, CART, (SHOP, cart, [1, 2, 3], [LOC] * 3, [1, 2, 3])) is True
    assert scalar(conn, CART, (SHOP, cart, [3, 1, 2], [LOC] * 3, [3, 1, 2])) is True
    assert scalar(conn, CART, (SHOP, cart, [2, 3, 1, 2], [LOC] * 4, [1, 3, 1, 1])) is True
    assert [levels(conn, SHOP, item, LOC) for item in (1, 2, 3)] == before
    assert _holds(conn, cart) == [(1, 1, "held"), (2, 2, "held"), (3, 3, "held")]
    # A different quantity under the same checkout is not a retry: refused, nothing changes.
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(CART, (SHOP, cart, [1, 2, 3], [LOC] * 3, [1, 2, 4]))
    assert raised.value.sqlstate == "SP007"
    assert [levels(conn, SHOP, item, LOC) for item in (1, 2, 3)] == before
    assert violations(conn) == []


def test_cart_retried_concurrently_holds_once(dsn: str, conn: psycopg.Connection) -> None:
    for item in (1, 2):
        _stock(conn, 10, item=item)
    cart = checkout()
    orders = iter([[1, 2], [2, 1]] * 3)
    lock = threading.Lock()

    def reserve(c: psycopg.Connection) -> Any:
        with lock:
            lines = next(orders)
        return scalar(c, CART, (SHOP, cart, lines, [LOC, LOC], [2 if i == 1 else 3 for i in lines]))

    assert _at_once(dsn, 6, reserve) == [True] * 6
    assert _holds(conn, cart) == [(1, 2, "held"), (2, 3, "held")]
    assert levels(conn, SHOP, 1, LOC) == (10, 8, 2, 0)
    assert levels(conn, SHOP, 2, LOC) == (10, 7, 3, 0)
    assert violations(conn) == []
