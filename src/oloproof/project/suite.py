"""The suite: one case per line of a JSON Lines file.

A line is one JSON object with these keys, and no others:

- ``id``: a non-empty string, unique in the file;
- ``input``: any JSON value (``null`` included, but the key must be there);
- ``expected``: optional, an object;
- ``metadata``: optional, an object.

Each key is written once in each object, at any depth: a key written twice is
an error naming the line and the key's path (a JSON reader would keep one of
the values and drop the other, silently).

Lines that are empty or hold only whitespace are skipped (a trailing newline,
a blank line between groups of cases). Line numbers in messages are physical
line numbers, counting from 1. ``NaN`` and ``Infinity`` are refused: they are
not JSON, and could not be written back canonically.

**Suite digest.** ``"sha256:"`` followed by the lowercase hex SHA-256 of the
UTF-8 bytes of::

    json.dumps(cases, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

where ``cases`` is the list, in file order, of one dict per case holding
``id`` and ``input``, plus ``expected`` and ``metadata`` only when the line
has them. Skipped blank lines, key order and whitespace inside a line do not
change the digest; any change to an id, an input, an expected value or
metadata does, and so does reordering the cases.

**Refused text.** Bytes that are not UTF-8 are an error naming the line. So is
a lone UTF-16 surrogate, which only a JSON ``\\udXXX`` escape can produce: it
is not a character, cannot be stored as UTF-8 nor printed, and the error names
the line and the field (``id``, ``input``, ``expected`` or ``metadata``).

**Size limits.** The file may hold at most :func:`max_suite_bytes` bytes
(default 1 GiB, environment variable ``OLOPROOF_MAX_SUITE_BYTES``) and one
line at most :func:`max_line_bytes` (default 16 MiB,
``OLOPROOF_MAX_SUITE_LINE_BYTES``): a single enormous line is far more likely
a mistake (a binary file, a whole dump on one line) than a case.

Validation is done by hand, not by pydantic, so that a 100,000-case suite
loads in a fraction of a second.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
from collections import namedtuple
from collections.abc import Iterable, Iterator
from hashlib import sha256

from oloproof._json import (
    MAX_JSON_DEPTH,
    JsonLimitError,
    canonical_json,
    check_depth,
    unseen_at,
)
from oloproof._records import dataclass
from oloproof.errors import ConfigError
from oloproof.project._files import read_bytes, utf8_bom
from oloproof.project._words import accepted_list

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple

CASE_KEYS = ("id", "input", "expected", "metadata")
_CASE_KEY_SET = frozenset(CASE_KEYS)
#: What a line of a suite may be, as a refusal says it.
ACCEPTED_LINE = (
    'JSON Lines, one object per line such as {"id": "case_1", "input": ...};'
    " not CSV, not a JSON array"
)

DEFAULT_MAX_SUITE_BYTES = 1 << 30
DEFAULT_MAX_LINE_BYTES = 16 << 20
SUITE_BYTES_ENV = "OLOPROOF_MAX_SUITE_BYTES"
LINE_BYTES_ENV = "OLOPROOF_MAX_SUITE_LINE_BYTES"


def _env_limit(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(
            f"expected a whole number of bytes, 1 or more, got {raw!r}", field=name
        )
    return value


def max_suite_bytes() -> int:
    """The largest suite file read (``OLOPROOF_MAX_SUITE_BYTES``, default 1 GiB)."""
    return _env_limit(SUITE_BYTES_ENV, DEFAULT_MAX_SUITE_BYTES)


def max_line_bytes() -> int:
    """The longest line of a suite (``OLOPROOF_MAX_SUITE_LINE_BYTES``, default 16 MiB)."""
    return _env_limit(LINE_BYTES_ENV, DEFAULT_MAX_LINE_BYTES)


# The type checker reads a NamedTuple; the interpreter gets the same named tuple from
# collections, without importing typing (docs/design-notes.md, "Imports: one rule"). A
# NamedTuple would also compile each of this module's string annotations (``from
# __future__ import annotations``) into a ForwardRef, and an unchanged rerun's first
# ``compile()`` builds Python's 111 AST classes (about 9.4 million instructions, 3% of the
# rerun; docs/performance.md).
if TYPE_CHECKING:

    class _CaseFields(NamedTuple):
        id: str
        input: Any
        expected: dict[str, Any] | None
        metadata: dict[str, Any] | None
        line: int

else:
    _CaseFields = namedtuple("_CaseFields", ("id", "input", "expected", "metadata", "line"))


class Case(_CaseFields):
    """One case of the suite (immutable; a named tuple, so that building
    100,000 of them costs next to nothing): ``id``, ``input``, ``expected``,
    ``metadata`` and ``line``, the line of the suite file it was read from (1-based)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """The case as it enters the suite digest (absent keys left out)."""
        out: dict[str, Any] = {"id": self.id, "input": self.input}
        if self.expected is not None:
            out["expected"] = self.expected
        if self.metadata is not None:
            out["metadata"] = self.metadata
        return out


@dataclass(slots=True, frozen=True)
class Suite:
    """The cases of one suite file, in file order, and their digest."""

    path: str
    cases: list[Case]
    digest: str

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON value (write null or a string)")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotJson(f"{text} is too large for a number (write it as a string)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__  # pragma: no cover - json yields nothing else


def load_suite(path: str | os.PathLike[str], display: str | None = None) -> Suite:
    """Read and check a JSON Lines suite; see the module docstring.

    ``display`` names the file in error messages (default: ``path`` as given).
    """
    path = os.fspath(path)
    shown = display if display is not None else str(path)
    limit = max_suite_bytes()
    data = read_bytes(path, shown, limit, what=f"suite (set {SUITE_BYTES_ENV} to raise it)")
    text = _decode(data, shown)
    del data  # the text is all that is read from now on: not both held through the lines
    # Building 100,000 small dicts would trigger many useless cyclic collections.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        hasher = sha256()
        cases = _check_lines(_lines(text, max_line_bytes()), shown, hasher)
    finally:
        if was_enabled:
            gc.enable()
    return Suite(path=path, cases=cases, digest=f"sha256:{hasher.hexdigest()}")


def _decode(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        at = exc.start + utf8_bom(data)  # the codec counts from after the mark
        line = data.count(b"\n", 0, at) + 1
        start = data.rfind(b"\n", 0, at) + 1
        raise ConfigError(
            f"not valid UTF-8 text (byte {at - start + 1} of the line); "
            "save the file as UTF-8",
            file=shown,
            line=line,
        ) from None


def _surrogate_field(obj: dict[str, Any]) -> str:
    """The first key of a case whose value (or key) holds a lone surrogate."""
    for key in CASE_KEYS:
        if key in obj:
            try:
                canonical_json(obj[key]).encode("utf-8")
            except UnicodeEncodeError:
                return key
    return "id"  # pragma: no cover - the caller saw the case fail to encode


def _repeated_key(raw: str) -> tuple[str, str] | None:
    """The first key written twice in one object of the line ``raw`` (already read once
    without error), and the path of that key in the case (``expected.label``), or None."""
    found: list[tuple[str, dict[str, Any]]] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) < len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    found.append((key, result))
                    break
                seen.add(key)
        return result

    top = json.JSONDecoder(
        parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=pairs_hook
    ).decode(raw)
    if not found:
        return None
    # Where each object that holds one is in the case: the first one still there is named
    # (an object can itself be the dropped value of a repeated key).
    paths: dict[int, str] = {}
    stack: list[tuple[Any, str]] = [(top, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            paths[id(value)] = path
            stack.extend((v, path + _path_part(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
    for key, holder in found:
        if id(holder) in paths:
            return key, paths[id(holder)] + _path_part(key)
    return found[0][0], ""


def _path_part(key: str) -> str:
    if key.isidentifier() and key.isprintable():
        return f".{key}"
    return f"[{key!r}]"


def _refuse_repeated_key(raw: str, number: int, error: Any) -> None:
    repeated = _repeated_key(raw)
    if repeated is not None:
        key, path = repeated
        raise error(
            f"the key {key!r} appears twice in one object (a JSON reader keeps only one "
            "of the values, silently); write each key once",
            number,
            path.lstrip(".") or None,
        )


def _lines(text: str, max_chars: int) -> Iterator[str | None]:
    """The lines of ``text`` split on ``\\n`` only, one at a time (no list of them all).

    A line of more than ``max_chars`` characters (so more bytes than that too) is None,
    never copied out of ``text``: a 200 MB line took 600 MB more to be refused."""
    start = 0
    find = text.find
    while True:
        end = find("\n", start)
        stop = len(text) if end == -1 else end
        if stop - start > max_chars:
            yield None
        else:
            yield text[start:stop]
        if end == -1:
            return
        start = end + 1


def _check_lines(lines: Iterable[str | None], shown: str, hasher: Any) -> list[Case]:
    """Check every line in turn, raising on the first problem; hash the cases.

    The digest hashes the canonical JSON of the list of cases (module
    docstring) a thousand cases at a time: "[", each case's canonical JSON
    with "," between them, "]" is the very text ``json.dumps`` makes of the
    list, without holding it (nor the list) whole.
    """

    def error(message: str, line: int, field: str | None = None, **kw: Any) -> ConfigError:
        return ConfigError(message, file=shown, line=line, field=field, **kw)

    def hash_pending() -> None:
        if pending:
            data = b",".join(pending)
            hasher.update(b"," + data if hashed else data)
            pending.clear()
            hashed.append(True)

    decode = _DECODER.decode
    keys = _CASE_KEY_SET
    pending: list[bytes] = []
    max_line = max_line_bytes()
    hashed: list[bool] = []  # not empty once a first group of cases is hashed
    hasher.update(b"[")
    cases: list[Case] = []
    first_line: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        # Characters, not bytes: a line is at most 4 bytes per character (None: more
        # characters than the limit has bytes, see _lines).
        if raw is None or (
                len(raw) > max_line // 4
                and len(raw.encode("utf-8", "surrogatepass")) > max_line):
            raise error(
                f"the line is longer than the limit of {max_line:,} bytes "
                f"(set {LINE_BYTES_ENV} to raise it)",
                number,
            )
        if not raw or raw.isspace():
            continue
        try:
            obj = decode(raw)
        except json.JSONDecodeError as exc:
            spread = ""
            if raw.strip() in ("[", "{"):
                spread = ("; the file looks like one JSON document written over several lines"
                          " (a pretty-printed array or object)")
            raise error(
                f"not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}"
                f"{unseen_at(raw, exc.pos)}{spread}",
                number,
                accepted=ACCEPTED_LINE,
            ) from None
        except _NotJson as exc:
            raise error(f"not valid JSON: {exc}", number) from None
        except RecursionError:
            raise error(f"nested deeper than {MAX_JSON_DEPTH} levels", number) from None
        except ValueError:
            # int() refuses to convert more than sys.get_int_max_str_digits() digits.
            raise error(
                f"a number is too long to read (more than {sys.get_int_max_str_digits():,} "
                "digits); write it as a string",
                number,
            ) from None
        try:
            # The one depth limit (oloproof._json): what is stored can be printed.
            check_depth(obj, text=raw)
        except JsonLimitError:
            raise error(f"nested deeper than {MAX_JSON_DEPTH} levels", number) from None
        if type(obj) is not dict:
            raise error(f"expected a JSON object, got {_kind(obj)}", number,
                        accepted=ACCEPTED_LINE)
        canonical = canonical_json(obj)
        # A key written twice in one object: the decoder keeps the last value, silently.
        # Each pair of the line has its colon, and so does the canonical text of what was
        # read, but for the pairs a repeated key dropped: fewer colons there (two C-level
        # counts) means a repeated key. A colon written as an escape (\u003a) could hide
        # one, so such a line is read again pair by pair. An object_pairs_hook on every
        # line would cost far more (docs/performance.md#suite-loading-a-key-written-twice).
        if canonical.count(":") < raw.count(":") or ("\\" in raw and "\\u003" in raw):
            _refuse_repeated_key(raw, number, error)
        if not obj.keys() <= keys:
            unknown = next(k for k in obj if k not in keys)
            shown_key = unknown.encode("utf-8", "backslashreplace").decode("utf-8")
            raise error(
                f"unknown key '{shown_key}'",
                number,
                shown_key,
                accepted=accepted_list(CASE_KEYS, unknown),
            )
        case_id = obj.get("id")
        if type(case_id) is not str or not case_id or case_id.isspace():
            if "id" not in obj:
                message = "required field is missing (every case needs a unique string id)"
            else:
                message = f"expected a non-empty string, got {_kind(case_id)}"
                if type(case_id) is str:
                    message = "expected a non-empty string, got an empty one"
            raise error(message, number, "id")
        if case_id in first_line:
            raise error(
                f"duplicate id '{case_id}' on lines {first_line[case_id]} and {number}; "
                "ids must be unique in the suite",
                number,
                "id",
            )
        first_line[case_id] = number
        if "input" not in obj:
            raise error(
                "required field is missing (use null for a case without input)", number, "input"
            )
        expected = obj.get("expected")
        if type(expected) is not dict and "expected" in obj:
            raise error(
                f"expected an object, got {_kind(expected)} "
                "(leave the key out when a case has no expected values)",
                number,
                "expected",
            )
        metadata = obj.get("metadata")
        if type(metadata) is not dict and "metadata" in obj:
            raise error(
                f"expected an object, got {_kind(metadata)} (leave the key out when empty)",
                number,
                "metadata",
            )
        try:
            encoded = canonical.encode("utf-8")
        except UnicodeEncodeError:
            field = _surrogate_field(obj)
            raise error(
                "holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape that is not "
                "half of a pair): it is not a character and cannot be stored; "
                "write the character itself, or a valid pair of escapes",
                number,
                field,
            ) from None
        cases.append(Case(case_id, obj["input"], expected, metadata, number))
        pending.append(encoded)
        if len(pending) == 1000:
            hash_pending()

    if not cases:
        raise ConfigError(
            "the suite has no cases (expected one JSON object per line, such as "
            '{"id": "case_1", "input": ...})',
            file=shown,
        )
    hash_pending()
    hasher.update(b"]")
    return cases
