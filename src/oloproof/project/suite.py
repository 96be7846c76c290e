"""The suite: one case per line of a JSON Lines file.

A line is one JSON object with these keys, and no others:

- ``id``: a non-empty string, unique in the file;
- ``input``: any JSON value (``null`` included, but the key must be there);
- ``expected``: optional, an object;
- ``metadata``: optional, an object.

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
metadata does, and so does reordering the cases. (A lone UTF-16 surrogate,
which only a ``\\udXXX`` escape can produce, is encoded with
``surrogatepass``.)

Validation is done by hand, not by pydantic, so that a 100,000-case suite
loads in a fraction of a second.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from oloproof._json import canonical_json
from oloproof.errors import ConfigError
from oloproof.project._errors import accepted_list
from oloproof.project._yaml import read_text

CASE_KEYS = ("id", "input", "expected", "metadata")
_CASE_KEY_SET = frozenset(CASE_KEYS)


class Case(NamedTuple):
    """One case of the suite (immutable; a named tuple, so that building
    100,000 of them costs next to nothing)."""

    id: str
    input: Any
    expected: dict[str, Any] | None
    metadata: dict[str, Any] | None
    line: int  # the line of the suite file it was read from (1-based)

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

    path: Path
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


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


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


def load_suite(path: Path | str, display: str | None = None) -> Suite:
    """Read and check a JSON Lines suite; see the module docstring.

    ``display`` names the file in error messages (default: ``path`` as given).
    """
    path = Path(path)
    shown = display if display is not None else str(path)
    text = read_text(path, shown)
    # Building 100,000 small dicts would trigger many useless cyclic collections.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        hasher = hashlib.sha256()
        cases = _check_lines(_lines(text), shown, hasher)
    finally:
        if was_enabled:
            gc.enable()
    return Suite(path=path, cases=cases, digest=f"sha256:{hasher.hexdigest()}")


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` split on ``\\n`` only, one at a time (no list of them all)."""
    start = 0
    find = text.find
    while True:
        end = find("\n", start)
        if end == -1:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


def _check_lines(lines: Iterable[str], shown: str, hasher: Any) -> list[Case]:
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
            text = ",".join(pending)
            hasher.update(("," + text if hashed else text).encode("utf-8", "surrogatepass"))
            pending.clear()
            hashed.append(True)

    decode = _DECODER.decode
    keys = _CASE_KEY_SET
    pending: list[str] = []
    hashed: list[bool] = []  # not empty once a first group of cases is hashed
    hasher.update(b"[")
    cases: list[Case] = []
    first_line: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        if not raw or raw.isspace():
            continue
        try:
            obj = decode(raw)
        except json.JSONDecodeError as exc:
            raise error(f"not valid JSON: {exc.msg} at column {exc.colno}", number) from None
        except _NotJson as exc:
            raise error(f"not valid JSON: {exc}", number) from None
        except RecursionError:
            raise error("not valid JSON: nested too deeply", number) from None
        if type(obj) is not dict:
            raise error(
                f'expected a JSON object such as {{"id": "case_1", "input": ...}}, '
                f"got {_kind(obj)}",
                number,
            )
        if not obj.keys() <= keys:
            unknown = next(k for k in obj if k not in keys)
            raise error(
                f"unknown key '{unknown}'",
                number,
                unknown,
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
        cases.append(Case(case_id, obj["input"], expected, metadata, number))
        pending.append(canonical_json(obj))
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
