"""``stockpool top``, run as a user would run it, as a monitor-only login role.

- ``--once`` against a database with known activity prints every section with
  the figures that activity must give: the counters' totals, the hot key's
  levels, the overdue holds, a session held idle in transaction under its
  application, and a session blocked on a row lock as ``Lock:transactionid``
  in the wait events (through stockpool.wait_events(): pg_stat_activity
  would hide it from this role; tests/python/test_wait_events.py shows that).
- The refusals: a role outside stockpool_monitor, a role of the app but not
  the monitor, a database without stockpool, bad flags: exit 2, one line.
- The live view in tmux, as a person would watch it: while ``stockpool race``
  (a short soak, run as a command against the database top watches) reserves,
  claims and releases, the captured screen shows non-zero reservations/s and
  claims/s (and, before the race, none: the check's control), a race key among
  the hot keys (none before it), the race's client sessions by application,
  its wait events (none before it) and every section; a killed backend is
  shown and reconnected; the race itself exits 0 with every check passed;
  Ctrl-C ends top with status 0.

Nothing here passes or fails on absolute time: every wait is a poll with a
generous deadline.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typer.testing import CliRunner

from stockpool.cli import app
from stockpool.client import Client
from stockpool.top.frame import Snapshot
from stockpool.top.view import rate
from support import background, scalar, wait_until_blocked

pytestmark = pytest.mark.timeout(120)

MONITOR = "test_top_monitor"  # stockpool_monitor and nothing else
NOBODY = "test_top_nobody"  # a login role and nothing else
APP_ONLY = "test_top_app"  # stockpool_app, not the monitor
SHOP, HOT_ITEM, LOCATION = 7, 4242, 3
TITLES = (
    "throughput",
    "holds and stock",
    "hot keys",
    "wait events",
    "sessions by application",
    "pool dead tuples",
)
WIDE = {**os.environ, "COLUMNS": "200"}  # --once prints to a pipe: lay it out as on a wide terminal
# A row of the wait events section: the event, backends on average, share.
WAIT_ROW = r"^\s*(?:CPU|[A-Za-z]+:\w+)\s+\d+\.\d\s+\d+%"
# The live view's load: a short soak race (stockpool race's own keys: shop 1, location 1,
# fresh items per run; its clients' sessions are stockpool-race/<run>/client).
RACE = (
    *("race", "--scenario", "soak", "--duration", "20", "--clients", "4"),
    *("--shops", "1", "--items", "50", "--check-every", "2"),
)
RACE_SHOP, RACE_LOCATION = 1, 1
RACE_CLIENTS = r"stockpool-race/\d+/client\s+\d+\s+\d+\s+\d+"


def _stockpool(*args: str) -> list[str]:
    return [sys.executable, "-m", "stockpool.cli", *args]


def _login(dsn: str, role: str, *member_of: str) -> str:
    """The DSN as ``role``, a login role that is a member of ``member_of`` only."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not scalar(conn, "SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)):
            conn.execute(
                f"CREATE ROLE {role} LOGIN" + (f" IN ROLE {', '.join(member_of)}" if member_of else "")
            )
    return make_conninfo(dsn, user=role)


def _count_functions(dsn: str) -> None:
    """PostgreSQL counts function calls in new sessions of this database (the
    counters of stockpool.metrics())."""
    dbname = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {dbname} SET track_functions = 'pl'")


def _until(
    what: str,
    check: Callable[[], bool],
    timeout: float = 30,
    every: float = 0.2,
    last: Callable[[], str] = lambda: "",
) -> None:
    """Poll ``check`` until it is true; fail after ``timeout`` seconds, with ``last()``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}\n{last()}")
        time.sleep(every)


def _once(target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _stockpool("top", "--dsn", target, "--once"), capture_output=True, text=True, timeout=60, env=WIDE
    )


# --- reading a frame ---------------------------------------------------------------


def per_second(frame: str, event: str) -> float | None:
    """The throughput section's per-second figure of ``event`` (None: '-' or absent)."""
    match = re.search(rf"^\s*{event}\s+([\d,.]+|-)\s+([\d,]+|-)", frame, re.M)
    if match is None or match.group(1) == "-":
        return None
    return float(match.group(1).replace(",", ""))


def total(frame: str, event: str) -> int | None:
    match = re.search(rf"^\s*{event}\s+(?:[\d,.]+|-)\s+([\d,]+)", frame, re.M)
    return None if match is None else int(match.group(1).replace(",", ""))


def hot_key(frame: str, shop: int, item: int | None, location: int) -> dict[str, str] | None:
    """The hot keys row of a key (``item`` None: of any item): its columns by name."""
    columns = ("on_hand", "pool", "target", "held", "free", "unsettled", "holds", "refill_age")
    cells = r"\s+".join(rf"(?P<{c}>[\d,]+|-|never|[\d.]+ (?:s|min|h))" for c in columns)
    items = r"\d+" if item is None else str(item)
    match = re.search(rf"^\s*{shop}\s+{items}\s+{location}\s+{cells}\s*$", frame, re.M)
    return None if match is None else match.groupdict()


def application(frame: str, app_name: str) -> tuple[int, int, int, str] | None:
    """Sessions by application: (sessions, active, idle in transaction, longest idle in tx)."""
    match = re.search(rf"{re.escape(app_name)}\s+(\d+)\s+(\d+)\s+(\d+)\s+(-|[\d.]+ (?:s|min|h))", frame)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3)), match.group(4)


def test_frame_readers_find_exactly_what_a_frame_says() -> None:
    frame = "\n".join(
        [
            " reservations       3,098  13,711    holds live      5",
            " claims               -      0",
            " 7     4242    3  990,450  168,239  131,072     2  822,209          0      1       0.9 s",
            " -     toptest-idle    1  0  1  2.5 s    pool_units_p0   0.0%",
        ]
    )
    assert per_second(frame, "reservations") == 3098.0 and total(frame, "reservations") == 13711
    assert per_second(frame, "claims") is None and total(frame, "claims") == 0
    assert per_second(frame, "releases") is None
    row = hot_key(frame, 7, 4242, 3)
    assert row is not None and row["on_hand"] == "990,450" and row["free"] == "822,209"
    assert hot_key(frame, 7, 4242, 4) is None
    assert application(frame, "toptest-idle") == (1, 0, 1, "2.5 s")
    assert application(frame, "toptest-other") is None


def test_rates_need_two_snapshots_and_a_counter_that_did_not_go_down() -> None:
    def snap(at: float, reservations: float) -> Snapshot:
        figures = {"reservations_total": {("", "", ""): reservations}}
        return Snapshot(at, datetime.now(), {"reservations_total": "counter"}, figures, [])

    assert rate(None, snap(1.0, 10), "reservations_total") is None
    assert rate(snap(1.0, 10), snap(3.0, 30), "reservations_total") == 10.0
    assert rate(snap(1.0, 30), snap(3.0, 10), "reservations_total") is None, "a reset is not a negative rate"
    assert rate(snap(1.0, 10), snap(3.0, 30), "claims_total") is None


# --- --once --------------------------------------------------------------------------


def test_once_as_a_monitor_role_shows_what_the_database_holds(dsn: str, conns: Any) -> None:
    _count_functions(dsn)
    monitor = _login(dsn, MONITOR, "stockpool_monitor")
    with Client(dsn) as client:
        client.set_stock(SHOP, HOT_ITEM, LOCATION, 500)
        client.set_stock(SHOP, 99, LOCATION, 50)
        client.set_stock(SHOP, 98, LOCATION, 1)
        claimed, released, held = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        for checkout in (claimed, released, held):
            assert client.reserve_units(SHOP, HOT_ITEM, LOCATION, 2, checkout)
        assert client.claim(SHOP, claimed) == 2
        assert client.release(SHOP, released) == 2
        for _ in range(2):  # two holds that expire at once and that no sweep expires
            assert client.reserve_units(SHOP, 99, LOCATION, 1, uuid.uuid4(), timedelta(milliseconds=1))
        assert not client.reserve_units(SHOP, 98, LOCATION, 5, uuid.uuid4()), "5 of 1 unit is refused"
    admin = conns()
    # A closed session's function counts reach the statistics shortly after it ends.
    _until(
        "the sessions' function calls are in pg_stat_user_functions",
        lambda: (
            scalar(
                admin,
                "SELECT value FROM stockpool.metrics() WHERE metric = 'reservations_total'",
            )
            == 5
        ),
    )
    idle = conns(name="toptest-idle")
    idle.execute("BEGIN")
    idle.execute("SELECT 1")
    admin.execute("CREATE TABLE top_scratch (id integer PRIMARY KEY)")
    admin.execute("INSERT INTO top_scratch VALUES (1)")
    idle.execute("UPDATE top_scratch SET id = 1 WHERE id = 1")  # a row lock, held while idle
    blocked = conns(name="toptest-blocked")
    blocked_pid = blocked.info.backend_pid
    with background() as run:
        waiting = run(blocked.execute, "UPDATE top_scratch SET id = 1 WHERE id = 1")
        wait_until_blocked(admin, blocked_pid, waiting)

        out = _once(monitor)

        idle.execute("ROLLBACK")
        waiting.result(timeout=30)

    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    frame = out.stdout
    for title in TITLES:
        assert title in frame, (title, frame)
    assert "counters are off" not in frame, frame
    totals = (total(frame, "reservations"), total(frame, "claims"), total(frame, "releases"))
    assert totals == (5, 1, 1), frame
    assert total(frame, "refusals") == 1, frame
    assert per_second(frame, "reservations") == 0.0, "--once reads twice: a rate, and no load now"
    row = hot_key(frame, SHOP, HOT_ITEM, LOCATION)
    assert row is not None, frame
    # 500 on hand, 2 claimed (off hand), 2 released (back), 2 held by one checkout.
    assert (row["on_hand"], row["held"], row["free"], row["holds"]) == ("498", "2", "496", "1"), row
    assert re.search(r"holds overdue\s+2 \(oldest [\d.]+ (?:s|min) past expiry\)", frame), frame
    assert re.search(r"invariant violations\s+0", frame), frame
    sessions = application(frame, "toptest-idle")
    assert sessions is not None and sessions[2] == 1 and sessions[3] != "-", frame
    assert application(frame, "toptest-blocked") is not None, frame
    # The plain monitor role sees the blocked session's lock wait, in every sample.
    assert re.search(r"Lock:transactionid\s+1\.0\s+\d+%", frame), frame
    assert "unavailable" not in frame and "hidden" not in frame, frame


# --- refusals -------------------------------------------------------------------------


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), stderr
    assert not [line for line in lines[1:] if not line.startswith("hint: ")], stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_refusals_exit_2_with_one_line(dsn: str, empty_db: str) -> None:
    cases = [
        (_login(dsn, NOBODY), f"role {NOBODY} may not read stockpool's metrics"),
        (_login(dsn, APP_ONLY, "stockpool_app"), f"role {APP_ONLY} may not run stockpool.metrics()"),
        (empty_db, "this database has no stockpool schema"),
        (make_conninfo(dsn, user="test_top_no_such_role", password="s3cret-pw"), "cannot connect"),
    ]
    for target, message in cases:
        out = _once(target)
        assert out.returncode == 2, (target, out.stdout, out.stderr)
        assert message in _one_error_line(out.stderr), out.stderr
        assert "s3cret-pw" not in out.stderr
        assert not out.stdout.strip(), "nothing but the error"
    # The control: the same database as a monitor works.
    assert _once(_login(dsn, MONITOR, "stockpool_monitor")).returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "0"], "--interval must be positive, got 0"),
        (["--interval", "-1", "--once"], "--interval must be positive"),
        (["--keys", "0"], "--keys must be between 1 and 1000, got 0"),
        ([], "stockpool top needs --dsn"),
    ],
)
def test_bad_flags_exit_2(dsn: str, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STOCKPOOL_DSN", raising=False)
    dsn_args = ["--dsn", dsn] if args else []
    out = CliRunner().invoke(app, ["top", *dsn_args, *args])
    assert out.exit_code == 2, out.output
    assert message in _one_error_line(out.stderr)


# --- the live view in tmux ------------------------------------------------------------


class Tmux:
    """A tmux server of the test's own (its own socket, no configuration file)."""

    def __init__(self, name: str) -> None:
        self.socket = f"stockpool-test-{uuid.uuid4().hex[:8]}"
        self.name = name

    def __call__(self, *args: str) -> str:
        # The server, started by the first call, hands its environment to the pane:
        # without COLUMNS and LINES (set under pytest), so that top sizes itself
        # from the terminal, as in a person's shell.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        out = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            env=env,
        )
        return out.stdout

    def start(self, command: list[str]) -> None:
        # The shell around it says how the command ended, and keeps the pane open to read that.
        shell = f'{shlex.join(command)}; echo "top exited with status $?"; sleep 300'
        self("new-session", "-d", "-s", self.name, "-x", "200", "-y", "60", shell)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.name)

    def kill(self) -> None:
        subprocess.run(
            ["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30, check=False
        )


def test_live_view_in_tmux_during_a_race(dsn: str, conns: Any, tmp_path: Path) -> None:
    assert shutil.which("tmux"), "tmux is missing: scripts/bootstrap-system installs it"
    _count_functions(dsn)
    monitor = _login(dsn, MONITOR, "stockpool_monitor")
    admin = conns()
    tmux = Tmux("top")
    screens: list[str] = []
    race: subprocess.Popen[str] | None = None
    race_out = tmp_path / "race.out"

    def race_output() -> str:
        return race_out.read_text() if race_out.exists() else ""

    def until(what: str, check: Callable[[str], bool], timeout: float = 45) -> None:
        """Capture the screen until ``check`` holds for one capture."""

        def poll() -> bool:
            screens.append(tmux.screen())
            assert "Traceback" not in screens[-1], screens[-1]
            return check(screens[-1])

        def last() -> str:
            status = "running" if race is None or race.poll() is None else f"exited {race.returncode}"
            screen = screens[-1] if screens else "(no capture)"
            return f"{screen}\nrace {status}:\n{race_output()[-3000:]}"

        _until(what, poll, timeout, 0.3, last)

    try:
        tmux.start(_stockpool("top", "--dsn", monitor, "--interval", "0.5"))
        # Before the race: every section, and no reservation going on (the control of
        # the check below: it tells a quiet screen from a busy one).
        until(
            "a frame with every section and rates",
            lambda s: all(t in s for t in TITLES) and per_second(s, "reservations") is not None,
        )
        quiet = screens[-1]
        assert per_second(quiet, "reservations") == 0.0 and per_second(quiet, "claims") == 0.0, quiet
        assert re.search(WAIT_ROW, quiet, re.M) is None, "no session is active before the race"
        assert hot_key(quiet, RACE_SHOP, None, RACE_LOCATION) is None, quiet

        # The load is a race, run as a person would run it against the database top
        # watches: a short soak whose own checks must pass.
        with race_out.open("w") as out:
            race = subprocess.Popen(
                _stockpool(*RACE, "--dsn", dsn, "--results", str(tmp_path / "results")),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=WIDE,
            )
        busy: dict[str, str] = {}

        def all_seen(screen: str) -> bool:
            for event in ("reservations", "claims"):
                if (per_second(screen, event) or 0) > 0:
                    busy.setdefault(event, screen)
            if hot_key(screen, RACE_SHOP, None, RACE_LOCATION) is not None:
                busy.setdefault("hot key", screen)
            if re.search(RACE_CLIENTS, screen):
                busy.setdefault("race sessions", screen)
            return len(busy) == 4

        try:
            until("non-zero rates, a race key and the race's sessions", all_seen)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nseen {sorted(busy)}") from None
        # The plain monitor role sees the race's sessions at work in the wait events.
        until("a wait event of the race", lambda s: re.search(WAIT_ROW, s, re.M) is not None)

        # A lost connection is shown and mended, without a traceback.
        pid = scalar(
            admin, "SELECT pid FROM pg_catalog.pg_stat_activity WHERE application_name = 'stockpool-top'"
        )
        admin.execute("SELECT pg_catalog.pg_terminate_backend(%s)", (pid,))
        until("the reconnection on screen", lambda s: "reconnected at" in s)
        until("rates again after the reconnection", lambda s: (per_second(s, "reservations") or 0) > 0)
        ended = race.poll() is not None
        assert not ended, f"the race ended before top showed it all: make it longer\n{race_output()}"

        # The race ends by itself, and its own checks pass.
        status = race.wait(timeout=60)
        assert status == 0, f"race exited {status}\n{race_output()}"
        assert re.search(r"^PASS: ", race_output(), re.M), race_output()

        tmux("send-keys", "-t", tmux.name, "C-c")
        until("top to end on Ctrl-C", lambda s: "top exited with status" in s)
        assert "top exited with status 0" in screens[-1], screens[-1]
    finally:
        if race is not None and race.poll() is None:
            race.terminate()
            try:
                race.wait(timeout=30)
            except subprocess.TimeoutExpired:
                race.kill()
                race.wait(timeout=30)
        tmux.kill()
