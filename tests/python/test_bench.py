"""The bench harness, run tiny: two strategies at two client counts for 2 s,
one counter shape, the cart and a short soak, on the session's test server.

What is checked is the structure of a run and the arithmetic of its report,
every ratio against the same run's ceiling. Nothing here passes or fails on
how fast this machine is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer

from stockpool.bench import bars, chart, command, markdown, model, report, runner
from stockpool.errors import StockpoolError
from stockpool.server import cpumeter, placement
from stockpool.server.stats import wait_for_sessions_gone
from support import scalar

pytestmark = pytest.mark.timeout(300)

# Keys of the catalogue cells: 2,000 of 500 units. With 300, a warm uniform
# cell (a warm-up and the cell, 2 s each) on a fast moment of CI's machine
# (31,354 counter+hold reservations/s) sold a few keys out, and the cell was
# rightly marked invalid: "reserved 62390 of 62430".
CATALOGUE_KEYS = 2_000

CLIENTS = [1, 8]


@pytest.fixture(scope="module")
def run(pg_server: Any) -> model.BenchRun:
    config = model.BenchConfig(
        clients=CLIENTS,
        seconds=2,
        strategies=["ceiling", "stockpool"],
        shapes=["naive"],
        shape_clients=[4],
        cart=True,
        checkouts=True,
        soak_seconds=10,
        soak_clients=4,
        jobs=2,
        catalogue_keys=CATALOGUE_KEYS,
        catalogue_clients=[4],
    )
    lines: list[str] = []
    cpu = cpumeter.ServerCPU.of_datadir(pg_server.cluster.datadir)
    assert cpu is not None, "the test server runs on this machine: its CPU can be read"
    result = runner.Bench(pg_server.dsn("postgres"), config, lines.append, cpu).execute()
    # template, per client count 2 strategies + the cart + 5 checkouts, the shape,
    # 8 catalogue cells (2 strategies x uniform/zipf x first touches/warm), the soak
    assert len(lines) == 1 + 2 * 8 + 1 + 8 + 1, lines
    return result


@pytest.mark.slow
def test_every_cell_ran_and_reserved_what_it_committed(run: model.BenchRun) -> None:
    for clients in CLIENTS:
        for kind, name in (("strategy", "ceiling"), ("strategy", "stockpool"), ("cart", "reserve_cart")):
            cell = run.cell(kind, name, clients)
            assert cell is not None, (kind, name, clients)
            assert cell.valid, cell.notes
            assert cell.transactions > 0 and cell.tps > 0
            expected = cell.transactions * cell.units_per_transaction
            assert expected - clients * cell.units_per_transaction <= cell.reserved <= expected + clients * 5
            assert cell.p50_ms is not None and cell.p99_ms is not None
            assert 0 < cell.p50_ms <= cell.p99_ms
            assert cell.wait_samples > 0
    sp = run.cell("strategy", "stockpool", 8)
    assert sp is not None and sp.invariant_violations == 0


@pytest.mark.slow
def test_ratios_are_to_the_same_runs_ceiling(run: model.BenchRun) -> None:
    rows = {(r[0], r[1]): r for r in markdown.strategy_rows(run)}
    for clients in CLIENTS:
        ceiling = run.cell("strategy", "ceiling", clients)
        sp = run.cell("strategy", "stockpool", clients)
        assert ceiling is not None and sp is not None
        assert rows[("ceiling", str(clients))][3] == "1.00x"
        assert rows[("stockpool", str(clients))][3] == f"{sp.rate / ceiling.rate:.2f}x"
        assert sp.p99_ms is not None and ceiling.p99_ms is not None
        assert rows[("stockpool", str(clients))][7] == f"{sp.p99_ms / ceiling.p99_ms:.2f}x"
        # CPU per reservation, server and pgbench, also against the ceiling.
        for cell in (ceiling, sp):
            assert cell.cpu_server_us is not None and cell.cpu_server_us > 0
            assert cell.cpu_client_us is not None and cell.cpu_client_us >= 0
        assert sp.cpu_us is not None and ceiling.cpu_us is not None
        assert rows[("stockpool", str(clients))][8] == f"{sp.cpu_us:,.0f}"
        assert rows[("stockpool", str(clients))][9] == f"{sp.cpu_us / ceiling.cpu_us:.2f}x"
    # The bar's floor covers 8 clients and up, so here 8 and not 1.
    floor = [c for c in bars.bar(run) if c.name.startswith(">= 0.5 x ceiling")]
    assert [c.name for c in floor] == [">= 0.5 x ceiling at 8 clients"]


@pytest.mark.slow
def test_cart_counts_units_not_carts(run: model.BenchRun) -> None:
    cart = run.cell("cart", "reserve_cart", 8)
    assert cart is not None and cart.units_per_transaction == 5
    assert cart.rate == pytest.approx(cart.tps * 5, rel=0.01)
    assert cart.invariant_violations == 0


@pytest.mark.slow
def test_checkout_cells_count_whole_checkouts(run: model.BenchRun) -> None:
    """One pgbench transaction is one checkout; what went all the way is counted
    from the tables (claimed or released holds), and claim's waits are told
    apart from reserve's."""
    for clients in CLIENTS:
        for name in ("stockpool_claim", "stockpool_release", "counter_hold_claim", "counter_hold_release"):
            cell = run.cell("checkout", name, clients)
            assert cell is not None and cell.valid, (name, clients, cell and cell.notes)
            assert cell.units_per_transaction == 1
            # a checkout cut by the end of the run may have reserved and not settled
            assert cell.transactions - clients <= cell.reserved <= cell.transactions + clients, (name, cell)
        cart = run.cell("checkout", "cart_claim", clients)
        assert cart is not None and cart.valid and cart.units_per_transaction == 5
        assert 5 * (cart.transactions - clients) <= cart.reserved <= 5 * (cart.transactions + clients)
        claim = run.cell("checkout", "stockpool_claim", clients)
        assert claim is not None and claim.invariant_violations == 0
        assert set(claim.waits_by_statement) <= {"reserve", "claim"}
        assert "claim" in claim.waits_by_statement or claim.wait_samples < 20
        release = run.cell("checkout", "stockpool_release", clients)
        assert release is not None and "claim" not in release.waits_by_statement
    rows = {r[0]: r for r in markdown.checkout_rows(run)}
    for clients in CLIENTS:
        claim, release = (
            run.cell("checkout", "stockpool_claim", clients),
            run.cell("checkout", "stockpool_release", clients),
        )
        ceiling = run.cell("strategy", "ceiling", clients)
        assert claim is not None and release is not None and ceiling is not None
        assert rows[str(clients)][2] == f"{claim.tps / ceiling.tps:.2f}x"
        assert rows[str(clients)][5] == f"{claim.tps / release.tps:.2f}x"
    names = [c.name for c in bars.checkout_bar(run)]
    assert names[0] == "checkout: reserve+claim >= 0.9 x reserve+release at 1, 8"
    assert names[1].startswith("checkout: neither Lock:transactionid nor Lock:tuple")
    assert len(names) == 2, "no client count of 32 or more: no comparison with counter+hold"


@pytest.mark.slow
def test_catalogue_cells_count_reservations_and_the_pool_they_left(run: model.BenchRun) -> None:
    """Each catalogue cell reserved what it committed, and the stockpool cells
    report the pool rows left behind and the keys touched (within the catalogue)."""
    for strategy in ("counter_hold", "stockpool"):
        for dist in ("uniform", "zipf"):
            for phase in ("cold", "warm"):
                cell = run.cell("catalogue", model.catalogue_name(strategy, dist, phase), 4)
                assert cell is not None, (strategy, dist, phase)
                assert cell.valid, cell.notes
                assert cell.transactions > 0
                assert cell.transactions - 4 <= cell.reserved <= cell.transactions + 4
                if strategy == "stockpool":
                    assert cell.invariant_violations == 0
                    assert cell.keys_touched is not None and 0 < cell.keys_touched <= CATALOGUE_KEYS
                    assert cell.pool_rows is not None and cell.pool_bytes is not None
                else:
                    assert cell.pool_rows is None
    names = [c.name for c in bars.catalogue_bar(run)]
    assert any("first touches" in n and "pool rows per key" in n for n in names), names


def _hand_made_run(clients: list[int], **options: Any) -> model.BenchRun:
    """An empty run to fill with hand-made cells (nothing is measured)."""
    config = model.BenchConfig(
        clients=clients,
        seconds=1,
        strategies=["ceiling"],
        shapes=[],
        shape_clients=[],
        cart=False,
        checkouts=options.pop("checkouts", False),
        soak_seconds=0,
        soak_clients=1,
        jobs=1,
        **options,
    )
    return model.BenchRun(config=config, machine={}, started="now")


def test_reserve_bar_arithmetic() -> None:
    """The reserve bar on hand-made cells: fixed figures, fixed verdicts."""
    run = _hand_made_run([8, 32, 512])
    run.config.strategies = ["ceiling", "counter_hold", "sharded", "stockpool"]

    def cell(name: str, clients: int, tps: float, p99: float) -> model.Cell:
        return model.Cell(
            kind="strategy",
            name=name,
            clients=clients,
            seconds=1,
            transactions=int(tps),
            tps=tps,
            reserved=int(tps),
            p99_ms=p99,
        )

    run.cells += [
        cell("ceiling", 8, 1000.0, 2.0),
        cell("ceiling", 32, 1000.0, 4.0),
        cell("ceiling", 512, 1000.0, 10.0),
        cell("stockpool", 8, 600.0, 3.0),
        cell("stockpool", 32, 450.0, 5.0),
        cell("stockpool", 512, 400.0, 25.0),
        cell("counter_hold", 8, 500.0, 2.0),
        cell("counter_hold", 32, 300.0, 9.0),
        cell("counter_hold", 512, 100.0, 90.0),
        cell("sharded", 8, 700.0, 2.0),
        cell("sharded", 32, 500.0, 5.0),
        cell("sharded", 512, 400.0, 20.0),
    ]
    checks = bars.bar(run)
    assert [(c.name, c.passed, c.detail) for c in checks] == [
        (">= 0.5 x ceiling at 8, 32, 512 clients", False, "lowest 0.40x; short at 32: 0.45x, 512: 0.40x"),
        (">= 1 x counter_hold at every client count", True, "8: 1.20x, 32: 1.50x, 512: 4.00x"),
        (">= 0.9 x sharded at every client count", False, "8: 0.86x, 32: 0.90x, 512: 1.00x"),
        ("p99 at 512 clients <= 3 x ceiling's", True, "25.0 ms vs 10.0 ms: 2.50x"),
        ("no collapse: 512 clients >= 0.7 x 32 clients", True, "0.89x"),
    ]


def test_catalogue_bar_arithmetic() -> None:
    """The catalogue bar on hand-made cells: fixed figures, fixed verdicts."""
    run = _hand_made_run([1, 32], catalogue_keys=1000, catalogue_clients=[1, 32])

    def cell(strategy: str, dist: str, phase: str, clients: int, tps: float, rows: int = 0) -> model.Cell:
        return model.Cell(
            kind="catalogue",
            name=model.catalogue_name(strategy, dist, phase),
            clients=clients,
            seconds=1,
            transactions=int(tps),
            tps=tps,
            reserved=int(tps),
            pool_rows=rows if strategy == "stockpool" else None,
            keys_touched=100 if strategy == "stockpool" else None,
        )

    for n in (1, 32):
        for phase in ("cold", "warm"):
            run.cells.append(cell("counter_hold", "uniform", phase, n, 1000.0))
            run.cells.append(cell("counter_hold", "zipf", phase, n, 1000.0))
    run.cells += [
        cell("stockpool", "uniform", "cold", 1, 800.0, rows=300),
        cell("stockpool", "uniform", "cold", 32, 690.0, rows=1600),
        cell("stockpool", "uniform", "warm", 1, 700.0),
        cell("stockpool", "uniform", "warm", 32, 900.0),
        cell("stockpool", "zipf", "cold", 1, 100.0, rows=0),
        cell("stockpool", "zipf", "cold", 32, 1000.0, rows=1700),
        cell("stockpool", "zipf", "warm", 1, 100.0),
        cell("stockpool", "zipf", "warm", 32, 999.0),
    ]
    checks = bars.catalogue_bar(run)
    assert [(c.passed, c.detail) for c in checks] == [
        (False, "1: 0.80x, 32: 0.69x"),
        (True, "1: 0.70x, 32: 0.90x"),
        (True, "32: 1.00x"),  # Zipf: only from 32 clients; 1 client is not part of the bar
        (False, "32: 1.00x"),  # 999 / 1000 shows as 1.00x but is below
        (False, "uniform 1: 3.00, uniform 32: 16.00, zipf 1: 0.00, zipf 32: 17.00"),
    ]


def test_checkout_bar_arithmetic() -> None:
    """The claim bar on hand-made cells: fixed figures, fixed verdicts."""
    run = _hand_made_run([8, 32], checkouts=True)

    def cell(name: str, clients: int, tps: float, claim_waits: dict[str, int] | None = None) -> model.Cell:
        return model.Cell(
            kind="checkout",
            name=name,
            clients=clients,
            seconds=1,
            transactions=int(tps),
            tps=tps,
            reserved=int(tps),
            waits_by_statement={"claim": claim_waits or {"CPU": 10}},
        )

    run.cells += [
        cell("stockpool_claim", 8, 900.0, {"CPU": 8, "Lock:transactionid": 1, "LWLock:WALWrite": 2}),
        cell("stockpool_release", 8, 1000.0),
        cell("counter_hold_claim", 8, 500.0),
        cell("stockpool_claim", 32, 800.0, {"CPU": 5, "IO:WALSync": 3}),
        cell("stockpool_release", 32, 1000.0),
        cell("counter_hold_claim", 32, 200.0),
    ]
    checks = bars.checkout_bar(run)
    assert [(c.passed, c.detail) for c in checks] == [
        (False, "8: 0.90x, 32: 0.80x"),
        (False, "8: Lock:transactionid"),
        (True, "32: 4.00x"),
    ]


def test_pooled_bar_arithmetic() -> None:
    """The pooler's bar on hand-made cells: fixed figures, fixed verdicts."""
    run = _hand_made_run([8, 512], pooler="pgbouncer", pooled_clients=[128, 512, 1000])

    def cell(kind: str, name: str, clients: int, tps: float, p99: float) -> model.Cell:
        return model.Cell(
            kind=kind,
            name=name,
            clients=clients,
            seconds=1,
            transactions=int(tps),
            tps=tps,
            reserved=int(tps),
            p99_ms=p99,
        )

    run.cells += [
        cell("strategy", "ceiling", 8, 2000.0, 2.0),
        cell("strategy", "stockpool", 8, 1000.0, 3.0),  # the best direct rate
        cell("strategy", "ceiling", 512, 1800.0, 100.0),
        cell("strategy", "stockpool", 512, 600.0, 900.0),
        cell("pooled", "pgbouncer", 128, 300.0, 50.0),  # below, but 128 is not part of the bar
        cell("pooled", "pgbouncer", 512, 810.0, 310.0),
        cell("pooled", "pgbouncer", 1000, 790.0, 600.0),
    ]
    checks = bars.pooled_bar(run)
    assert [(c.passed, c.detail) for c in checks] == [
        (False, "512: 0.81x, 1000: 0.79x (best direct: 1,000/s at 8)"),
        (False, "310.0 ms vs 100.0 ms: 3.10x"),
    ]
    # An invalid pooled cell (clients aborted) fails the bar whatever its rate.
    aborted = run.cells[-1]
    aborted.tps, aborted.transactions, aborted.reserved, aborted.aborted = 5000.0, 5000, 5000, 3
    run.cells[-2].p99_ms = 290.0
    checks = bars.pooled_bar(run)
    assert [(c.passed, c.detail) for c in checks] == [
        (False, "512: 0.81x, 1000: - (best direct: 1,000/s at 8)"),
        (True, "290.0 ms vs 100.0 ms: 2.90x"),
    ]
    assert bars.pooled_bar(_hand_made_run([8])) == []


@pytest.mark.slow
def test_pooled_cells_go_through_a_real_pgbouncer(pg_server: Any, tmp_path: Path) -> None:
    """stockpool through a throwaway pgbouncer beside the direct cells of the same
    counts: every transaction pgbench counted went through the pooler, no more
    server connections were busy than its pool, and the report has the section."""
    config = model.BenchConfig(
        clients=[4],
        seconds=2,
        strategies=["ceiling", "stockpool"],
        shapes=[],
        shape_clients=[],
        cart=False,
        checkouts=False,
        soak_seconds=0,
        soak_clients=1,
        jobs=2,
        pooler="pgbouncer",
        pooled_clients=[4, 24],
    )
    bench = runner.Bench(pg_server.dsn("postgres"), config, lambda _: None)
    assert bench.plan() == [
        ("strategy", "ceiling", 4),
        ("strategy", "stockpool", 4),
        ("pooled", "pgbouncer", 4),
        ("strategy", "ceiling", 24),
        ("strategy", "stockpool", 24),
        ("pooled", "pgbouncer", 24),
    ]
    result = bench.execute()
    for clients in (4, 24):
        cell = result.cell("pooled", "pgbouncer", clients)
        assert cell is not None and cell.valid, cell
        assert cell.invariant_violations == 0
        assert cell.transactions > 0 and cell.reserved >= cell.transactions
        # The wait sampler found the cell's backends by the application_name
        # pgbouncer passed on to its server connections.
        assert cell.wait_samples > 0
        figures = cell.pooler
        assert figures is not None
        assert cell.transactions <= figures["transactions"] <= cell.transactions + clients
        assert 0 < figures["sv_active_max"] <= figures["pool_size"] < 24
        assert figures["samples"] > 0 and 0 <= figures["cl_waiting_max"] <= clients
    many = result.cell("pooled", "pgbouncer", 24)
    assert many is not None and many.pooler is not None and many.pooler["cl_waiting_max"] > 0
    text = markdown.markdown(result, None)
    assert "## Through PgBouncer" in text and "### The bar behind a pooler" in text
    assert "| clients | direct res/s | x ceiling | through pgbouncer res/s | x best direct |" in text
    assert "`--placement split` measures the pooler path" in text  # shared cores: the note under the bar
    assert [c.name for c in bars.pooled_bar(result)] == []  # neither 512 nor 1,000 clients ran


@pytest.mark.slow
def test_counter_shape_drift_adds_up(run: model.BenchRun) -> None:
    naive = run.cell("shape", "naive", 4)
    assert naive is not None and naive.drift is not None
    drift = naive.drift
    assert drift["drift"] == drift["sold"] - drift["decremented"]
    assert drift["drift"] >= 0  # lost updates only ever sell units that were not there
    assert abs(drift["sold"] - naive.transactions) <= naive.clients


@pytest.mark.slow
def test_soak_samples_pool_health(run: model.BenchRun) -> None:
    soak = run.soak
    assert soak is not None
    assert soak.samples, "no pool health sample in a 10 s soak"
    assert all(0.0 <= s.dead_ratio <= 1.0 for s in soak.samples)
    assert soak.reserved > 0 and soak.invariant_violations == 0
    assert soak.p50_ms is not None and soak.p99_ms is not None


@pytest.mark.slow
def test_report_files(run: model.BenchRun, tmp_path: Path) -> None:
    out = tmp_path / "results"
    paths = report.write(run, out, publish=True)
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    data = json.loads((out / "published" / "bench.json").read_text())
    assert {c["name"] for c in data["cells"]} == {
        "ceiling",
        "stockpool",
        "reserve_cart",
        "naive",
        "stockpool_claim",
        "stockpool_release",
        "counter_hold_claim",
        "counter_hold_release",
        "cart_claim",
        *(
            model.catalogue_name(strategy, dist, phase)
            for strategy in ("counter_hold", "stockpool")
            for dist in ("uniform", "zipf")
            for phase in ("cold", "warm")
        ),
    }
    assert {"check", "passed", "detail"} <= set(data["bar"][0])
    assert any(b["check"].startswith("checkout: reserve+claim >= 0.9") for b in data["bar"])
    assert data["machine"]["nproc"] and data["machine"]["server_version"]
    markdown = (out / "published" / "bench.md").read_text()
    assert "| strategy | clients | reservations/s | x ceiling |" in markdown
    assert "| CPU µs per reservation | x ceiling |" in markdown
    assert "## Whole checkouts: reserve, then claim or release" in markdown
    assert "| clients | stockpool claim checkouts/s | x ceiling |" in markdown
    assert "## A whole catalogue: one key drawn per reservation" in markdown
    assert "### The bar for a catalogue" in markdown
    assert all(c["cpu_us"] and c["cpu_us"] > 0 for c in data["cells"] if c["kind"] != "soak")
    assert "![throughput and p99 against clients](bench.png)" in markdown
    assert (out / "published" / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_cell_that_did_not_reserve_is_flagged() -> None:
    # Negative control: pgbench counted transactions the tables do not show.
    cell = model.Cell(kind="strategy", name="pool", clients=4, seconds=2, transactions=1000, reserved=10)
    model.flag_problems(cell)
    assert not cell.valid and "reserved 10 of 1000" in cell.notes[0]
    ok = model.Cell(kind="strategy", name="pool", clients=4, seconds=2, transactions=1000, reserved=997)
    model.flag_problems(ok)
    assert ok.valid
    aborted = model.Cell(
        kind="strategy", name="pool", clients=4, seconds=2, transactions=5, reserved=5, aborted=2
    )
    model.flag_problems(aborted)
    assert not aborted.valid


def test_option_lists() -> None:
    assert command._int_list("1, 8,32", "--clients") == [1, 8, 32]
    assert command._name_list("stockpool,ceiling", model.STRATEGIES, "--strategies") == [
        "ceiling",
        "stockpool",
    ]
    assert command._name_list("all", model.SHAPES, "--shapes") == list(model.SHAPES)
    assert command._name_list("none", model.SHAPES, "--shapes") == []
    for bad in ("0", "x", ""):
        with pytest.raises(typer.BadParameter):
            command._int_list(bad, "--clients")
    with pytest.raises(typer.BadParameter):
        command._name_list("counter,redis", model.STRATEGIES, "--strategies")
    with pytest.raises(typer.BadParameter, match="--pooler: one of none, pgbouncer"):
        command.command(pooler="odyssey")


def test_cpu_meter_counts_a_backend_that_has_exited(pg_server: Any) -> None:
    """A bench cell's backends exit before the second reading: their CPU must
    still count (the postmaster's reaped children). Negative control: the
    same work does not show in the postmaster's own time."""
    meter = cpumeter.ServerCPU.of_datadir(pg_server.cluster.datadir)
    assert meter is not None
    before = meter.read()
    own_before = cpumeter._ticks(cpumeter._stat_fields(meter.pid) or [], with_children=False)
    with psycopg.connect(pg_server.dsn("postgres"), application_name="cpu-meter-test") as conn:
        conn.execute("SELECT pg_catalog.count(*) FROM pg_catalog.generate_series(1, 3000000)")
    with psycopg.connect(pg_server.dsn("postgres"), autocommit=True) as watcher:
        wait_for_sessions_gone(watcher, "cpu-meter-test")
    after = meter.read()
    own_after = cpumeter._ticks(cpumeter._stat_fields(meter.pid) or [], with_children=False)
    assert after.server - before.server >= 0.1, (before, after)
    assert (own_after - own_before) / meter.hz < 0.1, "the work was done by a child, not the postmaster"
    per_unit = cpumeter.per_unit_us(before, after, 1000)
    assert per_unit is not None and per_unit[0] >= 100.0
    assert cpumeter.per_unit_us(before, after, 0) is None


def test_cpu_meter_needs_a_local_server(tmp_path: Path) -> None:
    assert cpumeter.ServerCPU.of_datadir(tmp_path) is None  # no postmaster.pid
    (tmp_path / "postmaster.pid").write_text("999999999\n")
    assert cpumeter.ServerCPU.of_datadir(tmp_path) is None  # no such process


def test_chart_gives_every_strategy_its_own_colour() -> None:
    assert set(chart.CHART_COLORS) == set(model.STRATEGIES)
    assert len(set(chart.CHART_COLORS.values())) == len(chart.CHART_COLORS)


def test_bench_without_matplotlib_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a)
    )
    with pytest.raises(StockpoolError) as err:
        chart.require_chart_library()
    assert "matplotlib" in err.value.message
    assert err.value.hint is not None and "stockpool[bench]" in err.value.hint
    monkeypatch.undo()
    chart.require_chart_library()  # installed here: no error


def _seat_figures(calls: int, held_calls: int, blocks_before: int | None, blocks_left: int) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "units": 1000,
        "calls": calls,
        "reserved_calls": held_calls,
        "success": held_calls / calls,
        "free_at_end": 150,
        "free_blocks_at_end": blocks_left,
        "fill_at_end": 0.85,
    }
    if blocks_before is not None:
        figures["free_blocks_at_start"] = blocks_before
    return figures


def test_seats_bar_arithmetic() -> None:
    """The seats bar on hand-made cells: fixed figures, fixed verdicts, both ways."""
    run = _hand_made_run([1, 8, 32, 512], seat_clients=[1, 8, 32, 512])

    def cell(kind: str, name: str, clients: int, tps: float, **more: Any) -> model.Cell:
        return model.Cell(
            kind=kind,
            name=name,
            clients=clients,
            seconds=1,
            transactions=int(tps),
            tps=tps,
            reserved=int(tps),
            **more,
        )

    run.cells += [
        cell("strategy", "stockpool", 1, 100.0),
        cell("strategy", "stockpool", 8, 1000.0),
        cell("strategy", "stockpool", 32, 1000.0),
        cell("strategy", "stockpool", 512, 1000.0),
        cell("seats", "named_1", 1, 10.0),  # 1 client is not part of the bar
        cell("seats", "named_1", 8, 800.0),
        cell("seats", "named_1", 32, 790.0),
        cell("seats", "named_1", 512, 1200.0),
        cell("seats", "cloakroom", 1, 500.0),
        cell("seats", "cloakroom", 8, 900.0),  # faster than named_1, but 8 is below 32
        cell("seats", "cloakroom", 32, 400.0),
        cell("seats", "cloakroom", 512, 700.0),
    ]
    for n in (1, 8, 32, 512):
        start = cell("seats", "named_4_adjacent", n, 100.0, seats=_seat_figures(100, 100, None, 900))
        near = cell("seats", "named_4_near", n, 100.0, seats=_seat_figures(100, 40, 40, 0))
        for adjacent in (start, near):
            adjacent.units_per_transaction, adjacent.reserved = 4, 4 * adjacent.seats["reserved_calls"]  # type: ignore[index]
        run.cells += [start, near]
    checks = bars.seats_bar(run)
    assert [(c.name, c.passed, c.detail.split(";")[0]) for c in checks] == [
        (
            "seats: reserve_named of 1 >= 0.8 x counted reserve_units at 8, 32, 512 clients",
            False,
            "8: 0.80x, 32: 0.79x, 512: 1.20x",
        ),
        (
            "seats: reserve_named of 1 >= 2 x the cloakroom shape at 32, 512 clients",
            False,
            "32: 1.98x, 512: 1.71x",
        ),
        (
            "seats: 4 adjacent refused only when no block of 4 is free",
            True,
            "1: at the start 100% of 100 calls held (900 blocks free after), "
            "near sellout 40% of 100 calls held (40 blocks free before, 0 after)",
        ),
    ]
    # Passing the first two; an invalid cell (clients aborted) fails whatever its rate;
    # a refusal while a block of 4 is left at the end is an undersell.
    run.cell("seats", "named_1", 32).tps = 810.0  # type: ignore[union-attr]
    run.cell("seats", "named_1", 512).tps = 1400.0  # type: ignore[union-attr]
    checks = bars.seats_bar(run)
    assert [c.passed for c in checks] == [True, True, True]
    assert checks[1].detail == "32: 2.02x, 512: 2.00x"
    run.cell("seats", "cloakroom", 512).aborted = 2  # type: ignore[union-attr]
    run.cell("seats", "named_4_near", 8).seats = _seat_figures(100, 40, 40, 3)  # type: ignore[union-attr]
    checks = bars.seats_bar(run)
    assert [(c.passed, c.detail) for c in checks[1:]] == [
        (False, "32: 2.02x, 512: -"),
        (False, "8 near sellout: 60 refused with 3 blocks free"),
    ]
    assert bars.seats_bar(_hand_made_run([8])) == []


def test_seat_figures() -> None:
    cell = model.Cell(kind="seats", name="named_4_near", clients=4, seconds=5, transactions=100)
    cell.units_per_transaction, cell.reserved = 4, 200
    figures = runner.seat_figures(cell, 250, 50, 0)
    assert (figures["calls"], figures["reserved_calls"], figures["success"]) == (100, 50, 0.5)
    assert (figures["free_at_end"], figures["free_blocks_at_end"], figures["fill_at_end"]) == (50, 0, 0.8)
    # bench.seats(): rows of 20, an aisle of 2 positions between rows.
    assert runner.seat_span(20) == 20 and runner.seat_span(21) == 23


def test_seats_only_keeps_what_the_seats_are_compared_with() -> None:
    config = _hand_made_run([1, 8], seat_clients=[8, 32], catalogue_keys=10, pooler="pgbouncer").config
    config.strategies, config.cart, config.soak_seconds = ["ceiling", "counter", "stockpool"], True, 60
    command.only_seats(config)
    assert (config.clients, config.strategies, config.cart, config.catalogue_keys) == (
        [8, 32],
        ["ceiling", "stockpool"],
        False,
        0,
    )
    assert (config.pooler, config.soak_seconds, config.shapes) == ("none", 0, [])


@pytest.mark.slow
def test_seats_cells_run_small(pg_server: Any) -> None:
    """A real seats run, tiny: 4 clients, 2 s cells, 1,000 seats for the adjacent
    cells. Every call of the 1-seat, pick and cloakroom cells held its seat, the
    adjacent cells refused only once no block of 4 was left, the near-sellout
    cell started with about 90% of the seats held, stockpool's invariants held,
    and the report has the section and the bar."""
    config = _hand_made_run([4], seat_clients=[4], seat_units=1000).config
    config.seconds, config.jobs = 2, 2
    bench = runner.Bench(pg_server.dsn("postgres"), config, lambda _: None)
    assert bench.plan() == [
        ("strategy", "ceiling", 4),
        ("strategy", "stockpool", 4),
        *[("seats", name, 4) for name in model.SEAT_CELLS],
    ]
    result = bench.execute()
    for name in ("named_1", "labels_pick", "cloakroom"):
        cell = result.cell("seats", name, 4)
        assert cell is not None and cell.valid, (name, cell and cell.notes)
        assert cell.units_available >= 1000 and cell.seats is not None
        # Nothing sold out: every call held a seat (a pick may lose a race for its seat).
        assert cell.transactions - 4 <= cell.reserved <= cell.transactions + 4, cell
        assert cell.seats["free_at_end"] == cell.units_available - cell.reserved
    for name in model.SEAT_ADJACENT:
        cell = result.cell("seats", name, 4)
        assert cell is not None and cell.valid and cell.seats is not None, (name, cell)
        figures = cell.seats
        assert cell.units_per_transaction == 4 and cell.reserved % 4 == 0
        assert figures["reserved_calls"] == cell.reserved // 4 <= figures["calls"] == cell.transactions
        if figures["calls"] > figures["reserved_calls"]:
            assert figures["free_blocks_at_end"] == 0, "a refused call must mean no block was left"
    near = result.cell("seats", "named_4_near", 4)
    assert near is not None and near.seats is not None
    assert 800 <= near.seats["held_at_start"] <= 980, near.seats
    assert near.seats["free_at_start"] == 1000 - near.seats["held_at_start"]
    assert 0 <= near.reserved <= near.seats["free_at_start"]
    for name in ("named_1", "labels_pick", *model.SEAT_ADJACENT):
        cell = result.cell("seats", name, 4)
        assert cell is not None and cell.invariant_violations == 0
    text = markdown.markdown(result, None)
    assert "## Seats: a ticket drop on one hot named key" in text and "### The bar for seats" in text
    assert [c.name for c in bars.seats_bar(result)] == [
        "seats: 4 adjacent refused only when no block of 4 is free"
    ]


def test_placements_halve_the_cores() -> None:
    split = placement.placement("split", [0, 1, 2, 3])
    assert (split.server, split.clients, split.pooler) == (
        frozenset({0, 1}),
        frozenset({2, 3}),
        frozenset({2, 3}),
    )
    host = placement.placement("host", [0, 1])
    assert (host.server, host.clients, host.pooler) == (frozenset({0}), frozenset({1}), frozenset({0}))
    assert "pgbouncer with the server" in host.describe()
    shared = placement.placement("shared", [0, 1])
    assert shared.server == shared.clients == shared.pooler == {0, 1}
    with pytest.raises(StockpoolError, match="needs at least 2 cores"):
        placement.placement("split", [0])
    with pytest.raises(StockpoolError, match="one of shared, split, host"):
        placement.placement("apart", [0, 1])
    with pytest.raises(typer.BadParameter, match="--placement: one of shared, split, host"):
        command.command(placement="apart")
    with pytest.raises(typer.BadParameter, match="with --dsn the server is not this machine's"):
        command.command(placement="split", dsn="postgresql://127.0.0.1:1/x")


def test_placed_needs_a_local_server() -> None:
    split = placement.placement("split", [0, 1])
    with pytest.raises(StockpoolError, match="needs a server on this machine"), placement.placed(split, None):
        pass


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a placement needs two cores")
def test_a_host_placement_pins_the_server_pgbouncer_and_pgbench(
    pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under --placement host every cell runs with the postmaster and its
    backends on the server's cores, this process (so pgbench) on the others,
    and pgbouncer moved to the server's; every core is given back at the end.
    Negative control: the shared placement leaves all of them on every core."""
    cores = sorted(os.sched_getaffinity(0))
    meter = cpumeter.ServerCPU.of_datadir(pg_server.cluster.datadir)
    assert meter is not None
    seen: list[tuple[set[int], set[int], set[int]]] = []
    pinned: list[set[int]] = []
    real_pin = placement.pin

    def spy(pid: int, where: frozenset[int]) -> None:
        real_pin(pid, where)
        pinned.append(os.sched_getaffinity(pid))  # pgbouncer's, while it runs

    def log(line: str) -> None:
        if line.startswith("preparing"):  # before the cells, so before placing
            return
        with psycopg.connect(pg_server.dsn("postgres")) as conn:
            backend = int(scalar(conn, "SELECT pg_catalog.pg_backend_pid()"))
            postmaster = os.sched_getaffinity(meter.pid)
            seen.append((postmaster, os.sched_getaffinity(backend), os.sched_getaffinity(0)))

    monkeypatch.setattr(runner, "pin", spy)
    for where in ("host", "shared"):
        seen.clear()
        pinned.clear()
        config = model.BenchConfig(
            clients=[2],
            seconds=1,
            strategies=["ceiling"],
            shapes=[],
            shape_clients=[],
            cart=False,
            checkouts=False,
            soak_seconds=0,
            soak_clients=1,
            jobs=1,
            pooler="pgbouncer",
            pooled_clients=[2],
            placement=where,
        )
        run = runner.Bench(pg_server.dsn("postgres"), config, log, meter).execute()
        expected = placement.placement(where)
        assert run.machine["placement"] == expected.describe()
        assert seen and all(
            s == (set(expected.server), set(expected.server), set(expected.clients)) for s in seen
        ), seen
        assert pinned == ([set(expected.pooler)] if where == "host" else []), pinned
        if where == "host":
            assert expected.server != set(cores) and expected.clients != set(cores)
        assert os.sched_getaffinity(0) == set(cores)
        assert os.sched_getaffinity(meter.pid) == set(cores)
