"""A throwaway Prometheus, and promtool: Debian 12's prometheus package (2.42).

:func:`prometheus` runs the server on a free loopback port with stockpool's
own scrape configuration and alert rules (``monitoring/prometheus.yml``):
the same relabeling that turns the exporter's rows into ``stockpool_<metric>``,
pointed at the exporters it is given, scraping and evaluating every second,
with its storage in a temp folder that goes with it. Its HTTP API answers the
queries (:meth:`Prometheus.query`). :func:`promtool` runs the rule checks and
unit tests.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from stockpool.errors import StockpoolError
from stockpool.server import daemon
from stockpool.server.cluster import free_port
from stockpool.server.exporter import monitoring_dir

START_TIMEOUT = 30.0


@dataclass(frozen=True)
class Sample:
    """One series of an instant query's answer."""

    labels: dict[str, str]
    value: float

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")


@dataclass(frozen=True)
class Prometheus:
    """A running Prometheus."""

    port: int
    config: Path
    logfile: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of a GET of the HTTP API (``/api/v1/<path>``)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        answer = json.loads(daemon.http_get(f"{self.url}/api/v1/{path}{query}", timeout=10))
        if answer.get("status") != "success":
            raise StockpoolError(f"Prometheus API {path}: {answer.get('error', answer)}")
        return answer["data"]

    def query(self, expr: str) -> list[Sample]:
        """An instant query's series (a scalar answer is one series without labels)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [Sample({}, float(data["result"][1]))]
        return [Sample(dict(s["metric"]), float(s["value"][1])) for s in data["result"]]

    def wait_for(self, expr: str, timeout: float = 30) -> list[Sample]:
        """Poll ``expr`` until it has a series; StockpoolError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not (found := self.query(expr)):
            if time.monotonic() > deadline:
                raise StockpoolError(f"Prometheus has no series for {expr} after {timeout:g} s")
            time.sleep(0.25)
        return found

    def names(self) -> set[str]:
        """Every metric name Prometheus holds."""
        return set(self.api("label/__name__/values"))

    def alerting_rules(self) -> list[dict[str, Any]]:
        """The alerting rules it loaded, as ``/api/v1/rules`` reports them."""
        groups = self.api("rules", type="alert")["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets with their health and last error."""
        return list(self.api("targets")["activeTargets"])


def scrape_config(
    targets: Mapping[str, str],
    interval: str = "1s",
    template: Path | None = None,
) -> dict[str, Any]:
    """monitoring/prometheus.yml (or ``template``) pointed at ``targets``
    (job name -> host:port; jobs without a target are left out), scraping and
    evaluating every ``interval``, its rule files by absolute path."""
    template = template or monitoring_dir() / "prometheus.yml"
    config: dict[str, Any] = yaml.safe_load(template.read_text())
    unknown = set(targets) - {job["job_name"] for job in config["scrape_configs"]}
    if unknown:
        raise StockpoolError(f"{template} has no scrape job {', '.join(sorted(unknown))}")
    every = {"scrape_interval": interval, "evaluation_interval": interval}
    config["global"] = {**config.get("global", {}), **every}
    config["rule_files"] = [str((template.parent / path).resolve()) for path in config.get("rule_files", [])]
    jobs = []
    for job in config["scrape_configs"]:
        if job["job_name"] in targets:
            job["static_configs"] = [{"targets": [targets[job["job_name"]]]}]
            jobs.append(job)
    config["scrape_configs"] = jobs
    return config


def _binary(name: str) -> str:
    found = shutil.which(name)
    if not found:
        hint = "apt-get install prometheus (or scripts/bootstrap-system)"
        raise StockpoolError(f"{name} not found", hint=hint)
    return found


@contextlib.contextmanager
def prometheus(
    targets: Mapping[str, str], interval: str = "1s", template: Path | None = None
) -> Iterator[Prometheus]:
    """Prometheus scraping ``targets`` (job name -> host:port) with stockpool's
    scrape configuration and rules (or ``template``'s); stopped, its storage
    removed, on the way out."""
    binary = _binary("prometheus")
    config = scrape_config(targets, interval, template)
    root = Path(tempfile.mkdtemp(prefix="stockpool-prometheus-"))
    try:
        (root / "prometheus.yml").write_text(json.dumps(config, indent=2))  # JSON is YAML
        port = free_port()
        argv = [
            binary,
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ]
        with daemon.running("prometheus", argv, root / "stderr.log") as proc:
            server = Prometheus(port, root / "prometheus.yml", proc.stderr)
            daemon.wait_http(f"{server.url}/-/ready", START_TIMEOUT, proc.exited)
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)


def promtool(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run promtool; its exit status and output (stdout and stderr in the
    order it wrote them, in ``stdout``) are the caller's to judge."""
    return subprocess.run(
        [_binary("promtool"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def check_rules(paths: Sequence[Path]) -> subprocess.CompletedProcess[str]:
    return promtool("check", "rules", *map(str, paths))


def run_rule_tests(paths: Sequence[Path]) -> subprocess.CompletedProcess[str]:
    return promtool("test", "rules", *map(str, paths))
