"""A failover that loses nothing: a primary with a synchronous streaming
standby, Python clients and a maintenance worker on a multi-host DSN
(target_session_attrs=read-write), the primary SIGKILLed mid-run and the
standby promoted (race/failover.py, server/replica.py). Every outcome a
client was told is on the new primary, and the clients and the worker carry
on; cut off from its primary a second before the kill, the synchronous
standby still loses nothing (the primary acknowledged nothing meanwhile). The
negative control: an asynchronous standby cut off the same way loses the
commits of that second, and the checker lists exactly those. Below them: a
commit on the synchronous primary waits for its standby, the journal's check
on hand-made journals, and nothing of a pair is left after it, killed or not."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from stockpool.cli import app
from stockpool.client import Client
from stockpool.race import failover
from stockpool.race.journal import Answer, journal_check, missing
from stockpool.race.verify import KeyRange
from stockpool.server import cluster as clusters
from stockpool.server import replica
from support import background, result

pytestmark = pytest.mark.timeout(180)
JOURNAL_CHECK = "every acknowledged outcome on the new primary"
# What each acknowledged answer leaves in stockpool.holds (None: no hold),
# written out again here so that the test does not trust the checker's table.
EXPECTED: dict[str, set[str | None]] = {
    "reserved": {"held", "expired"},
    "refused": {None},
    "claimed": {"claimed"},
    "released": {"released"},
}


def _contradicted(dsn: str, answers: Sequence[Answer]) -> set[uuid.UUID]:
    """Checkouts whose last acknowledged answer the server contradicts, looked
    up one checkout at a time (those with an unknown outcome are left out)."""
    last: dict[uuid.UUID, Answer] = {}
    unknown: set[uuid.UUID] = set()
    for answer in sorted(answers, key=lambda a: a.at):
        if answer.acknowledged:
            last[answer.checkout_id] = answer
        elif answer.outcome == "unknown":
            unknown.add(answer.checkout_id)
    contradicted: set[uuid.UUID] = set()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for checkout, answer in last.items():
            if checkout in unknown:
                continue
            row = conn.execute(
                "SELECT status, quantity FROM stockpool.holds WHERE shop_id = 1 AND checkout_id = %s",
                (checkout,),
            ).fetchone()
            status = row[0] if row else None
            if status not in EXPECTED[answer.outcome] or (row and row[1] != answer.quantity):
                contradicted.add(checkout)
    return contradicted


def _shm_ids() -> set[str]:
    """The SysV shared memory segments that exist (their ids)."""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {line.split()[1] for line in lines}


def _processes_in(roots: Sequence[Path]) -> list[int]:
    """Processes working in one of ``roots`` (a server process works in its data directory)."""
    found = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            target = Path(os.readlink(cwd))
        except OSError:
            continue
        if any(target.is_relative_to(root) for root in roots):
            found.append(int(cwd.parent.name))
    return found


@contextmanager
def _pair(opts: failover.FailoverOptions) -> Iterator[tuple[clusters.Cluster, clusters.Cluster]]:
    """failover.pair, and afterwards nothing of it left: no process, no
    directory, not the killed primary's shared memory segment."""
    roots: list[Path] = []
    segment = ""
    try:
        with failover.pair(opts) as (primary, standby):
            roots = [primary.root, standby.root]
            segment = (primary.datadir / "postmaster.pid").read_text().splitlines()[6].split()[1]
            yield primary, standby
    finally:
        deadline = time.monotonic() + 10
        while _processes_in(roots) and time.monotonic() < deadline:
            time.sleep(0.05)  # a pg_ctl stop has returned; its last children may still exit
        assert _processes_in(roots) == [], "server processes left behind"
        assert [root for root in roots if root.exists()] == [], "data directories left behind"
        assert segment not in _shm_ids(), "the killed primary's shared memory segment left behind"


def test_a_synchronous_standby_cut_off_before_the_kill_loses_nothing_acknowledged() -> None:
    # The same partition as the negative control's: the standby hears nothing
    # for the last second. Synchronous, the primary acknowledges nothing
    # meanwhile; the calls it kept waiting are retried on the new primary.
    opts = failover.FailoverOptions(clients=4, duration=9, kill_at=3, hold_back=1.0)
    with _pair(opts) as (primary, standby):
        result = failover.failover_soak(primary, standby, opts)
        checks = {c.name: c for c in result.report.checks}
        assert result.passed, [c for c in result.report.checks if not c.passed]
        assert result.missing == []
        assert result.timeline.replication == "sync"
        assert result.report.counts["acknowledged_while_cut_off"] == 0
        assert checks["commits waited for the standby"].passed
        # The run meant something: commits acknowledged by the old primary and by the new one.
        acked = [a for a in result.answers if a.acknowledged]
        assert any(a.port == primary.port for a in acked) and any(a.port == standby.port for a in acked)
        assert _contradicted(standby.dsn, result.answers) == set()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(primary.dsn, connect_timeout=2).close()  # the old primary is dead
        assert not primary.running()
        with psycopg.connect(standby.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
            assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
    assert checks["clients carried on"].passed and checks["worker carried on"].passed
    first = result.timeline.kill_to_first_commit_s
    assert first is not None and first > 0
    assert result.report.counts["kill_to_first_commit_s"] == round(first, 3)


def test_an_asynchronous_standby_held_back_loses_commits_and_the_checker_names_them() -> None:
    opts = failover.FailoverOptions(clients=4, duration=8, kill_at=3, synchronous=False, hold_back=1.0)
    with _pair(opts) as (primary, standby):
        result = failover.failover_soak(primary, standby, opts)
        checks = {c.name: c for c in result.report.checks}
        assert not result.passed and checks[JOURNAL_CHECK].passed is False
        assert result.missing, "a second of commits past the standby is lost"
        # Unlike the synchronous primary, this one went on acknowledging without its standby.
        assert result.report.counts["acknowledged_while_cut_off"] > 0
        assert "commits waited for the standby" not in checks
        told = {a.checkout_id: a for a in sorted(result.answers, key=lambda a: a.at) if a.acknowledged}
        for lost in result.missing:
            # In the journal: acknowledged, by the primary that died.
            assert lost.checkout_id in told and told[lost.checkout_id].port == primary.port
        # Truly not on the new primary, and nothing else is missing there.
        assert {m.checkout_id for m in result.missing} == _contradicted(standby.dsn, result.answers)
    assert result.report.counts["lost"] == len(result.missing)
    assert len(result.report.counts["missing"]) == len(result.missing)
    # The standby's own books are consistent: only the journal sees the loss.
    assert checks["check_invariants() empty"].passed and checks["ledger = movement history"].passed
    assert checks["clients carried on"].passed and checks["worker carried on"].passed


@pytest.mark.parametrize("synchronous", [True, False])
def test_a_commit_waits_for_a_synchronous_standby_only(synchronous: bool) -> None:
    """Cut off, a synchronous standby holds every commit back (wait event
    SyncRep) until the wait is cancelled, which answers success without the
    standby: the trap operations.md warns of. An asynchronous one holds nothing."""
    with (
        clusters.throwaway() as primary,
        psycopg.connect(primary.dsn, autocommit=True) as conn,
    ):
        conn.execute("CREATE TABLE t (x integer)")
        with replica.standby_of(primary, synchronous=synchronous) as standby:
            replica.cut_off(standby)
            with psycopg.connect(primary.dsn, autocommit=True) as writer, background() as run:
                notices: list[str] = []
                writer.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
                pid = writer.info.backend_pid
                done = run(writer.execute, "INSERT INTO t VALUES (1)")
                if not synchronous:
                    result(done, timeout=10)
                    assert notices == []
                    return
                deadline = time.monotonic() + 15
                query = "SELECT wait_event FROM pg_stat_activity WHERE pid = %s"
                while (conn.execute(query, (pid,)).fetchone() or (None,))[0] != "SyncRep":
                    assert not done.done(), "the commit returned without its standby"
                    assert time.monotonic() < deadline, "the commit never waited for its standby"
                    time.sleep(0.02)
                time.sleep(0.5)
                assert not done.done(), "the commit stopped waiting for its standby"
                conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
                result(done, timeout=10)  # an answer: committed here, never replicated
                assert any("canceling wait for synchronous replication" in n for n in notices), notices
                assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_the_journal_check_lists_what_the_server_lacks_and_never_passes_empty(dsn: str) -> None:
    keys = KeyRange((1,), 1, 1, 1)
    names = ["held", "lost", "unknown", "pending", "claimed", "refused", "unasked"]
    ids = {name: uuid.uuid4() for name in names}

    def said(name: str, call: str, outcome: str, at: float, port: int = 5) -> Answer:
        return Answer(ids[name], 1, 2, call, outcome, int(outcome != "refused"), at, 0.01, port)

    with Client(dsn) as client:
        client.set_stock(1, 1, 1, 100)
        for name in ("held", "pending", "claimed", "unasked"):
            assert client.reserve_units(1, 1, 1, 2, ids[name], timedelta(minutes=5))
        client.claim(1, ids["claimed"])
    answers = [
        said("held", "reserve", "reserved", 1.0),
        said("lost", "reserve", "reserved", 2.0),  # told reserved; the server has nothing
        said("unknown", "reserve", "unknown", 3.0, port=0),  # may or may not have committed
        said("pending", "reserve", "reserved", 4.0),
        said("pending", "claim", "unknown", 5.0, port=0),  # still held: allowed
        said("claimed", "reserve", "reserved", 6.0),  # claimed by a call never journaled
        said("refused", "reserve", "refused", 7.0),
    ]
    with psycopg.connect(dsn, autocommit=True) as conn:
        lost, unasked = missing(conn, keys, answers)
    assert [(m.checkout_id, m.found) for m in lost] == [
        (ids["lost"], "no hold"),
        (ids["claimed"], "a claimed hold of 2 units of item 1"),
    ]
    assert unasked == 1
    failed = journal_check(answers, lost, unasked, old_port=5)
    assert (
        failed.passed is False and str(ids["lost"]) in failed.detail and "1 holds no client" in failed.detail
    )
    assert journal_check(answers[:1], [], 0, old_port=5).passed
    # Nothing acknowledged by the primary that died: nothing was tested, so no PASS.
    empty = journal_check(answers, [], 0, old_port=6)
    assert empty.passed is False and "acknowledged nothing" in empty.detail
    assert journal_check([], [], 0, old_port=5).passed is False


def test_race_failover_from_the_command_line(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        app,
        ["race", "--failover", "--clients", "2", "--duration", "6", "--results", str(tmp_path)],
        env={"STOCKPOOL_DSN": ""},
    )
    assert out.exit_code == 0, out.output
    (report,) = tmp_path.glob("race-*.json")
    (run,) = json.loads(report.read_text())["runs"]
    assert run["scenario"] == "failover" and run["passed"]
    assert run["counts"]["kill_to_first_commit_s"] > 0 and run["counts"]["lost"] == 0
    (waited,) = [c for c in run["checks"] if c["name"] == "commits waited for the standby"]
    assert waited["passed"] and waited["detail"] == "sync_state sync before the kill"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--async-standby"], "--async-standby is --failover's negative control"),
        (["--failover", "--dsn", "postgresql://x@127.0.0.1/y"], "not on --dsn"),
        (["--failover", "--scenario", "soak"], "--failover runs alone"),
        (["--failover", "--duration", "2"], "--duration must be at least 3"),
        (["--failover", "--async-standby", "--duration", "3"], "cannot be cut off 1 s before a kill at 1 s"),
        (["--failover", "--clients", "0"], "--clients must be at least 1"),
    ],
)
def test_failover_flags_that_cannot_work_exit_2(args: list[str], message: str) -> None:
    out = CliRunner().invoke(app, ["race", *args], env={"STOCKPOOL_DSN": ""})
    assert out.exit_code == 2 and message in " ".join(out.output.split()), out.output
