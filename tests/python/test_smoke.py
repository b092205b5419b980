"""Smoke: the fixtures give a deployed database of one's own."""

from __future__ import annotations

import uuid

import psycopg


def test_reserve_and_levels(conn: psycopg.Connection) -> None:
    assert conn.execute("SELECT stockpool.set_stock(1, 1, 1, 5)").fetchone() == (5,)
    held = conn.execute("SELECT stockpool.reserve_units(1, 1, 1, 2, %s)", (uuid.uuid4(),)).fetchone()
    assert held == (True,)
    row = conn.execute("SELECT on_hand, pooled, held, free FROM stockpool.stock_levels").fetchone()
    assert row == (5, 0, 2, 3)  # a quiet key: the 2 units came from its ledger row, no pool


def test_databases_are_separate(conn: psycopg.Connection) -> None:
    assert conn.execute("SELECT count(*) FROM stockpool.stock").fetchone() == (0,)
