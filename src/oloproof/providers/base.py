"""What the rubric judge needs of an LLM provider, and how to get one.

A :class:`Provider` answers one prompt pair per call (ONE attempt): it raises
:class:`~oloproof.transport.retry.RetryableFailure` for 429, 5xx, timeouts and
dropped connections (honouring ``Retry-After``) and
:class:`~oloproof.transport.retry.PermanentFailure` for other 4xx and malformed
replies. A 200 whose body is an error fails as the status it names
(:func:`~oloproof.transport.http.error_body_failure`). The judge wraps it with
:func:`~oloproof.transport.retry.call_with_retries`, as the engine does a system.

This module names no provider class: :mod:`oloproof.providers.factory` builds
one by name (so the base never imports its own subclasses).

All judges of a run share one ``httpx.AsyncClient`` (:func:`make_judge_client`)
sized to ``concurrency.judge``; each provider passes its own ``timeout_s`` per
request. The API key lives in a private attribute: it is sent in a header and
appears in no message, ``repr`` or log line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import httpx

from oloproof._records import dataclass
from oloproof.errors import ConfigError
from oloproof.transport.retry import AttemptFailure, PermanentFailure
from oloproof.usage import Usage

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "PROVIDERS",
    "JudgeReply",
    "Provider",
    "UnsupportedParameter",
    "as_refusal",
    "make_judge_client",
    "refused_parameter",
    "resolve_api_key",
    "send_refusing_parameters",
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
    """What a provider answered: its text, the tokens it reported, the model it named.

    ``stop`` is why the model stopped, as the provider says it (OpenAI's
    ``finish_reason``, Anthropic's ``stop_reason``); ``refusal`` the text of a refusal
    given instead of an answer (OpenAI's ``message.refusal``); ``textless`` that the reply
    held no text at all (a null content, only tool calls or thinking blocks).
    """

    text: str
    usage: Usage | None
    raw_model: str | None
    stop: str | None = None
    refusal: str | None = None
    textless: bool = False

    @property
    def cut(self) -> str | None:
        """Why the provider stopped the reply before the model ended it, if it says so (at
        the output limit, by a content filter, or a refusal midway), else None: a judge
        never reads a verdict from such a reply."""
        if self.stop in CUT_STOPS:
            return f'stop reason "{self.stop}"'
        return None


#: The stop reasons (OpenAI's ``finish_reason``, Anthropic's ``stop_reason``) of a reply
#: the provider stopped before the model ended it: Anthropic's ``pause_turn`` (a long turn
#: paused, to be continued) and ``model_context_window_exceeded`` too.
CUT_STOPS = frozenset({"length", "content_filter", "max_tokens", "refusal", "pause_turn",
                       "model_context_window_exceeded"})


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
    who: str = "judge",
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
            f"environment variable {name} is not set: the {provider} {who} needs an API key",
            field=field,
            accepted=f"export {name}=... before the run, or name another variable",
        )
    return value


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


class UnsupportedParameter(PermanentFailure):
    """The provider refused a parameter of the request (HTTP 400 naming it).

    Every later call would be refused the same way, so it stops the run; the judge
    turns :attr:`parameter` into the config field to change.
    """

    def __init__(self, message: str, parameter: str, provider_says: str = "") -> None:
        super().__init__(message, stops_run=True)
        self.parameter = parameter
        self.provider_says = provider_says


# What providers say when they refuse a parameter (OpenAI's "Unsupported parameter:
# 'max_tokens' ..." and "Unsupported value: 'temperature' ...", pydantic-style "x: Extra
# inputs are not permitted", Anthropic's "temperature may only be set to 1 when thinking
# is enabled"...). Matched only against the names the request sent.
_REFUSAL = re.compile(
    r"unsupported|not supported|does not support|not permitted|not allowed|"
    r"unrecognized|unknown (?:field|parameter|argument)|may only be set|"
    r"cannot be used|is not compatible|extra inputs|invalid parameter",
    re.IGNORECASE,
)


def _error_fields(body: str) -> tuple[str, str | None, str | None]:
    """``(message, param, code)`` of a provider's JSON error body (or the raw text)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body, None, None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return body, None, None
    message = error.get("message")
    param = error.get("param")
    code = error.get("code")
    return (
        message if isinstance(message, str) else body,
        param if isinstance(param, str) else None,
        code if isinstance(code, str) else None,
    )


def refused_parameter(failure: AttemptFailure, sent: Iterable[str]) -> str | None:
    """The parameter a 400 says the provider does not accept, among those ``sent``."""
    if failure.status != 400 or failure.body is None:
        return None
    message, param, code = _error_fields(failure.body)
    names = sorted(set(sent), key=len, reverse=True)
    if param is not None and code in ("unsupported_parameter", "unsupported_value"):
        top = param.split(".")[0].split("[")[0]
        if top in names:
            return top
    if not _REFUSAL.search(message):
        return None
    for name in names:
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message):
            return name
    return None


def as_refusal(
    failure: AttemptFailure, body: Mapping[str, Any], what: str, *, in_200: bool = False
) -> AttemptFailure:
    """``failure``, or the :class:`UnsupportedParameter` it is when it is a 400 (sent as the
    status, or named by a 200's error body: ``in_200``) refusing one of ``body``'s
    fields."""
    name = refused_parameter(failure, [k for k in body if k not in ("model", "messages")])
    if name is None:
        return failure
    message, _, _ = _error_fields(failure.body or "")
    flat = " ".join(message.split())[:200]
    return UnsupportedParameter(
        f"{what} refuses the parameter '{name}'", name,
        f"{'HTTP 200 naming a 400' if in_200 else 'HTTP 400'}: {flat}",
    )


async def send_refusing_parameters(
    send: Any, body: Mapping[str, Any], what: str
) -> Any:
    """``await send()``; a 400 that refuses one of ``body``'s fields becomes an
    :class:`UnsupportedParameter` naming it."""
    try:
        return await send()
    except PermanentFailure as failure:
        refusal = as_refusal(failure, body, what)
        if refusal is failure:
            raise
        raise refusal from None
