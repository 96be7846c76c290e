"""The ``@system`` decorator that names and versions a callable system."""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar
    F = TypeVar("F", bound=Callable[..., Any])


def system(*, name: str, version: str) -> Callable[[F], F]:
    """Declare a function as a system under test.

    ``name`` and ``version`` become part of the system's identity: bump the
    version when something the source does not show changes (a model behind an
    API, a prompt in a database), and every cached answer is recomputed.
    """

    def mark(fn: F) -> F:
        fn.__oloproof_system__ = {"name": name, "version": str(version)}  # type: ignore[attr-defined]
        return fn

    return mark
