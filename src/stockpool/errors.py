"""The one exception type the toolkit shows to users: a line and a hint."""

from __future__ import annotations

import re


class StockpoolError(Exception):
    """An error for the user: one clear line, plus an optional hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a driver's error can run to
    several, with DETAIL and CONTEXT), or its type when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def redact(dsn: str) -> str:
    """Hide passwords: in the URL's user info, and as a key=value or ?password= parameter."""
    dsn = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", r"\1***", dsn)
