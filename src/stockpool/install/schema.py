"""A normalised schema dump of an installed stockpool, for drift checks.

``python -m stockpool.schema`` prints the dump of the database in STOCKPOOL_DSN
(or PG* variables). sql/schema/stockpool.sql is this dump of a fresh install;
CI fails when a fresh install no longer matches it (`make schema` rewrites it).
"""

from __future__ import annotations

import os
import subprocess
import sys

from stockpool.errors import StockpoolError
from stockpool.server.cluster import find_bindir


def dump(dsn: str) -> str:
    proc = subprocess.run(
        [
            str(find_bindir() / "pg_dump"),
            "--schema-only",
            "--schema=stockpool",
            "--exclude-table-data=stockpool.migrations",
            "--dbname",
            dsn,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise StockpoolError(f"pg_dump failed: {proc.stderr.strip()}")
    return normalise(proc.stdout)


def normalise(text: str) -> str:
    """Drop what differs between otherwise equal installs (versions, blank runs)."""
    kept: list[str] = []
    for line in text.splitlines():
        if line.startswith(("-- Dumped from", "-- Dumped by", "\\restrict", "\\unrestrict")):
            continue
        if not line.strip() and kept and not kept[-1].strip():
            continue
        kept.append(line)
    return "\n".join(kept).strip() + "\n"


def main() -> None:
    dsn = os.environ.get("STOCKPOOL_DSN") or ""
    sys.stdout.write(dump(dsn))


if __name__ == "__main__":
    main()
