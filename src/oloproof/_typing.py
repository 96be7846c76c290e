"""The few names of :mod:`typing` that Oloproof's run path evaluates at run time, without
importing :mod:`typing` (about 3–4 ms of a 12 ms interpreter start; issue 16).

A module that needs one writes::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import Generic, TypeVar
    else:
        from oloproof._typing import Generic, TypeVar

so the type checker reads typing's own (mypy takes any ``TYPE_CHECKING`` as true), and the
interpreter these stand-ins:

- ``Protocol`` and ``Generic[...]``: an empty base class (no instance attributes, so a
  slotted subclass stays slotted); our protocols are never checked with ``isinstance``.
- ``TypeVar(...)``: a named placeholder.
- ``final`` and ``cast``: give back what they are given, as typing's do.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Generic", "Protocol", "TypeVar", "cast", "final"]


class Generic:
    """A base class for classes that are generic to the type checker only."""

    __slots__ = ()

    def __class_getitem__(cls, params: object) -> type[Generic]:
        return cls


class Protocol(Generic):
    """A base class for protocols that are structural to the type checker only."""

    __slots__ = ()


class TypeVar:
    """A type variable's name, for the type checker's ``TypeVar``."""

    __slots__ = ("__name__",)

    def __init__(self, name: str, *constraints: object, **options: object) -> None:
        self.__name__ = name

    def __repr__(self) -> str:
        return f"~{self.__name__}"


def final(f: Any) -> Any:
    return f


def cast(typ: object, value: Any) -> Any:
    return value
