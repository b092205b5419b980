"""The retrying client: which errors it retries, and that a retried reserve
whose commit reply was lost holds once, not twice."""

from __future__ import annotations

import random
import uuid

import psycopg
import pytest

from faultproxy import fault_proxy
from stockpool.client import Client, RetryPolicy, is_retryable

SHOP, ITEM, LOC = 1, 10, 1


def _proxied(dsn: str, port: int) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info.update(port=port, host="127.0.0.1", sslmode="disable")
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


def _holds(conn: psycopg.Connection) -> tuple[int, int]:
    row = conn.execute(
        "SELECT count(*), coalesce(sum(quantity), 0) FROM stockpool.holds WHERE status = 'held'"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _client(dsn: str) -> Client:
    return Client(dsn, retry=RetryPolicy(attempts=4, base=0.001, cap=0.01), rng=random.Random(1))


def test_lost_commit_reply_then_retry_holds_once(conn: psycopg.Connection, dsn: str) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, ITEM, LOC))
    port = str(psycopg.conninfo.conninfo_to_dict(dsn)["port"])
    checkout = uuid.uuid4()
    with fault_proxy(int(port)) as proxy, _client(_proxied(dsn, proxy.port)) as client:
        client.set_stock(SHOP, ITEM, LOC, 10)  # the connection is up before the fault
        proxy.arm(b"reserve_units")
        assert client.reserve_units(SHOP, ITEM, LOC, 3, checkout) is True
        assert proxy.dropped == 1, "the fault did not fire: the test would prove nothing"
        assert client.retries == 1
    assert _holds(conn) == (1, 3)
    levels = conn.execute("SELECT on_hand, pooled + held FROM stockpool.stock_levels").fetchone()
    assert levels is not None and levels[0] >= levels[1]
    assert conn.execute("SELECT count(*) FROM stockpool.check_invariants()").fetchone() == (0,)


def test_negative_control_new_checkout_per_retry_holds_twice(conn: psycopg.Connection, dsn: str) -> None:
    """The same fault against a caller that mints a new checkout id per attempt:
    it double-holds, which is what the test above must be able to catch."""
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, ITEM, LOC))
    port = str(psycopg.conninfo.conninfo_to_dict(dsn)["port"])
    with fault_proxy(int(port)) as proxy:
        proxied = _proxied(dsn, proxy.port)
        with psycopg.connect(proxied, autocommit=True) as first:
            proxy.arm(b"reserve_units")
            with pytest.raises(psycopg.OperationalError):
                first.execute(
                    "SELECT stockpool.reserve_units(%s, %s, %s, 3, %s)", (SHOP, ITEM, LOC, uuid.uuid4())
                )
        with psycopg.connect(proxied, autocommit=True) as second:
            second.execute(
                "SELECT stockpool.reserve_units(%s, %s, %s, 3, %s)", (SHOP, ITEM, LOC, uuid.uuid4())
            )
    assert _holds(conn) == (2, 6)


def test_lost_claim_reply_retry_returns_same_and_deducts_once(conn: psycopg.Connection, dsn: str) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, ITEM, LOC))
    checkout = uuid.uuid4()
    conn.execute("SELECT stockpool.reserve_units(%s, %s, %s, 4, %s)", (SHOP, ITEM, LOC, checkout))
    port = str(psycopg.conninfo.conninfo_to_dict(dsn)["port"])
    with fault_proxy(int(port)) as proxy, _client(_proxied(dsn, proxy.port)) as client:
        client.sweep()
        proxy.arm(b"claim")
        assert client.claim(SHOP, checkout) == 4
        assert proxy.dropped == 1
    assert conn.execute("SELECT on_hand FROM stockpool.stock").fetchone() == (6,)
    assert conn.execute("SELECT count(*) FROM stockpool.movements WHERE reason = 'claim'").fetchone() == (1,)


def test_adjust_stock_is_not_retried_after_lost_reply(conn: psycopg.Connection, dsn: str) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, ITEM, LOC))
    port = str(psycopg.conninfo.conninfo_to_dict(dsn)["port"])
    with fault_proxy(int(port)) as proxy, _client(_proxied(dsn, proxy.port)) as client:
        client.sweep()
        proxy.arm(b"adjust_stock")
        with pytest.raises(psycopg.OperationalError):
            client.adjust_stock(SHOP, ITEM, LOC, 5)
        assert client.retries == 0
    assert conn.execute("SELECT on_hand FROM stockpool.stock").fetchone() == (15,)


def test_bad_input_is_an_answer_not_retried(conn: psycopg.Connection, dsn: str) -> None:
    conn.execute("SELECT stockpool.set_stock(%s, %s, %s, 10)", (SHOP, ITEM, LOC))
    with _client(dsn) as client:
        with pytest.raises(psycopg.Error) as err:
            client.reserve_units(SHOP, ITEM, LOC, 0, uuid.uuid4())
        assert err.value.sqlstate == "22023"
        with pytest.raises(psycopg.Error) as err:
            client.claim(SHOP, uuid.uuid4())
        assert err.value.sqlstate == "SP003"
        assert client.retries == 0


@pytest.mark.parametrize(
    ("state", "idempotent", "expected"),
    [("40001", False, True), ("40P01", False, True), ("22023", True, False), ("SP003", True, False)],
)
def test_retry_classification(state: str, idempotent: bool, expected: bool) -> None:
    exc = psycopg.errors.lookup(state)("x") if state[:2] != "SP" else psycopg.Error("x")
    assert is_retryable(exc, idempotent) is expected


def test_lost_connection_retried_only_when_idempotent() -> None:
    lost = psycopg.OperationalError("server closed the connection unexpectedly")
    assert is_retryable(lost, True) is True
    assert is_retryable(lost, False) is False


def test_client_covers_the_api(conn: psycopg.Connection, dsn: str) -> None:
    with _client(dsn) as client:
        assert client.set_stock(SHOP, ITEM, LOC, 10) == 10
        assert client.set_stock(SHOP, ITEM + 1, LOC, 10) == 10
        assert client.adjust_stock(SHOP, ITEM, LOC, 2) == 12
        cart = uuid.uuid4()
        assert client.reserve_cart(SHOP, cart, [(ITEM + 1, LOC, 2), (ITEM, LOC, 1), (ITEM, LOC, 1)])
        assert client.claim(SHOP, cart) == 4
        single = uuid.uuid4()
        assert client.reserve_units(SHOP, ITEM, LOC, 1, single)
        assert client.release(SHOP, single) == 1
        assert client.replenish_pool(SHOP, ITEM, LOC) == 10  # all 10 free units: the key had no pool
        assert client.sweep(10) == 0
    assert conn.execute("SELECT count(*) FROM stockpool.check_invariants()").fetchone() == (0,)
