"""Building a judge provider by name: the one module that knows every wire format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from oloproof.errors import ConfigError
from oloproof.providers.anthropic import AnthropicProvider
from oloproof.providers.base import PROVIDERS, Provider, resolve_api_key
from oloproof.providers.openai import OpenAIProvider
from oloproof.transport.http import DEFAULT_MAX_RESPONSE_BYTES

__all__ = ["make_provider", "make_provider_from_config"]


def make_provider(
    provider: str,
    model: str,
    api_key: str | None,
    base_url: str | None,
    temperature: float | None,
    max_tokens: int | None,
    timeout_s: float,
    client: httpx.AsyncClient,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    *,
    max_completion_tokens: int | None = None,
    extra_body: dict[str, Any] | None = None,
    what: str | None = None,
) -> Provider:
    """The provider for ``provider`` (``anthropic``, ``openai``, ``openai_compatible``).

    ``base_url``: for ``anthropic`` the host part (default
    ``https://api.anthropic.com``; ``/v1/messages`` is appended); for
    ``openai`` and ``openai_compatible`` it includes ``/v1`` as the OpenAI SDK's
    does (default ``https://api.openai.com/v1``; required for
    ``openai_compatible``). ``temperature``, ``max_tokens`` and
    ``max_completion_tokens`` are left out of the request when None (the
    Anthropic API requires ``max_tokens``).
    """
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
        if not api_key:
            raise ConfigError(
                "the anthropic judge needs an API key", field="evaluators.api_key_env"
            )
        if max_tokens is None:
            raise ConfigError(
                "the anthropic Messages API requires max_tokens", field="evaluators.max_tokens"
            )
        return AnthropicProvider(
            model=model,
            api_key=api_key,
            base_url=base_url,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            client=client,
            max_response_bytes=max_response_bytes,
            extra_body=extra_body,
            what=what,
        )
    if provider in ("openai", "openai_compatible"):
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
            max_response_bytes=max_response_bytes,
            name=provider,
            max_completion_tokens=max_completion_tokens,
            extra_body=extra_body,
            what=what,
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
    if hasattr(judge, "request_temperature"):  # a RubricJudgeEvaluator: its own defaults
        temperature = judge.request_temperature
        max_tokens = judge.request_max_tokens
    else:
        temperature = getattr(judge, "temperature", None)
        max_tokens = getattr(judge, "max_tokens", None)
        temperature = 0.0 if temperature is None else float(temperature)
        max_tokens = 512 if max_tokens is None else int(max_tokens)
    timeout_s = getattr(judge, "timeout_s", None)
    return make_provider(
        provider,
        str(judge.model),
        api_key,
        getattr(judge, "base_url", None),
        temperature,
        max_tokens,
        60.0 if timeout_s is None else float(timeout_s),
        client,
        max_completion_tokens=getattr(judge, "max_completion_tokens", None),
        extra_body=getattr(judge, "extra_body", None),
    )
