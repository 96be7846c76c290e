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

__version__ = "0.1.0"

__all__ = [
    "CaseContext",
    "CaseView",
    "TransientError",
    "Verdict",
    "__version__",
    "current_case",
    "system",
]
