"""Read a YAML file into plain data, remembering the line of every key.

PyYAML's constructors throw position information away, so we compose the
node graph (which keeps ``start_mark`` on every node) and build the Python
values ourselves. Alongside the data we return a :class:`LineMap`: for every
path into the data (``("evaluators", 2, "pattern")``) the 1-based line of the
mapping key or sequence item. A validation error's location can then be
turned back into a line the user can jump to.

Choices that differ from ``yaml.safe_load``:

- mapping keys are the text the user wrote (``on:`` is the key ``"on"``,
  not ``True``; ``1:`` is ``"1"``);
- a plain scalar with an exponent is a number (``1e-3``, ``1.7e308``), as YAML 1.2 and
  JSON read it; YAML 1.1 reads it as text without a dot and a signed exponent;
- a timestamp-looking scalar stays text (``version: 2024-05-01`` is the
  string ``"2024-05-01"``, not a ``date``);
- a plain scalar YAML reads as a number or as true/false keeps its text as written
  (:meth:`LineMap.text`): where the schema expects text, the validation reads that text,
  so ``version: 1.10`` is ``"1.10"``, not 1.1 (project/models.py, :func:`as_written`);
- a key written twice in one mapping is an error, not "last one wins";
- aliases may not expand to more than :data:`MAX_ALIAS_VALUES` values (a
  kilobyte "billion laughs" document would otherwise build billions);
- only a regular file is read, and at most ``limit`` bytes of it
  (:func:`read_text`): a path to ``/dev/zero`` or a FIFO is refused at once;
- a character pasted by accident that looks like a space or like nothing (a
  no-break space, a zero-width space, a control character: :data:`_SUSPECT`) is
  named with its line and column, by its code point and name: in a key it is an
  error; where the file cannot be parsed it is pointed at as the likely cause
  (PyYAML's own message would name a later line, or none).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from oloproof._json import MAX_JSON_DEPTH
from oloproof.errors import ConfigError
from oloproof.project._files import read_text

PathKey = tuple[str | int, ...]

_Loader: type[yaml.SafeLoader]
try:  # the libyaml composer is several times faster where it is available
    _Loader = yaml.CSafeLoader  # type: ignore[assignment,unused-ignore]
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader

_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MAX_DEPTH = MAX_JSON_DEPTH  # the one depth limit (oloproof._json)
#: A number with an exponent as people write it (``1e-3``, ``5E2``, ``1.7e308``): YAML 1.1,
#: which PyYAML reads, makes it text unless it has a dot and a signed exponent
#: (``1.0e-3``, ``1.7e+308``); YAML 1.2, and every JSON reader, read a number. Unquoted,
#: it is read as the number it says.
_EXPONENT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+\Z")
#: Values built through aliases (``*name``, ``<<: *name``) in one document.
MAX_ALIAS_VALUES = 10_000
#: Characters that look like a space or like nothing, and are never what a YAML file
#: means where they break it: control characters (YAML refuses them all but tab and the
#: line breaks), spaces YAML does not read as one (no-break, en, em, ideographic...),
#: the invisible format characters (zero-width space and joiners, soft hyphen, byte order
#: mark, bidirectional controls) and the line breaks only YAML 1.1 counts (U+0085,
#: U+2028, U+2029), after which PyYAML's line numbers no longer match an editor's.
_SUSPECT = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\xa0\xad\u1680\u180e\u2000-\u200f"
    "\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000\ufeff]"
)
#: Names for the control characters (the Unicode database gives them none).
_CONTROL_NAMES = {
    "\x00": "NUL", "\x07": "BELL", "\x08": "BACKSPACE", "\x0b": "VERTICAL TAB",
    "\x0c": "FORM FEED", "\x1b": "ESCAPE", "\x7f": "DELETE", "\x85": "NEXT LINE",
}


class LineMap:
    """The line of every key and item of one YAML document, and the text as written of
    every scalar YAML read as a number or as true/false."""

    __slots__ = ("_lines", "_texts")

    def __init__(self) -> None:
        self._lines: dict[PathKey, int] = {}
        self._texts: dict[PathKey, str] = {}

    def set(self, path: PathKey, line: int) -> None:
        self._lines[path] = line

    def set_text(self, path: PathKey, text: str) -> None:
        self._texts[path] = text

    def text(self, path: PathKey) -> str | None:
        """The text as written of the number or true/false at ``path`` (``1.10``, ``010``,
        ``1:30``, ``yes``), or None."""
        return self._texts.get(path)

    def exact(self, path: PathKey) -> int | None:
        """The line of exactly this path, or None."""
        return self._lines.get(path)

    def nearest(self, path: PathKey) -> int | None:
        """The line of ``path``, or of its closest ancestor that has one."""
        for end in range(len(path), -1, -1):
            line = self._lines.get(path[:end])
            if line is not None:
                return line
        return None


def load_yaml(path: str | os.PathLike[str], display: str) -> tuple[Any, LineMap]:
    """Load one YAML document from ``path``; return its data and line map.

    ``display`` is the file name used in error messages (as the user gave it).
    An empty document yields ``None``.
    """
    text = read_text(path, display)
    try:
        root = yaml.compose(text, Loader=_Loader)
    except RecursionError:
        # PyYAML composes recursively: thousands of levels end its recursion before the
        # builder's own limit is reached.
        raise ConfigError(
            f"nested deeper than {_MAX_DEPTH} levels (a recursive anchor?)", file=display
        ) from None
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(exc, display, text) from None
    except yaml.YAMLError as exc:
        # The reader's error (a character YAML does not accept) has a position, not a
        # line: the first such character is found in the text itself.
        said = str(exc).split("\n")[0]
        raise _suspect_error(
            text, display, (0, len(text)), "not valid YAML: ", f" (the parser said: {said})"
        ) or ConfigError(f"not valid YAML: {exc}", file=display) from None
    lines = LineMap()
    if root is None:
        return None, lines
    builder = _Builder(display, lines, text)
    lines.set((), root.start_mark.line + 1)
    return builder.build(root, (), 0), lines


def _character(char: str) -> tuple[str, str]:
    """A suspect character by code point and name (``U+00A0 (NO-BREAK SPACE), which
    looks like a space but is not one``), and what to do with it."""
    import unicodedata

    name = _CONTROL_NAMES.get(char) or unicodedata.name(char, "") or "a control character"
    named = f"U+{ord(char):04X} ({name})"
    if char in "\x85\u2028\u2029":
        return f"{named}, a line break to YAML, not to an editor", "delete it"
    category = unicodedata.category(char)
    if category == "Cc":
        return f"{named}, a control character, which YAML does not accept", "delete it"
    if category == "Zs":
        return f"{named}, which looks like a space but is not one", "replace it with a space"
    return f"{named}, an invisible character", "delete it"


def suspect_note(text: str) -> str:
    """``; it holds U+00A0 (NO-BREAK SPACE), ...: replace it with a space`` for the first
    suspect character (:data:`_SUSPECT`) in a value read as text, or "": a document that is
    one line of text because a no-break space follows its first key looks, quoted back,
    like the mapping it was meant to be."""
    found = _SUSPECT.search(text)
    if found is None:
        return ""
    what, hint = _character(found.group())
    return f"; it holds {what}: {hint}"


def _suspect_error(
    source: str, display: str, span: tuple[int, int], lead: str, tail: str,
    field: str | None = None,
) -> ConfigError | None:
    """The error for the first suspect character (:data:`_SUSPECT`) in the ``span`` of
    ``source`` (offsets), or None when there is none: ``lead``, where it is and what it
    is, ``tail``; then what to do, and the line with a caret under it."""
    found = _SUSPECT.search(source, *span)
    if found is None:
        return None
    at = found.start()
    line = source.count("\n", 0, at)
    column = at - (source.rfind("\n", 0, at) + 1)
    what, hint = _character(found.group())
    return ConfigError(
        f"{lead}column {column + 1} holds {what}{tail}"
        f"\n  {hint}, on line {line + 1}:\n{_show_line(source, line, column)}",
        file=display,
        field=field,
        line=line + 1,
    )


def _offset(source: str, line: int) -> int:
    """Where ``line`` (0-based, counted as PyYAML counts: also after a lone carriage return,
    U+0085, U+2028 and U+2029) starts in ``source``; ``len(source)`` past its end."""
    if line == 0:
        return 0
    for number, found in enumerate(re.finditer("\r\n|[\r\n\x85\u2028\u2029]", source), 1):
        if number == line:
            return found.end()
    return len(source)


def _yaml_error(exc: yaml.MarkedYAMLError, display: str, source: str = "") -> ConfigError:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "cannot be parsed"
    if mark is not None and source:
        # A suspect character on the lines the parser read last (the error's line and the
        # one before; a scalar it was scanning, when that started later) is the likely
        # cause: a no-break space in an indentation or after a colon makes PyYAML stop a
        # line later, with words about something else. Not further up: a context such as
        # "while parsing a block mapping on line 1" would take in the whole file, and a
        # no-break space written on purpose in a quoted value would be blamed.
        first = exc.context_mark.line if exc.context_mark is not None else 0
        start = _offset(source, max(0, first, mark.line - 1))
        end = _offset(source, mark.line + 1)
        said = f" (the parser said: {problem} on line {mark.line + 1})"
        suspect = _suspect_error(source, display, (start, end), "not valid YAML: ", said)
        if suspect is not None:
            return suspect
    message = f"not valid YAML: {problem}"
    if mark is not None:
        message += f" at column {mark.column + 1}"
    if exc.context and exc.problem and exc.context_mark is not None:
        message += f" ({exc.context} on line {exc.context_mark.line + 1})"
    if mark is not None and _char_at(source, mark.line, mark.column) == "\t":
        message += "; indent with spaces, not tabs"
    if mark is not None and source and "nesting depth" not in str(exc.problem or ""):
        # PyYAML's own depth limit (past about 1,000 levels): one line, like the depth
        # limit of every reader (oloproof._json); indentation is not the matter.
        message += _hint(exc, mark, source)
    return ConfigError(message, file=display, line=mark.line + 1 if mark is not None else None)


def _hint(exc: yaml.MarkedYAMLError, mark: Any, source: str) -> str:
    """PyYAML's words say what the parser met, not what to change: a line that says what
    to look at, and that line of the file, with a caret under the column."""
    problem = str(exc.problem or "")
    context = str(exc.context or "")
    line, column = mark.line, mark.column
    if "escape character" in problem:
        hint = (f"in double quotes a backslash starts an escape: write \\\\ for a backslash"
                f" (\"\\\\d+\"), or use single quotes ('\\d+'), on line {line + 1}")
    elif "quoted scalar" in context and "end of stream" in problem and exc.context_mark:
        line, column = exc.context_mark.line, exc.context_mark.column
        hint = f"the quoted value that starts on line {line + 1} is never closed"
    elif (opened := _open_quote(source, mark)) is not None:
        line, column = opened
        hint = (f"the quoted value that starts on line {line + 1} runs on to line"
                f" {mark.line + 1}; is its closing quote missing")
    elif "undefined alias" in problem:
        hint = f"an alias (*name) needs an anchor (&name) above it; line {line + 1}"
    elif "mapping values are not allowed" in problem:
        hint = (f"check the indentation of line {line + 1}; a value that holds ': ' must be"
                " quoted")
    elif "\t" in _line_at(source, line)[: column + 1]:
        hint = f"replace the tab on line {line + 1} with spaces"
    else:
        hint = f"check the indentation of line {line + 1}"
    return f"\n  {hint}:\n{_show_line(source, line, column)}"


def _open_quote(source: str, mark: Any) -> tuple[int, int] | None:
    """Where a quoted scalar that runs over several lines, and ends on the line of the
    error, starts: the usual sign of a missing closing quote (``pattern: 'abc``)."""
    found = None
    try:
        for token in yaml.scan(source, Loader=yaml.SafeLoader):
            if token.start_mark.line > mark.line:
                break
            if (
                isinstance(token, yaml.ScalarToken) and token.style in ("'", '"')
                and token.start_mark.line < token.end_mark.line == mark.line
            ):
                found = (token.start_mark.line, token.start_mark.column)
    except yaml.YAMLError:
        pass
    return found


def _char_at(text: str, line: int, column: int) -> str:
    lines = text.split("\n")
    if 0 <= line < len(lines) and 0 <= column < len(lines[line]):
        return lines[line][column]
    return ""


def _line_at(source: str, line: int) -> str:
    lines = source.split("\n")
    return lines[line].rstrip("\r") if 0 <= line < len(lines) else ""


def _show_line(source: str, line: int, column: int, width: int = 100) -> str:
    """``   17 |    criterion: x`` and a caret under ``column``; tabs shown as ``→``, the
    suspect characters as escapes (``\\xa0``, ``\\u200b``)."""
    pieces = [_visible(char) for char in _line_at(source, line)]
    column = sum(len(piece) for piece in pieces[:column])
    text = "".join(pieces)
    start = max(0, column - width // 2) if len(text) > width else 0
    shown = text[start:start + width]
    if start:
        shown = "…" + shown[1:]
    if start + width < len(text):
        shown = shown[:-1] + "…"
    number = str(line + 1)
    gutter = " " * len(number)
    return f"  {number} | {shown}\n  {gutter} | {' ' * (column - start)}^"


def _visible(char: str) -> str:
    if char == "\t":
        return "\u2192"
    if _SUSPECT.match(char):
        code = ord(char)
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    return char


class _Builder:
    def __init__(self, display: str, lines: LineMap, source: str = "") -> None:
        self._display = display
        self._source = source
        self._lines = lines
        self._constructor = SafeConstructor()
        self._built: set[int] = set()
        self._aliased = 0

    def build(self, node: Node, path: PathKey, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise ConfigError(
                f"nested deeper than {_MAX_DEPTH} levels (a recursive anchor?)",
                file=self._display,
                line=node.start_mark.line + 1,
            )
        # The composed graph shares one node between an anchor and its aliases;
        # a node built a second time is an alias being expanded.
        if id(node) in self._built:
            self._aliased += 1
            if self._aliased > MAX_ALIAS_VALUES:
                raise ConfigError(
                    f"aliases (*name) expand to more than {MAX_ALIAS_VALUES:,} values "
                    "(an alias bomb?); write the values out instead",
                    file=self._display,
                    line=node.start_mark.line + 1,
                )
        else:
            self._built.add(id(node))
        if isinstance(node, MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                item_path = (*path, index)
                self._lines.set(item_path, item.start_mark.line + 1)
                items.append(self.build(item, item_path, depth + 1))
            return items
        assert isinstance(node, ScalarNode)
        if node.tag == _TIMESTAMP_TAG:
            return node.value
        try:
            value = self._constructor.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as exc:
            raise _yaml_error(exc, self._display, self._source) from None
        except ValueError:
            # int() refuses more than sys.get_int_max_str_digits() digits (an exit 70).
            raise ConfigError(
                f"a number is too long to read (more than {sys.get_int_max_str_digits():,}"
                " digits); write it as a string, in quotes",
                file=self._display,
                line=node.start_mark.line + 1,
            ) from None
        # Plain (style None, or '' from libyaml), not quoted: YAML 1.2's number.
        if not node.style and isinstance(value, str) and _EXPONENT.match(value):
            value = float(value)
        if isinstance(value, int | float):  # bool included
            self._lines.set_text(path, node.value)
        return value

    def _mapping(self, node: MappingNode, path: PathKey, depth: int) -> dict[str, Any]:
        try:
            self._constructor.flatten_mapping(node)  # resolves `<<: *anchor` merges
        except yaml.MarkedYAMLError as exc:
            raise _yaml_error(exc, self._display, self._source) from None
        result: dict[str, Any] = {}
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                raise ConfigError(
                    "a key must be plain text, not a list or a mapping",
                    file=self._display,
                    line=line,
                )
            key = str(key_node.value)
            if _SUSPECT.search(key):
                self._suspect_key(key_node, path, key)
            if key in seen:
                field = format_path((*path, key))
                raise ConfigError(
                    f"key '{key}' is written twice (also on line {seen[key]}); keep one",
                    file=self._display,
                    field=field,
                    line=line,
                )
            seen[key] = line
            key_path = (*path, key)
            self._lines.set(key_path, line)
            result[key] = self.build(value_node, key_path, depth + 1)
        return result

    def _suspect_key(self, node: ScalarNode, path: PathKey, key: str) -> None:
        """Refuse a key that holds a character that does not show (a zero-width space, a
        no-break space, a control character): no key Oloproof reads has one, and shown
        in an "unknown key" message it could not be seen."""
        start, end = node.start_mark, node.end_mark
        span = (_offset(self._source, start.line) + start.column,
                _offset(self._source, end.line) + end.column)
        visible = "".join(_visible(char) for char in key)
        raise _suspect_error(
            self._source, self._display, span, "", f", in the key '{visible}'",
            format_path((*path, visible)),
        ) or ConfigError(
            f"the key '{visible}' holds a character that does not show; delete it",
            file=self._display, field=format_path((*path, visible)), line=start.line + 1,
        )

def format_path(path: PathKey) -> str:
    """``("evaluators", 2, "pattern")`` -> ``evaluators[2].pattern``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def field_path(field: str) -> PathKey:
    """``evaluators[2].pattern`` -> ``("evaluators", 2, "pattern")`` (:func:`format_path`
    read back)."""
    return tuple(
        int(index) if index else name for name, index in _FIELD_PART.findall(field)
    )


def with_line(exc: ConfigError, path: str | os.PathLike[str], display: str) -> ConfigError:
    """``exc`` (raised after validation, knowing its field but not its line) with the line
    of that field in the YAML file at ``path``, shown as ``display``. The file is read
    again only here, on the way to an error: a run from the configuration's snapshot never
    parsed it."""
    if exc.line is not None or not exc.field:
        return exc
    try:
        _, lines = load_yaml(path, display)
    except ConfigError:
        return exc
    located = ConfigError(
        exc.detail, file=display, field=exc.field, line=lines.nearest(field_path(exc.field)),
        accepted=exc.accepted,
    )
    located.__cause__ = exc.__cause__
    return located
