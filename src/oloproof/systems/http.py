"""An HTTP endpoint as a system under test.

One :class:`HttpSystem` per run owns one pooled ``httpx.AsyncClient`` sized to
``concurrency.system``. :meth:`HttpSystem.call` makes ONE attempt and
classifies its failure; the engine wraps it with
:func:`oloproof.transport.retry.call_with_retries`.

The attempt itself (:func:`oloproof.transport.http.send_attempt`) is shared
with the judge providers, so an HTTP system and an LLM provider are retried,
size-limited and masked by the same rules (SPEC §3): see that module.

Secrets never leave this module: resolved header values are neither part of
the identity nor of any error text; a response body quoted in an error has
them masked (``***``), and so has an output that echoes one back (values of at
least 8 characters there, so that a short value never corrupts an output).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx

from oloproof._json import DEFAULT_MAX_JSON_DEPTH, digest
from oloproof.errors import ConfigError
from oloproof.paths import MISSING, lookup
from oloproof.systems.base import CallResult
from oloproof.transport.http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    MIN_MASK_TOKEN,
    body_excerpt,
    error_body_failure,
    error_of_body,
    mask_value,
    parse_json_response,
    resolve_header_templates,
    send_attempt,
    shown_url,
)
from oloproof.transport.retry import PermanentFailure
from oloproof.usage import Usage

__all__ = [
    "HttpSystem",
    "body_excerpt",
    "resolve_header_templates",
    "send_attempt",
]

METHODS = ("POST", "PUT", "GET")
_MISSING = object()


# --------------------------------------------------------------------------- #
# Dotted paths
# --------------------------------------------------------------------------- #


def _follow_path(data: Any, path: str) -> Any:
    """Follow ``a.b.0.c`` / ``items.-1`` (the one rule: :func:`oloproof.paths.lookup`)."""
    found = lookup(data, path)
    return _MISSING if found is MISSING else found


def _only_an_error(body: Any) -> bool:
    """A body that reports an error and nothing else: a non-empty ``error`` (or ``errors``
    list) whose fellow members, if any, are all null (``{"result": null, "error":
    "timeout"}``, GraphQL's ``{"data": null, "errors": [...]}``)."""
    return (
        isinstance(body, dict)
        and error_of_body({k: body.get(k) for k in _ERROR_KEYS}) is not None
        and all(value is None for key, value in body.items() if key not in _ERROR_KEYS)
    )


_ERROR_KEYS = ("error", "errors")


# --------------------------------------------------------------------------- #
# The system
# --------------------------------------------------------------------------- #


def _timeout_of(system: Any, http: Any) -> float:
    """``http.timeout_s``, unless only ``system.timeout_s`` was written (the configuration's
    records know what was written: ``fields_set``)."""
    http_set = getattr(http, "fields_set", None)
    system_set = getattr(system, "fields_set", None)
    http_timeout = getattr(http, "timeout_s", None)
    system_timeout = getattr(system, "timeout_s", None) if system is not http else None
    if (
        system_timeout is not None
        and http_set is not None
        and system_set is not None
        and "timeout_s" not in http_set
        and "timeout_s" in system_set
    ):
        return float(system_timeout)
    for value in (http_timeout, system_timeout):
        if value is not None:
            return float(value)
    return 30.0


class HttpSystem:
    """A JSON-over-HTTP endpoint called once per case (SPEC §1, §2).

    ``POST`` and ``PUT`` send the case input as the JSON body; ``GET`` sends it
    as query parameters (an object of scalars). The output is the response at
    ``output_path`` (the whole body when ``None``); the usage is read at
    ``usage_path`` in OpenAI or Anthropic token names.
    """

    kind = "http"

    def __init__(
        self,
        *,
        name: str,
        url: str,
        version: str,
        method: str = "POST",
        output_path: str | None = None,
        usage_path: str | None = None,
        timeout_s: float = 30.0,
        headers: Mapping[str, str] | None = None,
        concurrency: int = 8,
        environ: Mapping[str, str] | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> None:
        method = method.upper()
        if method not in METHODS:
            raise ConfigError(
                f"unsupported method {method!r}",
                field="system.http.method",
                accepted="POST, PUT, GET",
            )
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ConfigError(f"not a valid URL: {exc}", field="system.http.url") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigError(
                f"not an http(s) URL: {url!r}",
                field="system.http.url",
                accepted="http://… or https://…",
            )
        if timeout_s <= 0:
            raise ConfigError("must be positive", field="system.http.timeout_s")
        if concurrency < 1:
            raise ConfigError("must be at least 1", field="concurrency.system")
        self.name = name
        self.url = url
        self.version = str(version)
        self.method = method
        self.output_path = output_path or None
        self.usage_path = usage_path or None
        self.timeout_s = float(timeout_s)
        self.concurrency = int(concurrency)
        self.max_response_bytes = int(max_response_bytes)
        self.max_json_depth = int(max_json_depth)
        self._header_templates = dict(headers or {})
        self._headers, self._secrets = resolve_header_templates(
            self._header_templates,
            os.environ if environ is None else environ,
            "system.http.headers",
        )
        # Masked in outputs too, but only values that can be told from ordinary text
        # (transport/http.py mask_quoted): masking a short value ("k", "v1") would
        # corrupt the outputs being judged.
        self._output_secrets = tuple(s for s in self._secrets if len(s) >= MIN_MASK_TOKEN)
        self.identity = digest(
            {
                "kind": "http",
                "name": self.name,
                "version": self.version,
                "url": self.url,
                "method": self.method,
                "output_path": self.output_path,
                "usage_path": self.usage_path,
                "headers": self._header_templates,
            }
        )
        self._client: httpx.AsyncClient | None = None
        self._what = f"system {self.name}"
        #: What a call reaches, for messages (never a header or a query string).
        self.target = f"{self.method} {shown_url(self.url)}"

    @classmethod
    def from_config(
        cls,
        system: Any,
        *,
        concurrency: int = 8,
        environ: Mapping[str, str] | None = None,
        file: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> HttpSystem:
        """Build from the project's ``system`` section (duck-typed).

        Reads ``system.name`` and ``system.http`` with ``url, method, version,
        output_path, usage_path, timeout_s, headers``; ``system.version`` is
        used when ``http.version`` is absent, and ``system.timeout_s`` when only
        it was written. ``file`` names the config file in errors.
        """
        http = getattr(system, "http", None) or system
        version = getattr(http, "version", None) or getattr(system, "version", None)
        try:
            if not version:
                raise ConfigError(
                    "an HTTP system needs a version: a deployment change is invisible otherwise",
                    field="system.http.version",
                )
            return cls(
                name=system.name,
                url=str(http.url),
                version=str(version),
                method=getattr(http, "method", None) or "POST",
                output_path=getattr(http, "output_path", None),
                usage_path=getattr(http, "usage_path", None),
                timeout_s=_timeout_of(system, http),
                headers=dict(getattr(http, "headers", None) or {}),
                concurrency=concurrency,
                environ=environ,
                max_response_bytes=max_response_bytes,
                max_json_depth=max_json_depth,
            )
        except ConfigError as exc:
            if file is None or exc.file is not None:
                raise
            raise ConfigError(
                exc.detail, file=file, field=exc.field, line=exc.line, accepted=exc.accepted
            ) from None

    def __repr__(self) -> str:
        # Header templates only: never the resolved values.
        return (
            f"HttpSystem(name={self.name!r}, method={self.method!r}, url={self.url!r}, "
            f"version={self.version!r}, headers={sorted(self._header_templates)!r})"
        )

    async def start(self) -> None:
        if self._client is not None:
            return
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        self._client = httpx.AsyncClient(
            limits=limits,
            timeout=httpx.Timeout(self.timeout_s),
            headers={"user-agent": "oloproof", "accept": "application/json"},
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def call(self, case_id: str, case_input: Any, attempt: int) -> CallResult:
        if self._client is None:
            await self.start()
        assert self._client is not None
        if self.method == "GET":
            # Merged into the URL's own query: httpx's params= would replace it.
            url = httpx.URL(self.url).copy_merge_params(self._query_params(case_input))
            response = await send_attempt(
                self._client,
                "GET",
                url,
                what=self._what,
                timeout_s=self.timeout_s,
                headers=self._headers,
                secrets=self._secrets,
                max_bytes=self.max_response_bytes,
            )
        else:
            response = await send_attempt(
                self._client,
                self.method,
                self.url,
                what=self._what,
                timeout_s=self.timeout_s,
                headers=self._headers,
                json_body=case_input,
                secrets=self._secrets,
                max_bytes=self.max_response_bytes,
            )
        if response.status_code == 202:
            # Accepted for later: the body is a receipt (a job id, "queued"), not an answer.
            raise PermanentFailure(
                f"{self._what}: HTTP 202 from {response.request}: the request was accepted"
                " to be processed later, not answered (the url must answer in the response):"
                f" {body_excerpt(response.text, self._secrets)}"
            )
        body = parse_json_response(
            response, self._secrets, self._what, max_depth=self.max_json_depth
        )
        if self._output_secrets:
            # An endpoint that echoes a header back must not get it into the store.
            body = mask_value(body, self._output_secrets)
        output = body
        if self.output_path is None and _only_an_error(body):
            # {"error": ...} and nothing else is the endpoint failing, not an output to
            # score: a case that fails as the status it names (docs/http-endpoint.md).
            failure = error_body_failure(response, body, self._secrets, self._what)
            if failure is not None:
                raise failure
        if self.output_path is not None:
            output = _follow_path(body, self.output_path)
            if output is _MISSING or output is None:
                # Not there (or null), and the body reports an error: that error, retried
                # if it names a rate limit or a server error.
                failure = error_body_failure(response, body, self._secrets, self._what)
                if failure is not None:
                    raise failure
            if output is _MISSING:
                raise PermanentFailure(
                    f"{self._what}: HTTP {response.status_code} from {response.request}:"
                    " output_path "
                    f"{self.output_path!r} not found in the response: "
                    f"{body_excerpt(response.text, self._secrets)}"
                )
        usage = None
        if self.usage_path is not None:
            reported = _follow_path(body, self.usage_path)
            usage = None if reported is _MISSING else Usage.from_report(reported)
        return CallResult(output=output, usage=usage)

    def refuses_cached(self, output: object) -> bool:
        """True for a stored output that this system reads as an error, not an output: a
        whole body that is only ``{"error": ...}``, stored before such a body was read as
        an error (the engine calls the case again instead of scoring it)."""
        return self.output_path is None and _only_an_error(output)

    def _query_params(self, case_input: Any) -> dict[str, str | int | float | bool | None]:
        if not isinstance(case_input, dict):
            raise PermanentFailure(
                f"{self._what}: a GET system needs each case input to be an object of "
                f"scalars (sent as query parameters), got {type(case_input).__name__}"
            )
        params: dict[str, str | int | float | bool | None] = {}
        for key, value in case_input.items():
            if value is not None and not isinstance(value, (str, int, float, bool)):
                raise PermanentFailure(
                    f"{self._what}: a GET system sends the input as query parameters; "
                    f"field {key!r} is {type(value).__name__}, not a string, number, "
                    f"boolean or null"
                )
            params[str(key)] = value
        return params
