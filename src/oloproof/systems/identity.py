"""Identities: digests that key the caches.

A system's identity is a digest of what defines its answers (SPEC §2): kind,
name, declared version, and for a callable the source of its module (and of
the module that defines the function, when it is imported from another:
systems/loading.py ``defining_files``) and the content of every ``code_paths`` file. Concurrency, timeouts and environment
values never enter it.

The JSON and hash helpers themselves live in :mod:`oloproof._json` (a low
layer that the store and the project loader may import); they are re-exported
here for the callers that still name this module.
"""

from __future__ import annotations

from oloproof._json import canonical_json, compact_json, digest, digest_bytes

__all__ = ["canonical_json", "compact_json", "digest", "digest_bytes"]
