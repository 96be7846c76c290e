"""OpenAI's Chat Completions API (``POST {base_url}/chat/completions``) as a judge provider.

The same class serves ``openai_compatible`` servers (vLLM, llama.cpp, Ollama,
LiteLLM...), whose ``base_url`` includes ``/v1`` as the OpenAI SDK's does.
"""

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
    error_of_body,
    parse_json_response,
    send_attempt,
)
from oloproof.usage import Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The finish reasons of a reply the server failed to finish: a server error, retried.
_FAILED = ("error", "abort")


class OpenAIProvider:
    """Chat models through Chat Completions; the reply is ``choices[0].message.content``.

    ``temperature``, ``max_tokens`` and ``max_completion_tokens`` are sent only when not
    None: OpenAI's reasoning models refuse ``max_tokens`` and any temperature but the
    default. ``extra_body`` fields (``reasoning_effort``...) are added to the body.
    """

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None,
        base_url: str | None,
        temperature: float | None,
        max_tokens: int | None,
        timeout_s: float,
        client: httpx.AsyncClient,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        name: str = "openai",
        max_completion_tokens: int | None = None,
        extra_body: dict[str, Any] | None = None,
        what: str | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_completion_tokens = max_completion_tokens
        self.extra_body = dict(extra_body or {})
        self.timeout_s = timeout_s
        self._client = client
        self.max_response_bytes = max_response_bytes
        self._api_key = api_key
        self._what = what or f"{name} judge ({model})"

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self.name!r}, model={self.model!r}, url={self.url!r})"

    def request_body(self, system_prompt: str, user_prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model}
        for name, value in (
            ("temperature", self.temperature),
            ("max_tokens", self.max_tokens),
            ("max_completion_tokens", self.max_completion_tokens),
        ):
            if value is not None:
                body[name] = value
        body.update(self.extra_body)
        # A model system without a system prompt sends the user's message alone.
        body["messages"] = [
            *([{"role": "system", "content": system_prompt}] if system_prompt else []),
            {"role": "user", "content": user_prompt},
        ]
        return body

    async def complete(self, system_prompt: str, user_prompt: str) -> JudgeReply:
        headers = {"content-type": "application/json"}
        secrets: tuple[str, ...] = ()
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
            secrets = (self._api_key,)
        body = self.request_body(system_prompt, user_prompt)
        response = await send_refusing_parameters(
            lambda: send_attempt(
                self._client,
                "POST",
                self.url,
                what=self._what,
                timeout_s=self.timeout_s,
                headers=headers,
                json_body=body,
                secrets=secrets,
                max_bytes=self.max_response_bytes,
            ),
            body,
            self._what,
        )
        data = parse_json_response(response, secrets, self._what)
        # A gateway's 200 carrying an error ({"error": {"code": 429, ...}}) fails as the status
        # it names (a rate limit or a server error is retried), also beside a choice: the
        # text of a reply that says it failed is not read for a verdict.
        failure = error_body_failure(response, data, secrets, self._what, provider=True)
        if failure is not None:
            raise as_refusal(failure, body, self._what, in_200=True)  # as a real 400
        message = reply_field(data, "choices", 0, "message")
        if not isinstance(message, dict):
            raise malformed(self._what, "no choices[0].message in the response")
        choice = reply_field(data, "choices", 0)
        if error_of_body(choice) is not None or choice.get("finish_reason") in _FAILED:
            # An error met while the model wrote (OpenRouter: finish_reason "error", the
            # error in the choice; vLLM's and SGLang's "abort"): whatever text came before
            # it is no reply to read.
            said = choice if error_of_body(choice) is not None else {
                "error": {"type": "server_error"}}
            failure = error_body_failure(response, said, secrets, self._what, provider=True)
            if failure is not None:
                raise failure
        content = message.get("content")
        textless = False
        if content is None:
            text = ""  # a refusal or a tool call: no verdict, which the judge reports
            textless = True
        elif isinstance(content, str):
            text = content
        elif isinstance(content, list):
            # Some compatible servers answer with content parts.
            text = "".join(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        else:
            raise malformed(self._what, "choices[0].message.content is not text")
        model = reply_field(data, "model")
        stop = reply_field(data, "choices", 0, "finish_reason")
        refusal = message.get("refusal")
        return JudgeReply(
            text=text,
            usage=Usage.from_report(reply_field(data, "usage")),
            raw_model=model if isinstance(model, str) else None,
            stop=stop if isinstance(stop, str) else None,
            refusal=refusal if isinstance(refusal, str) and refusal.strip() else None,
            textless=textless,
        )
