"""SHA-256 without importing OpenSSL for small inputs.

``import hashlib`` loads OpenSSL's libcrypto, about 2.5 ms of every command's start-up
(issue 16), while almost everything Oloproof hashes is small: cache keys, identities,
configuration files. CPython's own SHA-256 (``_sha256``, ``_sha2`` from 3.12) needs no
library and gives the same digest; it is slower on large inputs (about 165 ms against
29 ms for 50 MiB here), so a caller hashing something large (a suite's file) asks for
OpenSSL's with ``large=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from hashlib import _Hash


def _builtin_sha256() -> Callable[[bytes], _Hash] | None:
    for name in ("_sha256", "_sha2"):  # CPython 3.11; 3.12 and later
        try:
            found: Callable[[bytes], _Hash] = getattr(__import__(name), "sha256")  # noqa: B009
        except (ImportError, AttributeError):
            continue
        return found
    return None  # a build without them: OpenSSL's, always


_builtin = _builtin_sha256()

__all__ = ["LARGE", "sha256"]

#: From this size on, OpenSSL's implementation is worth its import.
LARGE = 1 << 20


def sha256(data: bytes = b"", *, large: bool = False) -> _Hash:
    """A SHA-256 hash object holding ``data`` (``large``: more is coming, or it is big)."""
    if large or _builtin is None or len(data) >= LARGE:
        import hashlib

        return hashlib.sha256(data)
    return _builtin(data)
