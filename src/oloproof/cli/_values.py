"""The pieces cli/_args.py's table is made of: what the command line's values may be (the
``type`` functions), and argument groups.

Each ``type`` function returns the value or raises argparse's ``ArgumentTypeError`` naming
what is accepted; argparse then prints it as the command's usage error (exit 2), and
cli/_fast.py leaves such a command line to argparse.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from oloproof.cli._args import Declared

__all__ = ["MAX_RUNS_LIMIT", "Group", "case_cap", "given", "name", "port", "positive_int",
           "run_limit", "trials"]


def given(value: str) -> str:
    """A file, an address...: any text but the empty one, which is what a shell passes for a
    variable that is not set (``--policy "$POLICY"``). It used to mean "not given" where a
    command tested the value's truth (``plan --policy ''`` planned under the policy stored
    with the run, ``report -o ''`` and ``label --output ''`` wrote to their default files)
    and a path elsewhere (``run --junit-xml ''`` ran the whole suite, then could not write)."""
    if not value:
        raise _type_error("expected a value, got an empty one (a shell variable that is not set?)")
    return value


def name(value: str) -> str:
    """A run id, a case id, a criterion, a metadata key...: something a store or a suite
    holds, so not empty (see :func:`given`) and text. A command line is bytes, and Python
    keeps those that are not UTF-8 as lone surrogates (``$'run_\\xff'``), which no stored id
    holds and which SQLite cannot even be asked about: ``gate``, ``inspect``, ``report``,
    ``plan`` and ``compare`` ended in an internal error (exit 70)."""
    given(value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _type_error(
            f"expected text, got '{value}', which holds bytes that are not UTF-8"
        ) from None
    return value



def _whole(value: str, low: int, high: int | None = None) -> int | None:
    """``value`` as a whole number from ``low`` to ``high``; None when it is not one."""
    try:
        n = int(value)
    except ValueError:
        return None
    return n if n >= low and (high is None or n <= high) else None


def positive_int(value: str) -> int:
    n = _whole(value, 1)
    if n is None:
        raise _type_error(f"expected a whole number of cases, 1 or more, got '{value}'")
    return n


#: The largest ``runs --limit``: more runs than any store holds.
MAX_RUNS_LIMIT = 1_000_000_000


def run_limit(value: str) -> int:
    n = _whole(value, 1, MAX_RUNS_LIMIT)
    if n is None:
        raise _type_error(
            f"expected a whole number of runs from 1 to {MAX_RUNS_LIMIT}, got '{value}'"
        )
    return n


def case_cap(value: str) -> int | None:
    """``--cases``: a whole number of cases, 1 or more, or ``all`` (None: no cap)."""
    if value == "all":
        return None
    n = _whole(value, 1)
    if n is None:
        raise _type_error(f"expected a whole number of cases, 1 or more, or 'all', got '{value}'")
    return n


def trials(value: str) -> int:
    n = _whole(value, 1, 100)
    if n is None:
        raise _type_error(f"expected a whole number of trials from 1 to 100, got '{value}'")
    return n


def port(value: str) -> int:
    """``view --port``: a TCP port, 0 (any free one) to 65535. A port outside reached the
    socket's bind: "internal error: OverflowError", exit 70."""
    n = _whole(value, 0, 65535)
    if n is None:
        raise _type_error(f"expected a port from 0 (any free one) to 65535, got '{value}'")
    return n


def _type_error(message: str) -> Exception:
    import argparse

    return argparse.ArgumentTypeError(message)


class Group:
    """Arguments that argparse's help lists under a title of their own."""

    __slots__ = ("arguments", "description", "title")

    def __init__(self, title: str, description: str, *arguments: Declared) -> None:
        self.title, self.description, self.arguments = title, description, arguments
