"""Carts never deadlock, whatever the order of their lines.

reserve_cart sorts its lines into one lock order, so carts with opposite line
orders, refills of tiny pools, the near-sellout waiting path, claims, releases
and restocks can all run at once without PostgreSQL ever finding a deadlock.
The control test shows that the same measurement does see a deadlock when one
is built on purpose (single-key calls in opposite orders in one transaction),
so a zero here means something.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import psycopg
import pytest

from stockpool.server.stats import ServerLog
from support import (
    Conns,
    backend_pids,
    background,
    checkout,
    deadlocks,
    levels,
    result,
    scalar,
    violations,
    wait_until_blocked,
    wait_until_idle,
)

SHOP, LOC = 1, 1
CART = "SELECT stockpool.reserve_cart(%s, %s, %s, %s, %s)"
RESERVE = "SELECT stockpool.reserve_units(%s, %s, %s, %s, %s)"


@pytest.mark.timeout(300)
def test_opposite_order_carts_never_deadlock(dsn: str, conn: psycopg.Connection) -> None:
    items = [1, 2, 3, 4]
    on_hand = 6
    for item in items:
        conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (SHOP, item, LOC, on_hand))
        # Tiny pools in one bucket: refills on nearly every cart, everyone meets.
        conn.execute("SELECT stockpool.configure_pool(%s, %s, %s, 2, 0, 1)", (SHOP, item, LOC))
    deadlocks_before = deadlocks(conn)
    baseline = backend_pids(conn)

    workers, iterations = 6, 60
    start = threading.Barrier(workers, timeout=30)
    errors: list[psycopg.Error] = []

    def shopper(worker: int) -> Counter[str]:
        rng = random.Random(worker)
        seen: Counter[str] = Counter()
        with psycopg.connect(dsn, options="-c statement_timeout=30s", connect_timeout=10) as c:
            start.wait()
            for _ in range(iterations):
                lines = items if worker % 2 == 0 else items[::-1]
                if rng.random() < 0.3:  # a repeated key, summed by reserve_cart
                    lines = [*lines, lines[0]]
                quantities = [rng.randint(1, 2) for _ in lines]
                cart = checkout()
                try:
                    with c.transaction():
                        ok = scalar(c, CART, (SHOP, cart, lines, [LOC] * len(lines), quantities))
                        time.sleep(rng.random() * 0.003)  # hold the locks a little
                except psycopg.errors.DeadlockDetected as exc:
                    seen["deadlock"] += 1
                    errors.append(exc)
                    continue
                seen["held" if ok else "refused"] += 1
                if not ok:
                    continue
                try:
                    with c.transaction():
                        if rng.random() < 0.5:
                            scalar(c, "SELECT stockpool.release(%s, %s)", (SHOP, cart))
                            seen["released"] += 1
                            continue
                        claimed = scalar(c, "SELECT stockpool.claim(%s, %s)", (SHOP, cart))
                        assert claimed == sum(quantities)
                    # Restock what was sold, one key per transaction (several keys in
                    # one transaction in opposite orders would be the caller's own cycle).
                    per_item = Counter[int]()
                    for item, quantity in zip(lines, quantities, strict=True):
                        per_item[item] += quantity
                    for item in sorted(per_item, reverse=worker % 2 == 1):
                        with c.transaction():
                            c.execute(
                                "SELECT stockpool.adjust_stock(%s, %s, %s, %s)",
                                (SHOP, item, LOC, per_item[item]),
                            )
                    seen["claimed"] += 1
                except psycopg.errors.DeadlockDetected as exc:
                    seen["deadlock"] += 1
                    errors.append(exc)
        return seen

    with background() as submit:
        futures = [submit(shopper, w) for w in range(workers)]
        totals: Counter[str] = Counter()
        for f in futures:
            totals += result(f, timeout=240)

    wait_until_idle(conn, baseline)  # the workers' backends have exited and flushed their statistics
    assert totals["deadlock"] == 0, f"40P01 raised: {totals}: " + "; ".join(
        f"{e.diag.message_detail} [{e.diag.context}]" for e in errors
    )
    assert deadlocks(conn) == deadlocks_before, f"pg_stat_database counted deadlocks: {totals}"
    assert totals["held"] + totals["refused"] == workers * iterations
    # Both outcomes happened: the pools ran dry, so the waiting path ran too.
    assert totals["held"] > 0, totals
    assert totals["refused"] > 0, totals
    assert totals["claimed"] > 0 and totals["released"] > 0, totals
    for item in items:
        assert levels(conn, SHOP, item, LOC)[0::2] == (on_hand, 0), f"item {item}"
    assert violations(conn) == []


@pytest.mark.timeout(60)
def test_control_single_calls_in_opposite_order_do_deadlock(
    conn: psycopg.Connection, conns: Conns, server_log: ServerLog
) -> None:
    """Negative control: what a cart prevents. Two transactions each reserve the last
    unit of one key, then the other's key: PostgreSQL must find the cycle, raise
    40P01 in one of them, count it in pg_stat_database, and the server log's
    account of it (what the race harness shows) must name both processes."""
    for item in (1, 2):
        conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 1)", (SHOP, item, LOC))
        conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, item, LOC))
    before = deadlocks(conn)
    mark = server_log.mark()
    baseline = backend_pids(conn)
    a = conns(autocommit=False, name="control-a")
    b = conns(autocommit=False, name="control-b")
    assert scalar(a, RESERVE, (SHOP, 1, LOC, 1, checkout())) is True
    assert scalar(b, RESERVE, (SHOP, 2, LOC, 1, checkout())) is True
    a_pid, b_pid = a.info.backend_pid, b.info.backend_pid

    def second(c: psycopg.Connection, item: int) -> str:
        try:
            scalar(c, RESERVE, (SHOP, item, LOC, 1, checkout()))
        except psycopg.errors.DeadlockDetected:
            c.rollback()
            return "40P01"
        c.commit()
        return "done"

    with background() as submit:
        first = submit(second, a, 2)
        wait_until_blocked(conn, a.info.backend_pid, first)
        other = submit(second, b, 1)
        outcomes = sorted([result(first, timeout=30), result(other, timeout=30)])
    assert outcomes == ["40P01", "done"]
    conns.close_all()
    wait_until_idle(conn, baseline)
    assert deadlocks(conn) == before + 1
    reports = server_log.deadlocks_since(mark)
    assert len(reports) == 1, reports
    assert reports[0].startswith("ERROR: deadlock detected | DETAIL: Process ")
    for pid in (a_pid, b_pid):
        assert f"Process {pid}: " in reports[0], (pid, reports[0])
    assert "stockpool.reserve_units" in reports[0]


@pytest.mark.timeout(60)
def test_claim_of_a_just_expired_hold_and_a_near_sellout_cart(conn: psycopg.Connection, conns: Conns) -> None:
    """A claim that started before a hold expired, and a cart that started after.

    Checkout Y holds item 1 (long TTL) and item 2 (short TTL). C opens its
    transaction while Y's item 2 hold is live; R's cart (items 1 and 2) starts
    after it expired and goes down the waiting path: it refills item 1 (its
    ledger row stays locked) and waits on item 2's last pool unit, locked by P.
    C then claims Y: for C the hold is live, so it locks Y's holds and wants
    item 1's ledger row. When P commits its hold on that unit, R looks at item
    2's expired hold. If R
    waited for C's lock on that hold while C waits for R's ledger row, that
    would be a deadlock: it must not happen, and stock must stay consistent.
    """
    y = checkout()
    for item in (1, 2):  # both pooled keys (the pool path is the one under test)
        conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 2)", (SHOP, item, LOC))
        conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, item, LOC))
    assert scalar(conn, "SELECT stockpool.reserve_units(%s, 1, %s, 1, %s, '1 hour')", (SHOP, LOC, y))
    assert scalar(conn, "SELECT stockpool.reserve_units(%s, 2, %s, 1, %s, '1 second')", (SHOP, LOC, y))
    # Item 1: one unit free, none pooled (refill needed). Item 2: one unit in the pool.
    conn.execute("DELETE FROM stockpool.pool_units WHERE item_id = 1")
    conn.execute("UPDATE stockpool.stock SET allocated = 1 WHERE item_id = 1")
    assert levels(conn, SHOP, 1, LOC) == (2, 0, 1, 1)
    assert levels(conn, SHOP, 2, LOC) == (2, 1, 1, 0)
    before = deadlocks(conn)

    c = conns(autocommit=False, name="claimer-c")
    p = conns(autocommit=False, name="holder-p")
    r = conns(autocommit=True, name="cart-r")
    c.execute("SELECT 1")  # C's transaction (and its now()) starts while Y's item 2 hold is live
    time.sleep(1.3)  # Y's item 2 hold has expired; nobody swept it
    assert scalar(p, RESERVE, (SHOP, 2, LOC, 1, checkout())) is True

    def claim() -> object:
        try:
            return scalar(c, "SELECT stockpool.claim(%s, %s)", (SHOP, y))
        except psycopg.Error as exc:
            c.rollback()
            return exc.sqlstate

    with background() as submit:
        cart = submit(scalar, r, CART, (SHOP, checkout(), [2, 1], [LOC, LOC], [1, 1]))
        assert wait_until_blocked(conn, r.info.backend_pid, cart) == [p.info.backend_pid]
        claimed = submit(claim)
        wait_until_blocked(conn, c.info.backend_pid, claimed)
        p.commit()
        got = result(cart, timeout=30)
        claim_outcome = result(claimed, timeout=30)
        if isinstance(claim_outcome, int):
            c.commit()

    assert claim_outcome != "40P01"
    assert deadlocks(conn) == before
    # Either order is a consistent outcome: R expired Y's item 2 hold first (R
    # holds both items, C's claim finds an expired hold: SP004), or C claimed it
    # first (C claims both of Y's units, R finds item 2 sold: false).
    assert (got, claim_outcome) in [(True, "SP004"), (False, 2)]
    if got:
        assert levels(conn, SHOP, 1, LOC) == (2, 0, 2, 0)
        assert levels(conn, SHOP, 2, LOC) == (2, 0, 2, 0)
    else:
        assert levels(conn, SHOP, 1, LOC) == (1, 0, 0, 1)
        assert levels(conn, SHOP, 2, LOC) == (1, 0, 1, 0)
    assert violations(conn) == []
