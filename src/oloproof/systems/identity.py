"""Identities: digests that key the caches.

A system's identity is a digest of what defines its answers (SPEC §2): kind,
name, declared version, and for a callable the source of its module and the
content of every ``code_paths`` file. Concurrency, timeouts and environment
values never enter it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces: the same value always gives the same text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any) -> str:
    """``sha256:`` + the hex SHA-256 of the canonical JSON of ``obj``."""
    return "sha256:" + hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def digest_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
