"""The sell-out race through pgbench, and proof that its checks can fail.

64 clients x 20 one-unit reservations race for 50 units of one key:
exactly 50 units end up held, pooled + held = on hand, no deadlock. The
negative controls replace reserve_units (as superuser, in this test's own
database) with broken versions and require the same race to FAIL.
"""

from __future__ import annotations

import psycopg
import pytest

from stockpool import race
from support import deadlocks, violations

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SIGNATURE = (
    "stockpool.reserve_units(p_shop_id bigint, p_item_id bigint, p_location_id bigint,"
    " p_quantity integer, p_checkout_id uuid, p_ttl interval DEFAULT '15 minutes')"
)

# Oversells: checks on_hand (a stale, unlocked read) but never takes a unit.
NAIVE_OVERSELL = f"""
CREATE OR REPLACE FUNCTION {SIGNATURE}
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
BEGIN
    IF (SELECT s.on_hand FROM stockpool.stock AS s
        WHERE s.shop_id = p_shop_id AND s.item_id = p_item_id AND s.location_id = p_location_id)
        < p_quantity THEN
        RETURN false;
    END IF;
    INSERT INTO stockpool.holds (shop_id, checkout_id, item_id, location_id, quantity, expires_at)
    VALUES (p_shop_id, p_checkout_id, p_item_id, p_location_id, p_quantity, now() + p_ttl)
    ON CONFLICT DO NOTHING;
    RETURN true;
END;
$function$
"""

# Undersells: an empty SKIP LOCKED result is taken for "sold out" (design
# lesson 5), and the pool is never refilled.
NAIVE_UNDERSELL = f"""
CREATE OR REPLACE FUNCTION {SIGNATURE}
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
BEGIN
    IF stockpool.take_units(p_shop_id, p_item_id, p_location_id, p_quantity) < p_quantity THEN
        RETURN false;
    END IF;
    PERFORM stockpool._record_hold(p_shop_id, p_checkout_id, p_item_id, p_location_id, p_quantity, p_ttl);
    RETURN true;
END;
$function$
"""


def _key_levels(conn: psycopg.Connection) -> tuple[int, int, int]:
    rows = conn.execute("SELECT on_hand, pooled, held FROM stockpool.stock_levels").fetchall()
    assert len(rows) == 1, f"expected the one raced key, got {rows}"
    on_hand, pooled, held = rows[0]
    return int(on_hand), int(pooled), int(held)


def _failed(result: race.SelloutResult) -> set[str]:
    return {c.name for c in result.checks if not c.passed}


def test_sellout_64_clients_x_20_for_50_units(dsn: str, conn: psycopg.Connection) -> None:
    before = deadlocks(conn)
    result = race.sellout(dsn, 64, 20, 50)
    assert result.passed, [f"{c.name}: {c.detail}" for c in result.checks if not c.passed]
    assert (result.clients, result.per_client, result.units) == (64, 20, 50)
    assert result.attempts == 64 * 20
    assert result.failed == 0
    assert result.held == 50
    # Read back independently of the race's own checks.
    on_hand, pooled, held = _key_levels(conn)
    assert (on_hand, held) == (50, 50)
    assert pooled + held == on_hand
    assert deadlocks(conn) == before
    assert violations(conn) == []


def test_control_sellout_fails_when_reserve_units_oversells(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(NAIVE_OVERSELL)
    result = race.sellout(dsn, 64, 20, 50)
    assert result.passed is False
    assert "no oversell" in _failed(result), _failed(result)
    assert result.held > 50
    assert any(row[3] == "oversell" for row in violations(conn))


def test_control_sellout_fails_when_reserve_units_undersells(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(NAIVE_UNDERSELL)
    result = race.sellout(dsn, 64, 20, 50)
    assert result.passed is False
    assert "no undersell" in _failed(result), _failed(result)
    assert result.held < 50
