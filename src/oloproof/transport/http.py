"""One HTTP attempt, shared by HTTP systems and judge providers (SPEC §3).

:func:`send_attempt` sends one request and classifies how it failed:

- 429 and 5xx: :class:`RetryableFailure`, honouring ``Retry-After``;
- a timeout: :class:`RetryableFailure` with ``kind="TIMEOUT"``;
- a refused, reset or dropped connection: :class:`RetryableFailure`;
- 401, 403 and 404: :class:`PermanentFailure` with ``stops_run`` (every later
  call would get the same answer, so the engine stops the run early);
- any other status outside 2xx: :class:`PermanentFailure`.

Bodies are read as a stream and never beyond ``max_bytes`` *decoded* bytes
(after gzip/deflate/brotli), so neither a huge body nor a compression bomb can
exhaust memory: past the limit the attempt fails, permanently. JSON bodies are
parsed by :func:`oloproof._json.loads_strict` (nesting depth, no NaN, no
overflowing numbers, no duplicate keys).

This is also the one copy of secret masking (:func:`mask`,
:func:`mask_value`, :func:`body_excerpt`): a value read from the environment
for a header never appears in an error, a stored output or a reason.

Every failure names what was called: the method and the URL
(``POST http://127.0.0.1:9/v1/chat/completions: could not connect: …``,
``HTTP 404 from GET …: (empty body)``), as :func:`shown_url` shows it: no user
name or password, and no query string (it may carry a key, or a case's input),
only ``?…`` where there was one. Headers are never shown.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from oloproof._json import DEFAULT_MAX_JSON_DEPTH, JsonLimitError, loads_strict
from oloproof._records import dataclass
from oloproof.errors import ConfigError
from oloproof.transport.ratelimit import rate_signal, report
from oloproof.transport.retry import (
    AttemptFailure,
    PermanentFailure,
    RetryableFailure,
    parse_retry_after,
)
from oloproof.transport.threads import innermost

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "MASK",
    "HttpReply",
    "body_excerpt",
    "check_proxy_environment",
    "error_body_failure",
    "error_of_body",
    "mask",
    "mask_value",
    "parse_json_response",
    "resolve_header_templates",
    "send_attempt",
    "shown_url",
]

DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024
EXCERPT_CHARS = 200
# Bytes of an error body kept for its excerpt: the excerpt shows 200 characters.
_ERROR_BODY_BYTES = 64 * 1024
MASK = "***"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MISSING: Any = object()
STOPS_RUN_STATUSES = frozenset({401, 403, 404})


def shown_url(url: str | httpx.URL) -> str:
    """``url`` as a message may show it: scheme, host, port and path. The user info and
    the query string are left out (``?…`` marks a query), since either may hold a secret."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "(an invalid URL)"
    path = parsed.raw_path.split(b"?", 1)[0].decode("ascii", "replace") or "/"
    query = "?…" if parsed.query else ""
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii', 'replace')}{path}{query}"


@dataclass(frozen=True, slots=True)
class HttpReply:
    """A response read in full (within the limit): status, headers, decoded body, and
    the request it answers (``POST http://…``, as :func:`shown_url` shows it)."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    request: str = ""

    @property
    def text(self) -> str:
        # JSON is UTF-8 (RFC 8259); a body that is not is shown, not trusted.
        return self.content.decode("utf-8", errors="replace")


#: A secret at least this long is masked wherever it appears, in outputs and judge
#: reasons as in error messages.
MIN_MASK_ANYWHERE = 8
#: A shorter secret, from this length, is masked in outputs and judge reasons where it
#: stands alone: not inside a longer run of letters and digits ("abcd" in "abcdef" is
#: left as it is). Shorter still ("v1", "k"), it cannot be told from ordinary text and
#: is masked in error messages only.
MIN_MASK_TOKEN = 4
_JSON_ESCAPES = {"/": "\\/", '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f",
                 "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _char_forms(char: str) -> str:
    """A pattern for ``char`` as written, or as JSON may escape it (``\\/``,
    ``\\u002f``, a surrogate pair): a server quoting a secret inside JSON text escapes
    it as it likes."""
    forms = [re.escape(char)]
    short = _JSON_ESCAPES.get(char)
    if short is not None:
        forms.append(re.escape(short))
    code = ord(char)
    if code > 0xFFFF:
        code -= 0x10000
        units = (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))
        forms.append("".join(f"\\\\u(?i:{u:04x})" for u in units))
    else:
        forms.append(f"\\\\u(?i:{code:04x})")
    if not (char.isascii() and (char.isalnum() or char in "-._~")):
        # Percent-encoded, as a server quoting the secret in a URL writes it (%2F for /).
        forms.append("".join(f"%(?i:{b:02x})" for b in char.encode("utf-8")))
        if char == " ":
            forms.append(re.escape("+"))  # a form's encoding of a space
    return f"(?:{'|'.join(forms)})"


@functools.lru_cache(maxsize=256)
def _secret_pattern(secret: str, alone: bool) -> re.Pattern[str]:
    body = "".join(_char_forms(c) for c in secret)
    if alone:
        body = f"(?<![^\\W_]){body}(?![^\\W_])"
    return re.compile(body)


def _mask_one(text: str, secret: str, alone: bool) -> str:
    if not alone and "\\" not in text and "%" not in text:
        return text.replace(secret, MASK)  # nothing escaped: the plain form is the only one
    return _secret_pattern(secret, alone).sub(MASK, text)


def mask(text: str, secrets: Iterable[str]) -> str:
    """``text`` (an error message, a body quoted in one) with every secret replaced by
    ``***``, whatever its length, as written, JSON-escaped or percent-encoded; longest
    secrets first."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = _mask_one(text, secret, alone=False)
    return text


def mask_quoted(text: str, secrets: Iterable[str]) -> str:
    """``text`` that is someone's words (an output, a judge's reason) with the secrets that
    can be told from ordinary text masked: those of at least :data:`MIN_MASK_ANYWHERE`
    characters wherever they appear, those of :data:`MIN_MASK_TOKEN` or more where they
    stand alone, JSON-escaped or not (docs/refusals.md)."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        if len(secret) >= MIN_MASK_ANYWHERE:
            text = _mask_one(text, secret, alone=False)
        elif len(secret) >= MIN_MASK_TOKEN:
            text = _mask_one(text, secret, alone=True)
    return text


def mask_value(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (an output) with the secrets :func:`mask_quoted` masks masked in its
    strings, keys included."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return mask_quoted(value, secrets)
    if isinstance(value, list):
        return [mask_value(v, secrets) for v in value]
    if isinstance(value, dict):
        return {mask_quoted(str(k), secrets): mask_value(v, secrets) for k, v in value.items()}
    return value


def body_excerpt(text: str, secrets: Iterable[str] = (), limit: int = EXCERPT_CHARS) -> str:
    """The start of a response body, on one line, with secrets masked.

    Masking happens before cutting, so a secret straddling the cut cannot leak
    half of itself.
    """
    masked = mask(text, secrets)
    flat = " ".join(masked.split())
    if not flat:
        return "(empty body)"
    if len(flat) > limit:
        return flat[:limit] + "…"
    return flat


def _from(reply: HttpReply) -> str:
    """``HTTP 404 from GET http://…``: the status and what was called."""
    return f"HTTP {reply.status_code}" + (f" from {reply.request}" if reply.request else "")


def _shown_location(reply: HttpReply, location: str) -> str:
    """Where a redirect points, as :func:`shown_url` shows a URL (no user info, no query:
    a sign-in page's ``?session=…`` is not for the store), a relative one resolved against
    the URL called."""
    called = reply.request.split(" ", 1)[-1].split("?", 1)[0]
    try:
        target: str | httpx.URL = httpx.URL(called).join(location) if called else location
    except (httpx.InvalidURL, TypeError, ValueError):
        target = location
    return shown_url(target)


def _status_failure(reply: HttpReply, secrets: Iterable[str], what: str) -> AttemptFailure:
    status = reply.status_code
    message = f"{what}: {_from(reply)}: {body_excerpt(reply.text, secrets)}"
    if 300 <= status <= 399:
        # Redirects are never followed (credentials would go wherever they point).
        location = reply.headers.get("location")
        where = f" to {mask(_shown_location(reply, location), secrets)}" if location else ""
        message = (f"{what}: {_from(reply)}: a redirect{where}, not followed (set the url to"
                   f" where it points): {body_excerpt(reply.text, secrets)}")
    rate = rate_signal(status, reply.headers)
    if status == 429 and _out_of_credit(_json_or_none(reply.content)):
        return _credit_failure(message, reply, secrets)
    if status == 429 or 500 <= status <= 599:
        # The retry policy honours Retry-After only, as it always has; the adaptive
        # limiter reads every rate-limit header (transport/ratelimit.py).
        retry_after = parse_retry_after(reply.headers.get("retry-after"))
        retryable = RetryableFailure(message, retry_after_s=retry_after, rate=rate)
        retryable.status = status
        return retryable
    failure = PermanentFailure(message, stops_run=status in STOPS_RUN_STATUSES)
    failure.status = status
    failure.body = mask(reply.text, secrets)
    failure.rate = rate
    return failure


# What an error object's ``type``, ``code`` or ``status`` words say, when it names no HTTP
# status: OpenAI's "rate_limit_exceeded" / "server_error", Anthropic's "rate_limit_error" /
# "overloaded_error" / "api_error", Google's "RESOURCE_EXHAUSTED" / "UNAVAILABLE".
_RATE_WORDS = ("rate_limit", "ratelimit", "rate limit", "too_many_requests",
               "resource_exhausted", "throttl")
_SERVER_WORDS = ("overloaded", "server_error", "api_error", "internal", "unavailable",
                 "bad_gateway", "gateway_timeout", "deadline_exceeded")
# The client errors those words name, as the status each provider sends with it: Anthropic's
# "invalid_request_error" (400), "authentication_error" (401), "permission_error" (403),
# "not_found_error" (404); OpenAI's codes "invalid_api_key" (401), "model_not_found" (404).
# Whole words only, the most specific first: "model_not_found" beside "invalid_request_error"
# (as OpenAI sends them) is the 404 it comes with.
_CLIENT_WORDS = (
    (401, ("authentication_error", "invalid_api_key")),
    (403, ("permission_error",)),
    (404, ("not_found_error", "model_not_found")),
    (400, ("invalid_request_error",)),
)
# What an error given as text says (``{"error": "Rate limit exceeded"}``, Hugging Face's
# ``{"error": "Model is overloaded"}``), or the message of an error object whose words name
# nothing: read for a rate limit and an overloaded server only; any other text is the
# provider's own words, not a status ("ticket 42 not found" is no 404).
_RATE_TEXT = re.compile(
    r"rate[ _-]?limit|too[ _-]many[ _-]requests|quota|resource[ _]exhausted|throttl"
    # Cloudflare's "Capacity temporarily exceeded"; not "the input exceeds the model's capacity"
    r"|capacity (?:temporarily )?exceeded|(?:at|over|out of|no) capacity",
    re.IGNORECASE,
)
_SERVER_TEXT = re.compile(r"overloaded", re.IGNORECASE)
# A status written as text: three ASCII digits ("²" and "٤٢٩" pass str.isdigit, and int()
# refuses the first and 5,000 digits alike: a ValueError was the judgment's stored reason).
_STATUS_DIGITS = re.compile(r"[0-9]{3}")


def error_of_body(data: Any) -> Any:
    """The error a JSON body reports: its ``error`` member (a non-empty object or text), the
    first of its ``errors`` (GraphQL's ``{"data": null, "errors": [{"message": …}]}``,
    Cloudflare's ``{"result": null, "success": false, "errors": [{"code": 3040, …}]}``), or
    the body itself when it says it is one with a message (vLLM's and FastChat's
    ``{"object": "error", "message": …, "code": 400}``); ``None`` when it reports none (no
    ``error``, or ``null``, ``false``, ``""``, ``{}``, and no ``errors`` or ``[]``)."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict) and error:
        return error
    if isinstance(error, str) and error.strip():
        return error
    errors = data.get("errors")
    for item in errors if isinstance(errors, list) else ():
        if (isinstance(item, dict) and item) or (isinstance(item, str) and item.strip()):
            return item
    if "error" in (data.get("object"), data.get("type")) and isinstance(
        data.get("message"), str
    ):
        return data
    return None


def _named_status(error: Any, data: Any) -> int | None:
    """The HTTP status an error body names: a failing status in its ``code``, ``status`` or
    ``status_code`` (a number, or digits), else what its ``type``/``code``/``status`` words
    say (a rate limit: 429; an overloaded or failing server: 503; a client error: the status
    the provider sends it with, :data:`_CLIENT_WORDS`), else what the error's text says (a
    text error, or the ``message`` of one whose words name nothing: a rate limit, 429, or an
    overloaded server, 503), else ``None``."""
    words: list[str] = []
    for holder in (error, data):
        if not isinstance(holder, dict):
            continue
        for key in ("code", "status", "status_code"):
            value = holder.get(key)
            if isinstance(value, str) and _STATUS_DIGITS.fullmatch(value.strip()):
                value = int(value.strip())
            if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
                return value
        if holder is error:
            words += [v.lower() for k in ("type", "code", "status")
                      if isinstance(v := holder.get(k), str)]
    said = " ".join(words)
    if any(word in said for word in _RATE_WORDS):
        return 429
    if any(word in said for word in _SERVER_WORDS):
        return 503
    for status, names in _CLIENT_WORDS:
        if any(name in words for name in names):
            return status
    text = error if isinstance(error, str) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        text = error["message"]
    if text is not None and _RATE_TEXT.search(text):
        return 429
    if text is not None and _SERVER_TEXT.search(text):
        return 503
    return None


def error_body_failure(
    reply: HttpReply, data: Any, secrets: Iterable[str], what: str, *, provider: bool = False
) -> AttemptFailure | None:
    """The failure a 2xx reply whose JSON body is an error reports, classified as the HTTP
    status it names (:func:`_named_status`): a rate limit (429) is retried and carries its
    rate signal, as a 429 does; a server error (5xx) is retried; anything else is a failure
    of this call, not retried, quoting the body. ``None`` when ``data`` reports no error.

    Several OpenAI-compatible gateways and proxies answer ``200`` with
    ``{"error": {"code": 429, "message": "rate limited"}}``: neither an answer nor a
    malformed reply, but the failure it names.

    A ``provider``'s (a judge's or a model system's) 401, 403 or 404 stops the run, as the
    real status does: its request is the same for every case. An HTTP system's does not: an
    endpoint may answer one case "not found" (docs/http-endpoint.md).
    """
    error = error_of_body(data)
    if error is None:
        return None
    secrets = tuple(secrets)
    if _out_of_credit(data):
        return _credit_failure(f"{what}: {_from(reply)}: the body is an error (read as HTTP"
                               f" 429): {body_excerpt(reply.text, secrets)}", reply, secrets)
    status = _named_status(error, data)
    if status == 429:
        read = " (read as HTTP 429, a rate limit)"
    elif status is not None and status >= 500:
        read = f" (read as HTTP {status}, a server error)"
    elif status is not None:
        read = f" (read as HTTP {status})"
    else:
        read = ""
    message = (f"{what}: {_from(reply)}: the body is an error{read}: "
               f"{body_excerpt(reply.text, secrets)}")
    if status is not None and (status == 429 or status >= 500):
        rate = rate_signal(status, reply.headers)
        retryable = RetryableFailure(
            message, retry_after_s=parse_retry_after(reply.headers.get("retry-after")),
            rate=rate,
        )
        retryable.status = status
        return retryable
    failure = PermanentFailure(message, stops_run=provider and status in STOPS_RUN_STATUSES)
    failure.status = status
    failure.body = mask(reply.text, secrets)
    return failure


#: What OpenAI sends with a 429 when the account's credit or spending limit is used up
#: ("You exceeded your current quota, please check your plan and billing details"): no wait
#: lifts it, so it is not retried, and it stops the run (every later call is refused alike).
_OUT_OF_CREDIT = frozenset({"insufficient_quota"})


def _json_or_none(content: bytes) -> Any:
    try:
        return loads_strict(content)
    except ValueError:  # JsonLimitError too: an error body that is not JSON says nothing
        return None


def _out_of_credit(data: Any) -> bool:
    error = error_of_body(data)
    return isinstance(error, dict) and any(
        isinstance(v := error.get(k), str) and v.strip().lower() in _OUT_OF_CREDIT
        for k in ("type", "code")
    )


def _credit_failure(message: str, reply: HttpReply, secrets: Iterable[str]) -> AttemptFailure:
    failure = PermanentFailure(
        f"{message} (insufficient_quota: the account's credit or spending limit is used up;"
        " no retry lifts it)", stops_run=True,
    )
    failure.status = 429
    failure.body = mask(reply.text, secrets)
    return failure


def _transport_failure(
    exc: Exception, timeout_s: float, what: str, secrets: Iterable[str]
) -> AttemptFailure:
    """``what`` names the other side and the request (``system x: POST http://…``)."""
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return RetryableFailure(f"{what}: timed out after {timeout_s:g}s", kind="TIMEOUT")
    if isinstance(exc, httpx.LocalProtocolError):
        # h11 quotes the offending header line here: say nothing of it.
        return PermanentFailure(f"{what}: the request could not be sent (an invalid header?)")
    # httpx messages name the host and the failure, not the request headers;
    # masked all the same.
    reason = mask(str(exc).strip(), secrets) or type(exc).__name__
    if isinstance(exc, httpx.UnsupportedProtocol):
        return PermanentFailure(f"{what}: {type(exc).__name__}: {reason}")
    if isinstance(exc, httpx.ConnectError):
        return RetryableFailure(f"{what}: could not connect: {reason}")
    if isinstance(exc, httpx.RemoteProtocolError):
        return RetryableFailure(f"{what}: connection dropped: {reason}")
    if isinstance(exc, httpx.DecodingError):
        return PermanentFailure(f"{what}: the body could not be decoded: {reason}")
    if isinstance(exc, httpx.TransportError):
        # ReadError, WriteError, NetworkError, ProxyError...: the connection
        # broke under us; another attempt on a fresh one may succeed.
        return RetryableFailure(f"{what}: connection error ({type(exc).__name__}): {reason}")
    return PermanentFailure(f"{what}: {type(exc).__name__}: {reason}")


async def _read_limited(
    response: httpx.Response, limit: int, what: str, request: str = ""
) -> bytes:
    """The decoded body, or a :class:`PermanentFailure` once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    # aiter_bytes yields decoded (decompressed) bytes chunk by chunk: the count
    # is of what would be held in memory, not of what crossed the wire.
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            origin = f" from {request}" if request else ""
            raise PermanentFailure(
                f"{what}: HTTP {response.status_code}{origin}: the response passed the limit of"
                f" {limit} bytes (limits.max_response_bytes); reading stopped"
            )
        chunks.append(chunk)
    return b"".join(chunks)


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
    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> HttpReply:
    """Send one request and return its 2xx reply, or raise a classified failure.

    ``what`` names the other side in messages (``"system support-bot"``,
    ``"anthropic judge"``). ``timeout_s`` bounds the whole attempt, body
    included, not only each network read, so a server that trickles bytes
    still times out. The body is never read past ``max_bytes`` decoded bytes.
    """
    secrets = tuple(secrets)
    kwargs: dict[str, Any] = {"headers": headers, "timeout": timeout_s}
    if json_body is not _MISSING:
        kwargs["json"] = json_body
    request = f"{method} {shown_url(url)}"
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream(method, url, **kwargs) as response:
                if 200 <= response.status_code <= 299:
                    content = await _read_limited(response, max_bytes, what, request)
                else:
                    content = await _read_error_body(response)
                reply = HttpReply(response.status_code, response.headers, content, request)
    except (httpx.HTTPError, TimeoutError) as exc:
        raise _transport_failure(exc, timeout_s, f"{what}: {request}", secrets) from None
    except AttemptFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - below httpx: anyio's task group, the socket
        # An error httpx does not wrap (OverflowError for a port past 65535, inside the
        # ExceptionGroup of anyio's connect) is named by what it is, with the request.
        inner = innermost(exc)
        raise _transport_failure(
            inner if isinstance(inner, Exception) else exc, timeout_s, f"{what}: {request}",
            secrets,
        ) from None
    if not 200 <= reply.status_code <= 299:
        raise _status_failure(reply, secrets, what)
    signal = rate_signal(reply.status_code, reply.headers)
    if signal is not None:  # a limit exhausted by this very call (a remaining count of 0)
        report(signal)
    return reply


async def _read_error_body(response: httpx.Response) -> bytes:
    """Enough of an error body for its excerpt; the rest is not read. A body that cannot be
    decoded (``Content-Encoding: gzip`` on a plain or broken error page) is said to be so:
    the status is what the failure is, and it stands (a 429 stays a 429)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= _ERROR_BODY_BYTES:
                break
    except httpx.DecodingError:
        encoding = response.headers.get("content-encoding", "").strip()[:40] or "encoded"
        return f"(a {encoding} body that could not be decoded)".encode()
    return b"".join(chunks)[:_ERROR_BODY_BYTES]


def parse_json_response(
    reply: HttpReply, secrets: Iterable[str], what: str,
    *, max_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> Any:
    """The JSON body of a 2xx reply, or a :class:`PermanentFailure` quoting it."""
    try:
        return loads_strict(reply.content, max_depth=max_depth)
    except JsonLimitError as exc:
        raise PermanentFailure(
            f"{what}: {_from(reply)}: response JSON refused ({exc}): "
            f"{body_excerpt(reply.text, secrets)}"
        ) from None
    except ValueError:
        raise PermanentFailure(
            f"{what}: {_from(reply)}: response is not JSON: "
            f"{body_excerpt(reply.text, secrets)}"
        ) from None


def check_proxy_environment() -> None:
    """Refuse, as a :class:`ConfigError`, a proxy setting that every client of the run
    would fail to start with.

    httpx reads the proxies from ``urllib.request.getproxies()`` (``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY`` in either case; none with ``NO_PROXY=*``) when a client
    is made, and refuses one that is not an http, https or socks5 URL, or a socks5 one
    without the ``socksio`` package. That used to happen once the run was stored, as an
    internal error (exit 70); this reads them as httpx does, before, without a client.
    """
    import os
    from urllib.request import getproxies  # imported by httpx already

    proxies = getproxies()
    if "*" in (host.strip() for host in proxies.get("no", "").split(",")):
        return
    for scheme in ("http", "https", "all"):
        value = proxies.get(scheme)
        if not value:
            continue
        names = [n for n in os.environ if n.lower() == f"{scheme}_proxy"]
        name = (f"environment variable {min(names, key=lambda n: n != n.lower())}"
                if names else f"the system's {scheme} proxy setting")
        accepted = ("an http://, https:// or socks5:// URL, or no proxy (NO_PROXY lists"
                    " the hosts to reach without one)")
        try:
            proxy = httpx.Proxy(value if "://" in value else f"http://{value}")
        except (httpx.InvalidURL, ValueError, TypeError) as exc:
            reason = str(exc).split(" for proxy URL", 1)[0]
            raise ConfigError(
                f"{name} does not name a proxy that can be used ({reason})", accepted=accepted,
            ) from None
        if proxy.url.scheme in ("socks5", "socks5h"):
            from importlib.util import find_spec

            if find_spec("socksio") is None:
                raise ConfigError(
                    f"{name} names a SOCKS proxy, and the socksio package it needs is not"
                    " installed", accepted=f"pip install 'httpx[socks]', or {accepted}",
                )


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
