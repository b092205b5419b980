"""Named units under several connections at once: every label goes to at most
one checkout, every buyer is told the labels it holds, a sellout is exact, and
buyers of overlapping seats in opposite orders never deadlock.

Each thread has its own connection and reserves until it is told NULL / false;
the database is then checked against what the threads were told.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable

import psycopg
import pytest

from support import deadlocks, violations

pytestmark = pytest.mark.timeout(180)

SHOP, LOC = 1, 1


def _seats(conn: psycopg.Connection, item: int, count: int) -> list[str]:
    labels = [f"S{n}" for n in range(1, count + 1)]
    conn.execute("SELECT stockpool.set_named_units(%s, %s, %s, %s)", (SHOP, item, LOC, labels))
    return labels


def _run(threads: int, work: object) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(threads, timeout=30)

    def one(n: int) -> None:
        try:
            start.wait()
            work(n)  # type: ignore[operator]
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    pool = [threading.Thread(target=one, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(120)
    return errors


def test_sixteen_buyers_sell_out_two_hundred_seats_exactly(conn: psycopg.Connection, dsn: str) -> None:
    item = 5000
    seats = _seats(conn, item, 200)
    told: dict[uuid.UUID, list[str]] = {}
    claimed: set[uuid.UUID] = set()
    lock = threading.Lock()

    def buyer(n: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            while True:
                checkout = uuid.uuid4()
                labels = c.execute(
                    "SELECT stockpool.reserve_named(%s, %s, %s, 1, %s)", (SHOP, item, LOC, checkout)
                ).fetchone()
                assert labels is not None
                if labels[0] is None:
                    return
                with lock:
                    told[checkout] = labels[0]
                if n % 4 == 0:  # some buyers pay at once
                    c.execute("SELECT stockpool.claim(%s, %s)", (SHOP, checkout))
                    with lock:
                        claimed.add(checkout)

    assert _run(16, buyer) == []
    given = Counter(label for labels in told.values() for label in labels)
    assert sorted(given) == sorted(seats), "every seat sold, none made up"
    assert max(given.values()) == 1, "no seat went to two checkouts"
    rows = conn.execute(
        "SELECT label, checkout_id, status FROM stockpool.unit_status WHERE item_id = %s", (item,)
    ).fetchall()
    assert {label: checkout for label, checkout, _ in rows} == {
        labels[0]: checkout for checkout, labels in told.items()
    }, "each buyer holds the seat it was told"
    assert {status for _, _, status in rows} <= {"held", "sold"}
    sold = sum(1 for _, _, status in rows if status == "sold")
    assert sold == len(claimed) > 0
    assert conn.execute(
        "SELECT on_hand, pooled, held, free FROM stockpool.stock_levels WHERE item_id = %s", (item,)
    ).fetchone() == (200 - sold, 0, 200 - sold, 0), "sold out exactly: nothing free, on hand what is held"
    assert violations(conn) == []


def test_overlapping_picks_in_any_order_never_deadlock(conn: psycopg.Connection, dsn: str) -> None:
    item = 5001
    seats = _seats(conn, item, 12)
    before = deadlocks(conn)
    winners: dict[str, list[uuid.UUID]] = {label: [] for label in seats}
    lock = threading.Lock()

    def picker(n: int) -> None:
        rng = random.Random(n)
        with psycopg.connect(dsn, autocommit=True) as c:
            for _ in range(40):
                pick = rng.sample(seats, 3)
                checkout = uuid.uuid4()
                got = c.execute(
                    "SELECT stockpool.reserve_labels(%s, %s, %s, %s, %s)", (SHOP, item, LOC, pick, checkout)
                ).fetchone()
                assert got is not None
                if got[0]:
                    with lock:
                        for label in pick:
                            winners[label].append(checkout)
                if got[0]:
                    c.execute("SELECT stockpool.release(%s, %s)", (SHOP, checkout))

    assert _run(8, picker) == []
    assert deadlocks(conn) == before, "no deadlock"
    assert sum(len(w) for w in winners.values()) > 0
    assert violations(conn) == []
    assert conn.execute(
        "SELECT count(*) FROM stockpool.unit_status WHERE item_id = %s AND status = 'free'", (item,)
    ).fetchone() == (12,)


def test_adjacent_take_passes_locked_blocks_without_waiting(
    conn: psycopg.Connection, connect: Callable[..., psycopg.Connection]
) -> None:
    """Four seats together while in-flight buyers lock the 96 lowest seats (24
    blocks of 4, more than one batch of block starts): the buyer finds a free
    block further on by SKIP LOCKED alone, under a lock_timeout that a wait
    would hit. It used to look at the 16 lowest blocks only and then wait for
    them. Control: the waiting take does hit the timeout here."""
    item = 5002
    _seats(conn, item, 200)
    holders = []
    for block in range(24):
        holder = connect()
        holder.execute("BEGIN")
        picked = [f"S{4 * block + n}" for n in range(1, 5)]
        got = holder.execute(
            "SELECT stockpool.reserve_labels(%s, %s, %s, %s, %s)", (SHOP, item, LOC, picked, uuid.uuid4())
        ).fetchone()
        assert got == (True,)
        holders.append(holder)

    buyer = connect()
    buyer.execute("SET lock_timeout = '500ms'")
    for _ in range(3):
        row = buyer.execute(
            "SELECT stockpool.reserve_named(%s, %s, %s, 4, %s, p_adjacent => true)",
            (SHOP, item, LOC, uuid.uuid4()),
        ).fetchone()
        assert row is not None and row[0] is not None, "a free block was there"
        numbers = [int(label[1:]) for label in row[0]]
        assert numbers == list(range(numbers[0], numbers[0] + 4)), "four seats together"
        assert numbers[0] > 96, "none of the seats in-flight buyers hold"

    buckets = conn.execute(
        "SELECT buckets FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (%s, %s, %s)",
        (SHOP, item, LOC),
    ).fetchone()
    assert buckets is not None
    with pytest.raises(psycopg.errors.LockNotAvailable):
        buyer.execute(
            "SELECT stockpool._take_named(%s, %s, %s, 4, %s, true, true)", (SHOP, item, LOC, buckets[0])
        )
    for holder in holders:
        holder.execute("ROLLBACK")
