"""oloproof/_generic.py: the run-time stand-ins for typing's ``Generic`` and ``TypeVar``
that keep ``typing`` off an unchanged rerun's path (docs/design-notes.md, "Imports: one
rule", item 4). In the fast tier, so that every Python the package claims runs it."""

from __future__ import annotations

from oloproof._generic import Generic, TypeVar
from oloproof.evaluators import deterministic
from oloproof.transport.retry import Attempted


def test_a_subscripted_generic_is_the_class_itself() -> None:
    class Box(Generic[TypeVar("T")]):  # type: ignore[misc]
        __slots__ = ("value",)

        def __init__(self, value: object) -> None:
            self.value = value

    assert Box[int] is Box and Box[int, str] is Box
    assert Box[int](3).value == 3 and Box.__mro__ == (Box, Generic, object)
    assert TypeVar("C", bound=int) == "C" and TypeVar("CC", int, str) == "CC"


def test_the_generic_classes_of_the_rerun_path_stay_plain_classes() -> None:
    # What a rerun makes of them: classes whose subscript is themselves, nothing of typing's.
    assert Attempted[int] is Attempted
    assert deterministic._Base[object] is deterministic._Base  # type: ignore[type-var]
    assert all(base.__module__ != "typing" for base in deterministic.Regex.__mro__)
