"""One way to reach into a JSON value with a dotted path.

``lookup(value, "items.-1.label")`` is used wherever a user names a place in
a value: an evaluator's ``field`` and ``expected_field``, an HTTP system's
``output_path`` and ``usage_path``. Having one function means the same path
finds the same value everywhere.

The rules, part by part (split on ``.``):

- in an object, the part is a key (``"0"`` and ``"-1"`` included: a key that
  is written like a number is still a key);
- in an array, the part must be a whole number written in digits, optionally
  with a leading ``-``: ``0`` is the first item, ``-1`` the last, as in Python;
- anything else (a missing key, an index out of range, a part that goes into
  text, a number or null) gives :data:`MISSING`.

``None`` as the path is the whole value. This module is a bottom layer: it
imports nothing of Oloproof's.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final, final
else:

    def final(cls: type) -> type:  # typing's, for the type checker; typing stays off the run path
        return cls

__all__ = ["MISSING", "is_missing", "lookup"]


@final
class _Missing:
    """The type of :data:`MISSING` (one instance; false; prints as MISSING)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


#: What :func:`lookup` returns when the path leads nowhere (distinct from ``None``,
#: which is JSON's ``null`` and may well be the value found).
MISSING: Final = _Missing()

_INDEX = r"-?[0-9]+"


def lookup(value: Any, dotted_path: str | None) -> Any:
    """The value at ``dotted_path`` inside ``value``, or :data:`MISSING`."""
    if dotted_path is None:
        return value
    current = value
    for part in dotted_path.split("."):
        if isinstance(current, dict):
            if part not in current:
                return MISSING
            current = current[part]
        elif isinstance(current, list) and re.fullmatch(_INDEX, part):
            index = int(part)
            if not -len(current) <= index < len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


def is_missing(value: Any) -> bool:
    """Whether ``value`` is :data:`MISSING`."""
    return value is MISSING
