"""Claims never wait for a key's ledger row (escrow, migration 0005).

A claim that finds the ledger row held by another transaction records a
pending claim and commits; the next transaction to find the row free folds
it. Each test holds the row open in one session and claims in another with a
short lock_timeout: a claim that waited would fail with 55P03. The negative
control is the claim as it was before 0005, which does wait.
"""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from stockpool.race import verify
from support import Conns, background, checkout, result, scalar, violations, wait_until_blocked

pytestmark = pytest.mark.timeout(120)

SHOP, ITEM, LOC = 7, 70, 1
KEYS = verify.KeyRange((SHOP,), ITEM, ITEM + 2, LOC)

OLD_CLAIM = """
CREATE FUNCTION public.old_claim(p_shop_id bigint, p_checkout_id uuid)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_hold record;
    v_total integer := 0;
BEGIN
    PERFORM stockpool._lock_checkout(p_shop_id, p_checkout_id);
    FOR v_hold IN
        SELECT h.item_id, h.location_id, h.quantity FROM stockpool.holds AS h
        WHERE h.shop_id = p_shop_id AND h.checkout_id = p_checkout_id AND h.status = 'held'
        ORDER BY h.item_id, h.location_id
        FOR UPDATE
    LOOP
        UPDATE stockpool.stock AS s
        SET on_hand = s.on_hand - v_hold.quantity, allocated = s.allocated - v_hold.quantity
        WHERE (s.shop_id, s.item_id, s.location_id) = (p_shop_id, v_hold.item_id, v_hold.location_id);
        v_total := v_total + v_hold.quantity;
    END LOOP;
    UPDATE stockpool.holds AS h SET status = 'claimed'
    WHERE h.shop_id = p_shop_id AND h.checkout_id = p_checkout_id AND h.status = 'held';
    RETURN v_total;
END;
$$;
"""


def _reserve(conn: psycopg.Connection, quantity: int, item: int = ITEM) -> uuid.UUID:
    cid = checkout()
    assert scalar(
        conn, "SELECT stockpool.reserve_units(%s, %s, %s, %s, %s)", (SHOP, item, LOC, quantity, cid)
    )
    return cid


def _busy(conns: Conns, item: int = ITEM) -> psycopg.Connection:
    """A session holding the key's ledger row in an open transaction."""
    holder = conns(autocommit=False, name="ledger-holder")
    holder.execute(
        "SELECT 1 FROM stockpool.stock WHERE (shop_id, item_id, location_id) = (%s, %s, %s)"
        " FOR NO KEY UPDATE",
        (SHOP, item, LOC),
    )
    return holder


def _levels(conn: psycopg.Connection, item: int = ITEM) -> tuple[int, int, int]:
    row = conn.execute(
        "SELECT l.on_hand, l.unsettled, s.on_hand FROM stockpool.stock_levels AS l"
        " JOIN stockpool.stock AS s USING (shop_id, item_id, location_id)"
        " WHERE (l.shop_id, l.item_id, l.location_id) = (%s, %s, %s)",
        (SHOP, item, LOC),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def _history_replays(conn: psycopg.Connection) -> bool:
    """The race's own check: each movement's on_hand_after is the running sum in
    movement_id order, and each ledger row is the sum of its movements."""
    check = verify.ledger_history(conn, KEYS)
    assert check.passed, check.detail
    return check.passed


def test_a_claim_does_not_wait_for_a_busy_ledger_row(conn: psycopg.Connection, conns: Conns) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, ITEM, LOC))
    a, b = _reserve(conn, 1), _reserve(conn, 2)
    holder = _busy(conns)
    claimer = conns(autocommit=True, lock_timeout="200ms", name="claimer")
    assert scalar(claimer, "SELECT stockpool.claim(%s, %s)", (SHOP, a)) == 1
    assert scalar(claimer, "SELECT stockpool.claim(%s, %s)", (SHOP, b)) == 2
    # Both committed as pending claims: on hand as read is exact, the row untouched.
    assert _levels(conn) == (7, 3, 10)
    assert violations(conn) == []
    assert _history_replays(conn)
    holder.rollback()
    # The next claim that finds the row free folds them with its own, in claim order.
    c = _reserve(conn, 3)
    assert scalar(claimer, "SELECT stockpool.claim(%s, %s)", (SHOP, c)) == 3
    assert _levels(conn) == (4, 0, 4)
    moves = conn.execute(
        "SELECT checkout_id, delta, on_hand_after FROM stockpool.movements"
        " WHERE shop_id = %s AND reason = 'claim' ORDER BY movement_id",
        (SHOP,),
    ).fetchall()
    assert moves == [(a, -1, 9), (b, -2, 7), (c, -3, 4)]
    assert _history_replays(conn)
    assert violations(conn) == []


def test_control_the_old_claim_waits_for_the_ledger_row(conn: psycopg.Connection, conns: Conns) -> None:
    """Negative control: the claim before 0005 updates the row in its own
    transaction, so it times out behind the session holding it."""
    conn.execute(OLD_CLAIM)
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, ITEM, LOC))
    a = _reserve(conn, 1)
    holder = _busy(conns)
    claimer = conns(autocommit=True, lock_timeout="200ms", name="old-claimer")
    with pytest.raises(psycopg.errors.LockNotAvailable):
        claimer.execute("SELECT public.old_claim(%s, %s)", (SHOP, a))
    holder.rollback()
    assert scalar(claimer, "SELECT public.old_claim(%s, %s)", (SHOP, a)) == 1


def test_a_cart_claim_waits_on_none_of_its_ledger_rows(conn: psycopg.Connection, conns: Conns) -> None:
    items = [ITEM, ITEM + 1, ITEM + 2]
    for item in items:
        conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, item, LOC))
    cid = checkout()
    assert scalar(
        conn,
        "SELECT stockpool.reserve_cart(%s, %s, %s::bigint[], %s::bigint[], %s::integer[])",
        (SHOP, cid, items[::-1], [LOC] * 3, [1, 2, 3][::-1]),
    )
    holders = [_busy(conns, items[0]), _busy(conns, items[2])]
    claimer = conns(autocommit=True, lock_timeout="200ms", name="cart-claimer")
    assert scalar(claimer, "SELECT stockpool.claim(%s, %s)", (SHOP, cid)) == 6
    pending = conn.execute(
        "SELECT item_id, quantity FROM stockpool.pending_claims WHERE shop_id = %s ORDER BY 1", (SHOP,)
    ).fetchall()
    assert pending == [(items[0], 1), (items[2], 3)], "the free row's line was folded at once"
    assert [_levels(conn, i)[:2] for i in items] == [(9, 1), (8, 0), (7, 3)]
    for h in holders:
        h.rollback()
    assert scalar(conn, "SELECT stockpool.sweep()") == 0
    assert [_levels(conn, i) for i in items] == [(9, 0, 9), (8, 0, 8), (7, 0, 7)]
    assert violations(conn) == [] and _history_replays(conn)


def test_sweep_skips_a_busy_row_and_folds_it_later(conn: psycopg.Connection, conns: Conns) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, ITEM, LOC))
    cid = _reserve(conn, 4)
    holder = _busy(conns)
    claimer = conns(autocommit=True, lock_timeout="200ms", name="claimer")
    assert scalar(claimer, "SELECT stockpool.claim(%s, %s)", (SHOP, cid)) == 4
    sweeper = conns(autocommit=True, lock_timeout="200ms", name="sweeper")
    assert scalar(sweeper, "SELECT stockpool.sweep()") == 0  # did not wait for the row
    assert _levels(conn) == (6, 4, 10)
    holder.rollback()
    assert scalar(sweeper, "SELECT stockpool.sweep()") == 0
    assert _levels(conn) == (6, 0, 6)
    assert _history_replays(conn)


def test_set_stock_waits_for_the_row_and_settles_first(conn: psycopg.Connection, conns: Conns) -> None:
    """A cycle count needs the true figure: it waits for the ledger row (a
    claimer that holds it commits first) and folds every pending claim before
    it records its own movement."""
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 20)", (SHOP, ITEM, LOC))
    a, b = _reserve(conn, 2), _reserve(conn, 3)
    first = conns(autocommit=False, name="first-claimer")
    assert scalar(first, "SELECT stockpool.claim(%s, %s)", (SHOP, a)) == 2  # holds the row, open
    assert scalar(conn, "SELECT stockpool.claim(%s, %s)", (SHOP, b)) == 3  # pending
    counter = conns(autocommit=True, name="cycle-count")
    with background() as run:
        counted = run(scalar, counter, "SELECT stockpool.set_stock(%s, %s, %s, 12)", (SHOP, ITEM, LOC))
        wait_until_blocked(conn, counter.info.backend_pid)
        first.commit()
        assert result(counted) == 12
    moves = conn.execute(
        "SELECT reason, delta, on_hand_after FROM stockpool.movements"
        " WHERE shop_id = %s ORDER BY movement_id",
        (SHOP,),
    ).fetchall()
    assert moves == [("set", 20, 20), ("claim", -2, 18), ("claim", -3, 15), ("set", -3, 12)]
    assert _levels(conn) == (12, 0, 12)
    assert violations(conn) == [] and _history_replays(conn)


def test_many_claimers_of_one_key_at_once(conn: psycopg.Connection, dsn: str) -> None:
    """Eight sessions claim one key as fast as they can, each with a 200 ms
    lock_timeout: none times out, every claim is recorded once (movement or
    pending claim), on hand as read is exact, and a sweep settles the rest."""
    units, per_thread, threads = 400, 40, 8
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (SHOP, ITEM, LOC, units))
    ids = [[_reserve(conn, 1) for _ in range(per_thread)] for _ in range(threads)]
    errors: list[str] = []

    def claim_all(mine: list[uuid.UUID]) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("SET lock_timeout = '200ms'")
            for cid in mine:
                try:
                    assert scalar(c, "SELECT stockpool.claim(%s, %s)", (SHOP, cid)) == 1
                except (psycopg.Error, AssertionError) as exc:
                    errors.append(repr(exc))

    workers = [threading.Thread(target=claim_all, args=(mine,)) for mine in ids]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []
    claimed = per_thread * threads
    assert _levels(conn)[0] == units - claimed
    assert violations(conn) == [] and _history_replays(conn)
    scalar(conn, "SELECT stockpool.sweep()")
    assert _levels(conn) == (units - claimed, 0, units - claimed)
    recorded = scalar(
        conn, "SELECT count(*) FROM stockpool.movements WHERE shop_id = %s AND reason = 'claim'", (SHOP,)
    )
    assert recorded == claimed
