"""LLM judge providers: one wire format per module, over one shared httpx client.

``anthropic`` (Messages API), ``openai`` and ``openai_compatible`` (Chat
Completions). :func:`make_provider` picks one; :mod:`.verdict` builds the
judge's prompt and reads its ``{"pass": ..., "reason": ...}`` answer.
"""

from __future__ import annotations

from oloproof.providers.base import (
    DEFAULT_API_KEY_ENV,
    PROVIDERS,
    JudgeReply,
    Provider,
    make_judge_client,
    resolve_api_key,
)
from oloproof.providers.factory import make_provider, make_provider_from_config
from oloproof.providers.verdict import (
    PROMPT_VERSION,
    Verdict,
    VerdictError,
    build_judge_prompt,
    parse_verdict,
)

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "PROMPT_VERSION",
    "PROVIDERS",
    "JudgeReply",
    "Provider",
    "Verdict",
    "VerdictError",
    "build_judge_prompt",
    "make_judge_client",
    "make_provider",
    "make_provider_from_config",
    "parse_verdict",
    "resolve_api_key",
]
