"""monitoring/: the alert rules under promtool, and the whole chain for real.

- promtool checks the rules and the scrape configuration and runs the rules'
  unit tests; each alert has a firing and a quiet case, and every alert broken
  on purpose (dropped, its threshold or its ``for:`` moved) fails them: the
  negative control.
- A short soak runs through a throwaway pgbouncer on a database of the test
  server with track_functions = 'pl', while Debian 12's postgres_exporter
  (as a monitor role, with monitoring/postgres_exporter/queries.yaml), the
  pgbouncer exporter and a Prometheus on monitoring/prometheus.yml and its
  rules watch it over loopback. Every metric docs/metrics.md lists must reach
  Prometheus under its documented name, kind and labels; once the soak is over
  and the database quiet, every gauge that cannot move then and every counter
  equals what stockpool.metrics() reads directly (table_xid_age within a few),
  the clock-driven figures are in range; the same check on a Prometheus without the relabeling finds none of
  them (its negative control).
- Every metric name the dashboard and the rules use is one Prometheus really
  holds, and every panel's query answers.
"""

from __future__ import annotations

import copy
import json
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql

from stockpool import race
from stockpool.errors import StockpoolError
from stockpool.install.deploy import deploy
from stockpool.server import exporter, pooler
from stockpool.server import prometheus as prom

pytestmark = pytest.mark.timeout(180)

MONITORING = exporter.monitoring_dir()
RULES = MONITORING / "rules" / "stockpool.yml"
RULE_TESTS = MONITORING / "rules" / "stockpool_test.yml"
DASHBOARD = MONITORING / "grafana" / "stockpool.json"
METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
LABELS = ("relation", "application_name", "state")

# --- what docs/metrics.md promises, and metric names in PromQL -----------------------


@dataclass(frozen=True)
class Documented:
    kind: str  # gauge or counter
    labels: frozenset[str]


def documented() -> dict[str, Documented]:
    """The rows of docs/metrics.md's table: metric -> kind and labels."""
    rows = re.findall(r"^\| `(\w+)` \| (gauge|counter) \|\s*([\w, ]*?)\s*\|", METRICS_DOC.read_text(), re.M)
    assert len(rows) >= 20, f"docs/metrics.md's table not found ({len(rows)} rows)"
    return {
        name: Documented(kind, frozenset(label.strip() for label in labels.split(",") if label.strip()))
        for name, kind, labels in rows
    }


PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless"}
PROMQL_WORDS |= {"bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's $variables
    left out): words that are not functions, keywords, labels or durations."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\$\{?\w+\}?", "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"(?<![\w:])\d+(?:ms|[smhdwy])(?![\w:])", "", expr)  # durations
    expr = re.sub(r"(?<![\w:])\d[\d.]*(?:e[+-]?\d+)?", "", expr)  # numbers
    names = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", expr):
        if not expr[match.end() :].lstrip().startswith("(") and match.group().lower() not in PROMQL_WORDS:
            names.add(match.group())
    return names


def test_metric_names_finds_exactly_the_selected_metrics() -> None:
    expr = (
        'sum by (instance) (rate(stockpool_claims_total{instance=~"$instance"}[$__rate_interval]))'
        " / clamp_min(stockpool_holds_live offset 5m, 1e-9) > 0.2 and on(job) up == bool 0"
    )
    assert metric_names(expr) == {"stockpool_claims_total", "stockpool_holds_live", "up"}
    assert metric_names("absent(stockpool_invariant_violations)") == {"stockpool_invariant_violations"}


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the dashboard: panel targets (rows' panels
    included) and the template variables' label_values() queries."""
    exprs: list[str] = []
    panels = list(dashboard["panels"])
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", []))
        exprs.extend(target["expr"] for target in panel.get("targets", []))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            exprs.extend(re.findall(r"label_values\((\w+)", variable["definition"]))
    return exprs


def alerts() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


# --- promtool: the rules, their unit tests, and the tests' negative control -----------


def test_promtool_checks_the_rules_and_the_config_and_runs_the_rule_tests() -> None:
    checked = prom.check_rules([RULES])
    assert checked.returncode == 0, checked.stdout
    assert f"SUCCESS: {len(alerts())} rules found" in checked.stdout
    config = prom.promtool("check", "config", str(MONITORING / "prometheus.yml"))
    assert config.returncode == 0, config.stdout
    tested = prom.run_rule_tests([RULE_TESTS])
    assert tested.returncode == 0, tested.stdout


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases = [
        case for test in yaml.safe_load(RULE_TESTS.read_text())["tests"] for case in test["alert_rule_test"]
    ]
    for name, rule in alerts().items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert {"summary", "description"} <= set(rule["annotations"]), name
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case["exp_alerts"] for case in mine), f"{name} has no firing case"
        assert any(not case["exp_alerts"] for case in mine), f"{name} has no quiet case"


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", duration))


def _move_thresholds(expr: str, up: bool) -> str:
    """Every comparison's number moved a quarter up or down (from 0: to 1 or -1)."""

    def move(match: re.Match[str]) -> str:
        value = float(match.group(2))
        moved = (value * 1.25 if up else value * 0.75) if value else (1.0 if up else -1.0)
        return f"{match.group(1)} {moved:g}"

    moved = re.sub(r"(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?)", move, expr)
    assert moved != expr, f"no threshold in {expr}"
    return moved


def _mutations() -> list[tuple[str, str]]:
    found = []
    for name, rule in alerts().items():
        found += [(name, "dropped"), (name, "threshold raised"), (name, "threshold lowered")]
        if _seconds(str(rule.get("for", "0s"))):
            found += [(name, "for halved"), (name, "for doubled")]
    return found


def _broken_copy(root: Path, alert: str, mutation: str) -> Path:
    """A folder with the rules, ``alert`` broken by ``mutation``, and their unit tests."""
    document = yaml.safe_load(RULES.read_text())
    rules = document["groups"][0]["rules"]
    rule = next(r for r in rules if r.get("alert") == alert)
    if mutation == "dropped":
        rules.remove(rule)
    elif mutation.startswith("threshold"):
        rule["expr"] = _move_thresholds(rule["expr"], up=mutation.endswith("raised"))
    else:
        seconds = _seconds(rule["for"])
        rule["for"] = f"{seconds * 2 if mutation.endswith('doubled') else seconds // 2}s"
    folder = root / f"{alert}-{mutation.replace(' ', '-')}"
    folder.mkdir()
    (folder / RULES.name).write_text(yaml.safe_dump(document, sort_keys=False))
    # Only the unit tests of this alert: the others pass either way, and
    # promtool takes its time over each.
    tests = yaml.safe_load(RULE_TESTS.read_text())
    tests["tests"] = [
        test for test in tests["tests"] if any(case["alertname"] == alert for case in test["alert_rule_test"])
    ]
    (folder / RULE_TESTS.name).write_text(yaml.safe_dump(tests, sort_keys=False))
    return folder


@pytest.fixture(scope="module")
def broken_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """promtool's verdict on every broken copy: one run over all of them (one
    process instead of dozens), its output split per test file."""
    root = tmp_path_factory.mktemp("broken-rules")
    folders = {m: _broken_copy(root, *m) for m in _mutations()}
    checked = prom.check_rules([f / RULES.name for f in folders.values()])
    assert checked.returncode == 0, "every broken copy must still be valid rules:\n" + checked.stdout
    tested = prom.run_rule_tests([f / RULE_TESTS.name for f in folders.values()])
    sections = re.split(r"^Unit Testing:\s+", tested.stdout, flags=re.M)
    by_file = {section.split("\n", 1)[0].strip(): section for section in sections[1:]}
    return {m: by_file[str(f / RULE_TESTS.name)] for m, f in folders.items()}


@pytest.mark.parametrize(("alert", "mutation"), _mutations())
def test_a_broken_rule_fails_the_rule_tests(
    broken_runs: dict[tuple[str, str], str], alert: str, mutation: str
) -> None:
    verdict = broken_runs[alert, mutation]
    assert "FAILED" in verdict, f"{alert} {mutation}: the rule tests still pass:\n{verdict}"
    assert f"alertname: {alert}" in verdict, verdict


# --- the whole chain: a soak watched by the exporters and Prometheus -------------------

CLIENTS = 8
STOCK = 20  # units a key at the start of the soak


@dataclass
class Watched:
    """What the exporters and Prometheus saw of a short soak."""

    prometheus: prom.Prometheus  # monitoring/prometheus.yml and its rules
    plain: prom.Prometheus  # the same scrape jobs without the relabeling
    database: str
    dsn: str  # the soak's database, directly (not through pgbouncer)
    counts: dict[str, Any]  # the soak report's counts (checkouts reserved, refused, ...)
    rows: dict[tuple[str, str, str, str], tuple[str, float]]  # stockpool.metrics(), read directly
    raw: str  # one scrape of postgres_exporter
    names: set[str]  # every metric name Prometheus holds
    pgbouncer_max: dict[str, float]  # pgbouncer_<name> of the soak's database at its most, over the soak


def _metrics_rows(dsn: str) -> dict[tuple[str, str, str, str], tuple[str, float]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT metric, relation, application_name, state, kind, value FROM stockpool.metrics()"
        )
        return {(m, r, a, s): (k, float(v)) for m, r, a, s, k, v in rows.fetchall()}


def _without_relabeling(folder: Path) -> Path:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    config["rule_files"] = []
    for job in config["scrape_configs"]:
        job.pop("metric_relabel_configs", None)
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    return folder / "prometheus.yml"


@pytest.fixture(scope="module")
def watched(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    tag = uuid.uuid4().hex[:8]
    database, role = f"stockpool_monitoring_{tag}", f"stockpool_exporter_{tag}"
    admin = pg_server.dsn("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        # The event counters are PostgreSQL's function statistics (docs/metrics.md).
        conn.execute(sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(sql.Identifier(database)))
    dsn = pg_server.dsn(database)
    try:
        deploy(dsn)
        with psycopg.connect(admin, autocommit=True) as conn:
            # The exporter's role as in production: the monitor role for
            # stockpool.metrics(), pg_monitor for the exporter's own metrics.
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN IN ROLE stockpool_monitor, pg_monitor").format(
                    sql.Identifier(role)
                )
            )
        with ExitStack() as stack:
            bouncer = stack.enter_context(pooler.pgbouncer(dsn, CLIENTS + 20))
            postgres = stack.enter_context(
                exporter.postgres_exporter(f"postgresql://{role}@127.0.0.1:{pg_server.port}/{database}")
            )
            bouncers = stack.enter_context(exporter.pgbouncer_exporter(bouncer.admin_dsn))
            targets = {"stockpool-postgres": postgres.target, "stockpool-pgbouncer": bouncers.target}
            server = stack.enter_context(prom.prometheus(targets))
            plain_config = _without_relabeling(tmp_path_factory.mktemp("plain"))
            plain = stack.enter_context(prom.prometheus(targets, template=plain_config))
            # Prometheus scrapes a new target after up to 5 s: watch the whole soak.
            server.wait_for('up{job="stockpool-pgbouncer"} == 1 and on() up{job="stockpool-postgres"} == 1')
            harness = race.Harness(dsn=dsn, log_root=tmp_path_factory.mktemp("race"), client_dsn=bouncer.dsn)
            # stock=STOCK units a key (not the default 500): the Zipf-hot keys
            # sell out between the replenisher's rounds, so the soak refuses.
            report = race.soak(
                dsn,
                CLIENTS,
                5,
                harness=harness,
                shops=1,
                items=50,
                stock=STOCK,
                hot_items=3,
                abandon_ttl=1,
                check_every=2,
            )
            assert report.passed, [c for c in report.checks if not c.passed]
            pgbouncer_max = {
                name: max(
                    s.value for s in server.wait_for(f'max_over_time({name}{{database="{database}"}}[1m])')
                )
                for name in ("pgbouncer_waiting_clients", "pgbouncer_active_clients", "pgbouncer_pool_size")
            }
            # Server connections that end flush their function statistics at once.
            with psycopg.connect(bouncer.admin_dsn, autocommit=True, prepare_threshold=None) as conn:
                conn.execute(f"RECONNECT {database}")
            rows = _metrics_rows(dsn)
            for (metric, *_), (kind, value) in rows.items():
                if kind == "counter":  # Prometheus has caught up with what the database says now
                    server.wait_for(f"stockpool_{metric} >= {value}", timeout=15)
            yield Watched(
                server,
                plain,
                database,
                dsn,
                dict(report.counts),
                rows,
                postgres.scrape(),
                server.names(),
                pgbouncer_max,
            )
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def _values(watched: Watched, name: str) -> list[float]:
    return [s.value for s in watched.prometheus.query(f"stockpool_{name}")]


def _one(watched: Watched, name: str) -> float:
    (value,) = _values(watched, name)
    return value


def test_every_documented_metric_reaches_prometheus_by_its_name(watched: Watched) -> None:
    docs = documented()
    assert {metric for metric, *_ in watched.rows} == set(docs), (
        "stockpool.metrics() and docs/metrics.md differ"
    )
    for name, doc in docs.items():
        samples = watched.prometheus.query(f"stockpool_{name}")
        assert samples, f"stockpool_{name} is not in Prometheus"
        for sample in samples:
            assert "metric" not in sample.labels and "kind" not in sample.labels, sample
            assert {label for label in LABELS if sample.labels.get(label)} <= doc.labels, sample
        if doc.labels:
            assert any(doc.labels <= set(s.labels) for s in samples), f"stockpool_{name} lacks {doc.labels}"
    # The kinds as the exporter exposes them (a label Prometheus then drops).
    raw = re.findall(r'^stockpool_value{[^}]*\bkind="(\w+)",metric="(\w+)"', watched.raw, re.M)
    assert {name: kind for kind, name in raw} == {name: doc.kind for name, doc in docs.items()}


def test_without_the_relabeling_no_documented_name_exists(watched: Watched) -> None:
    """The name check's negative control: the same exporter scraped without
    monitoring/prometheus.yml's relabeling gives none of the documented names."""
    plain = watched.plain
    assert plain.wait_for('stockpool_value{metric="stock_keys"}')
    assert not [name for name in documented() if plain.query(f"stockpool_{name}")]


# With the soak over, the database quiet and its function statistics handed
# over, nothing moves these: what Prometheus scraped last must be exactly what
# stockpool.metrics() reads now.
QUIET_GAUGES = (
    "stock_keys",
    "stock_on_hand_units",
    "stock_pooled_units",
    "stock_held_units",
    "stock_unsettled_units",
    "holds_live",
    "holds_overdue",
    "pools_active",
    "pools_dry_with_free_stock",
    "pending_claims",
    "invariant_violations",
    "track_functions_enabled",
)
COUNTERS = (
    "reservations_total",
    "refusals_total",
    "claims_total",
    "releases_total",
    "expiries_total",
    "refills_total",
    "maintenance_yields_total",
)
# age(relfrozenxid) moves with every transaction id the server hands out (other
# databases' too) and drops when a vacuum freezes: equal within a few.
XID_AGE_SLACK = 5
# Figures measured against the clock or made of other sessions: ranges only.
MOVING = (
    "holds_oldest_overdue_seconds",
    "pending_claims_oldest_seconds",
    "pool_dead_ratio",
    "pool_last_vacuum_seconds",
    "sessions",
    "longest_transaction_seconds",
    "longest_idle_in_transaction_seconds",
)
AGREE_TIMEOUT = 15.0  # scrapes come every second

Key = tuple[str, str, str, str]  # metric, relation, application_name, state


def _latest(prometheus: prom.Prometheus) -> dict[Key, float]:
    """Every stockpool_<metric> series Prometheus holds: its latest sample."""
    return {
        (
            s.name.removeprefix("stockpool_"),
            s.labels.get("relation", ""),
            s.labels.get("application_name", ""),
            s.labels.get("state", ""),
        ): s.value
        for s in prometheus.query('{__name__=~"stockpool_.+"}')
    }


def _disagreements(database: dict[Key, float], seen: dict[Key, float]) -> list[str]:
    wrong = []
    for name in QUIET_GAUGES + COUNTERS:
        key = (name, "", "", "")
        if seen.get(key) != database.get(key):
            wrong.append(f"{name}: Prometheus {seen.get(key)}, database {database.get(key)}")
    ages = {k: v for k, v in database.items() if k[0] == "table_xid_age"}
    seen_ages = {k: v for k, v in seen.items() if k[0] == "table_xid_age"}
    if set(ages) != set(seen_ages):
        wrong.append(f"table_xid_age relations: Prometheus {sorted(seen_ages)}, database {sorted(ages)}")
    for key, age in ages.items():
        if key in seen_ages and abs(seen_ages[key] - age) > XID_AGE_SLACK:
            wrong.append(f"table_xid_age {key[1]}: Prometheus {seen_ages[key]}, database {age}")
    return wrong


def _agreed(watched: Watched) -> tuple[dict[Key, float], dict[Key, float]]:
    """stockpool.metrics() read directly and Prometheus's latest samples, once
    they agree: the database read twice around the query, unchanged (quiet),
    and Prometheus's samples equal to it (a scrape after the last event)."""
    deadline = time.monotonic() + AGREE_TIMEOUT
    while True:
        before = {k: v for k, (_, v) in _metrics_rows(watched.dsn).items()}
        seen = _latest(watched.prometheus)
        database = {k: v for k, (_, v) in _metrics_rows(watched.dsn).items()}
        keys = [(name, "", "", "") for name in QUIET_GAUGES + COUNTERS]
        moved = [
            f"{key[0]} moved in the database: {before.get(key)} -> {database.get(key)}"
            for key in keys
            if before.get(key) != database.get(key)
        ]
        wrong = moved + _disagreements(database, seen)
        if not wrong:
            return database, seen
        if time.monotonic() > deadline:
            pytest.fail(
                f"after {AGREE_TIMEOUT:g} s Prometheus and stockpool.metrics() still differ:\n"
                + "\n".join(wrong)
            )
        time.sleep(0.5)


def test_every_metric_agrees_with_the_database_after_the_soak(watched: Watched) -> None:
    database, seen = _agreed(watched)
    kinds = {m: k for (m, *_), (k, _) in watched.rows.items()}
    assert {m for m, k in kinds.items() if k == "counter"} == set(COUNTERS)
    checked = {*QUIET_GAUGES, *COUNTERS, "table_xid_age", *MOVING}
    assert checked == set(documented()), "every documented metric is checked one way or another"

    def one(name: str) -> float:
        return database[name, "", "", ""]

    def values(name: str) -> list[float]:
        return [v for (m, *_), v in seen.items() if m == name]

    # The agreed figures are the soak's.
    assert one("invariant_violations") == 0
    assert one("track_functions_enabled") == 1
    assert one("stock_keys") == 50, "the soak's 1 shop x 50 items"
    assert one("stock_on_hand_units") > 0
    assert one("pools_active") > 0, "the soak's hot items have pools"
    assert one("pools_dry_with_free_stock") <= one("pools_active")
    for name in ("reservations_total", "claims_total", "releases_total", "expiries_total", "refills_total"):
        assert one(name) > 0, f"{name}: the soak reserved, claimed, released, abandoned and refilled"
    # STOCK units a key: the hot keys sold out, and each refused checkout the
    # clients recorded was one refused call (a pgbench retry may add calls).
    counts = watched.counts
    assert counts["refused"] > 0, f"the soak refused no checkout: {counts}"
    assert one("refusals_total") >= counts["refused"], counts
    assert one("claims_total") >= counts["claimed"] > 0, counts
    assert one("releases_total") >= counts["released"] > 0, counts
    assert one("reservations_total") >= counts["reserved"] > 0, counts
    ages = {k[1]: v for k, v in seen.items() if k[0] == "table_xid_age"}
    assert {"stock", "holds"} <= set(ages) and all(age > 0 for age in ages.values()), ages

    # Figures that move with the clock or the sessions: in range.
    assert (one("holds_overdue") == 0) == (values("holds_oldest_overdue_seconds") == [0])
    assert (one("pending_claims") == 0) == (values("pending_claims_oldest_seconds") == [0])
    assert all(
        v >= 0 for v in values("holds_oldest_overdue_seconds") + values("pending_claims_oldest_seconds")
    )
    ratios = {k[1]: v for k, v in seen.items() if k[0] == "pool_dead_ratio"}
    assert ratios and set(ratios) == {k[1] for k in database if k[0] == "pool_dead_ratio"}, ratios
    assert all(0 <= v <= 1 for v in ratios.values()), ratios
    assert values("pool_last_vacuum_seconds") and all(v >= -1 for v in values("pool_last_vacuum_seconds"))
    assert sum(values("sessions")) >= 1, "the exporter's own session at least"
    assert all(v >= 0 for v in values("longest_transaction_seconds"))
    assert all(v >= 0 for v in values("longest_idle_in_transaction_seconds"))


def test_pgbouncer_exporter_reports_the_pooled_database(watched: Watched) -> None:
    # Over the soak: pgbouncer lists a database only while it has clients.
    seen = watched.pgbouncer_max
    assert seen["pgbouncer_waiting_clients"] >= 0
    assert seen["pgbouncer_active_clients"] > 0, "pgbouncer served the soak's clients"
    assert seen["pgbouncer_pool_size"] == pooler.pool_size()


def test_the_packaged_pgbouncer_exporter_stops_against_pgbouncer_1_18(pg_server: Any) -> None:
    """Why monitoring/pgbouncer_exporter exists: the launcher's negative control."""
    with (
        pooler.pgbouncer(pg_server.dsn("postgres"), 10) as bouncer,
        pytest.raises(StockpoolError, match="total_requests"),
        exporter.pgbouncer_exporter(bouncer.admin_dsn, compat=False),
    ):
        pass


def _panel_exprs(dashboard: dict[str, Any]) -> list[str]:
    return [e for e in dashboard_exprs(dashboard) if not re.fullmatch(r"\w+", e)]


def unknown_names(dashboard: dict[str, Any], names: set[str]) -> set[str]:
    used: set[str] = set()
    for expr in dashboard_exprs(dashboard):
        used |= metric_names(expr)
    return used - names


def test_the_dashboard_queries_only_metrics_prometheus_holds(watched: Watched) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert unknown_names(dashboard, watched.names) == set()
    broken = copy.deepcopy(dashboard)
    broken["panels"][-1]["targets"][0]["expr"] = "rate(stockpool_no_such_total[5m])"
    assert unknown_names(broken, watched.names) == {"stockpool_no_such_total"}, "the check's negative control"
    for expr in _panel_exprs(dashboard):
        query = expr.replace("$__rate_interval", "15s").replace("$instance", ".*").replace("$pgbouncer", ".*")
        assert watched.prometheus.query(query), f"no data for a panel: {expr}"


def test_the_dashboard_is_provisionable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["id"] is None
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    ids = []
    for panel in dashboard["panels"]:
        ids.append(panel["id"])
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["description"] and panel["targets"], panel["title"]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    provider = yaml.safe_load((MONITORING / "grafana" / "provisioning.yml").read_text())
    assert provider["apiVersion"] == 1 and provider["providers"][0]["type"] == "file"


def test_the_rules_use_only_metrics_prometheus_holds_and_evaluate(watched: Watched) -> None:
    used: set[str] = set()
    for rule in alerts().values():
        used |= metric_names(rule["expr"])
    assert used - watched.names == set()
    loaded = {rule["name"]: rule for rule in watched.prometheus.alerting_rules()}
    assert set(loaded) == set(alerts())
    for name, rule in loaded.items():
        assert rule["health"] == "ok", (name, rule.get("lastError"))
        assert rule["state"] != "firing", f"{name} fires after a clean soak"
