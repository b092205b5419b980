"""Where a bench run goes: JSON, the markdown report and the chart under
results/ (and results/published/ with --publish), and a summary on the terminal.

Every ratio is to the ceiling of the same run at the same client count, so a
busy or slow machine moves both sides of it. Absolute figures are what this
machine did during this run and nothing more.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from stockpool.bench.bars import every_bar
from stockpool.bench.chart import chart
from stockpool.bench.markdown import markdown, strategy_rows
from stockpool.bench.model import BenchRun
from stockpool.checks import verdict

PUBLISHED = "published"


def write(run: BenchRun, out: Path, publish: bool = False) -> list[Path]:
    """bench-<stamp>.json/.md/.png under ``out``; with ``publish`` also results/published/."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = run.started.replace(":", "").replace("-", "").replace("+0000", "Z")[:15]
    base = out / f"bench-{stamp}"
    png = base.with_suffix(".png")
    chart(run, png)
    data = run.as_json()
    data["bar"] = [{"check": c.name, "passed": c.passed, "detail": c.detail} for c in every_bar(run)]
    json_path = base.with_suffix(".json")
    json_path.write_text(json.dumps(data, indent=2) + "\n")
    md_path = base.with_suffix(".md")
    md_path.write_text(markdown(run, png.name))
    paths = [json_path, md_path, png]
    if publish:
        target = out / PUBLISHED if out.name != PUBLISHED else out
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(json_path, target / "bench.json")
        shutil.copyfile(png, target / "bench.png")
        (target / "bench.md").write_text(markdown(run, "bench.png"))
        (target / "machine.md").write_text(machine_markdown(run))
        paths += [target / "bench.json", target / "bench.md", target / "bench.png", target / "machine.md"]
    return paths


def machine_markdown(run: BenchRun) -> str:
    m = run.machine
    lines = ["# The machine of the published bench run", ""]
    for key in (
        "nproc",
        "cpu_model",
        "memory_gib",
        "kernel",
        "server_version",
        "pgbench",
        "python",
        "git_commit",
        "load_average_start",
        "load_average_end",
    ):
        lines.append(f"- {key}: {m.get(key)}")
    lines.append(f"- run: {run.started} to {run.finished}")
    lines += ["", "Server settings:", ""]
    lines += [f"- {k} = {v}" for k, v in (m.get("settings") or {}).items()]
    return "\n".join(lines) + "\n"


def print_summary(console: Console, run: BenchRun) -> None:
    """The strategy table (compact: the markdown report has every column) and the bar."""
    table = Table(
        title="one hot key, one unit per transaction (x: ratio to this run's ceiling)", box=box.SIMPLE
    )
    for name, justify in (
        ("strategy", "left"),
        ("clients", "right"),
        ("res/s", "right"),
        ("x", "right"),
        ("p99 ms", "right"),
        ("x", "right"),
        ("top wait", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in strategy_rows(run):
        table.add_row(row[0], row[1], row[2], row[3], row[6], row[7], row[10])
    console.print(table)
    checks = Table(title="the bar for stockpool.reserve_units", box=box.SIMPLE)
    for name in ("check", "result", "detail"):
        checks.add_column(name)
    for c in every_bar(run):
        colour = {True: "green", False: "red", None: "yellow"}[c.passed]
        checks.add_row(c.name, f"[{colour}]{verdict(c.passed)}[/]", c.detail)
    console.print(checks)
