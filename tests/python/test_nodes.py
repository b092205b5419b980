"""Beyond one server (issue 14): a PL/Proxy router in front of N nodes, all
real throwaway clusters on loopback (route/layout.py; the nodes ask the
router's roles for their SCRAM password).

- The router's API is the node's: every public function and view with the
  same arguments, defaults and results, and the same grants (the comparison
  must catch a function the router lacks).
- A shop's rows land on the node the map names, and only there; a node
  refuses a routed call for a shop it does not serve (SP020).
- SQLSTATEs pass through unchanged; a node that is down or hangs fails its
  shops' calls with 08006 within the connect timeout while the other nodes'
  shops go on; restarted, it carries on.
- The router's connections use roles with the app's (or the worker's and
  monitor's) rights on the nodes, no more; the password is in no error
  message, no server log and not readable by the router's app role.
- Moving a partition under load loses and doubles nothing, refuses only
  with SP020 (which the client retries) for a bounded time, and a move that
  dies half-way is resumed by the next run; one that cannot drain is undone.
- Re-deploying with a new node keeps the map; dropping a node that serves
  partitions is refused.
- `stockpool race --nodes 2` passes; its placement check catches a stray row.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from stockpool.client import Client, RetryPolicy
from stockpool.errors import StockpoolError
from stockpool.race.nodes import placement, shops_by_node
from stockpool.route import move as mover
from stockpool.route.deploy import deploy_router, write_servers
from stockpool.route.layout import Layout, init_node, throwaway_layout
from stockpool.server.cluster import throwaway

pytestmark = pytest.mark.timeout(300)
PUBLIC_SIGNATURES = """
SELECT p.proname, pg_catalog.pg_get_function_arguments(p.oid), pg_catalog.pg_get_function_result(p.oid),
       array(SELECT r FROM unnest(ARRAY['stockpool_app', 'stockpool_monitor', 'stockpool_worker']) AS r
             WHERE pg_catalog.has_function_privilege(r, p.oid, 'EXECUTE'))
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'stockpool'::regnamespace AND p.proname !~ '^_'
ORDER BY 1, 2
"""
PUBLIC_VIEWS = """
SELECT c.relname,
       array(SELECT a.attname || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod)
             FROM pg_catalog.pg_attribute AS a WHERE a.attrelid = c.oid AND a.attnum > 0 ORDER BY a.attnum),
       array(SELECT r FROM unnest(ARRAY['stockpool_app', 'stockpool_monitor', 'stockpool_worker']) AS r
             WHERE pg_catalog.has_table_privilege(r, c.oid, 'SELECT'))
FROM pg_catalog.pg_class AS c
WHERE c.relnamespace = 'stockpool'::regnamespace AND c.relkind = 'v' AND c.relname !~ '^_'
ORDER BY 1
"""


def q(dsn: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        return conn.execute(query, params).fetchall()


def one(dsn: str, query: str, params: Any = None) -> Any:
    return q(dsn, query, params)[0][0]


def sqlstate(dsn: str, query: str, params: Any = None) -> str | None:
    try:
        q(dsn, query, params)
    except psycopg.Error as exc:
        return exc.sqlstate
    return None


@pytest.fixture(scope="module")
def lay() -> Iterator[Layout]:
    with throwaway_layout(2) as layout:
        yield layout


def shop_on(layout: Layout, node_index: int, skip: int = 0) -> int:
    """A shop the map gives to that node (the skip-th one)."""
    name = layout.report.nodes[node_index]
    with psycopg.connect(layout.router.dsn, autocommit=True) as conn:
        return shops_by_node(conn, layout, range(1, 400))[name][skip]


def api_differences(node_dsn: str, router_dsn: str) -> list[str]:
    """Public functions and views that differ between a node and the router."""
    diffs = []
    for query in (PUBLIC_SIGNATURES, PUBLIC_VIEWS):
        node = {tuple(map(str, row)) for row in q(node_dsn, query)}
        router = {tuple(map(str, row)) for row in q(router_dsn, query)}
        diffs += [f"node only: {row}" for row in sorted(node - router, key=str)]
        diffs += [f"router only: {row}" for row in sorted(router - node, key=str)]
    return diffs


def test_router_api_is_the_nodes_api(lay: Layout) -> None:
    assert api_differences(lay.nodes[0].dsn, lay.router.dsn) == []
    assert len(q(lay.router.dsn, PUBLIC_SIGNATURES)) >= 15


def test_api_comparison_catches_a_missing_function(lay: Layout) -> None:
    """Negative control: the comparison sees a function the router lacks."""
    with psycopg.connect(lay.router.dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("DROP FUNCTION stockpool.release(bigint, uuid)")
        node = {tuple(map(str, row)) for row in q(lay.nodes[0].dsn, PUBLIC_SIGNATURES)}
        router = {tuple(map(str, row)) for row in conn.execute(PUBLIC_SIGNATURES).fetchall()}
        assert [row[0] for row in node - router] == ["release"]
        raise psycopg.Rollback()


def test_shops_live_on_their_map_node_only(lay: Layout) -> None:
    shops = list(range(1001, 1041))
    for shop in shops:
        assert one(lay.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 10)", (shop,)) == 10
    with psycopg.connect(lay.router.dsn, autocommit=True) as conn:
        by_node = shops_by_node(conn, lay, range(1001, 1041))
    assert all(by_node.values()), by_node
    assert placement(lay, by_node).passed
    for name, node_shops in by_node.items():
        rows = q(
            lay.node_of(name).dsn, "SELECT shop_id FROM stockpool.stock WHERE shop_id = ANY(%s)", (shops,)
        )
        assert sorted(r[0] for r in rows) == sorted(node_shops)
    # A node refuses a routed call for a shop it does not serve.
    other = lay.report.nodes[1]
    stray = by_node[lay.report.nodes[0]][0]
    assert (
        sqlstate(
            lay.node_of(other).dsn,
            "SELECT stockpool.set_stock(%s, 1, 1, 5) FROM stockpool._owns_shop(%s)",
            (stray, stray),
        )
        == "SP020"
    )
    assert (
        one(lay.router.dsn, "SELECT count(*) FROM stockpool.stock_levels WHERE shop_id = ANY(%s)", (shops,))
        == 40
    )


def test_placement_check_catches_a_stray_row(lay: Layout) -> None:
    """Negative control: a shop's key written on the other node directly."""
    shop = shop_on(lay, 0, skip=5)
    one(lay.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 10)", (shop,))
    wrong = lay.nodes[1] if lay.node_of(lay.report.nodes[0]) is lay.nodes[0] else lay.nodes[0]
    one(wrong.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 10)", (shop,))
    try:
        with psycopg.connect(lay.router.dsn, autocommit=True) as conn:
            by_node = shops_by_node(conn, lay, range(shop, shop + 1))
        check = placement(lay, by_node)
        assert not check.passed and f"shop {shop}" in check.detail
        part = one(lay.router.dsn, "SELECT stockpool._partition_of(%s)", (shop,))
        invariants = q(lay.router.dsn, "SELECT shop_id, invariant, detail FROM stockpool.check_invariants()")
        assert (
            shop,
            "placement",
            f"partition {part}: ledger row of partition {part} on a node that does not serve it",
        ) in invariants
    finally:
        with psycopg.connect(wrong.dsn, autocommit=True) as conn, conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")
            conn.execute("DELETE FROM stockpool.movements WHERE shop_id = %s", (shop,))
            conn.execute("DELETE FROM stockpool.stock WHERE shop_id = %s", (shop,))
    assert q(lay.router.dsn, "SELECT * FROM stockpool.check_invariants()") == []


@pytest.mark.parametrize(
    ("call", "state"),
    [
        ("SELECT stockpool.reserve_units(%(shop)s, 999, 1, 1, gen_random_uuid())", "SP001"),
        ("SELECT stockpool.reserve_units(%(shop)s, 1, 1, 0, gen_random_uuid())", "22023"),
        ("SELECT stockpool.reserve_units(%(shop)s, NULL, 1, 1, gen_random_uuid())", "22004"),
        ("SELECT stockpool.claim(%(shop)s, gen_random_uuid())", "SP003"),
        ("SELECT stockpool.set_stock(%(shop)s, 1, 1, -1)", "22023"),
        ("SELECT stockpool.adjust_stock(%(shop)s, 1, 1, 2147483647)", "22003"),
        ("SELECT * FROM stockpool.hot_keys(0)", "22023"),
        ("SELECT * FROM stockpool.hot_keys(NULL)", "22004"),
        ("SELECT * FROM stockpool.maintain('0 s')", "22023"),
        ("SELECT stockpool.sweep(0)", "22023"),
    ],
)
def test_sqlstates_pass_through(lay: Layout, call: str, state: str) -> None:
    shop = shop_on(lay, 0, skip=1)
    one(lay.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 10)", (shop,))
    node = lay.node_of(lay.report.nodes[0]).dsn
    assert sqlstate(node, call, {"shop": shop}) == state
    assert sqlstate(lay.router.dsn, call, {"shop": shop}) == state


def test_null_shop_is_22004_at_the_router(lay: Layout) -> None:
    assert (
        sqlstate(lay.router.dsn, "SELECT stockpool.reserve_units(NULL, 1, 1, 1, gen_random_uuid())")
        == "22004"
    )


def test_router_roles_have_the_apps_rights_and_no_more(lay: Layout) -> None:
    node = lay.nodes[0].dsn
    members = dict(
        q(
            node,
            "SELECT r.rolname, array(SELECT g.rolname FROM pg_auth_members m"
            " JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid ORDER BY 1) FROM pg_roles r"
            " WHERE r.rolname IN ('stockpool_router', 'stockpool_router_ops')",
        )
    )
    assert members == {
        "stockpool_router": ["stockpool_app"],
        "stockpool_router_ops": ["stockpool_monitor", "stockpool_worker"],
    }
    flags = q(
        node,
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles"
        " WHERE rolname IN ('stockpool_router', 'stockpool_router_ops')",
    )
    assert flags == [(False, False, False, False)] * 2
    # Function by function, the router role may call what the app role may
    # (plus the three routing helpers), nothing else; no table at all.
    extra = q(
        node,
        "SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'stockpool'::regnamespace"
        " AND has_function_privilege('stockpool_router', p.oid, 'EXECUTE')"
        " <> has_function_privilege('stockpool_app', p.oid, 'EXECUTE') ORDER BY 1",
    )
    assert [r[0] for r in extra] == ["_misplaced", "_owns_shop", "_partition_of"]
    tables = q(
        node,
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'stockpool'::regnamespace"
        " AND c.relkind IN ('r','p')"
        " AND has_table_privilege('stockpool_router', c.oid, 'SELECT,INSERT,UPDATE,DELETE')",
    )
    assert tables == []


def test_password_is_nowhere_but_the_user_mappings(lay: Layout) -> None:
    password = one(
        lay.router.dsn,
        "SELECT o.option_value FROM pg_user_mapping um, pg_options_to_table(um.umoptions) o"
        " WHERE o.option_name = 'password' LIMIT 1",
    )
    assert password and len(password) >= 24
    # The app role's members cannot read it.
    with psycopg.connect(lay.router.dsn, autocommit=True) as conn:
        conn.execute("CREATE ROLE shopper LOGIN IN ROLE stockpool_app")
    try:
        seen = q(
            lay.router.dsn.replace("postgres@", "shopper@", 1),
            "SELECT umoptions FROM pg_user_mappings",
        )
        assert all(row[0] is None for row in seen)
    finally:
        with psycopg.connect(lay.router.dsn, autocommit=True) as conn:
            conn.execute("DROP ROLE shopper")
    # The router's roles log in with it (the nodes ask for SCRAM): a routed
    # call works; the stored verifier is not the password.
    assert one(
        lay.nodes[0].dsn, "SELECT rolpassword FROM pg_authid WHERE rolname = 'stockpool_router'"
    ).startswith("SCRAM-SHA-256$")
    shop = shop_on(lay, 1, skip=2)
    assert one(lay.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 3)", (shop,)) == 3
    for cluster in (lay.router, *lay.nodes):
        assert password not in cluster.logfile.read_text(errors="replace")


@contextmanager
def stopped_postmaster(layout: Layout, index: int) -> Iterator[None]:
    """The node's postmaster frozen: new connections are accepted by the
    kernel and never answered (a hung host)."""
    pid = layout.nodes[index].postmaster_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_node_down_fails_its_shops_fast_others_unaffected() -> None:
    with throwaway_layout(2) as layout:
        down, up = shop_on(layout, 0), shop_on(layout, 1)
        for shop in (down, up):
            one(layout.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 100)", (shop,))
        node = layout.node_of(layout.report.nodes[0])
        # Stopped: refused at once.
        node.stop("immediate")
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError) as refused:
            q(layout.router.dsn, "SELECT stockpool.reserve_units(%s, 1, 1, 1, gen_random_uuid())", (down,))
        assert refused.value.sqlstate == "08006"
        assert time.monotonic() - started < 2
        assert one(layout.router.dsn, "SELECT stockpool.reserve_units(%s, 1, 1, 1, gen_random_uuid())", (up,))
        # The Python client's retry rules: a lost connection, retried for an
        # idempotent call, then raised.
        client = Client(layout.router.dsn, retry=RetryPolicy(attempts=3, base=0.01, cap=0.02))
        with pytest.raises(psycopg.OperationalError):
            client.reserve_units(down, 1, 1, 1, uuid.uuid4())
        assert client.retries == 2
        client.close()
        # Restarted: it carries on.
        node.start()
        time.sleep(0.2)
        assert one(
            layout.router.dsn, "SELECT stockpool.reserve_units(%s, 1, 1, 1, gen_random_uuid())", (down,)
        )
        # A host that does not answer (SYNs dropped: a listener whose accept
        # queue is full): 08006 after the connect timeout (2 s, the kernel's
        # TCP_USER_TIMEOUT), and the other node's shops do not wait.
        with blackhole() as port:
            repoint(layout, layout.report.nodes[0], port)
            started = time.monotonic()
            with pytest.raises(psycopg.OperationalError) as unanswered:
                q(
                    layout.router.dsn,
                    "SELECT stockpool.reserve_units(%s, 1, 1, 1, gen_random_uuid())",
                    (down,),
                )
            waited = time.monotonic() - started
            assert unanswered.value.sqlstate == "08006" and "timed out" in str(unanswered.value)
            assert 1.5 < waited < 5, waited
            started = time.monotonic()
            assert one(
                layout.router.dsn, "SELECT stockpool.reserve_units(%s, 1, 1, 1, gen_random_uuid())", (up,)
            )
            assert time.monotonic() - started < 1.5
        repoint(layout, layout.report.nodes[0], node.port)
        # A node process that accepts and never answers (postmaster frozen):
        # PL/Proxy 2.10 has no connect timeout of its own and libpq ignores
        # connect_timeout in an asynchronous connect, so only the caller's
        # statement_timeout bounds it (docs/nodes.md recommends one).
        index = layout.nodes.index(node)
        with stopped_postmaster(layout, index):
            started = time.monotonic()
            with pytest.raises(psycopg.errors.QueryCanceled):
                q(
                    layout.router.dsn + "?options=-c%20statement_timeout%3D3s",
                    "SELECT stockpool.reserve_units(%s, 1, 1, 1, gen_random_uuid())",
                    (down,),
                )
            assert time.monotonic() - started < 6
            assert one(
                layout.router.dsn, "SELECT stockpool.reserve_units(%s, 1, 1, 1, gen_random_uuid())", (up,)
            )
        assert one(
            layout.router.dsn, "SELECT stockpool.reserve_units(%s, 1, 1, 1, gen_random_uuid())", (down,)
        )
        assert q(layout.router.dsn, "SELECT * FROM stockpool.check_invariants()") == []


@contextmanager
def blackhole() -> Iterator[int]:
    """A loopback port that drops SYNs: a listener with a full accept queue."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.3)
    try:
        yield port
    finally:
        for sock in (*fillers, listener):
            sock.close()


def repoint(layout: Layout, name: str, port: int) -> None:
    """Point the router's partitions of that node at another port."""
    with psycopg.connect(layout.router.dsn, autocommit=True) as conn, conn.transaction():
        connstr = conninfo_to_dict(
            one(layout.router.dsn, "SELECT connstr FROM stockpool.nodes WHERE node = %s", (name,))
        )
        connstr["port"] = str(port)
        conn.execute(
            "UPDATE stockpool.nodes SET connstr = %s WHERE node = %s", (make_conninfo("", **connstr), name)
        )
        write_servers(conn)


class Buyers:
    """Threads buying through the router with the Python client (which
    retries SP020), recording every answer they were given."""

    def __init__(
        self, dsn: str, shops: list[int], threads: int = 6, retry: RetryPolicy | None = None
    ) -> None:
        self.dsn = dsn
        self.shops = shops
        self.retry = retry or RetryPolicy(attempts=40, base=0.02, cap=0.25)
        self.failed: list[tuple[int, uuid.UUID, float, str | None]] = []  # shop, checkout, when, SQLSTATE
        self.stop = threading.Event()
        self.answers: list[tuple[int, uuid.UUID, str, int]] = []  # shop, checkout, outcome, units
        self.times: list[tuple[int, float]] = []  # shop, when answered
        self.errors: list[str] = []
        self.retries = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def __enter__(self) -> Buyers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)

    def _run(self, i: int) -> None:
        client = Client(self.dsn, retry=self.retry)
        n = 0
        try:
            while not self.stop.is_set():
                shop = self.shops[(i + n) % len(self.shops)]
                n += 1
                checkout = uuid.uuid4()
                try:
                    if not client.reserve_units(shop, 1, 1, 1, checkout):
                        self._note(shop, checkout, "refused", 0)
                        continue
                    self._note(shop, checkout, "reserved", 1)
                    if n % 3:
                        self._note(shop, checkout, "claimed", client.claim(shop, checkout))
                    else:
                        self._note(shop, checkout, "released", client.release(shop, checkout))
                except psycopg.Error as exc:
                    with self.lock:
                        self.errors.append(f"{exc.sqlstate}: {exc}")
                        self.failed.append((shop, checkout, time.monotonic(), exc.sqlstate))
        finally:
            with self.lock:
                self.retries += client.retries
            client.close()

    def _note(self, shop: int, checkout: uuid.UUID, outcome: str, units: int) -> None:
        with self.lock:
            self.answers.append((shop, checkout, outcome, units))
            self.times.append((shop, time.monotonic()))


def told_vs_holds(dsn: str, answers: list[tuple[int, uuid.UUID, str, int]]) -> list[str]:
    """Checkouts whose hold row contradicts the last answer its buyer got."""
    last: dict[uuid.UUID, tuple[int, str]] = {}
    for shop, checkout, outcome, _ in answers:
        last[checkout] = (shop, outcome)
    rows = q(
        dsn,
        "SELECT checkout_id, status FROM stockpool.holds WHERE checkout_id = ANY(%s)",
        ([c for c in last],),
    )
    status = {r[0]: r[1] for r in rows}
    expected = {"reserved": "held", "claimed": "claimed", "released": "released", "refused": None}
    return [
        f"{c}: told {outcome}, hold {status.get(c)}"
        for c, (_, outcome) in last.items()
        if status.get(c) != expected[outcome]
    ]


def test_move_under_load_loses_and_doubles_nothing() -> None:
    with throwaway_layout(2) as layout:
        moving = shop_on(layout, 0)
        part = one(layout.router.dsn, "SELECT stockpool._partition_of(%s)", (moving,))
        others = [shop_on(layout, 0, skip=s) for s in range(1, 4)] + [
            shop_on(layout, 1, skip=s) for s in range(3)
        ]
        others = [
            s for s in others if one(layout.router.dsn, "SELECT stockpool._partition_of(%s)", (s,)) != part
        ]
        shops = [moving, *others]
        for shop in shops:
            one(layout.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 100000)", (shop,))
        source = layout.node_of(layout.report.nodes[0])
        target = layout.node_of(layout.report.nodes[1])
        with Buyers(layout.router.dsn, shops) as buyers:
            time.sleep(1.0)
            report = mover.move(layout.router.dsn, part, target.dsn)
            time.sleep(1.0)
        assert buyers.errors == []
        assert report.refused_seconds < 5 and report.rows["stockpool.holds"] > 0
        answered = [a for a in buyers.answers if a[0] == moving]
        assert len(answered) > 10
        # Every answer given about the moved shop stands on the target, and
        # the source keeps nothing of it; the rest is untouched.
        assert told_vs_holds(target.dsn, answered) == []
        assert q(source.dsn, "SELECT count(*) FROM stockpool.holds WHERE shop_id = %s", (moving,)) == [(0,)]
        with psycopg.connect(layout.router.dsn, autocommit=True) as conn:
            by_node = shops_by_node(conn, layout, range(1, max(shops) + 1))
        for name, node_shops in by_node.items():
            rest = [a for a in buyers.answers if a[0] != moving and a[0] in node_shops]
            assert told_vs_holds(layout.node_of(name).dsn, rest) == []
        # Claims: one movement per claimed checkout (folded now or pending).
        claimed = {c for s, c, o, _ in answered if o == "claimed"}
        moved = q(
            target.dsn,
            "SELECT checkout_id FROM stockpool.movements WHERE shop_id = %s AND reason = 'claim'"
            " UNION ALL SELECT checkout_id FROM stockpool.pending_claims WHERE shop_id = %s",
            (moving, moving),
        )
        assert sorted(str(r[0]) for r in moved) == sorted(str(c) for c in claimed)
        assert q(layout.router.dsn, "SELECT * FROM stockpool.check_invariants()") == []
        with psycopg.connect(layout.router.dsn, autocommit=True) as conn:
            assert placement(layout, shops_by_node(conn, layout, range(moving, moving + 1))).passed
        assert (
            one(layout.router.dsn, "SELECT phase FROM stockpool.moves ORDER BY move_id DESC LIMIT 1")
            == "done"
        )


def test_node_stopped_mid_load_fails_its_shops_only_and_carries_on() -> None:
    """Buyers on both nodes' shops (no retries: every failure is seen); node A
    stops (immediate) for 2 s and starts again."""
    with throwaway_layout(2) as layout:
        on_a = [shop_on(layout, 0, skip=s) for s in range(3)]
        on_b = [shop_on(layout, 1, skip=s) for s in range(3)]
        for shop in (*on_a, *on_b):
            one(layout.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 100000)", (shop,))
        node_a = layout.node_of(layout.report.nodes[0])
        with Buyers(layout.router.dsn, [*on_a, *on_b], threads=6, retry=RetryPolicy(attempts=1)) as buyers:
            time.sleep(1.0)
            stopping = time.monotonic()
            node_a.stop("immediate")
            down_from = time.monotonic()
            time.sleep(2.0)
            down_until = time.monotonic()
            node_a.start()
            up_at = time.monotonic()
            time.sleep(2.0)
        failed_shops = {shop for shop, _, _, _ in buyers.failed}
        states = {state for _, _, _, state in buyers.failed}
        assert failed_shops and failed_shops <= set(on_a), buyers.errors[:3]
        assert states <= {"08006"}, buyers.errors[:3]
        assert all(stopping <= when <= up_at + 1.5 for _, _, when, _ in buyers.failed)
        during = [shop for shop, when in buyers.times if down_from + 0.5 < when < down_until]
        assert any(shop in on_b for shop in during) and not any(shop in on_a for shop in during)
        after = [shop for shop, when in buyers.times if when > up_at + 0.5]
        assert any(shop in on_a for shop in after)
        # What the buyers were told stands. A checkout whose call failed may
        # or may not have committed that call (the outcome of a lost
        # connection is unknown): only checkouts without a failure count.
        unknown = {checkout for _, checkout, _, _ in buyers.failed}
        for name, shops in ((layout.report.nodes[0], on_a), (layout.report.nodes[1], on_b)):
            told = [a for a in buyers.answers if a[0] in shops and a[1] not in unknown]
            assert told_vs_holds(layout.node_of(name).dsn, told) == []
        assert q(layout.router.dsn, "SELECT * FROM stockpool.check_invariants()") == []


def test_move_checks_catch_a_lost_hold() -> None:
    """Negative control of the move test's check: a hold deleted on the target
    after a move contradicts what its buyer was told."""
    with throwaway_layout(2) as layout:
        shop = shop_on(layout, 0)
        part = one(layout.router.dsn, "SELECT stockpool._partition_of(%s)", (shop,))
        one(layout.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 10)", (shop,))
        checkout = uuid.uuid4()
        assert one(layout.router.dsn, "SELECT stockpool.reserve_units(%s, 1, 1, 1, %s)", (shop, checkout))
        target = layout.node_of(layout.report.nodes[1])
        mover.move(layout.router.dsn, part, target.dsn)
        answers = [(shop, checkout, "reserved", 1)]
        assert told_vs_holds(target.dsn, answers) == []
        with psycopg.connect(target.dsn, autocommit=True) as conn, conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")
            conn.execute("DELETE FROM stockpool.holds WHERE checkout_id = %s", (checkout,))
        assert told_vs_holds(target.dsn, answers) == [f"{checkout}: told reserved, hold None"]


def test_dead_move_is_resumed_and_a_stuck_one_undone() -> None:
    with throwaway_layout(2) as layout:
        shop = shop_on(layout, 0)
        part = one(layout.router.dsn, "SELECT stockpool._partition_of(%s)", (shop,))
        other = shop_on(layout, 1)
        for s in (shop, other):
            one(layout.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 10)", (s,))
        checkout = uuid.uuid4()
        assert one(layout.router.dsn, "SELECT stockpool.reserve_units(%s, 1, 1, 2, %s)", (shop, checkout))
        target = layout.node_of(layout.report.nodes[1])
        source = layout.node_of(layout.report.nodes[0])
        # 1. A router transaction older than the fence: the move waits for it
        # and, past --drain-timeout, is undone.
        with psycopg.connect(layout.router.dsn) as idle:
            idle.execute("SELECT stockpool.adjust_stock(%s, 1, 1, 0)", (other,))
            with pytest.raises(StockpoolError, match="undone"):
                mover.move(layout.router.dsn, part, target.dsn, drain_timeout=1)
            assert (
                one(
                    layout.router.dsn,
                    "SELECT state FROM stockpool.partition_map WHERE partition = %s",
                    (part,),
                )
                == "active"
            )
            # 2. The same, run as the CLI and killed while it waits: the
            # partition stays fenced (SP020; other shops go on) until a
            # later run resumes the move.
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "stockpool.cli",
                    "move",
                    "--dsn",
                    layout.router.dsn,
                    "--partition",
                    str(part),
                    "--to",
                    target.dsn,
                    "--drain-timeout",
                    "60",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            deadline = time.monotonic() + 30
            while (
                one(
                    layout.router.dsn,
                    "SELECT state FROM stockpool.partition_map WHERE partition = %s",
                    (part,),
                )
                != "moving"
            ):
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            proc.kill()
            proc.wait(timeout=10)
        assert sqlstate(layout.router.dsn, "SELECT stockpool.claim(%s, %s)", (shop, checkout)) == "SP020"
        assert one(layout.router.dsn, "SELECT stockpool.adjust_stock(%s, 1, 1, 1)", (other,)) == 11
        third = one(
            layout.router.dsn,
            "SELECT partition FROM stockpool.partition_map WHERE node = %s AND partition <> %s LIMIT 1",
            (layout.report.nodes[0], part),
        )
        report = mover.move(layout.router.dsn, third, target.dsn)
        assert report.resumed == [f"partition {part} -> {layout.report.nodes[1]}"]
        assert one(layout.router.dsn, "SELECT stockpool.claim(%s, %s)", (shop, checkout)) == 2
        # 3. Killed after the switch, before the source's clean-up: the next
        # run cleans up.
        original = mover._delete_partition
        calls = {"n": 0}

        def dies_on_source_cleanup(conn: psycopg.Connection, found: Any, partition: int) -> None:
            calls["n"] += 1
            if calls["n"] == 2:  # the first call clears the target's leftovers
                raise RuntimeError("killed")
            original(conn, found, partition)

        back = layout.node_of(layout.report.nodes[0])
        mover._delete_partition = dies_on_source_cleanup
        try:
            with pytest.raises(RuntimeError):
                mover.move(layout.router.dsn, part, back.dsn)
        finally:
            mover._delete_partition = original
        assert (
            one(
                layout.router.dsn,
                "SELECT phase FROM stockpool.moves WHERE partition = %s ORDER BY move_id DESC LIMIT 1",
                (part,),
            )
            == "switched"
        )
        assert one(target.dsn, "SELECT count(*) FROM stockpool.stock WHERE shop_id = %s", (shop,)) == 1
        with psycopg.connect(layout.router.dsn, autocommit=True) as conn:
            assert not placement(layout, shops_by_node(conn, layout, range(shop, shop + 1))).passed
        report = mover.move(layout.router.dsn, part, back.dsn)
        assert report.nothing_to_do and report.resumed == [f"partition {part} -> {layout.report.nodes[0]}"]
        with psycopg.connect(layout.router.dsn, autocommit=True) as conn:
            assert placement(layout, shops_by_node(conn, layout, range(shop, shop + 1))).passed
        assert q(layout.router.dsn, "SELECT * FROM stockpool.check_invariants()") == []
        assert one(source.dsn, "SELECT on_hand FROM stockpool.stock WHERE shop_id = %s", (shop,)) == 8


def test_adding_a_node_keeps_the_map_and_dropping_one_is_refused() -> None:
    with throwaway_layout(2) as layout, throwaway(create=init_node) as third:
        before = q(layout.router.dsn, "SELECT partition, node FROM stockpool.partition_map ORDER BY 1")
        report = deploy_router(layout.router.dsn, [layout.nodes[0].dsn, layout.nodes[1].dsn, third.dsn])
        assert not report.new_map and report.partitions[report.nodes[2]] == []
        assert (
            q(layout.router.dsn, "SELECT partition, node FROM stockpool.partition_map ORDER BY 1") == before
        )
        shop = shop_on(layout, 0)
        one(layout.router.dsn, "SELECT stockpool.set_stock(%s, 1, 1, 7)", (shop,))
        part = one(layout.router.dsn, "SELECT stockpool._partition_of(%s)", (shop,))
        mover.move(layout.router.dsn, part, third.dsn)
        assert one(third.dsn, "SELECT on_hand FROM stockpool.stock WHERE shop_id = %s", (shop,)) == 7
        assert one(layout.router.dsn, "SELECT stockpool.adjust_stock(%s, 1, 1, 1)", (shop,)) == 8
        # A re-deploy drops what a node no longer has.
        with psycopg.connect(layout.router.dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION stockpool.retired_call(p_shop_id bigint) RETURNS int"
                " LANGUAGE sql AS 'SELECT 1'"
            )
        deploy_router(layout.router.dsn, [layout.nodes[0].dsn, layout.nodes[1].dsn, third.dsn])
        assert q(layout.router.dsn, "SELECT 1 FROM pg_proc WHERE proname = 'retired_call'") == []
        assert api_differences(layout.nodes[0].dsn, layout.router.dsn) == []
        with pytest.raises(StockpoolError, match="serve partitions but are not in --nodes"):
            deploy_router(layout.router.dsn, [layout.nodes[0].dsn, layout.nodes[1].dsn])


def test_cli_deploy_and_move(lay: Layout) -> None:
    from typer.testing import CliRunner

    from stockpool.cli import app

    runner = CliRunner()
    nodes = ",".join(n.dsn for n in lay.nodes)
    out = runner.invoke(app, ["deploy", "--dsn", lay.router.dsn, "--nodes", nodes])
    assert out.exit_code == 0, out.output
    assert "partitions per node" in out.output and "map kept" in out.output
    bad = runner.invoke(app, ["move", "--dsn", lay.router.dsn, "--partition", "64", "--to", lay.nodes[0].dsn])
    assert bad.exit_code == 2 and "0..63" in bad.output
    owned = one(
        lay.router.dsn,
        "SELECT min(partition) FROM stockpool.partition_map WHERE node = %s",
        (lay.report.nodes[1],),
    )
    same = runner.invoke(
        app,
        [
            "move",
            "--dsn",
            lay.router.dsn,
            "--partition",
            str(owned),
            "--to",
            lay.node_of(lay.report.nodes[1]).dsn,
        ],
    )
    assert same.exit_code == 0 and "nothing moved" in same.output


def test_race_nodes_passes(tmp_path: Any) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stockpool.cli",
            "race",
            "--nodes",
            "2",
            "--duration",
            "8",
            "--clients",
            "8",
            "--results",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "each shop's rows on exactly one node" in proc.stdout and "PASS" in proc.stdout


def test_race_nodes_refuses_other_flags() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "stockpool.cli", "race", "--nodes", "2", "--scenario", "sellout"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--nodes runs the soak only" in proc.stdout + proc.stderr


def test_named_units_through_the_router(lay: Layout) -> None:
    """Seats (issue 15) are routed like the rest: labels come back as text[]."""
    shop = shop_on(lay, 1, skip=4)
    labels = ["A1", "A2", "A3", "A4"]
    assert one(lay.router.dsn, "SELECT stockpool.set_named_units(%s, 5, 1, %s)", (shop, labels)) == 4
    checkout = uuid.uuid4()
    got = one(
        lay.router.dsn,
        "SELECT stockpool.reserve_named(%s, 5, 1, 2, %s, p_adjacent => true)",
        (shop, checkout),
    )
    assert len(got) == 2 and set(got) <= set(labels)
    assert (
        one(
            lay.router.dsn,
            "SELECT stockpool.reserve_named(%s, 5, 1, 2, %s, p_adjacent => true)",
            (shop, checkout),
        )
        == got
    )
    assert one(lay.router.dsn, "SELECT stockpool.claim(%s, %s)", (shop, checkout)) == 2
    status = q(
        lay.router.dsn,
        "SELECT label, status FROM stockpool.unit_status WHERE shop_id = %s AND item_id = 5 ORDER BY label",
        (shop,),
    )
    assert sorted(s for _, s in status) == ["free", "free", "sold", "sold"], status
    assert {label for label, s in status if s == "sold"} == set(got)
    assert sqlstate(lay.router.dsn, "SELECT stockpool.set_stock(%s, 5, 1, 10)", (shop,)) == "SP010"
    assert q(lay.router.dsn, "SELECT * FROM stockpool.check_invariants()") == []
