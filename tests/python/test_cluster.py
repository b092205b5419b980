"""The embedded throwaway cluster: it starts, and it is removed afterwards
whatever happens (normal exit, an exception, Ctrl-C, SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from stockpool.errors import StockpoolError
from stockpool.server import cluster as clusters


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A TMPDIR the postgres OS user can traverse, empty at the start."""
    root = Path(tempfile.mkdtemp(prefix="stockpool-test-"))
    root.chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield root
    for child in root.iterdir():
        subprocess.run(["rm", "-rf", str(child)], check=False)
    root.rmdir()


def _processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def _postmasters(datadir_prefix: Path) -> list[str]:
    return [line for line in _processes() if "postgres" in line and str(datadir_prefix) in line]


def test_throwaway_runs_and_is_removed(scratch: Path) -> None:
    with clusters.throwaway({"max_connections": "20"}) as cl:
        assert cl.root.parent == scratch
        with psycopg.connect(cl.dsn) as conn:
            assert conn.execute("SHOW max_connections").fetchone() == ("20",)
    assert list(scratch.iterdir()) == []
    assert _postmasters(scratch) == []


def test_throwaway_is_removed_after_an_exception(scratch: Path) -> None:
    with pytest.raises(RuntimeError), clusters.throwaway():
        raise RuntimeError("boom")
    assert list(scratch.iterdir()) == []
    assert _postmasters(scratch) == []


# The two moments a user's Ctrl-C or a supervisor's SIGTERM can fall on: while
# initdb is still writing the data directory, and while the command runs.
_MOMENTS = {
    "initdb": lambda scratch: any("initdb" in p and str(scratch) in p for p in _processes()),
    "command": lambda scratch: "sleep 61" in _processes(),
}


def _default_sigint() -> None:
    # As a user's terminal delivers it. A test run started in the background
    # by a shell without job control inherits SIGINT ignored, and so would
    # the CLI, which then never sees the Ctrl-C this test sends.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("moment", sorted(_MOMENTS))
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_cli_cleans_up_on_signal(scratch: Path, signum: int, moment: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "stockpool.cli", "exec", "--", "sleep", "61"],
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 60
    while not _MOMENTS[moment](scratch):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"never reached {moment}"
        time.sleep(0.05)
    proc.send_signal(signum)
    proc.wait(timeout=60)
    assert proc.returncode != 0
    assert list(scratch.iterdir()) == []
    assert _postmasters(scratch) == []


def test_missing_binaries_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(clusters, "Path", _NoDebianPath)
    with pytest.raises(StockpoolError) as err:
        clusters.find_bindir()
    assert "initdb" in err.value.message and err.value.hint


class _NoDebianPath(type(Path())):  # type: ignore[misc]
    def glob(self, pattern: str) -> Iterator[Path]:
        return iter(())
