"""The seats: C clients sell out one named key (units with a label and a
position: seats in rows of 10, an aisle between rows) under load.

Two pgbench runs on the same key (race/pgbench/race_seats.sql):

1. the mix: C clients x R checkouts, each reserve_named of one seat, of 2-4
   seats anywhere or of 2-4 adjacent seats, or reserve_labels of 1-3 seats
   drawn among those it saw free in unit_status; a share roll back after reserving, the rest
   are claimed, released or kept. Demand is well above supply, so the key
   sells out and releases put seats back while others are refused.
2. the final rush: one-seat reserve_named only (still with rollbacks), no
   release, until every client has been told NULL a few times. Nothing is
   given back in the rush, so once a client was told NULL no seat may be
   free at the end: a NULL while a seat was free (or only locked by a
   reservation that rolled back) leaves one free.

Every reservation writes what its client was told (the labels) in the same
transaction as the stockpool call, so after each run, in one snapshot:
every label went to at most one checkout (clients' answers and stockpool's
holds), every client holds exactly the labels it was told (its hold row and
the public unit_status view), every sold seat is named in the claim's
movement, the key is sold out exactly after the rush, the holds are those
clients saw committed, check_invariants() is clean, no deadlock, no error.

``shape="naive"`` races the negative control instead (the cloakroom's first
free seat looked up, then taken without a lock: race_seats_naive.sql): its
checks must FAIL, which proves they can.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from stockpool.checks import Check
from stockpool.errors import StockpoolError
from stockpool.race import verify
from stockpool.race.harness import (
    ITEM_STRIDE,
    LOCATION,
    SHAPES,
    SHOP,
    Harness,
    Measured,
    make_report,
    measure,
    no_errors,
    shape_tag,
    temporary_harness,
    validate,
    zero_deadlocks,
)
from stockpool.race.report import RunReport
from stockpool.race.verify import MAX_SHOWN, KeyRange
from stockpool.server.target import connect

ROW_SEATS = 10  # seats side by side in a row
ROW_STRIDE = 12  # positions per row: an aisle (a gap of 2) breaks a block between rows
# The mix's calls, percent (the rest: reserve_labels of a pick), and fates.
MIX = {"one_pct": 40, "many_pct": 20, "adjacent_pct": 20, "claim_pct": 50, "release_pct": 25}
CALLS = ("one", "many", "adjacent", "pick")
RUSH_DEMAND = 2  # the rush asks for this many times the seats, one seat per transaction
MIN_SEATS = 3
# Seats per client by default: fewer, and every seat is locked by a buyer in
# flight from the first moment, so a pick of seats shown free never wins.
SEATS_PER_CLIENT = 8


def layout(seats: int) -> tuple[list[str], list[int]]:
    """Labels R<row>-<seat> and positions: rows of ROW_SEATS, an aisle between rows."""
    labels, positions = [], []
    for i in range(seats):
        row, seat = divmod(i, ROW_SEATS)
        labels.append(f"R{row + 1}-{seat + 1}")
        positions.append(row * ROW_STRIDE + seat + 1)
    return labels, positions


def seats(
    dsn: str,
    clients: int = 64,
    per_client: int = 20,
    units: int = 0,
    *,
    rollback_pct: int = 20,
    shape: str = "stockpool",
    harness: Harness | None = None,
) -> list[RunReport]:
    """C clients sell out ``units`` seats of one named key: the mix (C x R
    checkouts), then the final rush; with ``shape="naive"`` one run of the
    negative control. One report per pgbench run. ``units``: the seats (0:
    SEATS_PER_CLIENT per client)."""
    validate(clients=(clients, 1), per_client=(per_client, 1), rollback_pct=(rollback_pct, 0))
    units = units or SEATS_PER_CLIENT * clients
    validate(seats=(units, MIN_SEATS))
    if rollback_pct > 100:
        raise StockpoolError(f"--rollback-pct must be at most 100, got {rollback_pct}")
    if shape not in SHAPES:
        raise StockpoolError(f"unknown shape {shape!r}", hint=f"one of {', '.join(SHAPES)}")
    with contextlib.ExitStack() as stack:
        h = harness or stack.enter_context(temporary_harness(dsn))
        h.install()
        if shape == "naive":
            return [_naive(h, clients, per_client, units, rollback_pct)]
        return _seats(h, clients, per_client, units, rollback_pct)
    raise AssertionError("unreachable")


def _seats(h: Harness, clients: int, per_client: int, units: int, rollback_pct: int) -> list[RunReport]:
    params = {
        "clients": clients,
        "per_client": per_client,
        "seats": units,
        "rollback_pct": rollback_pct,
        **MIX,
    }
    labels, positions = layout(units)
    with connect(h.dsn) as conn:
        run_id = h.new_run(conn, "seats", "stockpool", params)
        item = run_id * ITEM_STRIDE + 1
        keys = KeyRange((SHOP,), item, item, LOCATION)
        conn.execute(
            "SELECT stockpool.set_named_units(%s, %s, %s, %s, %s)", (SHOP, item, LOCATION, labels, positions)
        )
    defines: dict[str, object] = {
        "run": run_id,
        "shop": SHOP,
        "item": item,
        "location": LOCATION,
        "rollback_pct": rollback_pct,
        **MIX,
    }
    mix = measure(
        h,
        run_id,
        f"seats: {clients} clients x {per_client} checkouts for {units} seats",
        "race_seats",
        clients,
        transactions=per_client,
        defines=defines,
    )
    with connect(h.dsn) as conn:
        checks, counts = seat_checks(conn, run_id, keys)
    checks.append(_every_call_ran(counts))
    checks.append(zero_deadlocks(mix))
    checks.append(no_errors(mix, clients * per_client))
    reports = [
        make_report(
            "seats",
            "stockpool",
            clients,
            run_id,
            mix,
            "one checkout: reserve (committed or rolled back), then claim or release",
            checks,
            counts,
            params,
        )
    ]

    # The rush: one seat per transaction, no release, demand above what is
    # left. First the mix's kept holds are released (their buyers gave up), so
    # the rush starts with seats to sell.
    rush_each = math.ceil(RUSH_DEMAND * units / clients) + 1
    with connect(h.dsn) as conn:
        (given_back,) = conn.execute(GIVE_BACK, {"run": run_id}).fetchone() or (0,)
        rush_id = h.new_run(conn, "seats-rush", "stockpool", {**params, "per_client": rush_each})
        (free_at_start,) = conn.execute(FREE_SEATS, keys.params).fetchone() or (0,)
    rush = measure(
        h,
        rush_id,
        f"seats, final rush: {clients} clients x {rush_each} one-seat reservations",
        "race_seats",
        clients,
        transactions=rush_each,
        defines={
            **defines,
            "run": rush_id,
            "one_pct": 100,
            "many_pct": 0,
            "adjacent_pct": 0,
            "claim_pct": 0,
            "release_pct": 0,
        },
    )
    with connect(h.dsn) as conn:
        checks, counts = seat_checks(conn, rush_id, keys, runs=(run_id, rush_id))
        checks.insert(0, sold_out(conn, rush_id, keys))
    counts.update(released_before=int(given_back), free_at_start=int(free_at_start))
    checks.append(zero_deadlocks(rush))
    checks.append(no_errors(rush, clients * rush_each))
    reports.append(
        make_report(
            "seats-rush",
            "stockpool",
            clients,
            rush_id,
            rush,
            "one one-seat reservation (committed or rolled back)",
            checks,
            counts,
            {**params, "per_client": rush_each},
        )
    )
    return reports


# The mix's kept holds released, each recorded as its client saw it.
GIVE_BACK = """
WITH given AS (
    UPDATE stockpool_race.outcomes AS o
    SET settled = 'released',
        settled_units = stockpool.release(o.shop_id, o.checkout_id)
    WHERE o.run_id = %(run)s
        AND o.reserved
        AND o.settled IS NULL
    RETURNING o.settled_units
)
SELECT coalesce(pg_catalog.sum(g.settled_units), 0)::integer
FROM given AS g
"""

FREE_SEATS = """
SELECT pg_catalog.count(*) FILTER (WHERE u.status = 'free')
FROM stockpool.unit_status AS u
WHERE u.shop_id = ANY(%(shops)s)
    AND u.item_id BETWEEN %(item_lo)s AND %(item_hi)s
    AND u.location_id = %(location)s
"""

# Labels clients were told they hold (and did not give back), more than once.
TOLD_TWICE = """
SELECT l.label, pg_catalog.count(*) AS checkouts
FROM stockpool_race.outcomes AS o
CROSS JOIN LATERAL pg_catalog.unnest(o.labels) AS l (label)
WHERE o.run_id = ANY(%(runs)s)
    AND o.reserved
    AND o.settled IS DISTINCT FROM 'released'
GROUP BY l.label
HAVING pg_catalog.count(*) > 1
ORDER BY l.label
"""

# Labels in more than one live (held or claimed) hold of the key.
HELD_TWICE = """
SELECT l.label, pg_catalog.count(*) AS holds
FROM stockpool.holds AS h
CROSS JOIN LATERAL pg_catalog.unnest(h.labels) AS l (label)
WHERE h.shop_id = ANY(%(shops)s)
    AND h.item_id BETWEEN %(item_lo)s AND %(item_hi)s
    AND h.location_id = %(location)s
    AND h.status IN ('held', 'claimed')
GROUP BY l.label
HAVING pg_catalog.count(*) > 1
ORDER BY l.label
"""

# What each client was told against its hold row and the unit_status view:
# the hold names exactly the labels told, each of them shows held (sold when
# claimed) by that checkout unless released, and no unit is held or sold by
# a checkout that was not told it.
TOLD_VS_HELD = """
WITH told AS (
    SELECT o.checkout_id, o.settled, l.label
    FROM stockpool_race.outcomes AS o
    CROSS JOIN LATERAL pg_catalog.unnest(o.labels) AS l (label)
    WHERE o.run_id = ANY(%(runs)s)
        AND o.reserved
),
hold AS (
    SELECT h.checkout_id, h.status, l.label
    FROM stockpool.holds AS h
    CROSS JOIN LATERAL pg_catalog.unnest(h.labels) AS l (label)
    WHERE h.shop_id = ANY(%(shops)s)
        AND h.item_id BETWEEN %(item_lo)s AND %(item_hi)s
        AND h.location_id = %(location)s
),
unit AS (
    SELECT u.label, u.status, u.checkout_id
    FROM stockpool.unit_status AS u
    WHERE u.shop_id = ANY(%(shops)s)
        AND u.item_id BETWEEN %(item_lo)s AND %(item_hi)s
        AND u.location_id = %(location)s
),
judged AS (
    SELECT t.checkout_id, t.label,
           CASE
               WHEN h.checkout_id IS NULL THEN 'told, not in its hold'
               WHEN t.settled = 'released' THEN NULL
               WHEN u.checkout_id IS DISTINCT FROM t.checkout_id THEN
                   'told, but unit_status shows ' || coalesce(u.status, 'no unit')
                   || coalesce(' by ' || u.checkout_id::text, '')
               WHEN u.status <> CASE WHEN t.settled = 'claimed' THEN 'sold' ELSE 'held' END THEN
                   'told, unit_status shows ' || u.status
           END AS problem
    FROM told AS t
    LEFT JOIN hold AS h
        ON h.checkout_id = t.checkout_id
        AND h.label = t.label
    LEFT JOIN unit AS u
        ON u.label = t.label
    UNION ALL
    SELECT h.checkout_id, h.label, 'in its hold, never told'
    FROM hold AS h
    WHERE NOT EXISTS (
        SELECT 1 FROM told AS t WHERE t.checkout_id = h.checkout_id AND t.label = h.label)
    UNION ALL
    SELECT u.checkout_id, u.label, 'unit_status shows ' || u.status || ', nobody was told'
    FROM unit AS u
    WHERE u.status NOT IN ('free')
        AND NOT EXISTS (
            SELECT 1 FROM told AS t
            WHERE t.checkout_id = u.checkout_id AND t.label = u.label
                AND t.settled IS DISTINCT FROM 'released')
)
SELECT j.problem, j.checkout_id, j.label, pg_catalog.count(*) OVER () AS total
FROM judged AS j
WHERE j.problem IS NOT NULL
ORDER BY j.problem, j.label
LIMIT 20
"""

# Sold seats named by the history: a claimed checkout's claim movement names
# its labels (or, not folded yet, its pending claim stands for them).
SOLD_IN_HISTORY = """
WITH claimed AS (
    SELECT o.checkout_id, o.labels
    FROM stockpool_race.outcomes AS o
    WHERE o.run_id = ANY(%(runs)s)
        AND o.settled = 'claimed'
)
SELECT c.checkout_id, c.labels, m.labels
FROM claimed AS c
LEFT JOIN stockpool.movements AS m
    ON m.checkout_id = c.checkout_id
    AND m.reason = 'claim'
    AND m.shop_id = ANY(%(shops)s)
    AND m.item_id BETWEEN %(item_lo)s AND %(item_hi)s
WHERE NOT EXISTS (
        SELECT 1 FROM stockpool.pending_claims AS p
        WHERE p.checkout_id = c.checkout_id
            AND p.shop_id = ANY(%(shops)s)
            AND p.item_id BETWEEN %(item_lo)s AND %(item_hi)s)
    AND (m.labels IS NULL
         OR ARRAY(SELECT x FROM pg_catalog.unnest(m.labels) AS x ORDER BY x)
            <> ARRAY(SELECT x FROM pg_catalog.unnest(c.labels) AS x ORDER BY x))
"""

CALL_COUNTS = """
SELECT o.call,
       pg_catalog.count(*) FILTER (WHERE o.reserved),
       pg_catalog.count(*) FILTER (WHERE NOT o.reserved),
       coalesce(pg_catalog.sum(pg_catalog.cardinality(o.labels)) FILTER (WHERE o.reserved), 0)
FROM stockpool_race.outcomes AS o
WHERE o.run_id = %(run)s
GROUP BY o.call
"""


def _shown(rows: list[tuple[Any, ...]]) -> str:
    text = "; ".join(" ".join(str(v) for v in row) for row in rows[:MAX_SHOWN])
    return text + (f"; and {len(rows) - MAX_SHOWN} more" if len(rows) > MAX_SHOWN else "")


def label_once(conn: psycopg.Connection[TupleRow], runs: tuple[int, ...], keys: KeyRange | None) -> Check:
    """Every label went to at most one checkout: among what clients were told
    (and did not give back) and, with ``keys``, among stockpool's live holds."""
    told = conn.execute(TOLD_TWICE, {"runs": list(runs)}).fetchall()
    held = conn.execute(HELD_TWICE, keys.params).fetchall() if keys else []
    problems = [("told to", n, "checkouts:", label) for label, n in told]
    problems += [("held by", n, "holds:", label) for label, n in held]
    (labels,) = conn.execute(
        "SELECT pg_catalog.count(DISTINCT l.label) FROM stockpool_race.outcomes AS o"
        " CROSS JOIN LATERAL pg_catalog.unnest(o.labels) AS l (label)"
        " WHERE o.run_id = ANY(%s) AND o.reserved",
        (list(runs),),
    ).fetchone() or (0,)
    return Check(
        "every label to at most one checkout",
        not problems,
        _shown(problems) if problems else f"{labels} labels given out, none to two checkouts at once",
    )


def told_is_held(conn: psycopg.Connection[TupleRow], runs: tuple[int, ...], keys: KeyRange) -> Check:
    """Every client holds exactly the labels it was told (hold row and unit_status)."""
    rows = conn.execute(TOLD_VS_HELD, {**keys.params, "runs": list(runs)}).fetchall()
    name = "every client holds the labels it was told"
    if rows:
        shown = [(problem, checkout, label) for problem, checkout, label, _ in rows]
        more = int(rows[0][3]) - min(len(rows), MAX_SHOWN)
        text = "; ".join(" ".join(str(v) for v in row) for row in shown[:MAX_SHOWN])
        return Check(name, False, text + (f"; and {more} more" if more > 0 else ""))
    return Check(name, True, "hold rows and unit_status name exactly the labels each client was told")


def sold_in_history(conn: psycopg.Connection[TupleRow], runs: tuple[int, ...], keys: KeyRange) -> Check:
    rows = conn.execute(SOLD_IN_HISTORY, {**keys.params, "runs": list(runs)}).fetchall()
    name = "every sold seat named in its claim movement"
    if rows:
        return Check(name, False, _shown([(c, "told", told, "movement", moved) for c, told, moved in rows]))
    return Check(
        name, True, "each claimed checkout's movement (or pending claim) names the labels it was told"
    )


def sold_out(conn: psycopg.Connection[TupleRow], run_id: int, keys: KeyRange) -> Check:
    """After the rush (nothing given back in it): when some client was told
    NULL, no seat is free. A NULL while a seat was free, or locked by a
    reservation that rolled back, leaves that seat free."""
    (free,) = conn.execute(FREE_SEATS, keys.params).fetchone() or (0,)
    (refused,) = conn.execute(
        "SELECT pg_catalog.count(*) FROM stockpool_race.outcomes WHERE run_id = %s AND NOT reserved",
        (run_id,),
    ).fetchone() or (0,)
    name = "sold out exactly (no undersell)"
    if not refused:
        return Check(
            name, False, f"no client was told NULL in the rush ({free} seats free): nothing was checked"
        )
    return Check(name, free == 0, f"{refused} answers NULL in the rush; {free} seats free at the end")


def seat_checks(
    conn: psycopg.Connection[TupleRow], run_id: int, keys: KeyRange, runs: tuple[int, ...] | None = None
) -> tuple[list[Check], dict[str, Any]]:
    """Every check of a stockpool seats run in one snapshot, and its counts.
    ``runs``: the runs whose answers stand on the key (the mix's and the rush's)."""
    runs = runs or (run_id,)
    with verify.snapshot(conn):
        checks = [
            label_once(conn, runs, keys),
            told_is_held(conn, runs, keys),
            sold_in_history(conn, runs, keys),
            verify.client_outcomes(conn, run_id, keys, runs=runs),
            verify.invariants(conn),
            verify.ledger_history(conn, keys),
        ]
        calls = {
            str(call): {"reserved": int(ok), "refused": int(no), "seats": int(n)}
            for call, ok, no, n in conn.execute(CALL_COUNTS, {"run": run_id}).fetchall()
        }
        reserved, refused, claimed, released, still_open = conn.execute(
            verify.OUTCOME_COUNTS, {"run": run_id}
        ).fetchone() or (0, 0, 0, 0, 0)
        statuses: dict[str, int] = dict(
            conn.execute(
                "SELECT u.status, pg_catalog.count(*) FROM stockpool.unit_status AS u"
                " WHERE u.shop_id = ANY(%(shops)s) AND u.item_id BETWEEN %(item_lo)s AND %(item_hi)s"
                " AND u.location_id = %(location)s GROUP BY u.status",
                keys.params,
            ).fetchall()
        )
    counts: dict[str, Any] = {
        "reserved": reserved,
        "refused": refused,
        "claimed": claimed,
        "released": released,
        "kept": still_open,
        "calls": calls,
        "seats": {str(k): int(v) for k, v in statuses.items()},
    }
    return checks, counts


def _every_call_ran(counts: dict[str, Any]) -> Check:
    """The mix put every call to the test: each reserved at least once, and
    claims and releases happened (a check of nothing must not pass)."""
    calls = counts["calls"]
    missing = [c for c in CALLS if not calls.get(c, {}).get("reserved")]
    missing += [what for what in ("claimed", "released") if not counts[what]]
    return Check(
        "every call reserved, claimed and released at least once",
        not missing,
        "missing: " + ", ".join(missing)
        if missing
        else ", ".join(f"{c} {calls[c]['reserved']} held / {calls[c]['refused']} refused" for c in CALLS)
        + f"; {counts['claimed']} claimed, {counts['released']} released",
    )


def _naive(h: Harness, clients: int, per_client: int, units: int, rollback_pct: int) -> RunReport:
    params = {"clients": clients, "per_client": per_client, "seats": units, "rollback_pct": rollback_pct}
    labels, positions = layout(units)
    with connect(h.dsn) as conn:
        run_id = h.new_run(conn, "seats", "naive", params)
        conn.execute(
            "INSERT INTO stockpool_race.naive_seats (run_id, label, position)"
            " SELECT %s, s.l, s.p"
            " FROM ROWS FROM (pg_catalog.unnest(%s::text[]), pg_catalog.unnest(%s::integer[])) AS s (l, p)",
            (run_id, labels, positions),
        )
    item = run_id * ITEM_STRIDE + 1
    m = measure(
        h,
        run_id,
        f"seats{shape_tag('naive')}: {clients} clients x {per_client} for {units} seats",
        "race_seats_naive",
        clients,
        transactions=per_client,
        defines={"run": run_id, "shop": SHOP, "item": item, "rollback_pct": rollback_pct},
    )
    with connect(h.dsn) as conn:
        checks, counts = naive_seat_checks(conn, run_id, m)
    checks.append(no_errors(m, clients * per_client))
    return make_report(
        "seats",
        "naive",
        clients,
        run_id,
        m,
        "one seat: look, then take (committed or rolled back)",
        checks,
        counts,
        params,
    )


NAIVE_TOLD_VS_HELD = """
SELECT 'checkout ' || o.checkout_id::text || ' told ' || l.label || ', the seat is '
       || coalesce('taken by ' || s.checkout_id::text, 'free')
FROM stockpool_race.outcomes AS o
CROSS JOIN LATERAL pg_catalog.unnest(o.labels) AS l (label)
LEFT JOIN stockpool_race.naive_seats AS s
    ON s.run_id = o.run_id
    AND s.label = l.label
WHERE o.run_id = %(run)s
    AND o.reserved
    AND s.checkout_id IS DISTINCT FROM o.checkout_id
ORDER BY l.label
"""


def naive_seat_checks(
    conn: psycopg.Connection[TupleRow], run_id: int, m: Measured
) -> tuple[list[Check], dict[str, Any]]:
    """The negative control's checks: the same two about labels, on its own table."""
    with verify.snapshot(conn):
        once = label_once(conn, (run_id,), None)
        wrong = conn.execute(NAIVE_TOLD_VS_HELD, {"run": run_id}).fetchall()
        (sold,) = conn.execute(
            "SELECT pg_catalog.count(*) FROM stockpool_race.outcomes WHERE run_id = %s AND reserved",
            (run_id,),
        ).fetchone() or (0,)
        (taken,) = conn.execute(
            "SELECT pg_catalog.count(*) FROM stockpool_race.naive_seats"
            " WHERE run_id = %s AND checkout_id IS NOT NULL",
            (run_id,),
        ).fetchone() or (0,)
    checks = [
        once,
        Check(
            "every client holds the labels it was told",
            not wrong,
            _shown(wrong) if wrong else f"{sold} seats told, each held by its checkout",
        ),
        zero_deadlocks(m),
    ]
    return checks, {"told": sold, "seats_taken": taken, "told_twice_or_lost": len(wrong)}
