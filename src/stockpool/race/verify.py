"""The checks a race runs against a database, during a run and after it.

Each check returns a :class:`Check`: a name, PASS or FAIL, and a short detail
naming the first violations. All of a snapshot's checks read one REPEATABLE
READ snapshot (:func:`snapshot`), so they compare rows committed together: an
outcome row and the hold it describes were written in the same transaction.

- :func:`invariants`: ``stockpool.check_invariants()`` returns no row.
- :func:`ledger_history`: for every key of the run, the movement history
  replays to its ledger: in movement order (movement ids are drawn under the
  key's ledger row lock) each ``on_hand_after`` is the running sum of the
  deltas, and the last one is the ledger's ``on_hand``.
- :func:`client_outcomes`: every hold a client saw committed exists with the
  quantity asked, in the state the client asked for (claimed, released, or
  still held / expired when it walked away); no hold exists that no client saw
  committed (a rolled-back reservation leaves nothing); a refused reservation
  left no hold.
- :func:`claims_in_ledger`: every claim a client saw committed left exactly
  one movement per key for its quantity, or one pending claim not yet folded
  into the ledger; no other claim movement or pending claim exists.

:func:`settling_lag` is not a check but a reading: how many claims of the run's
keys wait to be folded into their ledger rows, and the oldest one's age.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from stockpool.checks import Check

MAX_SHOWN = 3


@dataclass(frozen=True)
class KeyRange:
    """The stock keys of one run: shops x items [item_lo, item_hi], location 1."""

    shop_ids: tuple[int, ...]
    item_lo: int
    item_hi: int
    location_id: int = 1

    @property
    def params(self) -> dict[str, Any]:
        return {
            "shops": list(self.shop_ids),
            "item_lo": self.item_lo,
            "item_hi": self.item_hi,
            "location": self.location_id,
        }


def _shown(rows: Sequence[Sequence[Any]], total: int | None = None) -> str:
    total = len(rows) if total is None else total
    text = "; ".join(" ".join(str(v) for v in row) for row in rows[:MAX_SHOWN])
    more = total - min(len(rows), MAX_SHOWN)
    return text + (f"; and {more} more" if more > 0 else "")


@contextlib.contextmanager
def snapshot(conn: psycopg.Connection[TupleRow]) -> Iterator[psycopg.Connection[TupleRow]]:
    """One read-only REPEATABLE READ transaction on an autocommit connection."""
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def invariants(conn: psycopg.Connection[TupleRow]) -> Check:
    rows = conn.execute(
        "SELECT invariant, shop_id, item_id, location_id, detail FROM stockpool.check_invariants()"
    ).fetchall()
    return Check("check_invariants() empty", not rows, _shown(rows) if rows else "no violation")


LEDGER_HISTORY = """
WITH chain AS (
    SELECT m.shop_id, m.item_id, m.location_id, m.movement_id, m.on_hand_after,
           pg_catalog.sum(m.delta) OVER w AS replayed,
           pg_catalog.row_number() OVER (PARTITION BY m.shop_id, m.item_id, m.location_id
                                         ORDER BY m.movement_id DESC) AS from_last
    FROM stockpool.movements AS m
    WHERE m.shop_id = ANY(%(shops)s)
        AND m.item_id BETWEEN %(item_lo)s AND %(item_hi)s
        AND m.location_id = %(location)s
    WINDOW w AS (PARTITION BY m.shop_id, m.item_id, m.location_id ORDER BY m.movement_id)
)
SELECT 'movement ' || c.movement_id::text, c.shop_id, c.item_id,
       'on_hand_after ' || c.on_hand_after::text || ' <> replayed ' || c.replayed::text
FROM chain AS c
WHERE c.on_hand_after <> c.replayed
UNION ALL
SELECT 'ledger', s.shop_id, s.item_id,
       'on_hand ' || s.on_hand::text || ' <> history ' || coalesce(c.replayed, 0)::text
FROM stockpool.stock AS s
LEFT JOIN chain AS c
    ON c.shop_id = s.shop_id
    AND c.item_id = s.item_id
    AND c.location_id = s.location_id
    AND c.from_last = 1
WHERE s.shop_id = ANY(%(shops)s)
    AND s.item_id BETWEEN %(item_lo)s AND %(item_hi)s
    AND s.location_id = %(location)s
    AND s.on_hand <> coalesce(c.replayed, 0)
"""


def ledger_history(conn: psycopg.Connection[TupleRow], keys: KeyRange) -> Check:
    rows = conn.execute(LEDGER_HISTORY, keys.params).fetchall()
    (count,) = conn.execute(
        "SELECT pg_catalog.count(*) FROM stockpool.movements"
        " WHERE shop_id = ANY(%(shops)s) AND item_id BETWEEN %(item_lo)s AND %(item_hi)s",
        keys.params,
    ).fetchone() or (0,)
    return Check(
        "ledger = movement history",
        not rows,
        _shown(rows) if rows else f"{count} movements replay to every ledger row",
    )


# The holds of a run's keys, as clients see them: also the failover soak's
# (race/journal.py) against its journal.
HELD = """
SELECT h.shop_id, h.checkout_id, h.item_id, h.quantity, h.status,
       h.expires_at <= pg_catalog.now() AS overdue
FROM stockpool.holds AS h
WHERE h.shop_id = ANY(%(shops)s)
    AND h.item_id BETWEEN %(item_lo)s AND %(item_hi)s
    AND h.location_id = %(location)s
"""

CLIENT_OUTCOMES = f"""
WITH asked AS (
    SELECT o.checkout_id, o.shop_id, l.item_id, pg_catalog.sum(l.quantity)::integer AS quantity,
           o.intent, o.reserved, o.settled, o.settled_units,
           pg_catalog.sum(pg_catalog.sum(l.quantity)) OVER (PARTITION BY o.checkout_id) AS total
    FROM stockpool_race.outcomes AS o
    CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(o.item_ids), pg_catalog.unnest(o.quantities))
        AS l (item_id, quantity)
    WHERE o.run_id = ANY(%(runs)s)
    GROUP BY o.checkout_id, o.shop_id, l.item_id, o.intent, o.reserved, o.settled, o.settled_units
),
held AS ({HELD}),
judged AS (
    SELECT coalesce(a.checkout_id, h.checkout_id) AS checkout_id,
           coalesce(a.item_id, h.item_id) AS item_id,
           CASE
               WHEN a.checkout_id IS NULL THEN 'hold no client saw committed (' || h.status || ')'
               WHEN NOT a.reserved AND h.checkout_id IS NOT NULL THEN 'refused reservation left a hold'
               WHEN NOT a.reserved THEN NULL
               WHEN h.checkout_id IS NULL THEN 'committed hold missing'
               WHEN h.quantity <> a.quantity THEN
                   'hold of ' || h.quantity::text || ' units, client asked ' || a.quantity::text
               WHEN a.settled IS NOT NULL AND h.status <> a.settled THEN
                   a.settled || ', but the hold is ' || h.status
               WHEN a.settled IS NOT NULL AND a.settled_units <> a.total THEN
                   a.settled || ' ' || a.settled_units::text || ' units of ' || a.total::text
               WHEN a.settled IS NULL AND h.status NOT IN ('held', 'expired') THEN
                   h.status || ', but the client never asked'
               WHEN %(final)s AND a.intent = 'abandon' AND h.status = 'held' AND h.overdue THEN
                   'abandoned hold not expired after its TTL and a sweep'
           END AS problem
    FROM asked AS a
    FULL JOIN held AS h
        ON h.shop_id = a.shop_id
        AND h.checkout_id = a.checkout_id
        AND h.item_id = a.item_id
)
SELECT j.problem, j.checkout_id, j.item_id, pg_catalog.count(*) OVER () AS total
FROM judged AS j
WHERE j.problem IS NOT NULL
ORDER BY j.problem, j.checkout_id
LIMIT 20
"""

OUTCOME_COUNTS = """
SELECT pg_catalog.count(*) FILTER (WHERE o.reserved) AS reserved,
       pg_catalog.count(*) FILTER (WHERE NOT o.reserved) AS refused,
       pg_catalog.count(*) FILTER (WHERE o.settled = 'claimed') AS claimed,
       pg_catalog.count(*) FILTER (WHERE o.settled = 'released') AS released,
       pg_catalog.count(*) FILTER (WHERE o.reserved AND o.settled IS NULL) AS open
FROM stockpool_race.outcomes AS o
WHERE o.run_id = %(run)s
"""


def client_outcomes(
    conn: psycopg.Connection[TupleRow],
    run_id: int,
    keys: KeyRange,
    *,
    final: bool = False,
    runs: Sequence[int] = (),
) -> Check:
    """What clients saw committed against stockpool.holds (see the module docstring).

    ``final``: also require abandoned holds past their TTL to be expired, which
    holds only after a sweep at the end of a run. ``runs``: every run whose
    clients reserved on ``keys`` (default: ``run_id`` alone); the counts are
    ``run_id``'s.
    """
    params = {**keys.params, "runs": list(runs or (run_id,)), "final": final}
    rows = conn.execute(CLIENT_OUTCOMES, params).fetchall()
    counts = conn.execute(OUTCOME_COUNTS, {"run": run_id}).fetchone() or (0, 0, 0, 0, 0)
    reserved, refused, claimed, released, still_open = counts
    name = "client-seen holds = stockpool.holds"
    if rows:
        shown = [(problem, checkout, f"item {item}") for problem, checkout, item, _ in rows]
        return Check(name, False, _shown(shown, int(rows[0][3])))
    return Check(
        name,
        True,
        f"{reserved} held ({claimed} claimed, {released} released, {still_open} left), "
        f"{refused} refused: all match",
    )


CLAIMS_IN_LEDGER = """
WITH asked AS (
    SELECT o.checkout_id, o.shop_id, l.item_id, pg_catalog.sum(l.quantity)::integer AS quantity
    FROM stockpool_race.outcomes AS o
    CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(o.item_ids), pg_catalog.unnest(o.quantities))
        AS l (item_id, quantity)
    WHERE o.run_id = %(run)s
        AND o.settled = 'claimed'
    GROUP BY o.checkout_id, o.shop_id, l.item_id
),
recorded AS (
    SELECT m.checkout_id, m.shop_id, m.item_id, -m.delta AS quantity
    FROM stockpool.movements AS m
    WHERE m.reason = 'claim'
        AND m.shop_id = ANY(%(shops)s)
        AND m.item_id BETWEEN %(item_lo)s AND %(item_hi)s
        AND m.location_id = %(location)s
    UNION ALL
    SELECT c.checkout_id, c.shop_id, c.item_id, c.quantity
    FROM stockpool.pending_claims AS c
    WHERE c.shop_id = ANY(%(shops)s)
        AND c.item_id BETWEEN %(item_lo)s AND %(item_hi)s
        AND c.location_id = %(location)s
),
moved AS (
    SELECT r.checkout_id, r.shop_id, r.item_id, pg_catalog.sum(r.quantity)::integer AS quantity,
           pg_catalog.count(*) AS movements
    FROM recorded AS r
    GROUP BY r.checkout_id, r.shop_id, r.item_id
)
SELECT CASE
           WHEN a.checkout_id IS NULL THEN 'claim movement or pending claim no client saw committed'
           WHEN m.checkout_id IS NULL THEN 'claimed without a movement or pending claim'
           WHEN m.movements <> 1 THEN m.movements::text || ' claim movements and pending claims for one line'
           ELSE 'moved ' || m.quantity::text || ' units, claimed ' || a.quantity::text
       END AS problem,
       coalesce(a.checkout_id, m.checkout_id), coalesce(a.item_id, m.item_id),
       pg_catalog.count(*) OVER () AS total
FROM asked AS a
FULL JOIN moved AS m
    ON m.shop_id = a.shop_id
    AND m.checkout_id = a.checkout_id
    AND m.item_id = a.item_id
WHERE a.checkout_id IS NULL
    OR m.checkout_id IS NULL
    OR m.movements <> 1
    OR m.quantity <> a.quantity
LIMIT 20
"""


def claims_in_ledger(conn: psycopg.Connection[TupleRow], run_id: int, keys: KeyRange) -> Check:
    rows = conn.execute(CLAIMS_IN_LEDGER, {**keys.params, "run": run_id}).fetchall()
    name = "client-seen claims = claim movements"
    if rows:
        shown = [(problem, checkout, f"item {item}") for problem, checkout, item, _ in rows]
        return Check(name, False, _shown(shown, int(rows[0][3])))
    return Check(name, True, "one movement or pending claim per claimed line, none other")


SETTLING_LAG = """
SELECT pg_catalog.count(*)::integer,
       coalesce(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp() - pg_catalog.min(c.claimed_at)), 0)::float8
FROM stockpool.pending_claims AS c
WHERE c.shop_id = ANY(%(shops)s)
    AND c.item_id BETWEEN %(item_lo)s AND %(item_hi)s
    AND c.location_id = %(location)s
"""


def settling_lag(conn: psycopg.Connection[TupleRow], keys: KeyRange) -> tuple[int, float]:
    """Claims of ``keys`` not yet folded into their ledger rows, and the oldest one's age in seconds."""
    row = conn.execute(SETTLING_LAG, keys.params).fetchone()
    return (int(row[0]), float(row[1])) if row else (0, 0.0)


def merge(name: str, rounds: Sequence[tuple[float, Check]]) -> Check:
    """One check out of the same check run at intervals: FAIL if any round failed."""
    failed = [(t, c) for t, c in rounds if not c.passed]
    if failed:
        t, first = failed[0]
        return Check(
            name, False, f"{len(failed)} of {len(rounds)} checks failed; first at {t:.1f} s: {first.detail}"
        )
    return Check(name, True, f"{len(rounds)} checks during the run, all clean")
