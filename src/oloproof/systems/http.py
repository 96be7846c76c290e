"""An HTTP endpoint as a system under test.

One :class:`HttpSystem` per run owns one pooled ``httpx.AsyncClient`` sized to
``concurrency.system``. :meth:`HttpSystem.call` makes ONE attempt and
classifies its failure; the engine wraps it with
:func:`oloproof.engine.retry.call_with_retries`.

The classification (:func:`send_attempt`) is shared with the judge providers,
so an HTTP system and an LLM provider are retried by the same rules (SPEC §3):

- 429 and 5xx: :class:`RetryableFailure`, honouring ``Retry-After``;
- a timeout: :class:`RetryableFailure` with ``kind="TIMEOUT"``;
- a refused, reset or dropped connection: :class:`RetryableFailure`;
- any other status outside 2xx: :class:`PermanentFailure`.

Secrets never leave this module: resolved header values are neither part of
the identity nor of any error text; a response body quoted in an error has
them masked (``***``), and so has an output that echoes one back (values of at
least 8 characters there, so that a short value never corrupts an output).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from oloproof.engine.retry import (
    AttemptFailure,
    PermanentFailure,
    RetryableFailure,
    parse_retry_after,
)
from oloproof.errors import ConfigError
from oloproof.paths import MISSING, lookup
from oloproof.systems.base import CallResult
from oloproof.systems.identity import digest
from oloproof.usage import Usage

__all__ = [
    "HttpSystem",
    "body_excerpt",
    "identity_digest",
    "resolve_header_templates",
    "send_attempt",
]

METHODS = ("POST", "PUT", "GET")
EXCERPT_CHARS = 200
MIN_OUTPUT_MASK_CHARS = 8
_MASK = "***"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MISSING = object()


def identity_digest(obj: Any) -> str:
    """``sha256:`` + hex SHA-256 of the canonical JSON of ``obj``."""
    return digest(obj)


# --------------------------------------------------------------------------- #
# Failure classification, shared with oloproof.providers
# --------------------------------------------------------------------------- #


def _mask(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, _MASK)
    return text


def _mask_value(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` with every secret masked in its strings (keys included)."""
    if isinstance(value, str):
        return _mask(value, secrets)
    if isinstance(value, list):
        return [_mask_value(v, secrets) for v in value]
    if isinstance(value, dict):
        return {_mask(str(k), secrets): _mask_value(v, secrets) for k, v in value.items()}
    return value


def body_excerpt(text: str, secrets: Iterable[str] = (), limit: int = EXCERPT_CHARS) -> str:
    """The start of a response body, on one line, with secrets masked.

    Masking happens before cutting, so a secret straddling the cut cannot leak
    half of itself.
    """
    masked = _mask(text, secrets)
    flat = " ".join(masked.split())
    if not flat:
        return "(empty body)"
    if len(flat) > limit:
        return flat[:limit] + "…"
    return flat


def _status_failure(response: httpx.Response, secrets: Iterable[str], what: str) -> AttemptFailure:
    status = response.status_code
    message = f"{what}: HTTP {status}: {body_excerpt(response.text, secrets)}"
    if status == 429 or 500 <= status <= 599:
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        return RetryableFailure(message, retry_after_s=retry_after)
    return PermanentFailure(message)


def _transport_failure(
    exc: Exception, timeout_s: float, what: str, secrets: Iterable[str]
) -> AttemptFailure:
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return RetryableFailure(f"{what}: timed out after {timeout_s:g}s", kind="TIMEOUT")
    if isinstance(exc, httpx.LocalProtocolError):
        # h11 quotes the offending header line here: say nothing of it.
        return PermanentFailure(f"{what}: the request could not be sent (an invalid header?)")
    # httpx messages name the host and the failure, not the request headers;
    # masked all the same.
    reason = _mask(str(exc).strip(), secrets) or type(exc).__name__
    if isinstance(exc, httpx.UnsupportedProtocol):
        return PermanentFailure(f"{what}: {type(exc).__name__}: {reason}")
    if isinstance(exc, httpx.ConnectError):
        return RetryableFailure(f"{what}: could not connect: {reason}")
    if isinstance(exc, httpx.RemoteProtocolError):
        return RetryableFailure(f"{what}: connection dropped: {reason}")
    if isinstance(exc, httpx.TransportError):
        # ReadError, WriteError, NetworkError, ProxyError...: the connection
        # broke under us; another attempt on a fresh one may succeed.
        return RetryableFailure(f"{what}: connection error ({type(exc).__name__}): {reason}")
    return PermanentFailure(f"{what}: {type(exc).__name__}: {reason}")


async def send_attempt(
    client: httpx.AsyncClient,
    method: str,
    url: str | httpx.URL,
    *,
    what: str,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    json_body: Any = _MISSING,
    secrets: Iterable[str] = (),
) -> httpx.Response:
    """Send one request and return its 2xx response, or raise a classified failure.

    ``what`` names the other side in messages (``"system support-bot"``,
    ``"anthropic judge"``). ``timeout_s`` bounds the whole attempt, not only
    each network read, so a server that trickles bytes still times out.
    """
    secrets = tuple(secrets)
    kwargs: dict[str, Any] = {"headers": headers, "timeout": timeout_s}
    if json_body is not _MISSING:
        kwargs["json"] = json_body
    try:
        async with asyncio.timeout(timeout_s):
            response = await client.request(method, url, **kwargs)
    except (httpx.HTTPError, TimeoutError) as exc:
        raise _transport_failure(exc, timeout_s, what, secrets) from None
    if not 200 <= response.status_code <= 299:
        raise _status_failure(response, secrets, what)
    return response


def parse_json_response(response: httpx.Response, secrets: Iterable[str], what: str) -> Any:
    """The JSON body of a 2xx response, or a :class:`PermanentFailure` quoting it."""
    try:
        return response.json()
    except ValueError:
        raise PermanentFailure(
            f"{what}: HTTP {response.status_code}: response is not JSON: "
            f"{body_excerpt(response.text, secrets)}"
        ) from None


# --------------------------------------------------------------------------- #
# Header templates
# --------------------------------------------------------------------------- #


def resolve_header_templates(
    templates: Mapping[str, str], environ: Mapping[str, str], field_prefix: str
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Fill ``${NAME}`` in header values from ``environ``.

    Returns the resolved headers and the values read from the environment (the
    secrets to mask). A variable that is not set raises :class:`ConfigError`
    naming ``<field_prefix>.<Header>`` and the variable.
    """
    resolved: dict[str, str] = {}
    secrets: list[str] = []
    for header, template in templates.items():
        if not isinstance(template, str):
            raise ConfigError(
                f"a header value must be a string, not {type(template).__name__}",
                field=f"{field_prefix}.{header}",
            )

        def fill(match: re.Match[str], header: str = header) -> str:
            name = match.group(1)
            value = environ.get(name)
            if value is None:
                raise ConfigError(
                    f"environment variable {name} is not set",
                    field=f"{field_prefix}.{header}",
                    accepted=f"set {name} in the environment before the run",
                )
            if value:
                secrets.append(value)
            return value

        value = _VARIABLE.sub(fill, template)
        if not value.isascii() or any(ch in value for ch in "\r\n\0"):
            names = ", ".join(_VARIABLE.findall(template)) or "the template"
            raise ConfigError(
                f"the header value (from {names}) must be ASCII on one line",
                field=f"{field_prefix}.{header}",
            )
        resolved[header] = value
    # Longest first, so masking a secret never leaves the tail of a longer one.
    return resolved, tuple(sorted(set(secrets), key=len, reverse=True))


# --------------------------------------------------------------------------- #
# Dotted paths
# --------------------------------------------------------------------------- #


def _follow_path(data: Any, path: str) -> Any:
    """Follow ``a.b.0.c`` / ``items.-1`` (the one rule: :func:`oloproof.paths.lookup`)."""
    found = lookup(data, path)
    return _MISSING if found is MISSING else found


# --------------------------------------------------------------------------- #
# The system
# --------------------------------------------------------------------------- #


def _timeout_of(system: Any, http: Any) -> float:
    """``http.timeout_s``, unless only ``system.timeout_s`` was written (pydantic models)."""
    http_set = getattr(http, "model_fields_set", None)
    system_set = getattr(system, "model_fields_set", None)
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
        self._header_templates = dict(headers or {})
        self._headers, self._secrets = resolve_header_templates(
            self._header_templates,
            os.environ if environ is None else environ,
            "system.http.headers",
        )
        # Masked in outputs too, but only values long enough to be credentials:
        # masking a short value ("k", "v1") would corrupt the outputs being judged.
        self._output_secrets = tuple(
            s for s in self._secrets if len(s) >= MIN_OUTPUT_MASK_CHARS
        )
        self.identity = identity_digest(
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

    @classmethod
    def from_config(
        cls,
        system: Any,
        *,
        concurrency: int = 8,
        environ: Mapping[str, str] | None = None,
        file: str | None = None,
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
            )
        body = parse_json_response(response, self._secrets, self._what)
        if self._output_secrets:
            # An endpoint that echoes a header back must not get it into the store.
            body = _mask_value(body, self._output_secrets)
        output = body
        if self.output_path is not None:
            output = _follow_path(body, self.output_path)
            if output is _MISSING:
                raise PermanentFailure(
                    f"{self._what}: HTTP {response.status_code}: output_path "
                    f"{self.output_path!r} not found in the response: "
                    f"{body_excerpt(response.text, self._secrets)}"
                )
        usage = None
        if self.usage_path is not None:
            reported = _follow_path(body, self.usage_path)
            usage = None if reported is _MISSING else Usage.from_report(reported)
        return CallResult(output=output, usage=usage)

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
