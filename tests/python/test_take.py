"""The generated claim (sql/functions/_take.sql) in both of its forms: one
leaf partition per claim, as deployed, and the claim on the partitioned
parent that the generator falls back to when it cannot route a shop to its
leaf. The fallback is generated here on purpose (stockpool.take_on_parent),
so that it is run by a test and cannot rot unseen."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from stockpool import sql_dir

TAKE_SQL = sql_dir() / "functions" / "_take.sql"


def _generate(conn: psycopg.Connection, on_parent: bool) -> None:
    with conn.transaction():
        conn.execute(
            "SELECT pg_catalog.set_config('stockpool.take_on_parent', %s, true)",
            ("on" if on_parent else "off",),
        )
        conn.execute(TAKE_SQL.read_bytes())


def _form(conn: psycopg.Connection) -> tuple[str, list[str] | None]:
    row = conn.execute(
        "SELECT p.prosrc, p.proconfig FROM pg_catalog.pg_proc AS p"
        " WHERE p.oid = 'stockpool._take(bigint, bigint, bigint, integer, integer)'::pg_catalog.regprocedure"
    ).fetchone()
    assert row is not None
    return row[0], row[1]


def _workload(conn: psycopg.Connection, shops: list[int]) -> dict[int, tuple[int, int, int]]:
    """Per shop: a pool of 40 units, 25 one-unit reservations (one unit a
    claim) and one of 3 units (several at once); then, in a transaction rolled
    back, take_units of 3 more units than are left. Returns per shop: what
    that take got beyond what was left, and pooled and held before it."""
    out: dict[int, tuple[int, int, int]] = {}
    for shop in shops:
        conn.execute("SELECT stockpool.set_stock(%s, 7, 1, 100)", (shop,))
        assert conn.execute("SELECT stockpool.replenish_pool(%s, 7, 1, 40)", (shop,)).fetchone() == (40,)
        for quantity in [1] * 25 + [3]:
            row = conn.execute(
                "SELECT stockpool.reserve_units(%s, 7, 1, %s, %s)", (shop, quantity, uuid.uuid4())
            ).fetchone()
            assert row == (True,)
        row = conn.execute(
            "SELECT pooled, held FROM stockpool.stock_levels"
            " WHERE shop_id = %s AND item_id = 7 AND location_id = 1",
            (shop,),
        ).fetchone()
        assert row is not None
        pooled, held = int(row[0]), int(row[1])
        took = 0
        with conn.transaction():
            (took,) = conn.execute(
                "SELECT stockpool.take_units(%s, 7, 1, %s)", (shop, pooled + 3)
            ).fetchone() or (0,)
            raise psycopg.Rollback()
        out[shop] = (int(took) - pooled, pooled, held)
    assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
    return out


@pytest.mark.parametrize("on_parent", [False, True], ids=["one leaf per claim", "claims on the parent"])
def test_both_forms_of_the_claim_take_the_same_units(dsn: str, on_parent: bool) -> None:
    shops = [1, 2, 3, -5, 2**40, 9_223_372_036_854_775_807]
    with psycopg.connect(dsn, autocommit=True) as conn:
        _generate(conn, on_parent)
        source, config = _form(conn)
        if on_parent:
            assert "claims on the parent" in source and "stockpool.pool_units AS u" in source
            assert "pool_units_p" not in source
            assert config == ["plan_cache_mode=force_generic_plan"]
        else:
            assert "one leaf per claim" in source and "pool_units_p0" in source
            assert config is None
        levels = _workload(conn, shops)
    # Every shop: 28 units held, the pool still holds some (40 - 28, plus
    # what low-water refills added), and a take gets exactly what is left.
    assert {shop: (extra, held) for shop, (extra, _, held) in levels.items()} == {
        shop: (0, 28) for shop in shops
    }
    assert all(pooled >= 40 - 28 for _, pooled, _ in levels.values())


def test_the_deployed_claim_names_the_leaves(conn: psycopg.Connection) -> None:
    """The default, as deploy leaves it: one leaf per claim, not the fallback."""
    source, config = _form(conn)
    assert "one leaf per claim" in source and config is None


def test_one_unit_goes_to_the_shops_own_leaf(conn: psycopg.Connection) -> None:
    """The deployed claim of one unit routes each shop to its leaf: with units
    in the pool, one call takes one, for a shop of every leaf. (A claim sent to
    a wrong leaf finds nothing there; reserve_units would still succeed by its
    careful path, so only a direct call shows it.)"""
    leaves: dict[str, int] = {}
    for shop in range(1, 14):
        row = conn.execute(
            "SELECT c.relname::text FROM pg_catalog.pg_inherits AS i"
            " JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid"
            " CROSS JOIN LATERAL pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),"
            "     'modulus (\\d+), remainder (\\d+)') AS b"
            " WHERE i.inhparent = 'stockpool.pool_units'::pg_catalog.regclass"
            "     AND pg_catalog.satisfies_hash_partition('stockpool.pool_units'::pg_catalog.regclass,"
            "         b[1]::integer, b[2]::integer, %s::bigint)",
            (shop,),
        ).fetchone()
        assert row is not None, f"shop {shop}: no leaf satisfies its hash partition bound"
        leaves.setdefault(row[0], shop)
    (count,) = conn.execute(
        "SELECT pg_catalog.count(*)::integer FROM pg_catalog.pg_inherits"
        " WHERE inhparent = 'stockpool.pool_units'::pg_catalog.regclass"
    ).fetchone() or (0,)
    assert len(leaves) == count, f"shops 1-13 cover leaves {sorted(leaves)} of {count}"
    for leaf, shop in leaves.items():
        conn.execute("SELECT stockpool.set_stock(%s, 8, 1, 100)", (shop,))
        conn.execute("SELECT stockpool.replenish_pool(%s, 8, 1, 40)", (shop,))
        (buckets,) = conn.execute(
            "SELECT buckets FROM stockpool.stock WHERE shop_id = %s AND item_id = 8 AND location_id = 1",
            (shop,),
        ).fetchone() or (0,)
        for _ in range(3):
            assert conn.execute("SELECT stockpool._take(%s, 8, 1, 1, %s)", (shop, buckets)).fetchone() == (
                1,
            ), f"shop {shop}: no unit taken from {leaf}"
        assert conn.execute(
            "SELECT pg_catalog.count(*)::integer FROM stockpool.pool_units"
            " WHERE shop_id = %s AND item_id = 8 AND location_id = 1",
            (shop,),
        ).fetchone() == (37,), f"shop {shop}"
