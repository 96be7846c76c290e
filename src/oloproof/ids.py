"""Identifiers of runs and comparisons: a prefix and a ULID.

A ULID (https://github.com/ulid/spec) is 128 bits: a 48-bit Unix time in
milliseconds, then 80 random bits, written as 26 characters of Crockford's
base32 (``0-9A-Z`` without ``I L O U``). Ids made in a later millisecond
sort after earlier ones, as text too. Written here rather than imported: it
is a dozen lines, and a dependency would cost start-up time.
"""

from __future__ import annotations

import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(timestamp_ms: int | None = None, randomness: bytes | None = None) -> str:
    """A new ULID: 10 characters of time, then 16 of randomness (26 in all)."""
    ms = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
    if not 0 <= ms < 1 << 48:
        raise ValueError("a ULID's time must fit in 48 bits of milliseconds")
    rand = os.urandom(10) if randomness is None else randomness
    if len(rand) != 10:
        raise ValueError("a ULID's randomness is 80 bits (10 bytes)")
    value = (ms << 80) | int.from_bytes(rand, "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_run_id() -> str:
    """``run_`` + a ULID."""
    return "run_" + ulid()


def new_matrix_id() -> str:
    """``mx_`` + a ULID: a matrix of variants (``run --matrix``)."""
    return "mx_" + ulid()


def new_comparison_id() -> str:
    """``cmp_`` + a ULID."""
    return "cmp_" + ulid()
