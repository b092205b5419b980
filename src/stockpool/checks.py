"""The one result type of every check the race and the bench make."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Check:
    """A named check: passed, failed, or (None) not measured in this run."""

    name: str
    passed: bool | None
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


def verdict(passed: bool | None) -> str:
    """PASS, FAIL, or n/a (not measured), as the reports print it."""
    if passed is None:
        return "n/a"
    return "PASS" if passed else "FAIL"
