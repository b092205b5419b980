"""``stockpool bench --nodes N``: what the PL/Proxy router costs per call.

On a throwaway layout (route/layout.py), for each client count, three cells
of ``seconds`` each, in the same run:

- ``ceiling``: the bench's reference transaction on node 0 directly;
- ``direct``: ``reserve_units`` of one unit of a random key among node 0's
  shops (100 items each, stock to spare: no contention, so the difference
  is the router's and not a hot key's) on node 0 directly;
- ``routed``: the same script through the router.

Each cell reports its throughput as a ratio to the ceiling, and CPU
microseconds per reservation of the node, of the router, and of pgbench.
The arithmetic of N nodes follows from those figures (docs/nodes.md): all
of this machine's nodes share its 2 cores, so it cannot show the scaling.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg

from stockpool.bench.machine import machine
from stockpool.route.layout import Layout, throwaway_layout
from stockpool.server import pgbench
from stockpool.server.cluster import settings_for_clients
from stockpool.server.cpumeter import ServerCPU

PGBENCH = Path(__file__).resolve().parent / "pgbench"
ITEMS = 100
STOCK = 100_000_000


@dataclass
class RoutedCell:
    name: str
    clients: int
    tps: float
    x_ceiling: float | None
    node_us: float | None
    router_us: float | None
    pgbench_us: float | None


def _shops_of(layout: Layout, node: str, count: int) -> list[int]:
    with psycopg.connect(layout.router.dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT s FROM generate_series(1, 10000) AS s"
            " JOIN stockpool.partition_map AS pm ON pm.partition = stockpool._partition_of(s)"
            " WHERE pm.node = %s ORDER BY s LIMIT %s",
            (node, count),
        ).fetchall()
    return [int(r[0]) for r in rows]


def _script(tmp: Path, shops: list[int]) -> Path:
    path = tmp / "bench_routed.sql"
    array = ",".join(map(str, shops))
    path.write_text(
        "-- bench routed: one unit of a random key among node 0's shops.\n"
        f"\\set s random(1, {len(shops)})\n"
        f"\\set i random(1, {ITEMS})\n"
        f"SELECT stockpool.reserve_units((ARRAY[{array}]::bigint[])[:s], :i, 1, 1, gen_random_uuid());\n"
    )
    return path


def _cell(
    dsn: str, script: Path, clients: int, seconds: int, meters: dict[str, ServerCPU | None]
) -> tuple[float, dict[str, float | None], int]:
    before = {k: (m.read() if m else None) for k, m in meters.items()}
    result = pgbench.run(dsn, script, clients, seconds=seconds, jobs=min(clients, 2), prepared=True)
    after = {k: (m.read() if m else None) for k, m in meters.items()}
    done = result.processed
    cpu: dict[str, float | None] = {}
    for key in meters:
        b, a = before[key], after[key]
        cpu[key] = (a.server - b.server) / done * 1e6 if a and b and done else None
    first = next(iter(before.values()))
    last = next(iter(after.values()))
    cpu["pgbench"] = (last.clients - first.clients) / done * 1e6 if first and last and done else None
    return result.tps, cpu, done


def router_bench(
    clients: list[int], seconds: int, nodes: int, say: Callable[[str], None], tmp: Path
) -> dict[str, Any]:
    settings = settings_for_clients(max(clients) + 10)
    cells: list[RoutedCell] = []
    with throwaway_layout(nodes, settings) as layout:
        node_name = layout.report.nodes[0]
        node = layout.node_of(node_name)
        shops = _shops_of(layout, node_name, 8)
        with psycopg.connect(layout.router.dsn, autocommit=True) as conn:
            for shop in shops:
                for item in range(1, ITEMS + 1):
                    conn.execute("SELECT stockpool.set_stock(%s, %s, 1, %s)", (shop, item, STOCK))
        with psycopg.connect(node.dsn, autocommit=True) as conn:
            conn.execute((PGBENCH / "bench_setup.sql").read_bytes())
            conn.execute("SELECT bench.prepare('ceiling', %s, 0)", (max(clients),))
            host = machine(conn)
        script = _script(tmp, shops)
        meters = {
            "node": ServerCPU.of_datadir(node.datadir),
            "router": ServerCPU.of_datadir(layout.router.datadir),
        }
        for n in clients:
            ceiling_tps, _, _ = _cell(node.dsn, PGBENCH / "bench_ceiling.sql", n, seconds, meters)
            cells.append(RoutedCell("ceiling", n, round(ceiling_tps, 1), 1.0, None, None, None))
            for name, dsn in (("direct", node.dsn), ("routed", layout.router.dsn)):
                tps, cpu, _ = _cell(dsn, script, n, seconds, meters)
                cell = RoutedCell(
                    name,
                    n,
                    round(tps, 1),
                    round(tps / ceiling_tps, 3) if ceiling_tps else None,
                    _round(cpu["node"]),
                    _round(cpu["router"]) if name == "routed" else None,
                    _round(cpu["pgbench"]),
                )
                cells.append(cell)
                say(
                    f"{name:8} {n:4} clients: {tps:9.1f}/s = {cell.x_ceiling}x ceiling; CPU µs per "
                    f"reservation node {cell.node_us}, router {cell.router_us}, pgbench {cell.pgbench_us}"
                )
            time.sleep(1)
    return {
        "nodes": nodes,
        "seconds": seconds,
        "machine": host,
        "cells": [asdict(c) for c in cells],
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def markdown(run: dict[str, Any]) -> str:
    lines = [
        f"# Router cost per call ({run['nodes']} nodes, {run['seconds']} s per cell)",
        "",
        "| clients | cell | reservations/s | x ceiling | node CPU µs | router CPU µs | pgbench CPU µs |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in run["cells"]:
        lines.append(
            f"| {c['clients']} | {c['name']} | {c['tps']:,.0f} | {c['x_ceiling']} | "
            f"{c['node_us'] if c['node_us'] is not None else ''} | "
            f"{c['router_us'] if c['router_us'] is not None else ''} | "
            f"{c['pgbench_us'] if c['pgbench_us'] is not None else ''} |"
        )
    return "\n".join(lines) + "\n"


def write(run: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    paths = [out / f"router-{stamp}.json", out / f"router-{stamp}.md"]
    paths[0].write_text(json.dumps(run, indent=2) + "\n")
    paths[1].write_text(markdown(run))
    return paths
