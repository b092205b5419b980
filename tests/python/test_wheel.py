"""The wheel: built from this checkout and installed into a fresh virtualenv
outside the repository, it deploys stockpool and races it. sql/ and the
pgbench scripts ship inside the package, so nothing is read from the checkout.

The build needs setuptools from the package index (pip's isolated build), and
the venv installs the dependencies at the versions constraints.txt pins (from
pip's cache after `make bootstrap`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, (
        f"{argv[:3]} exit {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the checkout (setuptools builds in the source
    tree), so the checkout is left as it was."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "results", "*.egg-info", "__pycache__"
        ),
    )
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)], cwd=out)
    (built,) = out.glob("stockpool-*.whl")
    return built


def test_the_wheel_holds_the_sql_and_the_pgbench_scripts(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    in_repo = {
        f"stockpool/sql/{p.relative_to(REPO / 'sql')}" for p in (REPO / "sql").rglob("*") if p.is_file()
    }
    assert in_repo and in_repo <= names, sorted(in_repo - names)
    for part in ("bench", "race"):
        scripts = {
            f"stockpool/{part}/pgbench/{p.name}"
            for p in (REPO / "src" / "stockpool" / part / "pgbench").glob("*.sql")
        }
        assert scripts and scripts <= names, sorted(scripts - names)
    assert "stockpool/py.typed" in names


def test_an_installed_wheel_deploys_and_races(wheel: Path, empty_db: str, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run([*pip, "-c", str(REPO / "constraints.txt"), str(wheel)], cwd=tmp_path)
    work = tmp_path / "elsewhere"  # no sql/, no bench/, no src/ here
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "STOCKPOOL_DSN", "VIRTUAL_ENV")}
    stockpool = str(venv / "bin" / "stockpool")

    located = _run(
        [str(venv / "bin" / "python"), "-c", "import stockpool; print(stockpool.sql_dir())"],
        cwd=work,
        env=env,
    )
    assert Path(located.strip()).is_relative_to(venv), located

    deployed = _run([stockpool, "deploy", "--dsn", empty_db], cwd=work, env=env)
    assert "migrations applied: 0001" in deployed, deployed

    raced = _run(
        [
            stockpool,
            "race",
            "--dsn",
            empty_db,
            "--scenario",
            "sellout",
            "--clients",
            "4",
            "--per-client",
            "5",
            "--units",
            "10",
            "--results",
            str(work / "results"),
        ],
        cwd=work,
        env=env,
    )
    assert "PASS" in raced, raced
    assert list((work / "results").glob("race-*.json"))
