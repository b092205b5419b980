"""stockpool.maintain from several sessions at once: maintainers take
disjoint work and never wait, on each other or on a buyer holding a ledger
row (every lock they take is SKIP LOCKED or tried)."""

from __future__ import annotations

import uuid

import psycopg

from support import scalar

NO_WAITING = "SET statement_timeout = '3s'"  # a wait would end in 57014, not pass


def _overdue(conn: psycopg.Connection, item: int, holds: int) -> None:
    conn.execute("SELECT stockpool.set_stock(1, %s, 1, 1000)", (item,))
    for _ in range(holds):
        conn.execute("SELECT stockpool.reserve_units(1, %s, 1, 1, %s)", (item, uuid.uuid4()))
    conn.execute(
        "UPDATE stockpool.holds SET expires_at = now() - interval '1 minute' WHERE item_id = %s", (item,)
    )


def test_two_maintainers_take_disjoint_batches_without_waiting(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as setup:
        _overdue(setup, 2001, 30)
    with psycopg.connect(dsn) as first, psycopg.connect(dsn, autocommit=True) as second:
        second.execute(NO_WAITING)
        # The first maintainer expires one batch of 10 and keeps its transaction open.
        row = first.execute("SELECT * FROM stockpool.maintain('1 microsecond', 10)").fetchone()
        assert row is not None and row[0] == 10
        # The second skips the 10 locked hold rows and expires the other 20 at once.
        row = second.execute("SELECT * FROM stockpool.maintain('10 seconds', 10)").fetchone()
        assert row is not None and row[0] == 20
        first.commit()
    with psycopg.connect(dsn, autocommit=True) as check:
        assert (
            scalar(check, "SELECT count(*) FROM stockpool.holds WHERE item_id = 2001 AND status = 'expired'")
            == 30
        )
        assert scalar(check, "SELECT held FROM stockpool.stock_levels WHERE item_id = 2001") == 0
        assert check.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []


def test_a_busy_ledger_row_is_skipped_not_waited_for(dsn: str) -> None:
    """A buyer's transaction holds key 2011's ledger row: the maintainer folds
    the other key's pending claim, skips 2011's, and returns at once."""
    with psycopg.connect(dsn, autocommit=True) as setup:
        for item in (2011, 2012):
            setup.execute("SELECT stockpool.set_stock(1, %s, 1, 10)", (item,))
            checkout = uuid.uuid4()
            setup.execute("SELECT stockpool.reserve_units(1, %s, 1, 2, %s)", (item, checkout))
            setup.execute(
                "WITH c AS (UPDATE stockpool.holds SET status = 'claimed', updated_at = clock_timestamp()"
                " WHERE checkout_id = %s RETURNING item_id, quantity)"
                " INSERT INTO stockpool.pending_claims (shop_id, item_id, location_id, checkout_id, quantity)"
                " SELECT 1, item_id, 1, %s, quantity FROM c",
                (checkout, checkout),
            )
    with psycopg.connect(dsn) as buyer, psycopg.connect(dsn, autocommit=True) as maintainer:
        buyer.execute("SELECT FROM stockpool.stock WHERE item_id = 2011 FOR NO KEY UPDATE")
        maintainer.execute(NO_WAITING)
        row = maintainer.execute("SELECT * FROM stockpool.maintain()").fetchone()
        assert row is not None and row[1] == 2, "only key 2012's claim is folded"
        buyer.rollback()
        row = maintainer.execute("SELECT * FROM stockpool.maintain()").fetchone()
        assert row is not None and row[1] == 2, "the next cycle folds key 2011's"
        assert maintainer.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
