"""What the rubric judge needs of an LLM provider, and how to get one.

A :class:`Provider` answers one prompt pair per call (ONE attempt): it raises
:class:`~oloproof.engine.retry.RetryableFailure` for 429, 5xx, timeouts and
dropped connections (honouring ``Retry-After``) and
:class:`~oloproof.engine.retry.PermanentFailure` for other 4xx and malformed
replies. The engine wraps it with
:func:`~oloproof.engine.retry.call_with_retries`, as it does a system.

All judges of a run share one ``httpx.AsyncClient`` (:func:`make_judge_client`)
sized to ``concurrency.judge``; each provider passes its own ``timeout_s`` per
request. The API key lives in a private attribute: it is sent in a header and
appears in no message, ``repr`` or log line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from oloproof.engine.retry import PermanentFailure
from oloproof.errors import ConfigError
from oloproof.usage import Usage

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "PROVIDERS",
    "JudgeReply",
    "Provider",
    "make_judge_client",
    "make_provider",
    "make_provider_from_config",
    "resolve_api_key",
]

PROVIDERS = ("anthropic", "openai", "openai_compatible")

# The variable read when a judge does not name ``api_key_env``.
DEFAULT_API_KEY_ENV: dict[str, str | None] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openai_compatible": None,
}


@dataclass
class JudgeReply:
    """What a provider answered: its text, the tokens it reported, the model it named."""

    text: str
    usage: Usage | None
    raw_model: str | None


class Provider(Protocol):
    """One LLM behind one wire format; ``complete`` makes ONE attempt."""

    name: str
    model: str

    async def complete(self, system_prompt: str, user_prompt: str) -> JudgeReply: ...


def make_judge_client(concurrency: int = 4) -> httpx.AsyncClient:
    """The one pooled client all judges of a run share: ``concurrency.judge`` connections.

    Timeouts are set per request by each provider (its ``timeout_s``). Close it
    with ``await client.aclose()`` when the run ends.
    """
    if concurrency < 1:
        raise ConfigError("must be at least 1", field="concurrency.judge")
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(limits=limits, headers={"user-agent": "oloproof"})


def resolve_api_key(
    provider: str,
    api_key_env: str | None,
    environ: Mapping[str, str] | None = None,
    *,
    field: str = "evaluators.api_key_env",
) -> str | None:
    """Read the judge's API key from the environment, before the run starts.

    ``api_key_env`` defaults to ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``;
    ``openai_compatible`` without ``api_key_env`` sends no key (local servers).
    A named variable that is not set raises :class:`ConfigError` naming it.
    """
    env = os.environ if environ is None else environ
    name = api_key_env or DEFAULT_API_KEY_ENV.get(provider)
    if name is None:
        return None
    value = env.get(name)
    if not value:
        raise ConfigError(
            f"environment variable {name} is not set: the {provider} judge needs an API key",
            field=field,
            accepted=f"export {name}=... before the run, or name another variable",
        )
    return value


def make_provider(
    provider: str,
    model: str,
    api_key: str | None,
    base_url: str | None,
    temperature: float,
    max_tokens: int,
    timeout_s: float,
    client: httpx.AsyncClient,
) -> Provider:
    """The provider for ``provider`` (``anthropic``, ``openai``, ``openai_compatible``).

    ``base_url``: for ``anthropic`` the host part (default
    ``https://api.anthropic.com``; ``/v1/messages`` is appended); for
    ``openai`` and ``openai_compatible`` it includes ``/v1`` as the OpenAI SDK's
    does (default ``https://api.openai.com/v1``; required for
    ``openai_compatible``).
    """
    # Imported here: each wire format is its own module, loaded when used.
    if api_key is not None and (
        not api_key.isascii() or any(ch.isspace() or ch == "\0" for ch in api_key)
    ):
        # httpx would refuse the header later, and an error might quote it.
        raise ConfigError(
            "the API key must be ASCII without spaces or line breaks",
            field="evaluators.api_key_env",
        )
    if not model:
        raise ConfigError("a judge needs a model", field="evaluators.model")
    if provider == "anthropic":
        from oloproof.providers.anthropic import AnthropicProvider

        if not api_key:
            raise ConfigError(
                "the anthropic judge needs an API key", field="evaluators.api_key_env"
            )
        return AnthropicProvider(
            model=model,
            api_key=api_key,
            base_url=base_url,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            client=client,
        )
    if provider in ("openai", "openai_compatible"):
        from oloproof.providers.openai import OpenAIProvider

        if provider == "openai" and not api_key:
            raise ConfigError("the openai judge needs an API key", field="evaluators.api_key_env")
        if provider == "openai_compatible" and not base_url:
            raise ConfigError(
                "openai_compatible needs a base_url",
                field="evaluators.base_url",
                accepted="the server's URL up to and including /v1, e.g. http://localhost:8000/v1",
            )
        return OpenAIProvider(
            model=model,
            api_key=api_key,
            base_url=base_url,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            client=client,
            name=provider,
        )
    raise ConfigError(
        f"unknown provider {provider!r}",
        field="evaluators.provider",
        accepted=", ".join(PROVIDERS),
    )


def make_provider_from_config(
    judge: Any,
    client: httpx.AsyncClient,
    environ: Mapping[str, str] | None = None,
    *,
    field_prefix: str = "evaluators",
) -> Provider:
    """Build from a ``rubric_judge`` evaluator config (duck-typed).

    Reads ``provider, model, api_key_env, base_url, temperature, max_tokens,
    timeout_s``; the key is read from the environment here, so a missing one
    stops the run before its first case.
    """
    provider = str(judge.provider)
    api_key = resolve_api_key(
        provider,
        getattr(judge, "api_key_env", None),
        environ,
        field=f"{field_prefix}.api_key_env",
    )
    temperature = getattr(judge, "temperature", None)
    max_tokens = getattr(judge, "max_tokens", None)
    timeout_s = getattr(judge, "timeout_s", None)
    return make_provider(
        provider,
        str(judge.model),
        api_key,
        getattr(judge, "base_url", None),
        0.0 if temperature is None else float(temperature),
        512 if max_tokens is None else int(max_tokens),
        60.0 if timeout_s is None else float(timeout_s),
        client,
    )


def reply_field(data: Any, *keys: str | int) -> Any:
    """``data[k1][k2]...`` or ``None`` where the shape does not match."""
    current = data
    for key in keys:
        if isinstance(key, int):
            if not isinstance(current, list) or not -len(current) <= key < len(current):
                return None
            current = current[key]
        elif isinstance(current, dict):
            current = current.get(key)
        else:
            return None
    return current


def malformed(what: str, detail: str) -> PermanentFailure:
    return PermanentFailure(f"{what}: malformed reply: {detail}")
