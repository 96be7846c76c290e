"""Oloproof: is it good enough, and how sure can we be?

The public API: decorate a system under test with :func:`system`, raise
:class:`TransientError` to ask for a retry, and report usage through
:func:`current_case`.
"""

from __future__ import annotations

from oloproof._context import CaseContext, current_case
from oloproof.errors import TransientError
from oloproof.evaluators.base import CaseView, Verdict
from oloproof.systems.decorator import system


def __getattr__(name: str) -> str:
    # The version is pyproject.toml's, read from the installed package's metadata
    # (the one place it is written), and only when asked: importlib.metadata costs
    # start-up time that `oloproof run` should not pay.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("oloproof")
        except PackageNotFoundError:  # imported from a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'oloproof' has no attribute {name!r}")


__all__ = [
    "CaseContext",
    "CaseView",
    "TransientError",
    "Verdict",
    "__version__",
    "current_case",
    "system",
]
