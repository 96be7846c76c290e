"""The usual command line, parsed without argparse.

Importing argparse, building a command's parser and parsing (argparse asks gettext, which
looks for a catalogue on disk, for every word it may print) is about 4 ms of a 12 ms
interpreter start; an unchanged rerun or a ``gate`` takes few arguments and no help.
:func:`fast_parse` reads ``COMMAND`` followed by exact long options and plain values, from
the declaration of cli/_args.py, and returns the namespace argparse would; anything else (a
help, a short or abbreviated option, ``--opt=value``, ``--``, a value that starts with a
dash or that a type or the choices refuse, a missing or extra argument) returns ``None``
and argparse parses it, so every message stays argparse's own. tests/cli/test_fast_args.py
holds the two parsers equal over thousands of command lines.
"""

from __future__ import annotations

from types import SimpleNamespace

from oloproof.cli._args import ARGUMENTS, COMMANDS
from oloproof.cli._values import Group

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Callable, Sequence
    from typing import Any

    from oloproof.cli._args import Declared

__all__ = ["arguments", "fast_parse"]


class _Argument:
    __slots__ = ("action", "choices", "default", "dest", "flags", "nargs", "required", "type")

    def __init__(self, flags: tuple[str, ...], kw: dict[str, Any]) -> None:
        self.flags = flags
        self.action: str | None = kw.get("action")
        self.choices: Sequence[str] | None = kw.get("choices")
        self.nargs: str | None = kw.get("nargs")
        self.required: bool = kw.get("required", False)
        self.type: Callable[[str], Any] | None = kw.get("type")
        self.default: Any = kw.get("default", False if self.action == "store_true" else None)
        if "dest" in kw:
            self.dest: str = kw["dest"]
        elif flags[0].startswith("-"):
            long = next((f for f in flags if f.startswith("--")), flags[0])
            self.dest = long.lstrip("-").replace("-", "_")
        else:
            self.dest = flags[0]


def arguments(name: str) -> list[_Argument]:
    """Command ``name``'s arguments as the parser reads them."""
    return [_Argument(flags, options) for flags, options in _declared(name)]


def fast_parse(words: Sequence[str]) -> Namespace | None:
    """``words`` parsed as argparse would parse them, or ``None`` when this is a command
    line only argparse should read (see the module's docstring)."""
    if not words or words[0] not in COMMANDS:
        return None
    name = words[0]
    declared_here = arguments(name)
    values: dict[str, Any] = {"version": None, "command": name, "_module": COMMANDS[name][0]}
    options: dict[str, _Argument] = {}
    positionals: list[_Argument] = []
    for declared in declared_here:
        if declared.flags[0].startswith("-"):
            options.update(dict.fromkeys(declared.flags, declared))
        elif declared.nargs is not None:
            return None  # init (DIR may be left out) is not worth a second set of rules
        else:
            positionals.append(declared)
        values[declared.dest] = declared.default
    seen: set[str] = set()
    filled = 0
    i = 1
    while i < len(words):
        word = words[i]
        if not word.startswith("-"):
            if filled == len(positionals):
                return None
            value = _value(positionals[filled], word)
            if value is _REFUSED:
                return None
            values[positionals[filled].dest] = value
            filled += 1
            i += 1
            continue
        arg = options.get(word)
        if arg is None:
            return None
        seen.add(arg.dest)
        if arg.action == "store_true":
            values[arg.dest] = True
            i += 1
            continue
        if i + 1 == len(words) or words[i + 1].startswith("-"):
            return None
        value = _value(arg, words[i + 1])
        if value is _REFUSED:
            return None
        if arg.action == "append":
            if values[arg.dest] is arg.default:  # a list of this parse's own, appended to:
                values[arg.dest] = list(arg.default or ())  # copying it was quadratic
            values[arg.dest].append(value)
        else:
            values[arg.dest] = value
        i += 2
    if filled < len(positionals) or any(a.required and a.dest not in seen for a in declared_here):
        return None
    for arg in declared_here:  # argparse converts a string default that was not replaced
        if arg.dest not in seen and isinstance(arg.default, str) and arg.type is not None:
            values[arg.dest] = arg.type(arg.default)
    return SimpleNamespace(**values)  # type: ignore[return-value]  # reads as argparse's


#: What :func:`_value` returns for a value argparse would refuse.
_REFUSED = object()


def _value(arg: _Argument, text: str) -> Any:
    """``text`` as argparse makes it ``arg``'s value (its ``type``, then its ``choices``,
    an option's or a positional's alike), or :data:`_REFUSED` (argparse then says why)."""
    value: Any = text
    if arg.type is not None:
        try:
            value = arg.type(text)
        except Exception:  # noqa: BLE001 - argparse reports what the type refused
            return _REFUSED
    if arg.choices is not None and value not in arg.choices:
        return _REFUSED
    return value


def _declared(name: str) -> list[Declared]:
    """Command ``name``'s arguments, its groups' included, in order."""
    out: list[Declared] = []
    for item in ARGUMENTS[name]:
        out.extend(item.arguments if isinstance(item, Group) else [item])
    return out
