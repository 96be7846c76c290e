"""Identities: digests that key the caches.

A system's identity is a digest of what defines its answers (SPEC §2): kind,
name, declared version, and for a callable the source of its module and the
content of every ``code_paths`` file. Concurrency, timeouts and environment
values never enter it.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
from collections.abc import Callable
from typing import Any


def _encoder(*, sort_keys: bool) -> Callable[[Any], str]:
    """``json.dumps(obj, sort_keys=..., separators=(",", ":"), ensure_ascii=False)``, faster.

    A run encodes a few values per case, and ``json.dumps`` with options
    builds a new encoder on every call; this one is built once. Where the C
    encoder is available it is kept and called directly, without the circular
    reference check (a value that contains itself raises ``RecursionError``
    instead of ``ValueError``); the text is the same.
    """
    encoder = json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has it
        return encoder.encode
    c_encode = make(
        None, encoder.default, json.encoder.encode_basestring, None, ":", ",", sort_keys,
        False, True,
    )

    def encode(obj: Any) -> str:
        return "".join(c_encode(obj, 0))

    return encode


_canonical = _encoder(sort_keys=True)
_compact = _encoder(sort_keys=False)


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces: the same value always gives the same text."""
    return _canonical(obj)


def compact_json(obj: Any) -> str:
    """JSON with no spaces, keys in their own order: how values are stored."""
    return _compact(obj)


def digest(obj: Any) -> str:
    """``sha256:`` + the hex SHA-256 of the canonical JSON of ``obj``."""
    return "sha256:" + hashlib.sha256(_canonical(obj).encode("utf-8")).hexdigest()


def digest_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
