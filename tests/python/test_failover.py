"""A failover that loses nothing: a primary with a synchronous streaming
standby, Python clients and a maintenance worker on a multi-host DSN
(target_session_attrs=read-write), the primary SIGKILLed mid-run and the
standby promoted (race/failover.py, server/replica.py). Every outcome a
client was told is on the new primary, and the clients and the worker carry
on. The negative control: an asynchronous standby cut off before the kill
loses the commits of that second, and the checker lists exactly those."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from stockpool.cli import app
from stockpool.race import failover
from stockpool.race.journal import Answer

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


def test_a_synchronous_standby_loses_nothing_acknowledged() -> None:
    opts = failover.FailoverOptions(clients=4, duration=9, kill_at=3)
    with failover.pair(opts) as (primary, standby):
        result = failover.failover_soak(primary, standby, opts)
        checks = {c.name: c for c in result.report.checks}
        assert result.passed, [c for c in result.report.checks if not c.passed]
        assert result.missing == []
        assert result.timeline.replication == "sync"
        # The run meant something: commits acknowledged by the old primary and by the new one.
        acked = [a for a in result.answers if a.acknowledged]
        assert any(a.port == primary.port for a in acked) and any(a.port == standby.port for a in acked)
        assert _contradicted(standby.dsn, result.answers) == set()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(primary.dsn, connect_timeout=2).close()  # the old primary is dead
        with psycopg.connect(standby.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
            assert conn.execute("SELECT * FROM stockpool.check_invariants()").fetchall() == []
    assert checks["clients carried on"].passed and checks["worker carried on"].passed
    first = result.timeline.kill_to_first_commit_s
    assert first is not None and first > 0
    assert result.report.counts["kill_to_first_commit_s"] == round(first, 3)


def test_an_asynchronous_standby_held_back_loses_commits_and_the_checker_names_them() -> None:
    opts = failover.FailoverOptions(clients=4, duration=8, kill_at=3, synchronous=False, hold_back=1.0)
    with failover.pair(opts) as (primary, standby):
        result = failover.failover_soak(primary, standby, opts)
        checks = {c.name: c for c in result.report.checks}
        assert not result.passed and checks[JOURNAL_CHECK].passed is False
        assert result.missing, "a second of commits past the standby is lost"
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--async-standby"], "--async-standby is --failover's negative control"),
        (["--failover", "--dsn", "postgresql://x@127.0.0.1/y"], "not on --dsn"),
        (["--failover", "--scenario", "soak"], "--failover runs alone"),
        (["--failover", "--duration", "2"], "--duration must be at least 3"),
    ],
)
def test_failover_flags_that_cannot_work_exit_2(args: list[str], message: str) -> None:
    out = CliRunner().invoke(app, ["race", *args], env={"STOCKPOOL_DSN": ""})
    assert out.exit_code == 2 and message in " ".join(out.output.split()), out.output
