"""The race harness: stockpool PASSes under load, the naive shape FAILs, each
checker catches a broken database, bad flags get one line.

The pgbench runs go against this test's own database (the ``dsn`` fixture);
the parsers are tested on synthetic input, exactly.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from stockpool import race
from stockpool.checks import Check
from stockpool.cli import app
from stockpool.race import verify
from stockpool.server.stats import ServerLog

pytestmark = pytest.mark.timeout(180)

runner = CliRunner()


def _passed(checks: list[Check]) -> None:
    """Fail with the failed checks in full, one a line. An assertion's message
    is shortened by pytest without -vv, and with it the server's report of a
    deadlock (the cycle, with each statement); pytest.fail's is not."""
    failed = [f"{c.name}: {c.detail}" for c in checks if not c.passed]
    if failed:
        pytest.fail("\n".join(failed), pytrace=False)


def _check(checks: list[Check], name: str) -> Check:
    found = [c for c in checks if c.name == name]
    assert found, f"no check named {name!r} in {[c.name for c in checks]}"
    return found[0]


# --- scenarios against a real server ---------------------------------------------


@pytest.mark.slow
def test_sellout_holds_exactly_the_units(dsn: str) -> None:
    result = race.sellout(dsn, clients=64, per_client=20, units=50)
    assert result.passed, [c for c in result.checks if not c.passed]
    assert result.held == 50
    report = result.report
    assert report is not None
    assert report.transactions == 64 * 20
    assert report.counts["rolled_back"] > 0, "20% of transactions should have rolled back"
    assert report.counts["refused"] > 0, "demand was well above supply"
    lat = report.latency_ms
    assert lat["p50"] is not None and lat["max"] is not None
    assert 0 < lat["p50"] <= (lat["p95"] or 0) <= (lat["p99"] or 0) <= lat["max"]
    assert report.wal_bytes > 0
    assert report.waits["samples"] > 0
    assert _check(result.checks, "zero deadlocks").passed
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT pg_catalog.count(*) FROM stockpool.check_invariants()").fetchone() == (0,)


@pytest.mark.slow
def test_soak_passes_with_checks_during_the_run(dsn: str, server_log: ServerLog, tmp_path: Path) -> None:
    # With the server log, a failed "zero deadlocks" check carries the cycle
    # as the server reported it, and every client's error counts, retried or not.
    harness = race.Harness(dsn=dsn, log_root=tmp_path, server_log=server_log)
    report = race.soak(dsn, clients=24, duration=12, harness=harness, shops=2, items=100, check_every=2)
    _passed(report.checks)
    assert report.passed
    counts = report.counts
    assert counts["claimed"] > 0 and counts["released"] > 0 and counts["abandoned"] > 0
    assert counts["hold_lines_expired"] > 0, "abandoned holds must expire through the sweeper"
    assert counts["check_rounds"] >= 3, "invariants are checked during the run, not only at the end"
    assert report.reservations > 0 and report.reservations_per_s > 0
    assert set(report.errors) == set()
    assert report.pool["partitions"], "pool partition health is reported"


@pytest.mark.slow
def test_hot_sweep_reports_one_run_per_client_count(dsn: str) -> None:
    reports = race.hot(dsn, clients=(1, 8), duration=2)
    assert [r.clients for r in reports] == [1, 8]
    for report in reports:
        _passed(report.checks)
        assert report.passed
        assert report.counts["held"] == report.transactions > 0


@pytest.mark.slow
def test_naive_shape_drifts_and_fails(dsn: str) -> None:
    result = race.sellout(dsn, clients=32, per_client=10, units=20, shape="naive")
    assert not result.passed
    assert not _check(result.checks, "no oversell").passed, "lost updates must sell more than there is"
    assert not _check(result.checks, "counter = units - sales").passed
    assert result.held > 20


@pytest.mark.slow
def test_cli_naive_shape_exits_non_zero(dsn: str, tmp_path: Path) -> None:
    args = ["--shape", "naive", "--clients", "16", "--per-client", "10", "--units", "10"]
    out = runner.invoke(app, ["race", "--dsn", dsn, *args, "--results", str(tmp_path)])
    assert out.exit_code == 1, out.output
    assert "FAIL" in out.output
    (report,) = tmp_path.glob("race-*.json")
    document = json.loads(report.read_text())
    assert document["passed"] is False
    assert document["runs"][0]["shape"] == "naive"


@pytest.mark.slow
def test_cli_sellout_passes_and_writes_json(dsn: str, tmp_path: Path) -> None:
    args = ["--scenario", "sellout", "--clients", "16", "--per-client", "5", "--units", "10"]
    out = runner.invoke(app, ["race", "--dsn", dsn, *args, "--results", str(tmp_path)])
    assert out.exit_code == 0, out.output
    (report,) = tmp_path.glob("race-*.json")
    run = json.loads(report.read_text())["runs"][0]
    assert run["passed"] is True
    for key in (
        "reservations_per_s",
        "latency_ms",
        "errors_by_sqlstate",
        "retries",
        "wait_events",
        "pool",
        "autovacuum_runs",
        "wal_bytes_per_reservation",
        "checks",
    ):
        assert key in run
    assert set(run["latency_ms"]) == {"p50", "p95", "p99", "max"}


@pytest.mark.slow
def test_seats_sell_out_with_every_label_told_once(dsn: str) -> None:
    mix, rush = race.seats(dsn, clients=16, per_client=10, units=120)
    for report in (mix, rush):
        _passed(report.checks)
        assert report.passed
        assert _check(report.checks, "zero deadlocks").passed
    calls = mix.counts["calls"]
    assert all(calls[c]["reserved"] > 0 for c in ("one", "many", "adjacent", "pick")), calls
    assert mix.counts["claimed"] > 0 and mix.counts["released"] > 0
    assert mix.counts["refused"] > 0, "demand was well above supply"
    assert rush.counts["free_at_start"] > 0, "the rush starts with seats to sell"
    assert rush.counts["refused"] > 0 and rush.counts["seats"].get("free", 0) == 0
    assert set(rush.counts["seats"]) <= {"held", "sold"}


@pytest.mark.slow
def test_seats_naive_sells_seats_twice_and_fails(dsn: str) -> None:
    (report,) = race.seats(dsn, clients=16, per_client=10, units=60, shape="naive")
    assert not report.passed
    assert not _check(report.checks, "every label to at most one checkout").passed
    assert not _check(report.checks, "every client holds the labels it was told").passed
    assert report.counts["told"] > report.counts["seats_taken"], "lost updates: more told than taken"


@pytest.mark.slow
def test_seats_checks_catch_a_broken_database(dsn: str) -> None:
    """Each seats check against a database broken by hand after a clean run:
    a second hold naming a held seat, a client told other labels than it
    holds, and a seat left free after a client was told NULL."""
    from stockpool.race.seats import label_once, sold_in_history, sold_out, told_is_held

    mix, rush = race.seats(dsn, clients=16, per_client=10, units=120)
    assert mix.passed and rush.passed, [c for r in (mix, rush) for c in r.checks if not c.passed]
    runs = (mix.run_id, rush.run_id)
    item = mix.run_id * race.ITEM_STRIDE + 1
    keys = verify.KeyRange((1,), item, item, 1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert label_once(conn, runs, keys).passed
        assert told_is_held(conn, runs, keys).passed
        assert sold_in_history(conn, runs, keys).passed
        assert sold_out(conn, rush.run_id, keys).passed
        # A hold nobody was told, naming a seat another checkout holds.
        (label,) = conn.execute(
            "SELECT l FROM stockpool.holds AS h CROSS JOIN LATERAL unnest(h.labels) AS l"
            " WHERE h.item_id = %s AND h.status = 'held' LIMIT 1",
            (item,),
        ).fetchone() or ("",)
        twin = uuid.uuid4()
        conn.execute(
            "INSERT INTO stockpool.holds"
            " (shop_id, checkout_id, item_id, location_id, quantity, expires_at, labels)"
            " VALUES (1, %s, %s, 1, 1, now() + interval '1 hour', ARRAY[%s])",
            (twin, item, label),
        )
        once = label_once(conn, runs, keys)
        assert not once.passed and f"held by 2 holds: {label}" in once.detail
        told = told_is_held(conn, runs, keys)
        assert not told.passed and "in its hold, never told" in told.detail
        conn.execute("DELETE FROM stockpool.holds WHERE checkout_id = %s", (twin,))
        # A claimed checkout told other labels than it holds (and than its movement names).
        checkout, labels = conn.execute(
            "SELECT checkout_id, labels FROM stockpool_race.outcomes"
            " WHERE run_id = %s AND settled = 'claimed' LIMIT 1",
            (mix.run_id,),
        ).fetchone() or (None, None)
        conn.execute(
            "UPDATE stockpool_race.outcomes SET labels = ARRAY['nowhere']"
            " WHERE run_id = %s AND checkout_id = %s",
            (mix.run_id, checkout),
        )
        told = told_is_held(conn, runs, keys)
        assert not told.passed and str(checkout) in told.detail
        assert not sold_in_history(conn, runs, keys).passed
        conn.execute(
            "UPDATE stockpool_race.outcomes SET labels = %s WHERE run_id = %s AND checkout_id = %s",
            (labels, mix.run_id, checkout),
        )
        assert told_is_held(conn, runs, keys).passed
        # A seat free again after the rush told clients NULL: an undersell.
        (held,) = conn.execute(
            "SELECT checkout_id FROM stockpool_race.outcomes WHERE run_id = %s AND reserved LIMIT 1",
            (rush.run_id,),
        ).fetchone() or (None,)
        conn.execute("SELECT stockpool.release(1, %s)", (held,))
        left = sold_out(conn, rush.run_id, keys)
        assert not left.passed and "1 seats free at the end" in left.detail
        # And a rush nobody was refused in checks nothing: FAIL, not PASS.
        conn.execute("DELETE FROM stockpool_race.outcomes WHERE run_id = %s AND NOT reserved", (rush.run_id,))
        assert "nothing was checked" in sold_out(conn, rush.run_id, keys).detail


# --- bad flags: one line, no traceback ------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--clients", "-1"], "--clients must be at least 1"),
        (["--units", "-5"], "--units must be at least 0"),
        (["--scenario", "soak", "--duration", "0"], "--duration must be at least 1"),
        (["--scenario", "nope"], "unknown scenario nope"),
        (["--scenario", "seats", "--seats", "2"], "--seats must be at least 3"),
        (["--shape", "naive", "--scenario", "soak"], "--shape naive runs the sellout and hot"),
        (["--scenario", "hot", "--hot-clients", "8,-2"], "--hot-clients must be at least 1"),
        (["--dsn", "postgresql://nobody@127.0.0.1:1/none"], "cannot connect"),
    ],
)
def test_bad_flags_get_one_clear_line(args: list[str], message: str, tmp_path: Path) -> None:
    out = runner.invoke(app, ["race", *args, "--results", str(tmp_path)])
    assert out.exit_code == 2, out.output
    assert "error:" in out.output and message in " ".join(out.output.split())
    assert "Traceback" not in out.output
    assert not list(tmp_path.iterdir()), "nothing ran, so no report"


def test_more_clients_than_the_server_allows(dsn: str) -> None:
    out = runner.invoke(app, ["race", "--dsn", dsn, "--scenario", "sellout", "--clients", "5000"])
    assert out.exit_code == 2, out.output
    assert "this run needs 5005" in " ".join(out.output.split())


# --- every checker catches a broken database (negative controls) ----------------


def _reserve_as_client(conn: psycopg.Connection, run_id: int, item: int, quantity: int) -> uuid.UUID:
    """What a pgbench client does: reserve and record the outcome in one transaction."""
    checkout = uuid.uuid4()
    with conn.transaction():
        (ok,) = conn.execute(
            "SELECT stockpool.reserve_units(1, %s, 1, %s, %s)", (item, quantity, checkout)
        ).fetchone() or (False,)
        conn.execute(
            "INSERT INTO stockpool_race.outcomes"
            " (run_id, checkout_id, shop_id, item_ids, quantities, intent, reserved)"
            " VALUES (%s, %s, 1, %s, %s, 'hold', %s)",
            (run_id, checkout, [item], [quantity], ok),
        )
    return checkout


def _all_checks(conn: psycopg.Connection, run_id: int, keys: verify.KeyRange) -> dict[str, Check]:
    with verify.snapshot(conn):
        checks = [
            verify.invariants(conn),
            verify.ledger_history(conn, keys),
            verify.client_outcomes(conn, run_id, keys),
            verify.claims_in_ledger(conn, run_id, keys),
        ]
    return {c.name: c for c in checks}


@pytest.fixture
def small_run(dsn: str) -> tuple[str, int, verify.KeyRange, list[uuid.UUID]]:
    """A run of a few reservations recorded the way clients record them."""
    with race.temporary_harness(dsn) as h, psycopg.connect(dsn, autocommit=True) as conn:
        h.install()
        run_id = h.new_run(conn, "test", "stockpool", {})
        item = run_id * race.ITEM_STRIDE + 1
        conn.execute("SELECT stockpool.set_stock(1, %s, 1, 10)", (item,))
        checkouts = [_reserve_as_client(conn, run_id, item, 2) for _ in range(3)]
        refused = _reserve_as_client(conn, run_id, item, 50)
        keys = verify.KeyRange((1,), item, item)
        checks = _all_checks(conn, run_id, keys)
        assert all(c.passed for c in checks.values()), checks
        assert "3 held" in checks["client-seen holds = stockpool.holds"].detail
        return dsn, run_id, keys, [*checkouts, refused]


def test_a_lost_committed_hold_is_caught(
    small_run: tuple[str, int, verify.KeyRange, list[uuid.UUID]],
) -> None:
    dsn, run_id, keys, checkouts = small_run
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM stockpool.holds WHERE checkout_id = %s", (checkouts[0],))
        check = _all_checks(conn, run_id, keys)["client-seen holds = stockpool.holds"]
    assert not check.passed and "committed hold missing" in check.detail


def test_a_hold_no_client_saw_is_caught(small_run: tuple[str, int, verify.KeyRange, list[uuid.UUID]]) -> None:
    dsn, run_id, keys, _ = small_run
    with psycopg.connect(dsn, autocommit=True) as conn:
        # A reservation whose transaction the client saw roll back, yet it held.
        conn.execute("SELECT stockpool.reserve_units(1, %s, 1, 1, %s)", (keys.item_lo, uuid.uuid4()))
        check = _all_checks(conn, run_id, keys)["client-seen holds = stockpool.holds"]
    assert not check.passed and "hold no client saw committed" in check.detail


def test_a_refusal_that_left_a_hold_is_caught(
    small_run: tuple[str, int, verify.KeyRange, list[uuid.UUID]],
) -> None:
    dsn, run_id, keys, checkouts = small_run
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE stockpool_race.outcomes SET reserved = false WHERE run_id = %s AND checkout_id = %s",
            (run_id, checkouts[1]),
        )
        check = _all_checks(conn, run_id, keys)["client-seen holds = stockpool.holds"]
    assert not check.passed and "refused reservation left a hold" in check.detail


def test_a_hold_in_the_wrong_state_is_caught(
    small_run: tuple[str, int, verify.KeyRange, list[uuid.UUID]],
) -> None:
    dsn, run_id, keys, checkouts = small_run
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT stockpool.release(1, %s)", (checkouts[2],))  # nobody asked for it
        check = _all_checks(conn, run_id, keys)["client-seen holds = stockpool.holds"]
    assert not check.passed and "released, but the client never asked" in check.detail


def test_ledger_drift_is_caught(small_run: tuple[str, int, verify.KeyRange, list[uuid.UUID]]) -> None:
    dsn, run_id, keys, _ = small_run
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO stockpool.movements (shop_id, item_id, location_id, delta, on_hand_after, reason)"
            " VALUES (1, %s, 1, 5, 15, 'adjust')",
            (keys.item_lo,),
        )
        checks = _all_checks(conn, run_id, keys)
    assert not checks["ledger = movement history"].passed
    assert "on_hand 10 <> history 15" in checks["ledger = movement history"].detail
    assert not checks["check_invariants() empty"].passed


def test_a_claim_movement_no_client_saw_is_caught(
    small_run: tuple[str, int, verify.KeyRange, list[uuid.UUID]],
) -> None:
    dsn, run_id, keys, checkouts = small_run
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT stockpool.claim(1, %s)", (checkouts[0],))  # outcome not updated
        checks = _all_checks(conn, run_id, keys)
    assert not checks["client-seen claims = claim movements"].passed
    detail = checks["client-seen claims = claim movements"].detail
    assert "claim movement or pending claim no client saw committed" in detail
    assert "claimed, but the client never asked" in checks["client-seen holds = stockpool.holds"].detail


def test_a_pending_claim_no_client_saw_is_caught(
    small_run: tuple[str, int, verify.KeyRange, list[uuid.UUID]],
) -> None:
    """A claim that met a busy ledger row is recorded as a pending claim; the
    check counts it like a movement, so one nobody saw committed is caught."""
    dsn, run_id, keys, checkouts = small_run
    with psycopg.connect(dsn, autocommit=True) as conn, psycopg.connect(dsn) as busy:
        busy.execute(
            "SELECT 1 FROM stockpool.stock WHERE shop_id = 1 AND item_id = %s AND location_id = 1"
            " FOR NO KEY UPDATE",
            (keys.item_lo,),
        )
        conn.execute("SELECT stockpool.claim(1, %s)", (checkouts[0],))  # outcome not updated
        pending = conn.execute("SELECT count(*) FROM stockpool.pending_claims").fetchone()
        busy.rollback()
        checks = _all_checks(conn, run_id, keys)
    assert pending == (1,), "the claim met a busy ledger row, so it is pending"
    assert not checks["client-seen claims = claim movements"].passed
    assert "claim movement or pending claim no client saw committed" in (
        checks["client-seen claims = claim movements"].detail
    )
    assert checks["check_invariants() empty"].passed, "a pending claim is a healthy state"
    assert checks["ledger = movement history"].passed, "the ledger replays with a claim pending"


def test_wait_sampler_tells_statements_apart(dsn: str) -> None:
    """Two sessions of one tag, each in a different statement: the sampler counts
    each under its own label (and the session outside the tag not at all)."""
    from stockpool.server.sampler import WaitSampler

    sessions = [
        psycopg.connect(dsn, autocommit=True, application_name=app)
        for app in ("sampler-test/a", "sampler-test/b", "someone-else")
    ]
    threads = [
        threading.Thread(target=c.execute, args=(f"SELECT pg_catalog.pg_sleep(1.5) /* {label} */",))
        for c, label in zip(sessions, ("alpha", "beta", "alpha"), strict=True)
    ]
    try:
        with WaitSampler(dsn, "sampler-test/", 0.1, (("alpha", r"/\* alpha"), ("beta", r"/\* beta"))) as s:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        for c in sessions:
            c.close()
    profile = s.profile
    assert profile.samples >= 5 and profile.errors == 0
    assert set(profile.by_statement) == {"alpha", "beta"}
    alpha, beta = profile.by_statement["alpha"], profile.by_statement["beta"]
    assert alpha["Timeout:PgSleep"] >= 5 and beta["Timeout:PgSleep"] >= 5
    # only the tagged "alpha" session: never more backends than samples
    assert alpha["Timeout:PgSleep"] <= profile.samples
    assert profile.counts["Timeout:PgSleep"] == alpha["Timeout:PgSleep"] + beta["Timeout:PgSleep"]
