"""JSON text and digests: the one low-level home for how values become text.

Everything that keys a cache (identities, execution and judgment keys), that
is stored (outputs, inputs, decisions) or that is read from the outside world
(HTTP bodies, judge replies) goes through here. It imports nothing of
Oloproof's, so every layer may use it.

Two guarantees matter for trust:

- :func:`storable` turns any text into text SQLite can store: a lone UTF-16
  surrogate (which Python strings can hold but UTF-8 cannot encode) becomes
  U+FFFD. The store writer applies it at its one boundary, so one bad row can
  never block a commit.
- :func:`loads_strict` reads JSON from outside with bounds: no ``NaN`` or
  ``Infinity``, no float that overflows to infinity, no integer longer than
  Python will convert, no nesting deeper than ``max_depth``, no object with a
  key twice. Each is a :class:`JsonLimitError` (a ``ValueError``), which the
  callers record as a per-case error.
"""

from __future__ import annotations

import json
import json.encoder
import math
import re
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "MAX_JSON_DEPTH",
    "JsonLimitError",
    "canonical_json",
    "check_depth",
    "compact_json",
    "depth_of",
    "digest",
    "digest_bytes",
    "loads_bounded",
    "loads_strict",
    "output_json",
    "output_snapshot",
    "reject_duplicate_keys",
    "storable",
    "unseen_at",
]

#: The deepest nesting of arrays and objects Oloproof reads, stores or prints anywhere:
#: a suite line, a labels line, a system's output, an HTTP body, a judge's reply, a
#: configuration snapshot, JSON read back from the store, and (in YAML) the project's
#: files. One limit, so that whatever one part accepts every other part can read and
#: print (a printer walks a value with a few Python frames per level, and Python's
#: recursion limit is about 1,000 frames).
MAX_JSON_DEPTH = 100
#: The default for an HTTP body (``limits.max_json_depth``, at most MAX_JSON_DEPTH).
DEFAULT_MAX_JSON_DEPTH = 64
_SURROGATE = "[\ud800-\udfff]"  # compiled (by `re`) when a text holds one


def _not_json(value: Any) -> Any:
    """What a value JSON cannot hold raises: ``TypeError`` naming its type with its module
    (NumPy 2 names its boolean ``bool``: 'Object of type bool is not JSON serializable' was
    said of an output holding ``numpy.bool_(True)``), and how to turn a NumPy value into one."""
    kind = type(value)
    module = kind.__module__
    name = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
    hint = (": a NumPy value, turn it into a Python one with .item() or .tolist()"
            if module.split(".")[0] == "numpy" else "")
    raise TypeError(f"Object of type {name} is not JSON serializable{hint}")


def _encoder(*, sort_keys: bool, allow_nan: bool) -> Callable[[Any], str]:
    """``json.dumps(obj, sort_keys=..., separators=(",", ":"), ensure_ascii=False)``, faster.

    A run encodes a few values per case, and ``json.dumps`` with options
    builds a new encoder on every call; this one is built once. Where the C
    encoder is available it is kept and called directly, without the circular
    reference check (a value that contains itself raises ``RecursionError``
    instead of ``ValueError``); the text is the same.
    """
    encoder = json.JSONEncoder(
        sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan,
        default=_not_json,
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has it
        return encoder.encode
    c_encode = make(
        None, _not_json, json.encoder.encode_basestring, None, ":", ",", sort_keys,
        False, allow_nan,
    )

    def encode(obj: Any) -> str:
        return "".join(c_encode(obj, 0))

    return encode


_canonical = _encoder(sort_keys=True, allow_nan=True)
# Outputs are checked strictly: NaN and Infinity are not JSON, so an output
# holding them is refused (ValueError) rather than stored as text no JSON
# reader accepts.
_canonical_strict = _encoder(sort_keys=True, allow_nan=False)
_compact = _encoder(sort_keys=False, allow_nan=True)
_compact_strict = _encoder(sort_keys=False, allow_nan=False)


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces: the same value always gives the same text.

    Raises ``ValueError`` for integers too long to print, ``TypeError`` for
    values JSON cannot hold, ``RecursionError`` for cycles.
    """
    return _canonical(obj)


def output_json(obj: Any) -> str:
    """:func:`canonical_json` that also refuses NaN and infinities (``ValueError``):
    the check every output of a system passes before it is judged or stored."""
    return _canonical_strict(obj)


def output_snapshot(obj: Any) -> tuple[Any, str]:
    """A system's output as it is now: a copy decoded from its JSON (keys in their own
    order), and the copy's :func:`output_json`.

    Taken where the output is returned, so that what is stored, what is judged and the
    text judgments are keyed on are one value, whatever the system does to the object
    afterwards (one it shares between calls) and whatever it claims to hold (a ``dict``
    subclass whose ``__getitem__`` lies). Refuses what :func:`output_json` refuses, and a
    key that JSON turns into one already there (``{1: "a", "1": "b"}``), as
    :class:`JsonLimitError`, a ``ValueError``.
    """
    copy = _snapshot_decoder.decode(_compact_strict(obj))
    return copy, _canonical_strict(copy)


def compact_json(obj: Any) -> str:
    """JSON with no spaces, keys in their own order: how values are stored."""
    return _compact(obj)


def digest(obj: Any) -> str:
    """``sha256:`` + the hex SHA-256 of the canonical JSON of ``obj``.

    A lone surrogate is hashed as its own code unit (``surrogatepass``), so a
    value that holds one still has one stable digest.
    """
    from hashlib import sha256  # OpenSSL's, loaded when a digest is first made (2.5 ms)

    text = _canonical(obj)
    return "sha256:" + sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def digest_bytes(data: bytes) -> str:
    from hashlib import sha256

    return "sha256:" + sha256(data).hexdigest()


def storable(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (valid UTF-8 from then on)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return re.sub(_SURROGATE, "\ufffd", text)
    return text


class JsonLimitError(ValueError):
    """JSON from outside that breaks one of :func:`loads_strict`'s bounds."""


def _no_constant(name: str) -> Any:
    raise JsonLimitError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonLimitError(f"the number {text[:40]} overflows a float")
    return value


def reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise JsonLimitError(f"the key {key!r} appears twice in one object")
        result[key] = value
    return result


# One decoder for every output snapshot: ``json.loads`` with a hook builds a new one per
# call, most of the time a small output's snapshot took.
_snapshot_decoder = json.JSONDecoder(object_pairs_hook=reject_duplicate_keys)


def depth_of(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def _opened(text: str | bytes) -> int:
    """How many arrays and objects ``text`` could open at most: a bound on its depth that
    costs two C-level counts, so that most values need no walk at all."""
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def check_depth(
    value: Any, *, max_depth: int = MAX_JSON_DEPTH, text: str | bytes | None = None
) -> None:
    """Raise :class:`JsonLimitError` when arrays and objects nest in ``value`` deeper than
    ``max_depth``. ``text``, the JSON ``value`` was read from or written as, lets most
    values pass without being walked."""
    if text is not None and _opened(text) <= max_depth:
        return
    if depth_of(value) > max_depth:
        raise JsonLimitError(f"nested deeper than {max_depth} levels")


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth``
    (:class:`JsonLimitError`) instead of reading it or failing with ``RecursionError``:
    how Oloproof reads back JSON it wrote itself (the store, the snapshots)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonLimitError(f"nested deeper than {max_depth} levels") from None
    check_depth(value, max_depth=max_depth, text=text)
    return value


def loads_strict(text: str | bytes, *, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> Any:
    """Parse JSON from outside within bounds, or raise :class:`JsonLimitError`.

    Plain syntax errors stay ``json.JSONDecodeError`` (also a ``ValueError``).
    """
    try:
        value = json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            object_pairs_hook=reject_duplicate_keys,
        )
    except RecursionError:
        raise JsonLimitError(f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        if isinstance(exc, (JsonLimitError, json.JSONDecodeError)):
            raise
        # int(): "Exceeds the limit (4300 digits) for integer string conversion".
        raise JsonLimitError(str(exc)) from None
    check_depth(value, max_depth=max_depth, text=text)
    return value


#: Names the Unicode database does not give.
_UNNAMED = {"\x00": "NUL", "\x09": "TAB", "\x0b": "VERTICAL TAB", "\x0c": "FORM FEED",
            "\x0d": "CARRIAGE RETURN", "\x1b": "ESCAPE", "\x7f": "DELETE",
            "\ufeff": "BYTE ORDER MARK"}


def unseen_at(text: str, pos: int) -> str:
    """``; it holds U+FEFF (BYTE ORDER MARK) there, which does not show: delete it`` when
    the character at ``pos`` (where a JSON decoder stopped) does not show in an editor (a
    control character, a byte order mark from files put together, a no-break space), else
    "": "Expecting value at column 1" alone sends the reader looking at a line that looks
    right."""
    if not 0 <= pos < len(text) or text[pos].isprintable():
        return ""
    import unicodedata

    char = text[pos]
    name = _UNNAMED.get(char) or unicodedata.name(char, "") or "a control character"
    return f"; it holds U+{ord(char):04X} ({name}) there, which does not show: delete it"
