"""``stockpool race --nodes N``: the soak through a PL/Proxy router in front
of N throwaway data nodes (route/layout.py), with shops on every node.

pgbench's clients connect to the router only; every stockpool call they
make is routed to the node of its shop, and each transaction's outcome row
is written in the router's own ``stockpool_race`` schema (after the node's
call has committed: a routed call commits on its own). Each node runs its
own sweeper and replenisher, as a production node runs its own
`stockpool worker`. During the run the router's ``check_invariants()``
(every node's, plus the placement invariant) is checked every
``check_every`` seconds. At the end the router's final sweep runs on every
node, the journal rows of each node's shops are copied to that node, and
every check of the single-node soak runs on every node; plus "each shop's
rows live on exactly one node, its map's" and zero deadlocks on every node.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb

from stockpool.checks import Check
from stockpool.errors import StockpoolError
from stockpool.race import verify
from stockpool.race.harness import LOCATION, Harness, make_report, measure, no_errors, temporary_harness
from stockpool.race.report import RunReport
from stockpool.race.soak import (
    Replenisher,
    SoakOptions,
    Sweeper,
    back_office_errors,
    soak_round,
    stock_keys,
)
from stockpool.race.verify import KeyRange
from stockpool.route.layout import Layout
from stockpool.server import stats
from stockpool.server.sampler import Periodic
from stockpool.server.target import connect


class RouterChecker(Periodic):
    """check_invariants() through the router (every node's rows) each period."""

    def __init__(self, dsn: str, period: float) -> None:
        super().__init__("checker", dsn, period, start_after=period)
        self.rounds: list[tuple[float, int, str]] = []

    def tick(self, conn: psycopg.Connection[TupleRow], elapsed: float) -> bool:
        rows = conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall()
        self.rounds.append((elapsed, len(rows), str(rows[0]) if rows else ""))
        return False


def shops_by_node(router: psycopg.Connection[TupleRow], lay: Layout, shops: range) -> dict[str, list[int]]:
    """Each node's name and the shops (of ``shops``) the router's map gives it."""
    rows = router.execute(
        "SELECT s, pm.node FROM unnest(%s::bigint[]) AS s"
        " JOIN stockpool.partition_map AS pm ON pm.partition = stockpool._partition_of(s) ORDER BY s",
        (list(shops),),
    ).fetchall()
    found: dict[str, list[int]] = {name: [] for name in lay.report.nodes}
    for shop, node in rows:
        found[str(node)].append(int(shop))
    return found


def covering_shops(router: psycopg.Connection[TupleRow], lay: Layout, at_least: int) -> int:
    """The smallest shop count >= at_least whose shops 1..S land on every node:
    at least each node's lowest shop (64 partitions: one of the first few
    thousand shops lands on each)."""
    by_node = shops_by_node(router, lay, range(1, 4097))
    idle = [name for name, shops in by_node.items() if not shops]
    if idle:
        raise StockpoolError(f"node(s) {', '.join(idle)} serve no partition: the soak cannot reach them")
    return max(at_least, *(min(shops) for shops in by_node.values()))


def _copy_journal(router_dsn: str, node_dsn: str, log_root: Any, run_id: int, shops: list[int]) -> None:
    """The router's journal rows of these shops, on the node (its own harness schema)."""
    Harness(dsn=node_dsn, log_root=log_root).install()
    with connect(router_dsn) as src, connect(node_dsn) as dst, dst.transaction():
        run = src.execute(
            "SELECT run_id, scenario, shape, started_at, params FROM stockpool_race.runs WHERE run_id = %s",
            (run_id,),
        ).fetchone()
        dst.execute(
            "INSERT INTO stockpool_race.runs (run_id, scenario, shape, started_at, params)"
            " OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (*run[:4], Jsonb(run[4])) if run else None,
        )
        select = (
            "COPY (SELECT * FROM stockpool_race.outcomes"
            " WHERE run_id = {} AND shop_id = ANY('{{{}}}'::bigint[])) TO STDOUT (FORMAT binary)"
        ).format(int(run_id), ",".join(str(int(s)) for s in shops))
        with (
            src.cursor().copy(select) as out,
            dst.cursor().copy("COPY stockpool_race.outcomes FROM STDIN (FORMAT binary)") as into,
        ):
            for data in out:
                into.write(data)


def placement(lay: Layout, by_node: dict[str, list[int]]) -> Check:
    """Each shop's rows live on exactly one node, the one the map names."""
    wrong: list[str] = []
    shops = sorted(s for ss in by_node.values() for s in ss)
    found: dict[int, list[str]] = {s: [] for s in shops}
    for name in by_node:
        with connect(lay.node_of(name).dsn) as conn:
            rows = conn.execute(
                "SELECT DISTINCT shop_id FROM ("
                " SELECT shop_id FROM stockpool.stock UNION ALL SELECT shop_id FROM stockpool.holds"
                " UNION ALL SELECT shop_id FROM stockpool.movements) AS r WHERE shop_id = ANY(%s)",
                (shops,),
            ).fetchall()
        for (shop,) in rows:
            found[int(shop)].append(name)
    for name, node_shops in by_node.items():
        for shop in node_shops:
            if found[shop] != [name]:
                wrong.append(f"shop {shop}: rows on {found[shop] or 'no node'}, map says {name}")
    detail = "; ".join(wrong[:3]) or f"{len(shops)} shops, each on its map's node only"
    return Check("each shop's rows on exactly one node, its map's", not wrong, detail)


def _deadlocks(lay: Layout) -> list[int]:
    counts = []
    for node in lay.nodes:
        with connect(node.dsn) as conn:
            counts.append(stats.take(conn).deadlocks)
    return counts


def routed_soak(lay: Layout, h: Harness, clients: int, duration: int, o: SoakOptions) -> RunReport:
    h.install()
    with connect(h.dsn) as router:
        shop_count = covering_shops(router, lay, o.shops)
        o = dataclasses.replace(o, shops=shop_count)
        by_node = shops_by_node(router, lay, range(1, shop_count + 1))
    params = {**o.params(clients, duration), "nodes": len(lay.nodes), "shops_per_node": by_node}
    run_id, keys = stock_keys(h, o, params)
    node_keys = {
        name: KeyRange(tuple(shops), keys.item_lo, keys.item_hi, LOCATION) for name, shops in by_node.items()
    }
    sweepers = [Sweeper(lay.node_of(name).dsn, run_id) for name in by_node]
    replenishers = [
        Replenisher(
            lay.node_of(name).dsn, run_id, node_keys[name], o.hot_items, max(o.stock // 5, 1), o.stock
        )
        for name in by_node
    ]
    checker = RouterChecker(h.dsn, o.check_every)
    deadlocks_before = _deadlocks(lay)
    m = measure(
        h,
        run_id,
        f"soak through the router: {clients} clients, {duration} s, {len(lay.nodes)} nodes",
        "race_soak",
        clients,
        seconds=duration,
        defines=o.defines(run_id, keys),
        beside=(*sweepers, *replenishers, checker),
    )
    time.sleep(o.abandon_ttl + 0.2)
    swept = 0
    with connect(h.dsn) as router:
        while n := int((router.execute("SELECT stockpool.sweep(5000)").fetchone() or (0,))[0]):
            swept += n
        routed = router.execute("SELECT * FROM stockpool.check_invariants()").fetchall()
        outcomes = router.execute(verify.OUTCOME_COUNTS, {"run": run_id}).fetchone() or (0, 0, 0, 0, 0)
    checks: list[Check] = []
    for name, shops in by_node.items():
        node = lay.node_of(name)
        _copy_journal(h.dsn, node.dsn, h.log_root, run_id, shops)
        with connect(node.dsn) as conn:
            for check in soak_round(conn, run_id, node_keys[name], final=True):
                checks.append(dataclasses.replace(check, name=f"{check.name} (node {name})"))
    dirty = [r for r in checker.rounds if r[1]]
    checks += [
        Check(
            "router check_invariants() clean during the run and at the end (every node, placement included)",
            bool(checker.rounds) and not dirty and not routed and not checker.errors,
            f"{len(checker.rounds)} rounds every {o.check_every:g} s and one at the end"
            + (f"; first dirty round at {dirty[0][0]:.1f} s: {dirty[0][2]}" if dirty else "")
            + (f"; at the end: {routed[0]}" if routed else "")
            + (f"; checker errors: {dict(checker.errors)}" if checker.errors else ""),
        ),
        placement(lay, by_node),
    ]
    after = _deadlocks(lay)
    per_node = [a - b for a, b in zip(after, deadlocks_before, strict=True)]
    checks += [
        Check("zero deadlocks on every node", not any(per_node), f"deadlocks per node: {per_node}"),
        no_errors(m),
        back_office_errors(*sweepers, *replenishers),
    ]
    reserved, refused, claimed, released, still_open = (int(v) for v in outcomes)
    counts = {
        "checkouts": reserved + refused,
        "reserved": reserved,
        "refused": refused,
        "claimed": claimed,
        "released": released,
        "left_open": still_open,
        "hold_lines_expired": sum(s.expired for s in sweepers) + swept,
        "nodes": len(lay.nodes),
        "shops": shop_count,
    }
    return make_report(
        "soak",
        "stockpool",
        clients,
        run_id,
        m,
        "one checkout through the router: reserve, then claim or release (two transactions)",
        checks,
        counts,
        params,
    )


def race_nodes(lay: Layout, clients: int, duration: int, o: SoakOptions, **harness: Any) -> RunReport:
    with temporary_harness(lay.router.dsn, **harness) as h:
        return routed_soak(lay, h, clients, duration, o)
