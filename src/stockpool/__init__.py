"""stockpool: inventory reservations inside PostgreSQL, and the toolkit around them."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"


def sql_dir() -> Path:
    """The package's SQL tree (sql/ at the repository root, or bundled)."""
    here = Path(__file__).resolve()
    for candidate in (here.parent / "sql", here.parents[2] / "sql"):
        if (candidate / "migrations").is_dir():
            return candidate
    raise FileNotFoundError("stockpool SQL tree not found")
