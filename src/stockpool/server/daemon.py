"""Throwaway daemons: start one, know when it is up or why it died, stop it.

What every harnessed daemon (pgbouncer, postgres_exporter, the pgbouncer
exporter, Prometheus) shares. Its stderr goes to a file, never to a pipe that
nobody reads (a full pipe blocks the daemon as soon as it logs enough); when it
exits before it is ready, its last line on stderr is the error; on the way out
it gets SIGTERM, then SIGKILL, whatever happened meanwhile.
"""

from __future__ import annotations

import contextlib
import pwd
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stockpool.errors import StockpoolError


@dataclass(frozen=True)
class Daemon:
    """A running daemon: its process and the file its stderr goes to."""

    name: str
    proc: subprocess.Popen[bytes]
    stderr: Path

    def exited(self) -> str | None:
        """Why the daemon is gone (its last line on stderr), or None while it runs."""
        if self.proc.poll() is None:
            return None
        err = self.stderr.read_text(errors="replace").strip().splitlines()
        return f"{self.name} exited at start: {err[-1] if err else self.proc.returncode}"

    def log_tail(self, chars: int = 2000) -> str:
        return self.stderr.read_text(errors="replace")[-chars:] if self.stderr.exists() else ""


@contextlib.contextmanager
def running(
    name: str,
    argv: Sequence[str],
    stderr: Path,
    env: Mapping[str, str] | None = None,
    user: str | None = None,
) -> Iterator[Daemon]:
    """Start ``argv`` with its stderr in ``stderr``; stop it on the way out.

    ``user``: run it as that OS user (we are root). The process changes user
    itself rather than through ``runuser``, which would reset the open-files
    limit and hold every stop for two seconds after passing the signal on."""
    entry = pwd.getpwnam(user) if user is not None else None
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            user=entry.pw_uid if entry else None,
            group=entry.pw_gid if entry else None,
            extra_groups=[] if entry else None,
        )
    try:
        yield Daemon(name, proc, stderr)
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes], grace: float = 10) -> None:
    """SIGTERM, and SIGKILL after ``grace`` seconds; return once it is gone."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def http_get(url: str, timeout: float = 5) -> bytes:
    """The body of a GET; urllib's errors as they come (HTTPError for a status >= 400)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


def wait_http(url: str, timeout: float, exited: Callable[[], str | None]) -> None:
    """Wait until a GET of ``url`` answers 200. A StockpoolError at once when
    ``exited`` names why the daemon is gone, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if (reason := exited()) is not None:
            raise StockpoolError(reason)
        try:
            http_get(url, timeout=2)
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            if time.monotonic() > deadline:
                raise StockpoolError(f"{url} did not answer within {timeout:g} s: {exc}") from exc
            time.sleep(0.1)
