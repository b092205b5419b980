"""Move one logical partition (its shops) to another node while the rest sells.

``stockpool move --dsn ROUTER_URL --partition N --to NODE_URL``. The router's
``stockpool.moves`` row is the move's journal; a run first finishes any move
an earlier run left unfinished, so a move that dies half-way is resumed by
the next run. The steps:

1. **Fence on the router** (phase ``fencing``): partition N's map row turns
   ``moving``; from that commit on, ``stockpool._route`` refuses N's calls
   with SP020 (retryable: nothing happened). Then the mover waits until every
   router transaction that began before that commit has ended (the way
   CREATE INDEX CONCURRENTLY waits for older transactions), so no call that
   saw N active is still running. If they do not end within the drain
   timeout, the move is undone (N active again on its node) and fails.
2. **Fence on the source**: the source stops serving N
   (``node_partitions``), so even a router backend with a stale map is
   refused there (``_owns_shop``).
3. **Copy**: in one REPEATABLE READ snapshot of the source, every row of N's
   shops in every stockpool table with a ``shop_id`` (ledger, pools, holds,
   pending claims, movements, whatever a later migration adds), parents
   before children, is COPYed to the target in one transaction that first
   removes anything an earlier, dead run left there, moves identity
   sequences past the copied ids, compares the row counts and makes the
   target serve N. A shop is never served by two nodes: the source stopped
   before the target starts.
4. **Switch** (phase ``switched``): in one router transaction, N's map row
   names the target, active, and both PL/Proxy servers' pN point at it.
   N's calls flow again; the refused window (reported) ends here.
5. **Clean up** (phase ``done``): N's rows are deleted from the source (with
   ``session_replication_role = replica``, the one delete of movement rows
   there is: they live on in the target's copy).

The source's own maintenance may expire or settle N's holds after the
snapshot; that work is redone by the target's maintenance on the copy, and
the source's version of it is deleted in step 5, so nothing is lost or
doubled. The mover connects to both nodes as the ``--to`` URL's user (one
admin role across nodes), a superuser.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from stockpool.errors import StockpoolError
from stockpool.install.deploy import connect_directly
from stockpool.route.deploy import PARTITIONS, Node, write_servers

# pg_try_advisory_lock key of the mover: one move at a time per router.
MOVE_LOCK_ID = 0x73706D6F7665  # 'spmove'

TABLES_SQL = """
SELECT c.oid::regclass::text,
       array(SELECT quote_ident(a.attname) FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
             ORDER BY a.attnum),
       array(SELECT a.attname FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attidentity <> ''),
       array(SELECT f.confrelid::regclass::text FROM pg_catalog.pg_constraint AS f
             WHERE f.conrelid = c.oid AND f.contype = 'f' AND f.confrelid <> c.oid)
FROM pg_catalog.pg_class AS c
WHERE c.relnamespace = 'stockpool'::regnamespace
  AND c.relkind IN ('r', 'p')
  AND NOT c.relispartition
  AND c.relname NOT IN ('node_partitions', 'migrations')
  AND EXISTS (SELECT FROM pg_catalog.pg_attribute AS a
              WHERE a.attrelid = c.oid AND a.attname = 'shop_id' AND NOT a.attisdropped)
"""


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    identities: tuple[str, ...]
    parents: tuple[str, ...]


@dataclass
class MoveReport:
    partition: int
    from_node: str
    to_node: str
    resumed: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    refused_seconds: float = 0.0
    drain_seconds: float = 0.0
    nothing_to_do: bool = False

    def line(self) -> str:
        if self.nothing_to_do:
            return f"partition {self.partition} is already on {self.to_node}: nothing moved"
        rows = ", ".join(f"{t} {n}" for t, n in self.rows.items())
        return (
            f"partition {self.partition} moved {self.from_node} -> {self.to_node}: rows {rows}; "
            f"its calls refused (SP020) for {self.refused_seconds:.2f} s "
            f"(waiting for older router transactions {self.drain_seconds:.2f} s)"
        )


def tables(conn: psycopg.Connection) -> list[Table]:
    """Every stockpool table with a shop_id, parents (FK targets) first."""
    found = {
        str(r[0]): Table(str(r[0]), tuple(r[1]), tuple(r[2]), tuple(r[3]))
        for r in conn.execute(TABLES_SQL).fetchall()
    }
    ordered: list[Table] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or name not in found:
            return
        seen.add(name)
        for parent in found[name].parents:
            visit(parent)
        ordered.append(found[name])

    for name in sorted(found):
        visit(name)
    return ordered


def _admin_dsn(connstr: str, credentials_from: str) -> str:
    creds = {
        k: v for k, v in conninfo_to_dict(credentials_from).items() if k in ("user", "password", "passfile")
    }
    return make_conninfo(connstr, **creds)


def _delete_partition(conn: psycopg.Connection, found: list[Table], partition: int) -> None:
    """Delete the partition's rows, children first, in the caller's
    transaction; triggers (the movements' append-only guard) do not fire."""
    conn.execute("SET LOCAL session_replication_role = replica")
    for table in reversed(found):
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE stockpool._partition_of(shop_id) = %s").format(sql.SQL(table.name)),
            (partition,),
        )


def _copy(source: psycopg.Connection, target: psycopg.Connection, partition: int) -> dict[str, int]:
    """Step 3: one source snapshot into one target transaction."""
    found = tables(source)
    rows: dict[str, int] = {}
    with source.transaction(), target.transaction():
        source.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        _delete_partition(target, found, partition)
        for table in found:
            cols = sql.SQL(", ").join(sql.SQL(c) for c in table.columns)
            select = sql.SQL(
                "COPY (SELECT {} FROM {} WHERE stockpool._partition_of(shop_id) = {}) "
                "TO STDOUT (FORMAT binary)"
            )
            copy_in = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(sql.SQL(table.name), cols)
            with (
                source.cursor().copy(select.format(cols, sql.SQL(table.name), sql.Literal(partition))) as out,
                target.cursor().copy(copy_in) as into,
            ):
                for data in out:
                    into.write(data)
            count_sql = sql.SQL("SELECT count(*) FROM {} WHERE stockpool._partition_of(shop_id) = %s").format(
                sql.SQL(table.name)
            )
            had = source.execute(count_sql, (partition,)).fetchone()
            got = target.execute(count_sql, (partition,)).fetchone()
            if not had or not got or had[0] != got[0]:
                raise StockpoolError(
                    f"copy of {table.name} for partition {partition}: {had} rows read, {got} written"
                )
            rows[table.name] = int(had[0])
            for column in table.identities:
                target.execute(
                    sql.SQL(
                        "SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence({t}, {c}), m) "
                        "FROM (SELECT max({col}) AS m FROM {tbl}) AS x WHERE m IS NOT NULL"
                    ).format(
                        t=sql.Literal(table.name),
                        c=sql.Literal(column),
                        col=sql.Identifier(column),
                        tbl=sql.SQL(table.name),
                    )
                )
        target.execute(
            "INSERT INTO stockpool.node_partitions (partition) VALUES (%s) ON CONFLICT DO NOTHING",
            (partition,),
        )
    return rows


def _drain(router: psycopg.Connection, fenced_at: float, timeout: float) -> None:
    """Wait until no router transaction older than the fence is running."""
    deadline = time.monotonic() + timeout
    while True:
        row = router.execute(
            """
            SELECT count(*) FROM pg_catalog.pg_stat_activity
            WHERE datname = pg_catalog.current_database() AND pid <> pg_catalog.pg_backend_pid()
              AND backend_type = 'client backend' AND xact_start < pg_catalog.to_timestamp(%s)
            """,
            (fenced_at,),
        ).fetchone()
        if row and row[0] == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{row[0] if row else '?'} router transaction(s) older than the fence still running"
            )
        time.sleep(0.02)


class Mover:
    def __init__(self, router_dsn: str, credentials_from: str, drain_timeout: float) -> None:
        self.router_dsn = router_dsn
        self.credentials_from = credentials_from
        self.drain_timeout = drain_timeout

    def _node_dsn(self, router: psycopg.Connection, node: str) -> str:
        row = router.execute("SELECT connstr FROM stockpool.nodes WHERE node = %s", (node,)).fetchone()
        if not row:
            raise StockpoolError(f"node {node} is not registered on the router")
        return _admin_dsn(str(row[0]), self.credentials_from)

    def run(self, router: psycopg.Connection, move_id: int, report: MoveReport) -> None:
        """Carry one journalled move from its phase to done."""
        row = router.execute(
            "SELECT partition, from_node, to_node, phase, extract(epoch FROM started_at) "
            "FROM stockpool.moves WHERE move_id = %s",
            (move_id,),
        ).fetchone()
        assert row is not None
        partition, from_node, to_node, phase, started = (
            int(row[0]),
            str(row[1]),
            str(row[2]),
            str(row[3]),
            float(row[4]),
        )
        source_dsn, target_dsn = self._node_dsn(router, from_node), self._node_dsn(router, to_node)
        if phase == "fencing":
            now = router.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
            fenced_at = float(now[0]) if now else time.time()
            drain_started = time.monotonic()
            try:
                _drain(router, fenced_at, self.drain_timeout)
            except TimeoutError as exc:
                self._undo(router, move_id, partition)
                raise StockpoolError(
                    f"move of partition {partition} undone: {exc} after {self.drain_timeout:g} s",
                    hint="a session holds a router transaction open (idle in transaction?); end it or raise "
                    "--drain-timeout",
                ) from exc
            report.drain_seconds = time.monotonic() - drain_started
            with (
                connect_directly(source_dsn, "source node") as source,
                connect_directly(target_dsn, "target node") as target,
            ):
                source.execute("DELETE FROM stockpool.node_partitions WHERE partition = %s", (partition,))
                report.rows = _copy(source, target, partition)
            with router.transaction():
                router.execute(
                    "UPDATE stockpool.partition_map SET node = %s, state = 'active', moving_to = NULL, "
                    "changed_at = clock_timestamp() WHERE partition = %s",
                    (to_node, partition),
                )
                write_servers(router)
                router.execute(
                    "UPDATE stockpool.moves SET phase = 'switched', switched_at = clock_timestamp(), "
                    "rows_copied = %s WHERE move_id = %s",
                    (sum(report.rows.values()), move_id),
                )
            now = router.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
            report.refused_seconds = (float(now[0]) if now else time.time()) - started
        with connect_directly(source_dsn, "source node") as source, source.transaction():
            _delete_partition(source, tables(source), partition)
        router.execute(
            "UPDATE stockpool.moves SET phase = 'done', finished_at = clock_timestamp() WHERE move_id = %s",
            (move_id,),
        )

    def _undo(self, router: psycopg.Connection, move_id: int, partition: int) -> None:
        with router.transaction():
            router.execute(
                "UPDATE stockpool.partition_map SET state = 'active', moving_to = NULL, "
                "changed_at = clock_timestamp() WHERE partition = %s",
                (partition,),
            )
            router.execute(
                "UPDATE stockpool.moves SET phase = 'done', finished_at = clock_timestamp(), rows_copied = 0 "
                "WHERE move_id = %s",
                (move_id,),
            )


def move(router_dsn: str, partition: int, to_dsn: str, drain_timeout: float = 10.0) -> MoveReport:
    if not 0 <= partition < PARTITIONS:
        raise StockpoolError(f"--partition must be 0..{PARTITIONS - 1}, not {partition}")
    target = Node.parse(to_dsn)
    mover = Mover(router_dsn, to_dsn, drain_timeout)
    with connect_directly(router_dsn, "router") as router:
        got = router.execute("SELECT pg_catalog.pg_try_advisory_lock(%s)", (MOVE_LOCK_ID,)).fetchone()
        if not got or not got[0]:
            raise StockpoolError(
                "another `stockpool move` is running on this router", hint="wait for it to finish"
            )
        registered = router.execute(
            "SELECT 1 FROM stockpool.nodes WHERE node = %s", (target.name,)
        ).fetchone()
        if not registered:
            raise StockpoolError(
                f"node {target.name} is not one of the router's nodes",
                hint="add it first: stockpool deploy --dsn ROUTER_URL --nodes <every node>,NEW_NODE_URL",
            )
        resumed: list[str] = []
        for move_id, part, to_node in router.execute(
            "SELECT move_id, partition, to_node FROM stockpool.moves WHERE phase <> 'done' ORDER BY move_id"
        ).fetchall():
            earlier = MoveReport(int(part), "", str(to_node))
            mover.run(router, int(move_id), earlier)
            resumed.append(f"partition {part} -> {to_node}")
        row = router.execute(
            "SELECT node FROM stockpool.partition_map WHERE partition = %s", (partition,)
        ).fetchone()
        if not row:
            raise StockpoolError(f"partition {partition} is not in the router's map")
        report = MoveReport(partition, str(row[0]), target.name, resumed=resumed)
        if row[0] == target.name:
            report.nothing_to_do = True
            return report
        with router.transaction():
            router.execute(
                "UPDATE stockpool.partition_map SET state = 'moving', moving_to = %s, "
                "changed_at = clock_timestamp() WHERE partition = %s",
                (target.name, partition),
            )
            ins = router.execute(
                "INSERT INTO stockpool.moves (partition, from_node, to_node) "
                "VALUES (%s, %s, %s) RETURNING move_id",
                (partition, report.from_node, target.name),
            ).fetchone()
        assert ins is not None
        mover.run(router, int(ins[0]), report)
        return report
