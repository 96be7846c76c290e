"""``Generic`` and ``TypeVar`` for the two generic classes of an unchanged rerun's path
(``transport/retry.py``'s ``Attempted``, ``evaluators/deterministic.py``'s ``_Base``),
without importing :mod:`typing` at run time (docs/design-notes.md, "Imports: one rule").

A module that needs them writes::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import Generic, TypeVar
    else:
        from oloproof._generic import Generic, TypeVar

so that the type checker reads typing's own (it takes any ``TYPE_CHECKING`` as true) and
the interpreter these: a subscripted ``Generic`` (or a subclass) is the class itself, and a
type variable is its name. Nothing of ours reads a class's type parameters at run time.
"""

from __future__ import annotations

__all__ = ["Generic", "TypeVar"]


class Generic:
    """A base for a class that is generic to the type checker only."""

    __slots__ = ()

    def __class_getitem__(cls, params: object) -> type[Generic]:
        return cls


def TypeVar(name: str, *constraints: object, bound: object = None) -> str:
    """A type variable's name (typing's ``TypeVar`` for the type checker)."""
    return name
