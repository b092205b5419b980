"""Faults: stockpool keeps every guarantee when things break.

Each test runs load (threads with their own connections, bounded in time and
count) against its database, injects one fault, and afterwards checks:
check_invariants() is empty (oversell, allocation, ledger_drift, negative,
orphan), the claim movements match the claimed holds key by key, and every
client-side outcome matches the database (stockcheck.verify_outcomes): what the
client saw commit is there, what it saw fail left nothing, what it could not
know (connection lost) went one way or the other but never half.

Faults that end the server or every session (SIGKILL of a backend, which makes
the postmaster restart all of them, and ``pg_ctl stop -m immediate``) run on a
throwaway cluster of this module, so the session cluster other tests share is
never disturbed. That cluster keeps fsync on: crash recovery is under test.

Every fault that makes sense behind a transaction pooler runs twice, by the
``via`` parameter: the clients (buyers, victim, blocker, holders) connect to
the server itself ("direct") or to a throwaway pgbouncer 1.18 in transaction
mode in front of it ("pgbouncer"); the faults (pg_terminate_backend, SIGKILL,
pg_ctl) and the checks always go to the server. Behind the pooler:

- A backend ended mid-call: pgbouncer drops that server connection and the
  client sees its connection lost (the server's 57P01, or pgbouncer's 08P01);
  stockpool.client.Client retries the idempotent call and it lands once.
- SIGKILL (every backend restarts) and ``pg_ctl stop -m immediate``: a client
  loses its connection when it is inside a transaction, or when pgbouncer
  refuses it for want of a server connection. pgbouncer reconnects once the
  server is back, but after a failed server login it waits
  ``server_login_retry`` (15 s by default, 1 s here) and meanwhile refuses
  the clients that find no server connection; clients already queued just
  wait. A client between transactions holds no server connection and may
  notice nothing, so the direct variant's "every session reconnects" is not
  asserted; what must hold is that the buyers carry on.
- A client that vanishes mid-transaction: pgbouncer closes the server
  connection it lent (it never hands a connection inside a transaction to
  another client), and the server rolls back.
- idle_in_transaction_session_timeout, lock_timeout and statement_timeout are
  the server's: they act the same, set with SET LOCAL in the transaction.

So both variants keep no session state across transactions: pgbouncer gives a
session's next transaction any server connection and runs no reset query in
transaction mode, so a session-level SET would stay behind for whoever
borrows that connection next. Timeouts are SET LOCAL; the test's gate keys on
application_name, which pgbouncer sets on every server connection it lends
(every client here names itself: one without a name inherits the last
borrower's); the statement_timeout safety net is a database default, since
1.18 refuses the startup parameter ``options``; a client's backend is looked
up from the server while its transaction is open, because the pid a pooled
client is told is pgbouncer's; and sessions do not prepare statements (the
load uses the client's pooler detection, the victim is the client itself).

Not run through the pooler: the negative controls of the checkers (they have
no clients; test_pooled_outcomes_are_checked_against_the_server is the pooled
one), and ending the backend of an idle client, which behind a pooler has no
backend. The lost commit reply is test_client.py's (its proxy sits between a
client and the server).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from stockcheck import (
    FAILED,
    OK,
    REFUSED,
    UNKNOWN,
    ClaimMove,
    HoldRow,
    Line,
    Op,
    diff,
    final_state,
    snapshot,
    verify_outcomes,
)
from stockpool.client import Client, RetryPolicy, behind_pooler, is_connection_lost
from stockpool.install.deploy import deploy
from stockpool.server import cluster as clusters
from stockpool.server import pooler

SHOP = 1  # load runs here
FAULT_SHOP = 2  # faults that compare snapshots happen here, away from the load
LOC = 1
LOAD_ITEMS = (1, 2, 3)
HOT = 1  # an item both the load and the victims use
SLOW = 9  # an item only the victims use; the fault blocks on it
GATE_LOCK = 7_000_001  # advisory lock of the test-only gate trigger
VICTIM_CART: tuple[Line, ...] = ((HOT, LOC, 2), (SLOW, LOC, 8))
LOAD_STOCK = 5000  # per key: the load must not sell out within a test

# Every client names itself (see the module docstring); the gate stops only the victim.
LOAD_APP = "stockpool-fault-load"
VICTIM_APP = "stockpool-fault-victim"
BLOCKER_APP = "stockpool-fault-blocker"
BUYER_APP = "stockpool-fault-buyer"
HOLDER_APP = "stockpool-fault-holder"

VIA = ("direct", "pgbouncer")
SAFETY_TIMEOUT = "20s"  # any statement of any session: a hang fails the test, not the run
LOGIN_RETRY = 1  # pgbouncer's server_login_retry here, in seconds (its default: 15)


# ---------------------------------------------------------------------------
# where the clients connect


@dataclass(frozen=True)
class Route:
    """Where a test's clients connect: the server itself ("direct"), or a
    throwaway pgbouncer in transaction mode in front of it ("pgbouncer").
    Faults and checks use ``server_dsn`` in both."""

    via: str
    server_dsn: str
    dsn: str  # every client's
    pgbouncer: pooler.Pooler | None = None

    @property
    def pooled(self) -> bool:
        return self.pgbouncer is not None

    def connect(self, name: str, autocommit: bool = False) -> psycopg.Connection:
        """A client session named ``name``, preparing no statements behind the pooler."""
        conn = psycopg.connect(self.dsn, autocommit=autocommit, application_name=name, connect_timeout=5)
        if self.pooled:
            conn.prepare_threshold = None
        return conn

    def transactions(self) -> int:
        """Transactions pgbouncer has carried to this test's database (SHOW STATS); 0 when direct."""
        if self.pgbouncer is None:
            return 0
        dbname = conninfo_to_dict(self.dsn)["dbname"]
        with psycopg.connect(self.pgbouncer.admin_dsn, autocommit=True, prepare_threshold=None) as console:
            cur = console.execute("SHOW STATS")
            names = [c.name for c in cur.description or ()]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        return sum(int(r["total_xact_count"]) for r in rows if r["database"] == dbname)


@contextlib.contextmanager
def started_pgbouncer(server_dsn: str) -> Iterator[pooler.Pooler]:
    """pgbouncer in transaction mode in front of a cluster; every database of
    the cluster is a pool of its own there, so one serves a module's tests."""
    with pooler.pgbouncer(server_dsn, 50) as pb:
        with psycopg.connect(pb.admin_dsn, autocommit=True, prepare_threshold=None) as console:
            # After a failed server login (the server down, or in crash
            # recovery) pgbouncer waits this long before it tries again;
            # 15 s by default would only make the restart tests wait.
            console.execute(f"SET server_login_retry = {LOGIN_RETRY}")
        yield pb


def routed(via: str, server_dsn: str, request: pytest.FixtureRequest, bouncer: str) -> Route:
    """The route ``via`` to the database ``server_dsn``; ``bouncer`` names the
    module's pgbouncer fixture in front of that cluster, started on first use."""
    with psycopg.connect(server_dsn, autocommit=True) as c:
        # The safety net of every session, as a database default: pgbouncer
        # 1.18 refuses a client's startup parameter ``options``.
        c.execute(
            sql.SQL("ALTER DATABASE {} SET statement_timeout = {}").format(
                sql.Identifier(c.info.dbname), sql.Literal(SAFETY_TIMEOUT)
            )
        )
    if via == "direct":
        return Route(via, server_dsn, server_dsn)
    pb: pooler.Pooler = request.getfixturevalue(bouncer)
    return Route(via, server_dsn, pooler.through(server_dsn, int(str(conninfo_to_dict(pb.dsn)["port"]))), pb)


@pytest.fixture(scope="module")
def bouncer(pg_server: Any) -> Iterator[pooler.Pooler]:
    with started_pgbouncer(pg_server.dsn("postgres")) as pb:
        yield pb


@pytest.fixture(params=VIA)
def via(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def route(via: str, dsn: str, request: pytest.FixtureRequest) -> Route:
    """The clients' way to this test's database (see :class:`Route`)."""
    return routed(via, dsn, request, "bouncer")


# ---------------------------------------------------------------------------
# load


@dataclass
class Load:
    """Buyers on their own connections: reserve (units or cart), then claim,
    release or walk away. Bounded by ``seconds`` and ``max_ops`` per thread;
    survives lost connections and a server that is down for a while. Each
    session asks the client's pooler detection (stockpool.client.behind_pooler)
    whether it may prepare statements, and ``sessions`` keeps the answers."""

    dsn: str
    shop: int = SHOP
    items: Sequence[int] = LOAD_ITEMS
    threads: int = 3
    seconds: float = 10.0  # a cap; tests normally end the load with finish()
    max_ops: int = 2000
    ttls: Sequence[str] = ("15 minutes",)
    allowed: frozenset[str] = frozenset({"SP003"})  # claim/release after an unknown reserve
    claim_delay: float = 0.0
    pause: float = 0.002  # think time between checkouts: the machine is shared
    seed: int = 0
    ops: list[Op] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    reconnects: int = 0
    sessions: list[bool] = field(default_factory=list)  # per session opened: behind a pooler?
    stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Load:
        for n in range(self.threads):
            t = threading.Thread(target=self._run, args=(n,), daemon=True)
            t.start()
            self._workers.append(t)
        return self

    def finish(self, timeout: float = 30) -> None:
        self.stop.set()
        for t in self._workers:
            t.join(timeout)
        hung = [t.name for t in self._workers if t.is_alive()]
        assert not hung, f"load threads hung: {hung}"

    def committed(self, since: float = 0.0) -> int:
        with self._lock:
            return sum(1 for o in self.ops if o.outcome == OK and o.at > since)

    def _record(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def _connect(self) -> psycopg.Connection | None:
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=2, application_name=LOAD_APP)
        except psycopg.OperationalError:
            return None
        try:
            # Five executions of one statement and psycopg prepares it, which
            # a transaction pooler's next server connection never saw.
            pooled = behind_pooler(conn)
        except psycopg.OperationalError:
            conn.close()
            return None
        if pooled:
            conn.prepare_threshold = None
        with self._lock:
            self.sessions.append(pooled)
        return conn

    def _run(self, n: int) -> None:
        rng = random.Random(self.seed * 1000 + n)
        deadline = time.monotonic() + self.seconds
        conn: psycopg.Connection | None = None
        done = 0
        first = True
        try:
            while not self.stop.is_set() and time.monotonic() < deadline and done < self.max_ops:
                if conn is None or conn.broken or conn.closed:
                    conn = self._connect()
                    if conn is None:
                        time.sleep(0.05)
                        continue
                    if not first:
                        with self._lock:
                            self.reconnects += 1
                    first = False
                checkout = uuid.uuid4()
                op = Op("reserve", checkout, self._lines(rng))
                self._do(conn, op, rng.choice(self.ttls))
                self._record(op)
                time.sleep(rng.uniform(0, self.pause))
                done += 1
                if op.outcome in (OK, UNKNOWN):
                    pick = rng.random()
                    kind = "claim" if pick < 0.5 else "release" if pick < 0.8 else ""
                    if kind:
                        if self.claim_delay:
                            time.sleep(rng.uniform(0, self.claim_delay))
                        if conn.broken or conn.closed:
                            conn = self._connect()
                            if conn is None:
                                continue
                            with self._lock:
                                self.reconnects += 1
                        follow = Op(kind, checkout)
                        self._do(conn, follow, "")
                        self._record(follow)
                        done += 1
        finally:
            if conn is not None:
                conn.close()

    def _lines(self, rng: random.Random) -> tuple[Line, ...]:
        pick = rng.random()
        if pick < 0.6:
            return ((rng.choice(self.items), LOC, rng.choice((1, 1, 2, 3))),)
        # a cart: 2-3 lines in any order, keys may repeat
        return tuple((rng.choice(self.items), LOC, rng.randint(1, 2)) for _ in range(rng.randint(2, 3)))

    def _do(self, conn: psycopg.Connection, op: Op, ttl: str) -> None:
        try:
            self._call(conn, op, ttl)
        finally:
            op.at = time.monotonic()

    def _call(self, conn: psycopg.Connection, op: Op, ttl: str) -> None:
        try:
            if op.kind == "reserve" and len(op.lines) == 1:
                item, loc, qty = op.lines[0]
                row = conn.execute(
                    "SELECT stockpool.reserve_units(%s, %s, %s, %s, %s, %s::interval)",
                    (self.shop, item, loc, qty, op.checkout, ttl),
                ).fetchone()
            elif op.kind == "reserve":
                row = conn.execute(
                    "SELECT stockpool.reserve_cart(%s, %s, %s::bigint[], %s::bigint[], %s::integer[],"
                    " %s::interval)",
                    (
                        self.shop,
                        op.checkout,
                        [ln[0] for ln in op.lines],
                        [ln[1] for ln in op.lines],
                        [ln[2] for ln in op.lines],
                        ttl,
                    ),
                ).fetchone()
            else:
                row = conn.execute(f"SELECT stockpool.{op.kind}(%s, %s)", (self.shop, op.checkout)).fetchone()
            assert row is not None
            op.value = row[0]
            op.outcome = REFUSED if op.value is False else OK
        except psycopg.Error as exc:
            if is_connection_lost(exc):
                op.outcome = UNKNOWN
                conn.close()
                return
            op.outcome, op.sqlstate = FAILED, exc.sqlstate
            if exc.sqlstate not in self.allowed:
                with self._lock:
                    self.unexpected.append(f"{op.kind}: [{exc.sqlstate}] {str(exc).splitlines()[0]}")


@contextlib.contextmanager
def running(load: Load, warmup: float = 0.4) -> Iterator[Load]:
    load.start()
    time.sleep(warmup)
    try:
        yield load
    finally:
        load.finish()


def assert_clean_load(load: Load, route: Route) -> None:
    """No error outside the allowed ones, and the buyers went the test's way:
    every session of a pooled run found the pooler (none of a direct run),
    and pgbouncer carried at least one transaction per answered call."""
    assert load.unexpected == [], load.unexpected[:10]
    assert load.sessions and set(load.sessions) == {route.pooled}, (route.via, load.sessions)
    if route.pooled:
        answered = sum(1 for o in load.ops if o.outcome != UNKNOWN)
        assert route.transactions() >= answered > 0, (route.transactions(), answered)


def assert_consistent(conn: psycopg.Connection, ops: Sequence[Op], shop: int | None = None) -> None:
    state = final_state(conn, shop)
    assert state.violations == [], f"check_invariants: {state.violations}"
    assert state.history == [], state.history
    problems = verify_outcomes(ops, state.holds, state.moves)
    assert problems == [], "\n".join(problems[:20])


def stock_keys(conn: psycopg.Connection, shop: int, items: Sequence[int], on_hand: int) -> None:
    for item in items:
        conn.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (shop, item, LOC, on_hand))


def wait_for(predicate: Callable[[], Any], timeout: float = 10, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def lock_wait(admin: psycopg.Connection, pid: int) -> str | None:
    """The lock the backend ``pid`` is waiting on inside its call, or None."""
    row = admin.execute(
        "SELECT wait_event FROM pg_catalog.pg_stat_activity"
        " WHERE pid = %s AND state = 'active' AND wait_event_type = 'Lock'",
        (pid,),
    ).fetchone()
    return None if row is None else str(row[0])


class Victim:
    """A stockpool.client.Client on the test's route whose one call runs in a
    thread, so the test can end its backend while the call blocks.

    The client's rules for a lost connection (the outcome is unknown, the call
    is idempotent: retry it) hold the first retry back until the test has
    looked at what the lost attempt left and calls :meth:`retry`."""

    def __init__(self, route: Route) -> None:
        self.sessions: list[psycopg.Connection] = []  # every connection the client opened
        self.retrying = threading.Event()
        self.error: BaseException | None = None
        self.result: Any = None
        self._dsn = route.dsn
        self._go = threading.Event()
        self._thread: threading.Thread | None = None
        self.client = Client(
            route.dsn,
            retry=RetryPolicy(attempts=3),
            connect=self._connect,
            sleep=self._sleep,
            rng=random.Random(0),
        )

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self._dsn, autocommit=True, application_name=VICTIM_APP, connect_timeout=5)
        self.sessions.append(conn)
        return conn

    def _sleep(self, delay: float) -> None:
        if self.retrying.is_set():
            time.sleep(delay)
            return
        self.retrying.set()
        self._go.wait(60)

    def call(self, fn: Callable[[Client], Any]) -> None:
        def run() -> None:
            try:
                self.result = fn(self.client)
            except BaseException as exc:
                self.error = exc

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def wait_retrying(self, timeout: float = 15) -> None:
        """Until the client, its connection lost, is about to retry."""
        assert self._thread is not None
        wait_for(lambda: self.retrying.is_set() or not self._thread_alive(), timeout, "the client to retry")
        assert self.retrying.is_set(), f"the client gave up: {self.error!r}, returned {self.result!r}"

    def retry(self, timeout: float = 30) -> None:
        """Let the held retry go and wait for the call's answer."""
        assert self._thread is not None
        self._go.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the victim's call never returned"

    def _thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        self._go.set()
        self.client.close()
        for conn in self.sessions:
            conn.close()


def cart(conn: psycopg.Connection, shop: int, checkout: uuid.UUID, lines: Sequence[Line]) -> bool:
    row = conn.execute(
        "SELECT stockpool.reserve_cart(%s, %s, %s::bigint[], %s::bigint[], %s::integer[])",
        (shop, checkout, [x[0] for x in lines], [x[1] for x in lines], [x[2] for x in lines]),
    ).fetchone()
    return bool(row and row[0])


# ---------------------------------------------------------------------------
# a throwaway cluster for the faults that end every session or the server


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[clusters.Cluster]:
    # syncfs: crash recovery's sync of the data directory is one call, not
    # an fsync per file (the machine is shared and its disk may be busy).
    with clusters.throwaway({"max_connections": "60", "recovery_init_sync_method": "syncfs"}) as cl:
        yield cl


@pytest.fixture
def own_dsn(own_cluster: clusters.Cluster) -> Iterator[str]:
    if not own_cluster.running():
        own_cluster.start()
    clusters.wait_ready(own_cluster.dsn)
    name = f"faults_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(own_cluster.dsn, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    dsn = own_cluster.dsn_for(name)
    deploy(dsn)
    yield dsn
    if own_cluster.running():
        clusters.wait_ready(own_cluster.dsn)
        with psycopg.connect(own_cluster.dsn, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def own_bouncer(own_cluster: clusters.Cluster) -> Iterator[pooler.Pooler]:
    with started_pgbouncer(own_cluster.dsn) as pb:
        yield pb


@pytest.fixture
def own_route(via: str, own_dsn: str, request: pytest.FixtureRequest) -> Route:
    """The clients' way to this test's database on the throwaway cluster."""
    return routed(via, own_dsn, request, "own_bouncer")


# ---------------------------------------------------------------------------
# a backend ended mid-reserve, mid-claim, mid-release


GATE_TRIGGER = f"""
CREATE FUNCTION public.fault_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only the victim's calls stop here, mid-call, after their earlier
    -- writes, until the test's session lets them go. The victim is known by
    -- its application_name: a pooler sets it on the server connection it
    -- lends, where a session setting would stay behind for the next client.
    IF pg_catalog.current_setting('application_name') = '{VICTIM_APP}' THEN
        PERFORM pg_catalog.pg_advisory_xact_lock_shared({GATE_LOCK});
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER fault_gate AFTER INSERT ON {{table}}
    FOR EACH STATEMENT EXECUTE FUNCTION public.fault_gate();
"""
# Where each call stops at the gate: release after ending the holds and
# returning HOT's units to the pool; claim after recording a pending claim
# (SLOW's ledger row is busy, so SLOW's claim is pending at the latest).
GATE_TABLE = {"release": "stockpool.pool_units", "claim": "stockpool.pending_claims"}


def _end_backend(
    method: str, dsn: str, admin: psycopg.Connection, blocker: psycopg.Connection, pid: int
) -> psycopg.Connection:
    """End the victim's backend; returns a live admin connection afterwards."""
    if method == "terminate":
        row = admin.execute("SELECT pg_catalog.pg_terminate_backend(%s, 5000)", (pid,)).fetchone()
        assert row == (True,)
        blocker.rollback()
        return admin
    # SIGKILL: the postmaster treats it as a crash, ends every other session,
    # runs crash recovery and accepts connections again.
    os.kill(pid, signal.SIGKILL)

    def blocker_gone() -> bool:
        try:
            blocker.execute("SELECT 1")
            return False
        except psycopg.Error:
            return True

    wait_for(blocker_gone, 15, "the postmaster to end every session")
    clusters.wait_ready(dsn, timeout=30)
    admin.close()
    return psycopg.connect(dsn, autocommit=True)


def _prepare(admin: psycopg.Connection, phase: str, checkout: uuid.UUID) -> Callable[[Client], Any]:
    """Set the victim's stage; returns its call."""
    stock_keys(admin, SHOP, [*LOAD_ITEMS, SLOW], LOAD_STOCK)
    if phase == "reserve":
        # SLOW's pool holds 5 units: the victim takes 2 of HOT and 5 of SLOW,
        # then waits for SLOW's refill lock, which the blocker holds.
        admin.execute("SELECT stockpool.configure_pool(%s, %s, %s, 5)", (SHOP, SLOW, LOC))
        admin.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, SLOW, LOC))
        return lambda client: client.reserve_cart(SHOP, checkout, VICTIM_CART)
    assert cart(admin, SHOP, checkout, VICTIM_CART)
    if phase in GATE_TABLE:
        admin.execute(GATE_TRIGGER.format(table=GATE_TABLE[phase]))
    if phase == "claim":
        return lambda client: client.claim(SHOP, checkout)
    return lambda client: client.release(SHOP, checkout)


def block(blocker: psycopg.Connection, phase: str, shop: int) -> None:
    """Take, in the blocker's open transaction, the lock the victim will wait for."""
    if phase == "reserve":
        # the key's refill lock: reserve waits for it after taking pool units
        blocker.execute(
            "SELECT pg_catalog.pg_advisory_xact_lock(stockpool._key_lock_id(%s, %s, %s))", (shop, SLOW, LOC)
        )
    else:
        if phase == "claim":
            # the key's ledger row: claim does not wait for it, it records
            # SLOW's claim as pending, and stops at the gate after that insert
            blocker.execute(
                "SELECT 1 FROM stockpool.stock WHERE shop_id = %s AND item_id = %s AND location_id = %s"
                " FOR NO KEY UPDATE",
                (shop, SLOW, LOC),
            )
        # the gate (see GATE_TABLE)
        blocker.execute("SELECT pg_catalog.pg_advisory_xact_lock(%s)", (GATE_LOCK,))


WRITES_BEFORE_BLOCK = {
    "reserve": {"stockpool.pool_units"},  # HOT's and SLOW's pooled units deleted
    "claim": {"stockpool.pending_claims"},  # a deduction recorded (HOT's or SLOW's), not yet committed
    "release": {"stockpool.holds", "stockpool.pool_units"},  # holds ended, HOT's units back
}


def server_log(cl: clusters.Cluster, since: int) -> str:
    with cl.logfile.open("rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace")


def backend_pid(session: psycopg.Connection) -> int:
    """The server process serving ``session``, asked inside its open
    transaction: behind a transaction pooler a client has a server process
    only while a transaction is open, and the pid it was told at login is
    pgbouncer's."""
    assert session.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    row = session.execute("SELECT pg_catalog.pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def blocked_victim(admin: psycopg.Connection, blocker_pid: int) -> int | None:
    """The server process running the victim's call while the blocker holds it up."""
    row = admin.execute(
        "SELECT pid FROM pg_catalog.pg_stat_activity"
        " WHERE application_name = %s AND state = 'active' AND %s = ANY (pg_catalog.pg_blocking_pids(pid))",
        (VICTIM_APP, blocker_pid),
    ).fetchone()
    return None if row is None else int(row[0])


def _mid_call(method: str, phase: str, route: Route, cl: clusters.Cluster | None = None) -> None:
    dsn = route.server_dsn
    admin = psycopg.connect(dsn, autocommit=True)
    checkout = uuid.uuid4()
    call = _prepare(admin, phase, checkout)
    lines = VICTIM_CART if phase == "reserve" else ()
    ops: list[Op] = []
    if phase != "reserve":
        ops.append(Op("reserve", checkout, VICTIM_CART, OK, True))
    victim = Victim(route)
    blocker = route.connect(BLOCKER_APP)
    load = Load(route.dsn, seconds=120, seed=len(method) * 10 + len(phase))
    try:
        with running(load):
            block(blocker, phase, SHOP)
            blocker_pid = backend_pid(blocker)
            victim.call(call)
            try:
                pid = wait_for(lambda: blocked_victim(admin, blocker_pid), 10, "the victim to block mid-call")
            except AssertionError as exc:
                seen = admin.execute(
                    "SELECT pid, wait_event_type, wait_event, state FROM pg_catalog.pg_stat_activity"
                    " WHERE application_name = %s",
                    (VICTIM_APP,),
                ).fetchall()
                raise AssertionError(
                    f"{exc}: victim {seen}, returned {victim.result!r} {victim.error!r}"
                ) from None
            # Mid-call means after its first writes: the victim holds the
            # write locks of the tables it has changed so far.
            written = {
                r[0]
                for r in admin.execute(
                    "SELECT relation::regclass::text FROM pg_catalog.pg_locks"
                    " WHERE pid = %s AND mode = 'RowExclusiveLock' AND locktype = 'relation'",
                    (pid,),
                )
            }
            assert WRITES_BEFORE_BLOCK[phase] <= written, written
            postmaster = cl.postmaster_pid() if cl else None
            log_at = cl.logfile.stat().st_size if cl else 0
            admin = _end_backend(method, dsn, admin, blocker, pid)
            # The client saw its connection lost: an unknown outcome of an
            # idempotent call, so it retries (held until the checks below).
            victim.wait_retrying()
            if cl:
                assert cl.postmaster_pid() == postmaster, "the postmaster itself must survive"
                log = server_log(cl, log_at)
                assert "was terminated by signal 9" in log, log
                assert "all server processes terminated; reinitializing" in log, log
            if method == "sigkill":
                restarted = time.monotonic()
                if not route.pooled:
                    wait_for(lambda: load.reconnects >= load.threads, 30, "every buyer to reconnect")
                wait_for(lambda: load.committed(since=restarted) > 0, 30, "a commit after the restart")
            time.sleep(0.5)  # the load goes on
        # The victim was waiting before its commit: its lost call must have left nothing.
        ops.append(Op(phase, checkout, lines, FAILED))
        assert_clean_load(load, route)
        assert load.committed() > 0, "the load did no work"
        if method == "sigkill" and not route.pooled:
            # (Behind the pooler only the clients inside a transaction lose theirs.)
            assert load.reconnects >= load.threads, "every session should have been restarted"
        assert_consistent(admin, [*load.ops, *ops], SHOP)
        # The client's retry of the same call now succeeds, exactly once.
        victim.retry()
        levels = admin.execute("SELECT * FROM stockpool.stock_levels ORDER BY 1, 2, 3").fetchall()
        assert victim.error is None and victim.result == (True if phase == "reserve" else 10), (
            victim.error,
            victim.result,
            levels,
        )
        assert victim.client.retries == 1 and len(victim.sessions) == 2, (
            victim.client.retries,
            victim.sessions,
        )
        # The client found the pooler on each connection, and prepared nothing behind it.
        assert {c.prepare_threshold is None for c in victim.sessions} == {route.pooled}
        ops.append(Op(phase, checkout, lines, OK, victim.result))
        assert_consistent(admin, [*load.ops, *ops], SHOP)
    finally:
        victim.close()
        blocker.close()
        admin.close()


@pytest.mark.parametrize("phase", ["reserve", "claim", "release"])
def test_backend_terminated_mid_call(phase: str, route: Route) -> None:
    """pg_terminate_backend of a session blocked inside reserve_cart / claim /
    release, after its first writes: the call leaves nothing, the load around
    it is intact, and the client's retry of the same call succeeds once."""
    _mid_call("terminate", phase, route)


@pytest.mark.parametrize("phase", ["reserve", "claim", "release"])
def test_backend_sigkilled_mid_call(phase: str, own_cluster: clusters.Cluster, own_route: Route) -> None:
    """SIGKILL of the backend mid-call: the postmaster ends every session and
    recovers; the buyers reconnect (direct: all of them) and carry on; nothing
    half-done survives recovery; the client's retry succeeds once."""
    _mid_call("sigkill", phase, own_route, own_cluster)


# ---------------------------------------------------------------------------
# the server stopped hard during a soak


def test_immediate_stop_during_soak_then_restart(own_cluster: clusters.Cluster, own_route: Route) -> None:
    """``pg_ctl stop -m immediate`` (no shutdown checkpoint: crash recovery on
    start) while buyers reserve, claim and release; after the restart every
    guarantee holds and the buyers carry on (direct: every session was cut and
    reconnected; behind the pooler, those inside a transaction or refused by
    pgbouncer while it had no server connection)."""
    dsn = own_route.server_dsn
    with psycopg.connect(dsn, autocommit=True) as admin:
        stock_keys(admin, SHOP, LOAD_ITEMS, LOAD_STOCK)
    load = Load(own_route.dsn, threads=4, seconds=120, seed=7)
    with running(load, warmup=1.2):
        assert load.committed() > 0
        log_at = own_cluster.logfile.stat().st_size
        own_cluster.stop("immediate")
        time.sleep(0.3)
        own_cluster.start()
        clusters.wait_ready(dsn)
        restarted = time.monotonic()
        if not own_route.pooled:
            wait_for(lambda: load.reconnects >= load.threads, 30, "every buyer to reconnect")
        wait_for(lambda: load.committed(since=restarted) > 0, 30, "a commit after the restart")
        time.sleep(0.5)
    if not own_route.pooled:
        assert load.reconnects >= load.threads, "every session was cut by the stop"
    log = server_log(own_cluster, log_at)
    assert "automatic recovery in progress" in log, log
    assert_clean_load(load, own_route)
    assert load.committed(since=restarted) > 0, "the buyers did not carry on after the restart"
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert_consistent(admin, load.ops, SHOP)


# ---------------------------------------------------------------------------
# clients that vanish or idle while holding pool units

HOLDER = """
import sys, psycopg
# a transaction opens with the first statement and stays open
conn = psycopg.connect(sys.argv[1], application_name=sys.argv[6])
row = conn.execute("SELECT stockpool.reserve_units(%s, %s, %s, %s, %s::uuid), pg_catalog.pg_backend_pid()",
                   (int(sys.argv[2]), int(sys.argv[3]), 1, int(sys.argv[4]), sys.argv[5])).fetchone()
print("held", row[1], flush=True)
sys.stdin.read()
"""
RESERVE = "SELECT stockpool.reserve_units(%s, %s, %s, %s, %s)"


def _reserve_all(route: Route, units: int, lock_timeout: str) -> tuple[bool | None, str | None]:
    """A buyer asks for ``units`` of SLOW and waits at most ``lock_timeout``:
    set with SET LOCAL, since a session-level SET would stay on the pooler's
    server connection for whoever borrows it next."""
    with route.connect(BUYER_APP, autocommit=True) as c:
        try:
            with c.transaction():
                c.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(lock_timeout)))
                row = c.execute(RESERVE, (FAULT_SHOP, SLOW, LOC, units, uuid.uuid4())).fetchone()
            return (bool(row and row[0]), None)
        except psycopg.Error as exc:
            return (None, exc.sqlstate)


def backend_gone(conn: psycopg.Connection, pid: int) -> bool:
    row = conn.execute("SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row == (0,)


@pytest.mark.parametrize("how", ["client-killed", "closed-without-commit"])
def test_client_disconnects_mid_transaction(how: str, route: Route, conn: psycopg.Connection) -> None:
    """A client holding all of a key's units in an open transaction vanishes
    (its process is SIGKILLed, or it closes without COMMIT): the server process
    that ran its transaction ends (behind the pooler: pgbouncer closes the
    server connection it lent, never handing it on mid-transaction), the
    transaction rolls back and the units are free again for the next buyer."""
    stock_keys(conn, SHOP, LOAD_ITEMS, LOAD_STOCK)
    stock_keys(conn, FAULT_SHOP, [SLOW], 6)
    conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (FAULT_SHOP, SLOW, LOC))
    before = snapshot(conn, FAULT_SHOP)
    checkout = uuid.uuid4()
    load = Load(route.dsn, seed=11)
    with running(load):
        if how == "client-killed":
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    HOLDER,
                    route.dsn,
                    str(FAULT_SHOP),
                    str(SLOW),
                    "6",
                    str(checkout),
                    HOLDER_APP,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            said, held_by = proc.stdout.readline().split()
            assert said == "held"
            pid = int(held_by)
        else:
            holder = route.connect(HOLDER_APP)
            holder.execute(RESERVE, (FAULT_SHOP, SLOW, LOC, 6, checkout))
            pid = backend_pid(holder)
        # While the holder lives its units are locked: a buyer cannot have them.
        assert _reserve_all(route, 6, "300ms") == (None, "55P03")
        if how == "client-killed":
            proc.kill()
            proc.wait(10)
        else:
            holder.close()
        wait_for(lambda: backend_gone(conn, pid), 10, "the holder's server process to end")
        assert _reserve_all(route, 6, "10s") == (True, None)
    assert_clean_load(load, route)
    after = snapshot(conn, FAULT_SHOP)
    assert after["stock_levels"] == [(FAULT_SHOP, SLOW, LOC, 6, 0, 6, 0, 0)], diff(before, after)
    holds = conn.execute(
        "SELECT count(*) FROM stockpool.holds WHERE checkout_id = %s", (checkout,)
    ).fetchone()
    assert holds == (0,)
    assert_consistent(conn, load.ops, SHOP)


def test_idle_in_transaction_timeout_gives_units_back(route: Route, conn: psycopg.Connection) -> None:
    """A session idle in a transaction hides the units it took. Without a
    timeout a buyer waits in vain (negative control); with
    idle_in_transaction_session_timeout the server ends that session, the units
    come back and the other buyers take every one of them."""
    units = 6
    stock_keys(conn, SHOP, LOAD_ITEMS, LOAD_STOCK)
    stock_keys(conn, FAULT_SHOP, [SLOW], units)
    conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (FAULT_SHOP, SLOW, LOC))
    load = Load(route.dsn, seed=13)
    with running(load):
        # Negative control: no timeout, the units stay hidden past 1 s.
        idle = route.connect(HOLDER_APP)
        idle.execute(RESERVE, (FAULT_SHOP, SLOW, LOC, units, uuid.uuid4()))
        assert _reserve_all(route, 1, "1s") == (None, "55P03")
        idle.rollback()
        idle.close()

        idle = route.connect(HOLDER_APP)
        # This transaction's timeout (SET LOCAL: see _reserve_all).
        idle.execute("SET LOCAL idle_in_transaction_session_timeout = '500ms'")
        idler = uuid.uuid4()
        idle.execute(RESERVE, (FAULT_SHOP, SLOW, LOC, units, idler))
        started = time.monotonic()

        got: list[uuid.UUID] = []
        unexpected: list[str] = []

        def buyer() -> None:
            # They wait for the idle session's units; the database's
            # statement_timeout ends a wait in vain.
            with route.connect(BUYER_APP, autocommit=True) as c:
                while True:
                    checkout = uuid.uuid4()
                    try:
                        row = c.execute(RESERVE, (FAULT_SHOP, SLOW, LOC, 1, checkout)).fetchone()
                    except psycopg.Error as exc:
                        unexpected.append(f"[{exc.sqlstate}] {exc}")
                        return
                    if not (row and row[0]):
                        return
                    got.append(checkout)

        buyers = [threading.Thread(target=buyer) for _ in range(3)]
        for b in buyers:
            b.start()
        for b in buyers:
            b.join(30)
        waited = time.monotonic() - started
        with pytest.raises(psycopg.Error) as ended:
            idle.execute("SELECT 1")
        # the server's 25P03, or the connection gone (pgbouncer: 08P01)
        assert ended.value.sqlstate in (None, "25P03") or is_connection_lost(ended.value)
        idle.close()
    assert unexpected == []
    assert len(got) == units, f"buyers got {len(got)} of {units} units"
    assert waited >= 0.4, "the buyers cannot have had the units before the timeout"
    assert_clean_load(load, route)
    held = conn.execute(
        "SELECT count(*) FILTER (WHERE checkout_id = %s), count(*) FROM stockpool.holds"
        " WHERE shop_id = %s AND status = 'held'",
        (idler, FAULT_SHOP),
    ).fetchone()
    assert held == (0, units)
    assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
    assert_consistent(conn, load.ops, SHOP)


# ---------------------------------------------------------------------------
# lock_timeout and statement_timeout inside reserve and claim


@pytest.mark.parametrize("phase", ["reserve", "claim"])
@pytest.mark.parametrize(("setting", "sqlstate"), [("lock_timeout", "55P03"), ("statement_timeout", "57014")])
def test_timeout_inside_call_is_clean(
    phase: str, setting: str, sqlstate: str, route: Route, conn: psycopg.Connection
) -> None:
    """The call is stopped by the timeout while it waits on a lock after its
    first writes (reserve: HOT's units taken, waiting for SLOW's refill lock;
    claim, which never waits for a ledger row: stopped at the test's gate
    after recording a pending claim): a clean error with the timeout's
    SQLSTATE, nothing of the call left, the session still usable. The timeout
    is the transaction's own (SET LOCAL), as a client behind a transaction
    pooler must set it."""
    stock_keys(conn, SHOP, LOAD_ITEMS, LOAD_STOCK)
    stock_keys(conn, FAULT_SHOP, [HOT, SLOW], 40)
    conn.execute("SELECT stockpool.configure_pool(%s, %s, %s, 5)", (FAULT_SHOP, SLOW, LOC))
    conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (FAULT_SHOP, SLOW, LOC))
    conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (FAULT_SHOP, HOT, LOC))
    checkout = uuid.uuid4()
    lines = [(SLOW, LOC, 8), (HOT, LOC, 2)]  # any order: the function sorts
    params: tuple[Any, ...]
    if phase == "claim":
        assert cart(conn, FAULT_SHOP, checkout, lines)
        conn.execute(GATE_TRIGGER.format(table=GATE_TABLE[phase]))
        query, params = "SELECT stockpool.claim(%s, %s)", (FAULT_SHOP, checkout)
    else:
        query = "SELECT stockpool.reserve_cart(%s, %s, %s::bigint[], %s::bigint[], %s::integer[])"
        params = (FAULT_SHOP, checkout, [x[0] for x in lines], [x[1] for x in lines], [x[2] for x in lines])
    before = snapshot(conn, FAULT_SHOP)
    load = Load(route.dsn, seed=17)
    with (
        running(load),
        route.connect(BLOCKER_APP) as blocker,
        route.connect(VICTIM_APP, autocommit=True) as victim,
    ):
        block(blocker, phase, FAULT_SHOP)
        started = time.monotonic()
        with pytest.raises(psycopg.Error) as err, victim.transaction():
            victim.execute(sql.SQL("SET LOCAL {} = '300ms'").format(sql.Identifier(setting)))
            victim.execute(query, params)
        assert err.value.sqlstate == sqlstate
        assert time.monotonic() - started < 10
        after = snapshot(conn, FAULT_SHOP)
        assert after == before, diff(before, after)
        blocker.rollback()
        # The session is fine and the call, retried, goes through.
        row = victim.execute(query, params).fetchone()
        assert row == ((10,) if phase == "claim" else (True,))
    assert_clean_load(load, route)
    assert_consistent(conn, load.ops, SHOP)


# ---------------------------------------------------------------------------
# everything at once on one key


def test_everything_at_once_on_one_key(route: Route, conn: psycopg.Connection) -> None:
    """sweep, replenish_pool, set_stock, adjust_stock, configure_pool, claim and
    release hammer the same key for a few seconds, with short TTLs so holds
    expire under the buyers: no deadlock (40P01), no serialization failure, no
    error outside the documented ones, invariants hold at every look and at the
    end, every client outcome matches the database."""
    key = (SHOP, HOT, LOC)
    stock_keys(conn, SHOP, [HOT], 200)
    seconds = 3.0
    buyers = Load(
        route.dsn,
        items=[HOT],
        threads=3,
        seconds=seconds,
        ttls=("100 milliseconds", "1 second", "15 minutes"),
        allowed=frozenset({"SP004"}),  # claim after the hold expired
        claim_delay=0.15,
        seed=23,
    )
    stop = threading.Event()
    errors: list[str] = []
    looks: list[Any] = []
    counts: dict[str, int] = {}

    def loop(name: str, body: Callable[[psycopg.Connection, random.Random], None], allowed: set[str]) -> None:
        rng = random.Random(name)
        n = 0
        with route.connect(f"stockpool-fault-{name}", autocommit=True) as c:
            while not stop.is_set():
                try:
                    body(c, rng)
                    n += 1
                except psycopg.Error as exc:
                    if exc.sqlstate not in allowed:
                        errors.append(f"{name}: [{exc.sqlstate}] {str(exc).splitlines()[0]}")
                time.sleep(rng.uniform(0, 0.01))
        counts[name] = n

    def sweeper(c: psycopg.Connection, rng: random.Random) -> None:
        c.execute("SELECT stockpool.sweep(%s)", (rng.randint(1, 20),))

    def refiller(c: psycopg.Connection, rng: random.Random) -> None:
        c.execute("SELECT stockpool.replenish_pool(%s, %s, %s, %s)", (*key, rng.choice([None, 3, 20, 80])))

    def stocker(c: psycopg.Connection, rng: random.Random) -> None:
        pick = rng.random()
        if pick < 0.4:
            c.execute("SELECT stockpool.set_stock(%s, %s, %s, %s)", (*key, rng.randint(100, 300)))
        elif pick < 0.8:
            c.execute("SELECT stockpool.adjust_stock(%s, %s, %s, %s)", (*key, rng.randint(-30, 30)))
        else:
            cap = rng.choice([10, 50, 200])
            c.execute(
                "SELECT stockpool.configure_pool(%s, %s, %s, %s, NULL, %s)", (*key, cap, rng.randint(1, 64))
            )

    def watcher(c: psycopg.Connection, rng: random.Random) -> None:
        found = c.execute("SELECT * FROM stockpool.check_invariants()").fetchall()
        if found:
            looks.append(found)
        time.sleep(0.05)

    helpers = [
        threading.Thread(target=loop, args=("sweep", sweeper, set())),
        threading.Thread(target=loop, args=("replenish", refiller, set())),
        # SP002: below live holds; 22023: an adjustment below zero
        threading.Thread(target=loop, args=("stock", stocker, {"SP002", "22023"})),
        threading.Thread(target=loop, args=("watch", watcher, set())),
    ]
    for t in helpers:
        t.start()
    buyers.start()
    time.sleep(seconds)
    buyers.finish()
    stop.set()
    for t in helpers:
        t.join(30)
    assert not any(t.is_alive() for t in helpers), "a helper hung"
    assert errors == [], errors[:10]
    assert_clean_load(buyers, route)
    assert looks == [], looks[:3]
    assert all(counts.get(n, 0) > 5 for n in ("sweep", "replenish", "stock")), counts
    kinds = {(o.kind, o.outcome) for o in buyers.ops}
    assert {("reserve", OK), ("claim", OK), ("release", OK)} <= kinds, kinds
    deadlocks = conn.execute(
        "SELECT deadlocks FROM pg_catalog.pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    assert deadlocks == (0,)
    conn.execute("SELECT stockpool.sweep(1000)")
    assert_consistent(conn, buyers.ops, SHOP)


# ---------------------------------------------------------------------------
# negative controls: the outcome checker catches each broken shape


def _c(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


def test_outcome_checker_catches_broken_shapes() -> None:
    a, b, c, d, e, f = (_c(i) for i in range(1, 7))
    cart_lines = ((1, 1, 2), (2, 1, 1))
    healthy_ops = [
        Op("reserve", a, cart_lines, OK, True),
        Op("claim", a, (), OK, 3),
        Op("reserve", b, ((1, 1, 1),), UNKNOWN),
        Op("reserve", c, ((1, 1, 1),), REFUSED, False),
    ]
    healthy_holds = [HoldRow(a, 1, 1, 2, "claimed"), HoldRow(a, 2, 1, 1, "claimed")]
    healthy_moves = [ClaimMove(a, 1, 1, -2), ClaimMove(a, 2, 1, -1)]
    assert verify_outcomes(healthy_ops, healthy_holds, healthy_moves) == []

    def broken(ops: list[Op], holds: list[HoldRow], moves: list[ClaimMove], needle: str) -> None:
        problems = verify_outcomes(ops, holds, moves)
        assert any(needle in p for p in problems), (needle, problems)

    # a committed reserve that is not there
    broken([Op("reserve", d, ((1, 1, 1),), OK, True)], [], [], "holds nothing")
    # a failed reserve that left a hold
    broken([Op("reserve", d, ((1, 1, 1),), FAILED)], [HoldRow(d, 1, 1, 1, "held")], [], "left holds")
    # an unknown cart that landed half
    broken([Op("reserve", e, cart_lines, UNKNOWN)], [HoldRow(e, 1, 1, 2, "held")], [], "half a reservation")
    # a claim that deducted one key of two
    broken(
        [Op("reserve", a, cart_lines, OK, True), Op("claim", a, (), UNKNOWN)],
        [HoldRow(a, 1, 1, 2, "claimed"), HoldRow(a, 2, 1, 1, "held")],
        [ClaimMove(a, 1, 1, -2)],
        "claim half-applied",
    )
    # a committed claim that is missing
    broken(
        [Op("reserve", a, cart_lines, OK, True), Op("claim", a, (), OK, 3)],
        [HoldRow(a, 1, 1, 2, "held"), HoldRow(a, 2, 1, 1, "held")],
        [],
        "claim the client saw commit",
    )
    # a failed claim that left a movement behind
    broken(
        [Op("reserve", a, cart_lines, OK, True), Op("claim", a, (), FAILED)],
        [HoldRow(a, 1, 1, 2, "held"), HoldRow(a, 2, 1, 1, "held")],
        [ClaimMove(a, 1, 1, -2)],
        "without claimed holds",
    )
    # a failed release that released anyway
    broken(
        [Op("reserve", f, ((1, 1, 1),), OK, True), Op("release", f, (), FAILED)],
        [HoldRow(f, 1, 1, 1, "released")],
        [],
        "no release committed",
    )
    # a committed release that did not happen
    broken(
        [Op("reserve", f, ((1, 1, 1),), OK, True), Op("release", f, (), OK, 1)],
        [HoldRow(f, 1, 1, 1, "held")],
        [],
        "release the client saw commit",
    )
    # rows nobody asked for
    broken([], [HoldRow(f, 1, 1, 1, "held")], [], "never used")


def test_invariant_and_history_checks_catch_a_lost_unit_and_a_silent_claim(
    conn: psycopg.Connection,
) -> None:
    """Negative control for assert_consistent's database side: a pool unit
    deleted behind the ledger's back, and a hold marked claimed without its
    movement, are both caught."""
    stock_keys(conn, SHOP, [HOT], 10)
    conn.execute("SELECT stockpool.replenish_pool(%s, %s, %s)", (SHOP, HOT, LOC))
    checkout = uuid.uuid4()
    ops = [Op("reserve", checkout, ((HOT, LOC, 2),), OK, True)]
    conn.execute("SELECT stockpool.reserve_units(%s, %s, %s, 2, %s)", (SHOP, HOT, LOC, checkout))
    assert_consistent(conn, ops, SHOP)

    conn.execute("DELETE FROM stockpool.pool_units WHERE ctid = (SELECT min(ctid) FROM stockpool.pool_units)")
    assert [v[3] for v in final_state(conn, SHOP).violations] == ["allocation"]

    conn.execute("UPDATE stockpool.holds SET status = 'claimed' WHERE checkout_id = %s", (checkout,))
    state = final_state(conn, SHOP)
    assert any("claim movements 0 <> claimed holds 2" in h for h in state.history), state.history
    problems = verify_outcomes([*ops, Op("claim", checkout, (), OK, 2)], state.holds, state.moves)
    assert any("but claim movements {}" in p for p in problems), problems


@pytest.mark.parametrize("via", ["pgbouncer"])
def test_pooled_outcomes_are_checked_against_the_server(route: Route, conn: psycopg.Connection) -> None:
    """Negative control of the pooled runs: buyers go through pgbouncer, their
    outcomes are checked against the server itself. A reservation and a
    release they saw commit, undone on the server (what a pooler that
    acknowledged work the server never kept would leave), are both caught; so
    is a "pooled" run whose buyers went straight to the server."""
    stock_keys(conn, SHOP, LOAD_ITEMS, LOAD_STOCK)
    load = Load(route.dsn, seed=31)
    with running(load):
        wait_for(
            lambda: sum(1 for o in load.ops if o.kind == "release" and o.outcome == OK) >= 3,
            20,
            "committed releases through the pooler",
        )
    assert_clean_load(load, route)
    assert_consistent(conn, load.ops, SHOP)

    kinds: dict[uuid.UUID, list[tuple[str, str]]] = {}
    for o in load.ops:
        kinds.setdefault(o.checkout, []).append((o.kind, o.outcome))
    reserved = next(c for c, k in kinds.items() if k == [("reserve", OK)])
    released = next(c for c, k in kinds.items() if k == [("reserve", OK), ("release", OK)])
    with conn.transaction(force_rollback=True):
        conn.execute("DELETE FROM stockpool.holds WHERE checkout_id = %s", (reserved,))
        conn.execute("UPDATE stockpool.holds SET status = 'held' WHERE checkout_id = %s", (released,))
        state = final_state(conn, SHOP)
        problems = verify_outcomes(load.ops, state.holds, state.moves)
    assert any(p.startswith(str(reserved)[:8]) and "holds nothing" in p for p in problems), problems
    assert any(p.startswith(str(released)[:8]) and "release the client saw commit" in p for p in problems), (
        problems
    )
    assert state.violations, "the ledger no longer matches the holds"

    # Buyers that went straight to the server fail a pooled run's check.
    direct = Load(route.server_dsn, seed=37, max_ops=3)
    with running(direct):
        pass
    with pytest.raises(AssertionError):
        assert_clean_load(direct, route)
