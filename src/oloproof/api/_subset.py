"""Choosing part of a suite: ``--limit N`` (``--sample``, ``--seed``), ``--case ID``, ``--where``.

The filters apply in this order: ``--case`` (the named cases, in suite order), then every
``--where`` (all must hold), then ``--limit`` (the first N of what is left, or a seeded
random N with ``sample``; the chosen cases still run in suite order).

A ``--where`` expression is ``PATH OP VALUE``: PATH is ``id`` or a dotted path into
``metadata``, ``input`` or ``expected`` (``metadata.lang``, ``input.items.0``); OP is one of
``==  !=  <  <=  >  >=  in``; VALUE is JSON (``"fr"``, ``3``, ``true``, ``null``,
``["fr", "de"]``). Several ``--where`` hold together (and). A case without the path never
matches (except ``!=``, which it always matches).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from oloproof._json import JsonLimitError, loads_bounded
from oloproof._records import dataclass
from oloproof.errors import UsageError
from oloproof.paths import MISSING, lookup

if TYPE_CHECKING:
    from typing import Any

__all__ = ["SubsetSpec", "parse_shard", "parse_where", "shard_of"]

#: The most shards a suite may be cut into (--shard I/K).
MAX_SHARDS = 10_000

_WHERE = re.compile(
    r"^\s*(?P<path>id|(?:metadata|input|expected)(?:\.[^\s.=!<>]+)+)\s*"
    r"(?P<op>==|!=|<=|>=|<|>|\bin\b)\s*(?P<value>.+?)\s*$"
)
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


@dataclass(frozen=True)
class Where:
    """One parsed ``--where`` expression."""

    text: str
    root: str
    path: str | None
    op: str
    value: Any

    def matches(self, case_id: str, input_: Any, expected: Any, metadata: Any) -> bool:
        if self.root == "id":
            found: Any = case_id
        else:
            base = {"input": input_, "expected": expected, "metadata": metadata}[self.root]
            found = lookup(base, self.path) if base is not None else MISSING
        if found is MISSING:
            return self.op == "!="
        if self.op == "==":
            return _same(found, self.value)
        if self.op == "!=":
            return not _same(found, self.value)
        if self.op == "in":
            return any(_same(found, v) for v in self.value)
        try:
            return bool(_ORDER[self.op](found, self.value))
        except TypeError:
            return False


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def parse_where(text: str) -> Where:
    """Parse ``metadata.lang == "fr"``; a :class:`UsageError` says what is accepted."""
    accepted = (
        "accepted: PATH OP VALUE, where PATH is id or metadata.KEY / input.KEY / expected.KEY"
        " (dotted), OP is one of == != < <= > >= in, and VALUE is JSON, e.g."
        ' metadata.lang == "fr" or metadata.difficulty in ["easy", "medium"]'
    )
    m = _WHERE.match(text)
    if m is None:
        raise UsageError(f"--where {text!r}: cannot be read ({accepted})")
    raw = m.group("value")
    try:
        value = loads_bounded(raw)
    except JsonLimitError as exc:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise UsageError(f"--where {shown!r}: the value is {exc}") from None
    except ValueError:
        raise UsageError(
            f"--where {text!r}: the value {raw!r} is not JSON (strings need double quotes;"
            f" {accepted})"
        ) from None
    op = m.group("op")
    if op == "in" and not isinstance(value, list):
        raise UsageError(f"--where {text!r}: 'in' needs a JSON list, e.g. [\"fr\", \"de\"]")
    if op in _ORDER and (isinstance(value, bool) or not isinstance(value, int | float | str)):
        raise UsageError(f"--where {text!r}: {op} compares numbers or strings")
    root, _, path = m.group("path").partition(".")
    return Where(text.strip(), root, path or None, op, value)


@dataclass(frozen=True)
class SubsetSpec:
    """What part of the suite to run; empty (``is_whole``) means all of it."""

    limit: int | None = None
    sample: bool = False
    seed: int | None = None
    case_ids: tuple[str, ...] = ()
    where: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1
        ):
            raise UsageError(f"limit: expected a whole number of cases, 1 or more, got {self.limit!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise UsageError(f"seed: expected a whole number, got {self.seed!r}")
        if self.sample and self.limit is None:
            raise UsageError("sample: a random sample needs its size: pass limit=N (--limit N)")
        if self.seed is not None and not self.sample:
            raise UsageError("seed: applies to a random sample only (--sample --limit N --seed S)")

    @property
    def is_whole(self) -> bool:
        return self.limit is None and not self.case_ids and not self.where

    def select(self, cases: Sequence[Any]) -> list[int]:
        """The indices of the chosen cases, in suite order (``cases`` have ``id``,
        ``input``, ``expected``, ``metadata``)."""
        chosen = list(range(len(cases)))
        if self.case_ids:
            index = {c.id: i for i, c in enumerate(cases)}
            unknown = [cid for cid in self.case_ids if cid not in index]
            if unknown:
                shown = ", ".join(repr(u) for u in unknown[:5])
                raise UsageError(
                    f"--case: no such case in the suite: {shown}"
                    f"{' …' if len(unknown) > 5 else ''} (ids are the suite's 'id' fields)"
                )
            wanted = {index[cid] for cid in self.case_ids}
            chosen = [i for i in chosen if i in wanted]
        for text in self.where:
            where = parse_where(text)
            chosen = [
                i for i in chosen
                if where.matches(cases[i].id, cases[i].input, cases[i].expected, cases[i].metadata)
            ]
        if self.limit is not None and self.limit < len(chosen):
            if self.sample:
                import random

                rng = random.Random(self.seed)
                chosen = sorted(rng.sample(chosen, self.limit))
            else:
                chosen = chosen[: self.limit]
        if not chosen:
            raise UsageError(
                "the subset is empty: no case of the suite matches"
                f" {' and '.join(self.where) or 'the --case ids'}"
            )
        return chosen


# -- shards (--shard I/K) ---------------------------------------------------------------


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` as ``(2, 4)``: shard I of K, numbered from 1; a :class:`UsageError` naming
    what is accepted otherwise."""
    accepted = (
        f"accepted: I/K with whole numbers 1 <= I <= K <= {MAX_SHARDS:,}, e.g. --shard 1/4"
        " ... --shard 4/4 (shards are numbered from 1)"
    )
    # ASCII digits only: str.isdigit() let '²' through to int(), an internal error (exit
    # 70), and '١/٣' read as 1/3; a number of 5,000 digits was int()'s ValueError too.
    m = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)
    shown = repr(text if len(text) <= 80 else text[:77] + "...")
    if m is None:
        raise UsageError(f"--shard {shown}: cannot be read ({accepted})")
    index, count = (_whole(g) for g in m.groups())
    if count < 1 or count > MAX_SHARDS:
        raise UsageError(f"--shard {shown}: K must be from 1 to {MAX_SHARDS:,} ({accepted})")
    if not 1 <= index <= count:
        raise UsageError(f"--shard {shown}: I must be from 1 to {count} ({accepted})")
    return index, count


def _whole(digits: str) -> int:
    """ASCII digits as a number; past 18 digits, one larger than any shard count."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else 10**18


def shard_of(case_id: str, count: int) -> int:
    """The shard (1 to ``count``) that case ``case_id`` belongs to.

    The 64 first bits of the SHA-256 of the id, through Lamping and Veach's jump consistent
    hash ("A Fast, Minimal Memory, Consistent Hash Algorithm", 2014): a case's shard depends
    on its id and ``count`` only, so adding or removing cases moves no other case, and going
    from K to K + 1 shards moves about 1/(K + 1) of the cases (each to the new shard)."""
    from hashlib import sha256

    key = int.from_bytes(sha256(case_id.encode("utf-8", "surrogatepass")).digest()[:8], "big")
    bucket, jump = -1, 0
    while jump < count:
        bucket = jump
        key = (key * 2862933555777941757 + 1) & 0xFFFFFFFFFFFFFFFF
        jump = int((bucket + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return bucket + 1
