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
- a timestamp-looking scalar stays text (``version: 2024-05-01`` is the
  string ``"2024-05-01"``, not a ``date``);
- a plain scalar YAML reads as a number or as true/false keeps its text as written
  (:meth:`LineMap.text`): where the schema expects text, the validation reads that text,
  so ``version: 1.10`` is ``"1.10"``, not 1.1 (project/models.py, :func:`as_written`);
- a key written twice in one mapping is an error, not "last one wins";
- aliases may not expand to more than :data:`MAX_ALIAS_VALUES` values (a
  kilobyte "billion laughs" document would otherwise build billions);
- only a regular file is read, and at most ``limit`` bytes of it
  (:func:`read_text`): a path to ``/dev/zero`` or a FIFO is refused at once.
"""

from __future__ import annotations

import os
import re
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
#: Values built through aliases (``*name``, ``<<: *name``) in one document.
MAX_ALIAS_VALUES = 10_000


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
    except yaml.YAMLError as exc:  # pragma: no cover - unmarked errors are rare
        raise ConfigError(f"not valid YAML: {exc}", file=display) from None
    lines = LineMap()
    if root is None:
        return None, lines
    builder = _Builder(display, lines, text)
    lines.set((), root.start_mark.line + 1)
    return builder.build(root, (), 0), lines


def _yaml_error(exc: yaml.MarkedYAMLError, display: str, source: str = "") -> ConfigError:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "cannot be parsed"
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
    """``   17 |    criterion: x`` and a caret under ``column``; tabs shown as ``→``."""
    text = _line_at(source, line).replace("\t", "\u2192")
    start = max(0, column - width // 2) if len(text) > width else 0
    shown = text[start:start + width]
    if start:
        shown = "…" + shown[1:]
    if start + width < len(text):
        shown = shown[:-1] + "…"
    number = str(line + 1)
    gutter = " " * len(number)
    return f"  {number} | {shown}\n  {gutter} | {' ' * (column - start)}^"


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
