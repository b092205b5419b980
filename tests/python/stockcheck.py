"""What the fault and bad-input suites check after the fact.

- :func:`snapshot`: a fingerprint of every stockpool table (row counts, the
  ledger, the holds, the pool's unit ids, the movement history) plus
  stock_levels, to prove that a refused or failed call left nothing behind.
- :class:`Op` and :func:`verify_outcomes`: client-side records of reserve,
  claim and release calls, checked against the holds and claim movements in the
  database: everything the client saw commit is there, everything it saw fail
  left nothing, and a call whose outcome the client could not know (connection
  lost) went one way or the other but never half.
- :func:`final_state`: reads holds, claim movements and check_invariants() in
  one REPEATABLE READ snapshot and adds the history checks that tie claimed
  holds to claim movements.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

Key = tuple[int, int]  # (item_id, location_id) within one shop
Line = tuple[int, int, int]  # (item_id, location_id, quantity)

# Outcomes as the client saw them.
OK = "ok"  # the call returned; for a reserve, it returned true
REFUSED = "refused"  # a reserve returned false: committed, holding nothing
FAILED = "failed"  # an error with a SQLSTATE: rolled back
UNKNOWN = "unknown"  # the connection was lost: committed or not, nobody knows


@dataclass
class Op:
    kind: str  # "reserve" | "claim" | "release"
    checkout: uuid.UUID
    lines: tuple[Line, ...] = ()  # reserve only: what was asked for
    outcome: str = UNKNOWN
    value: Any = None
    sqlstate: str | None = None
    at: float = 0.0  # time.monotonic() when the call returned


@dataclass
class HoldRow:
    checkout: uuid.UUID
    item_id: int
    location_id: int
    quantity: int
    status: str


@dataclass
class ClaimMove:
    checkout: uuid.UUID
    item_id: int
    location_id: int
    delta: int


@dataclass
class FinalState:
    holds: list[HoldRow]
    moves: list[ClaimMove]
    violations: list[tuple[Any, ...]]
    history: list[str] = field(default_factory=list)


def summed(lines: Iterable[Line]) -> dict[Key, int]:
    out: dict[Key, int] = defaultdict(int)
    for item, loc, qty in lines:
        out[(item, loc)] += qty
    return dict(out)


def verify_outcomes(ops: Sequence[Op], holds: Sequence[HoldRow], moves: Sequence[ClaimMove]) -> list[str]:
    """Every way the database disagrees with what the client saw; empty when none."""
    problems: list[str] = []
    by_checkout: dict[uuid.UUID, list[Op]] = defaultdict(list)
    for op in ops:
        by_checkout[op.checkout].append(op)
    rows: dict[uuid.UUID, dict[Key, HoldRow]] = defaultdict(dict)
    for h in holds:
        rows[h.checkout][(h.item_id, h.location_id)] = h
    moved: dict[uuid.UUID, dict[Key, int]] = defaultdict(lambda: defaultdict(int))
    for m in moves:
        moved[m.checkout][(m.item_id, m.location_id)] += m.delta

    for stray in sorted(set(rows) | set(moved), key=str):
        if stray not in by_checkout:
            problems.append(f"{stray}: holds or claim movements of a checkout the client never used")

    for checkout, cops in by_checkout.items():
        tag = str(checkout)[:8]
        reserves = [o for o in cops if o.kind == "reserve"]
        claims = [o for o in cops if o.kind == "claim"]
        releases = [o for o in cops if o.kind == "release"]
        want = summed(reserves[0].lines) if reserves else {}
        have = rows.get(checkout, {})
        got = {k: h.quantity for k, h in have.items()}
        statuses = {h.status for h in have.values()}
        mv = {k: v for k, v in moved.get(checkout, {}).items() if v}

        if have and got != want:
            problems.append(f"{tag}: holds {got} are not what was asked {want} (half a reservation?)")
        if any(o.outcome == OK for o in reserves):
            if not have:
                problems.append(f"{tag}: a reserve the client saw commit holds nothing")
        elif not any(o.outcome == UNKNOWN for o in reserves) and have:
            problems.append(f"{tag}: a reserve the client saw fail or refuse left holds behind")

        if "claimed" in statuses:
            if statuses != {"claimed"}:
                problems.append(f"{tag}: claim half-applied, hold statuses {sorted(statuses)}")
            if mv != {k: -q for k, q in got.items()}:
                problems.append(f"{tag}: claimed holds {got} but claim movements {mv}")
            if not any(o.outcome in (OK, UNKNOWN) for o in claims):
                problems.append(f"{tag}: claimed although no claim committed or went unanswered")
        else:
            if mv:
                problems.append(f"{tag}: claim movements {mv} without claimed holds")
            if any(o.outcome == OK for o in claims):
                problems.append(f"{tag}: a claim the client saw commit is missing")
        for o in claims:
            if o.outcome == OK and o.value != sum(got.values()):
                problems.append(f"{tag}: claim returned {o.value}, holds sum to {sum(got.values())}")

        if "released" in statuses:
            if statuses - {"released", "expired"}:
                problems.append(f"{tag}: release half-applied, hold statuses {sorted(statuses)}")
            if not any(o.outcome in (OK, UNKNOWN) for o in releases):
                problems.append(f"{tag}: released although no release committed or went unanswered")
        released_units = sum(h.quantity for h in have.values() if h.status == "released")
        for o in releases:
            if o.outcome != OK:
                continue
            if statuses & {"held", "claimed"}:
                problems.append(f"{tag}: a release the client saw commit left statuses {sorted(statuses)}")
            if o.value != released_units:
                problems.append(f"{tag}: release returned {o.value}, released holds sum to {released_units}")
    return problems


@contextlib.contextmanager
def _reading(conn: psycopg.Connection) -> Iterator[None]:
    """Every read from one snapshot: a REPEATABLE READ transaction of its own,
    or, inside the caller's open transaction, that one (negative controls
    damage the data in a transaction, look, and roll back)."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        yield
        return
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def final_state(conn: psycopg.Connection, shop_id: int | None = None) -> FinalState:
    """Holds, claim movements and invariant violations, all from one snapshot."""
    shop_filter = "" if shop_id is None else " AND shop_id = %(shop)s"
    params = {"shop": shop_id}
    with _reading(conn):
        holds = [
            HoldRow(*r)
            for r in conn.execute(
                "SELECT checkout_id, item_id, location_id, quantity, status FROM stockpool.holds"
                " WHERE true" + shop_filter,
                params,
            )
        ]
        moves = [
            ClaimMove(*r)
            for r in conn.execute(
                # A claim is recorded as a movement, or as a pending claim
                # until its key's ledger row folds it (the same deduction).
                "SELECT checkout_id, item_id, location_id, delta FROM stockpool.movements"
                " WHERE reason = 'claim'" + shop_filter + " UNION ALL"
                " SELECT checkout_id, item_id, location_id, -quantity FROM stockpool.pending_claims"
                " WHERE true" + shop_filter,
                params,
            )
        ]
        violations = conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall()
        # History ties claims to holds: per key, the units claimed in the
        # movement history and in pending claims equal the units of claimed
        # holds.
        history = [
            f"key {r[0]}/{r[1]}/{r[2]}: claim movements {r[3]} <> claimed holds {r[4]}"
            for r in conn.execute(
                """
                WITH m AS (
                    SELECT shop_id, item_id, location_id, sum(units) AS units
                    FROM (
                        SELECT shop_id, item_id, location_id, -delta AS units
                        FROM stockpool.movements WHERE reason = 'claim'
                        UNION ALL
                        SELECT shop_id, item_id, location_id, quantity
                        FROM stockpool.pending_claims
                    ) AS claims
                    GROUP BY 1, 2, 3
                ), h AS (
                    SELECT shop_id, item_id, location_id, sum(quantity) AS units
                    FROM stockpool.holds WHERE status = 'claimed'
                    GROUP BY 1, 2, 3
                )
                SELECT shop_id, item_id, location_id, coalesce(m.units, 0), coalesce(h.units, 0)
                FROM m FULL JOIN h USING (shop_id, item_id, location_id)
                WHERE coalesce(m.units, 0) <> coalesce(h.units, 0)
                """
            )
        ]
    return FinalState(holds, moves, violations, history)


def snapshot(conn: psycopg.Connection, shop_id: int | None = None) -> dict[str, Any]:
    """A fingerprint of every stockpool table and of stock_levels (optionally one shop).

    Row counts of every table and partition, the full ledger and holds, each
    key's pool as (count, sum of unit ids, sum of buckets): a unit deleted and
    put back by a rolled-back transaction keeps its id, a committed take and
    refill does not. Sequences are left out: they advance on rollback.
    """
    where = "" if shop_id is None else " WHERE shop_id = %(shop)s"
    params = {"shop": shop_id}
    out: dict[str, Any] = {}
    with _reading(conn):
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT c.oid::regclass::text FROM pg_catalog.pg_class AS c"
                " JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'stockpool' AND c.relkind IN ('r', 'p') ORDER BY 1"
            )
        ]
        for table in tables:
            filt = "" if table == "stockpool.migrations" else where
            row = conn.execute(f"SELECT count(*) FROM {table}{filt}", params).fetchone()
            out[f"rows {table}"] = row[0] if row else None
        out["stock_levels"] = conn.execute(
            f"SELECT * FROM stockpool.stock_levels{where} ORDER BY 1, 2, 3", params
        ).fetchall()
        out["stock"] = conn.execute(
            "SELECT shop_id, item_id, location_id, on_hand, allocated, pool_cap, low_water, buckets,"
            f" updated_at FROM stockpool.stock{where} ORDER BY 1, 2, 3",
            params,
        ).fetchall()
        out["holds"] = conn.execute(
            "SELECT shop_id, checkout_id, item_id, location_id, quantity, status, expires_at, updated_at"
            f" FROM stockpool.holds{where} ORDER BY 1, 2, 3, 4",
            params,
        ).fetchall()
        out["pool"] = conn.execute(
            "SELECT shop_id, item_id, location_id, count(*), sum(unit_id), sum(bucket)"
            f" FROM stockpool.pool_units{where} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
            params,
        ).fetchall()
        out["movements"] = conn.execute(
            f"SELECT count(*), max(movement_id), sum(delta) FROM stockpool.movements{where}", params
        ).fetchone()
        out["pending_claims"] = conn.execute(
            "SELECT shop_id, item_id, location_id, checkout_id, quantity"
            f" FROM stockpool.pending_claims{where} ORDER BY 1, 2, 3, 4",
            params,
        ).fetchall()
    return out


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {
        k: (before.get(k), after.get(k))
        for k in before.keys() | after.keys()
        if before.get(k) != after.get(k)
    }
