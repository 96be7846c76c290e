"""Anthropic's Messages API (``POST /v1/messages``) as a judge provider."""

from __future__ import annotations

from typing import Any

import httpx

from oloproof.providers.base import (
    JudgeReply,
    as_refusal,
    malformed,
    reply_field,
    send_refusing_parameters,
)
from oloproof.transport.http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    error_body_failure,
    parse_json_response,
    send_attempt,
)
from oloproof.usage import Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicProvider:
    """Claude models through the Messages API.

    ``base_url`` is the host part (``https://api.anthropic.com``);
    ``/v1/messages`` is appended. The reply text is the concatenation of the
    reply's ``text`` content blocks (a reasoning model's ``thinking`` blocks are
    left out). ``temperature`` None leaves it out of the request (extended
    thinking refuses any but the default); ``extra_body`` fields are added to
    the request body.
    """

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None,
        temperature: float | None,
        max_tokens: int,
        timeout_s: float,
        client: httpx.AsyncClient,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        extra_body: dict[str, Any] | None = None,
        what: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = self.base_url + "/v1/messages"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self.timeout_s = timeout_s
        self._client = client
        self.max_response_bytes = max_response_bytes
        self._api_key = api_key
        self._what = what or f"anthropic judge ({model})"

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, url={self.url!r})"

    def request_body(self, system_prompt: str, user_prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(self.extra_body)
        if system_prompt:  # a model system without a system prompt sends none
            body["system"] = system_prompt
        body["messages"] = [{"role": "user", "content": user_prompt}]
        return body

    async def complete(self, system_prompt: str, user_prompt: str) -> JudgeReply:
        secrets = (self._api_key,)
        body = self.request_body(system_prompt, user_prompt)
        response = await send_refusing_parameters(
            lambda: send_attempt(
                self._client,
                "POST",
                self.url,
                what=self._what,
                timeout_s=self.timeout_s,
                headers={
                    "x-api-key": self._api_key,
                    "anthropic-version": ANTHROPIC_VERSION,
                    "content-type": "application/json",
                },
                json_body=body,
                secrets=secrets,
                max_bytes=self.max_response_bytes,
            ),
            body,
            self._what,
        )
        data = parse_json_response(response, secrets, self._what)
        # A gateway's 200 carrying an error ({"error": {"code": 429, ...}}, or Anthropic's own
        # {"type": "error", ...}) fails as the status it names (a rate limit or a server
        # error is retried), also beside content: a reply that says it failed is not read.
        failure = error_body_failure(response, data, secrets, self._what, provider=True)
        if failure is not None:
            raise as_refusal(failure, body, self._what, in_200=True)  # as a real 400
        blocks = reply_field(data, "content")
        if not isinstance(blocks, list):
            raise malformed(self._what, "no 'content' list in the response")
        texts = [
            block["text"]
            for block in blocks
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        model = reply_field(data, "model")
        stop = reply_field(data, "stop_reason")
        return JudgeReply(
            text="".join(texts),
            usage=Usage.from_report(reply_field(data, "usage")),
            raw_model=model if isinstance(model, str) else None,
            stop=stop if isinstance(stop, str) else None,
            textless=not texts,
        )
