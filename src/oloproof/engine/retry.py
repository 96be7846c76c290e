"""Moved to :mod:`oloproof.transport.retry` (a layer below systems, providers and
evaluators, which all use it); re-exported here for older imports."""

from __future__ import annotations

from oloproof.transport.retry import (
    Attempted,
    AttemptFailure,
    PermanentFailure,
    RetryableFailure,
    RetryPolicy,
    call_with_retries,
    parse_retry_after,
)

__all__ = [
    "AttemptFailure",
    "Attempted",
    "PermanentFailure",
    "RetryPolicy",
    "RetryableFailure",
    "call_with_retries",
    "parse_retry_after",
]
