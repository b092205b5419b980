"""stockpool: inventory reservations inside PostgreSQL, and the toolkit around them.

The package's folders follow the toolkit's architecture:

- ``install``: what puts the SQL into a database (deploy, the schema dump);
- ``server``: what runs PostgreSQL and its tools (throwaway clusters, the
  database a command runs on, the pgbench driver, samplers, server
  statistics, the CPU meter);
- ``race``: ``stockpool race``, the package raced under load and checked;
- ``bench``: ``stockpool bench``, the strategies side by side, and its reports;
- ``client``: the Python client with its retry rules;
- ``cli``: the ``stockpool`` command line, which parses options and delegates.

``sql`` is the SQL tree (the repository's sql/ folder, shipped in the wheel).
"""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"


def sql_dir() -> Path:
    """The SQL tree: migrations, functions, views and the schema dump.

    In a source checkout ``stockpool/sql`` is a link to the repository's sql/
    folder; a built wheel holds a copy of it.
    """
    path = Path(__file__).resolve().parent / "sql"
    if not (path / "migrations").is_dir():
        raise FileNotFoundError(f"stockpool's SQL tree is missing ({path})")
    return path
