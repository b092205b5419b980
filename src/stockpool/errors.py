"""The one exception type the toolkit shows to users: a line and a hint."""

from __future__ import annotations


class StockpoolError(Exception):
    """An error for the user: one clear line, plus an optional hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message
