"""check_invariants(): silent on a healthy, busy database; names every broken shape.

Each negative control breaks the data on purpose, as a superuser going around
the API (direct writes, the movements trigger disabled, a constraint dropped),
and requires the checker to report exactly the invariants that broke, on the
key that broke them, and nothing about the healthy keys beside it.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from support import checkout, scalar, violations

pytestmark = pytest.mark.timeout(120)

SHOP, LOC = 1, 1
A, B, C = 1, 2, 3  # busy key, cart key, quiet key (on hand, nothing pooled or held)
HELD = "00000000-0000-0000-0000-00000000a001"


def _busy(conn: psycopg.Connection) -> None:
    """A healthy database that has seen every kind of change."""
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 20)", (SHOP, A, LOC))
    conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, A, LOC))  # A pooled, B not
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 8)", (SHOP, B, LOC))
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, C, LOC))
    reserve = "SELECT stockpool.reserve_units(%s, %s, %s, %s, %s)"
    assert scalar(conn, reserve, (SHOP, A, LOC, 3, HELD))
    claimed, released, expiring = checkout(), checkout(), checkout()
    assert scalar(conn, reserve, (SHOP, A, LOC, 2, claimed))
    assert scalar(conn, "SELECT stockpool.claim(%s, %s)", (SHOP, claimed)) == 2
    assert scalar(conn, reserve, (SHOP, A, LOC, 1, released))
    assert scalar(conn, "SELECT stockpool.release(%s, %s)", (SHOP, released)) == 1
    assert scalar(
        conn, "SELECT stockpool.reserve_units(%s, %s, %s, 1, %s, '50 milliseconds')", (SHOP, A, LOC, expiring)
    )
    cart = checkout()
    assert scalar(
        conn,
        "SELECT stockpool.reserve_cart(%s, %s, %s, %s, %s)",
        (SHOP, cart, [B, A, B], [LOC] * 3, [2, 1, 1]),
    )
    assert scalar(conn, "SELECT stockpool.claim(%s, %s)", (SHOP, cart)) == 4
    conn.execute("SELECT stockpool.adjust_stock(%s, %s, %s, 5)", (SHOP, A, LOC))
    conn.execute("SELECT stockpool.adjust_stock(%s, %s, %s, -1)", (SHOP, B, LOC))
    time.sleep(0.1)
    assert scalar(conn, "SELECT stockpool.sweep()") == 1


def _found(conn: psycopg.Connection) -> set[tuple[str, int]]:
    return {(row[3], int(row[1])) for row in violations(conn)}


def test_healthy_busy_database_has_no_violations(conn: psycopg.Connection) -> None:
    _busy(conn)
    assert violations(conn) == []
    # The busy state really is busy: pooled, held, claimed, released, expired, moved.
    statuses = {s for (s,) in conn.execute("SELECT DISTINCT status FROM stockpool.holds")}
    assert statuses == {"held", "claimed", "released", "expired"}
    assert scalar(conn, "SELECT count(*) FROM stockpool.pool_units") > 0
    assert scalar(conn, "SELECT count(DISTINCT reason) FROM stockpool.movements") == 3


def test_units_taken_through_the_low_level_api_but_never_held_are_reported(conn: psycopg.Connection) -> None:
    """take_units() without a hold, committed: the units left the pool but are still
    allocated. Not sabotage, a caller's mistake the header of take_units warns of."""
    _busy(conn)
    assert scalar(conn, "SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, C, LOC)) == 10
    assert scalar(conn, "SELECT stockpool.take_units(%s, %s, %s, 2)", (SHOP, C, LOC)) == 2
    assert _found(conn) == {("allocation", C)}


BROKEN: dict[str, tuple[list[str], set[tuple[str, int]]]] = {
    "pool rows beyond on hand": (
        [
            f"INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket)"
            f" SELECT {SHOP}, {A}, {LOC}, 0 FROM generate_series(1, 40)"
        ],
        {("oversell", A), ("allocation", A)},
    ),
    "one pool row the ledger did not allocate": (
        [
            f"INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket)"
            f" VALUES ({SHOP}, {C}, {LOC}, 0)"
        ],
        {("allocation", C)},
    ),
    "on hand raised without a movement": (
        [f"UPDATE stockpool.stock SET on_hand = on_hand + 3 WHERE item_id = {A}"],
        {("ledger_drift", A)},
    ),
    "on hand lowered without a movement": (
        [f"UPDATE stockpool.stock SET on_hand = on_hand - 1 WHERE item_id = {C}"],
        {("ledger_drift", C)},
    ),
    "a movement deleted (trigger disabled)": (
        [
            "ALTER TABLE stockpool.movements DISABLE TRIGGER movements_immutable",
            f"DELETE FROM stockpool.movements WHERE movement_id ="
            f" (SELECT max(movement_id) FROM stockpool.movements WHERE item_id = {B})",
            "ALTER TABLE stockpool.movements ENABLE TRIGGER movements_immutable",
        ],
        {("ledger_drift", B)},
    ),
    "a movement rewritten (trigger disabled)": (
        [
            "ALTER TABLE stockpool.movements DISABLE TRIGGER movements_immutable",
            f"UPDATE stockpool.movements SET delta = delta + 1 WHERE movement_id ="
            f" (SELECT min(movement_id) FROM stockpool.movements WHERE item_id = {A})",
            "ALTER TABLE stockpool.movements ENABLE TRIGGER movements_immutable",
        ],
        {("ledger_drift", A)},
    ),
    "allocated counter off by one": (
        [f"UPDATE stockpool.stock SET allocated = allocated - 1 WHERE item_id = {A}"],
        {("allocation", A)},
    ),
    "a live hold deleted": (
        [f"DELETE FROM stockpool.holds WHERE checkout_id = '{HELD}'"],
        {("allocation", A)},
    ),
    "a phantom hold": (
        [
            f"INSERT INTO stockpool.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)"
            f" VALUES ({SHOP}, gen_random_uuid(), {B}, {LOC}, 100, now() + interval '1 hour')"
        ],
        {("oversell", B), ("allocation", B)},
    ),
    "negative on hand (constraint dropped)": (
        [
            "ALTER TABLE stockpool.stock DROP CONSTRAINT stock_allocated_within_on_hand",
            f"UPDATE stockpool.stock SET on_hand = -1 WHERE item_id = {C}",
        ],
        {("negative", C), ("ledger_drift", C), ("oversell", C)},  # 0 pooled + 0 held > -1
    ),
    "negative allocated (constraint dropped)": (
        [
            "ALTER TABLE stockpool.stock DROP CONSTRAINT stock_allocated_within_on_hand",
            f"UPDATE stockpool.stock SET allocated = -1 WHERE item_id = {C}",
        ],
        {("negative", C), ("allocation", C)},
    ),
    "a zero-quantity hold (its trigger disabled)": (
        [
            "ALTER TABLE stockpool.holds DISABLE TRIGGER holds_valid",
            f"UPDATE stockpool.holds SET quantity = 0 WHERE checkout_id = '{HELD}'",
        ],
        {("negative", A), ("allocation", A)},
    ),
    "pool units of an unknown key": (
        [
            f"INSERT INTO stockpool.pool_units (shop_id, item_id, location_id, bucket)"
            f" VALUES ({SHOP}, 99, {LOC}, 0)"
        ],
        {("orphan", 99)},
    ),
    "a hold of an unknown key": (
        [
            f"INSERT INTO stockpool.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)"
            f" VALUES ({SHOP}, gen_random_uuid(), 98, {LOC}, 1, now() + interval '1 hour')"
        ],
        {("orphan", 98)},
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_checker_reports_a_broken_shape(conn: psycopg.Connection, case: str) -> None:
    statements, expected = BROKEN[case]
    _busy(conn)
    assert violations(conn) == [], "not healthy before the breakage"
    for statement in statements:
        conn.execute(statement)
    found = _found(conn)
    assert found == expected, f"{case}: expected {sorted(expected)}, got {violations(conn)}"


def test_history_cannot_be_edited_without_disabling_the_trigger(conn: psycopg.Connection) -> None:
    """Why the ledger_drift controls above disable the trigger: through it, even a
    superuser's edit of the history is refused (SP009), so drift needs sabotage."""
    _busy(conn)
    for statement in (
        "UPDATE stockpool.movements SET delta = delta + 1",
        "DELETE FROM stockpool.movements",
        "TRUNCATE stockpool.movements CASCADE",
    ):
        with pytest.raises(psycopg.Error) as raised:
            conn.execute(statement)
        assert raised.value.sqlstate == "SP009", statement
    assert violations(conn) == []
