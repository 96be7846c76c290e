"""An offline stand-in for an LLM provider and a deployed system, over real HTTP.

The ``judge`` and ``http`` examples and the docs run without the network or an
API key against this server::

    python -m oloproof.testing.fake_provider --port 8787

It prints its URL on the first line of standard output and serves, on
127.0.0.1, until SIGINT or SIGTERM.

Endpoints
---------
``POST /v1/messages``
    Anthropic Messages format. Needs ``x-api-key`` (or ``Authorization:
    Bearer ...``, as the official SDK sends an auth token) and
    ``anthropic-version`` (401 / 400 otherwise) and a body with ``model``,
    ``max_tokens`` and ``messages``; with ``thinking``, a temperature other
    than 1 is refused (400) as the real API does. ``"stream": true`` gets the
    answer as server-sent events (testing/fake_stream.py), as for OpenAI below.
``POST /v1/chat/completions``
    OpenAI Chat Completions format. Needs ``Authorization: Bearer ...`` (401
    otherwise) and a body with ``model`` and ``messages``. A model whose name
    contains ``reasoning`` refuses ``max_tokens`` and a temperature other than
    1 with OpenAI's 400 (``unsupported_parameter`` / ``unsupported_value``).
``POST|PUT|GET /system``
    A system under test. The input is the JSON body (or, for GET, the query
    parameters). It answers ``{"answer": "You asked: <text>", "label": <first
    word of text, lower case>, "length": <len(text)>, "method": ..., "input":
    <input>, "usage": {"input_tokens": <words in text>, "output_tokens": <words
    in answer>}}`` where text is the input's ``question`` or ``text`` field, or
    the input as compact JSON. An input ``{"echo_header": NAME}`` gets that
    request header's value back in its ``answer`` (a careless endpoint that
    echoes a secret). An input object with a ``respond`` field gets that value
    back as the JSON body, with status ``status`` (default 200); with
    ``respond_raw`` (a string) it gets that text as a ``text/plain`` body.

The judge's rule
----------------
The judged output is the prompt's output part, framed by its random boundary
and unescaped (:func:`oloproof.providers.verdict.read_section`). By
default the verdict is pass iff that text is not empty and does not contain
``FAIL`` (:attr:`JudgeRule.fail_keyword`). With ``pass_keyword`` set, it is
pass iff the text contains that keyword. The reply text is exactly one JSON
object ``{"pass": ..., "reason": ...}``; usage counts whitespace-separated words.

A prompt that asks for a score (a scored judge's last line names its scale,
``{"score": <a whole number from 1 to 5>, ...}``) gets ``{"score": ...,
"reason": ...}`` instead, deterministically (:func:`score_verdict`): the
scale's low for an empty output or one containing ``FAIL`` (with
``pass_keyword``: its high when the output contains the keyword, else its
low), and otherwise one point above the low for every
:data:`WORDS_PER_POINT` words of the output, up to the scale's high.

The model's rule
----------------
A chat request (either format) whose user message is not a judge's prompt (it has no
framed output part and asks for no score) and whose prompt has a ``Categories:`` line is
answered as a *model* would, so that a model can be the system under test
(``system.model``, docs/prompts-and-models.md); any other prompt gets the judge's answer
(a failing verdict: no output part). The answer is deterministic, and depends on the
model's name and on the prompt (:func:`model_answer`):

- the prompt (system and user message together) names its labels on a line
  ``Categories: a, b, c``; the right label is the first of them that appears as a word
  in the prompt's other lines (lines starting with ``Example`` aside), else ``unknown``;
- the model makes a mistake (answers the next label of the list instead) when a number
  drawn from the SHA-256 of the model's name and the whole prompt falls below its error
  rate: :data:`MODEL_ERROR_RATES` by the name (``small`` 0.3, ``large`` 0.12, any other
  0.2), halved when the prompt says ``step by step``, and halved again when it has a line
  starting with ``Example``;
- the reply is the label alone, or ``{"label": ...}`` when the prompt mentions ``JSON``;
  a prompt that mentions ``code fence`` gets that JSON in a fenced code block.

:func:`model_answer` called without a ``Categories:`` line says ``I cannot tell.`` (a
model that was not told what to answer). Usage counts words, as for the judge.

Capacity
--------
With ``--capacity N`` (:class:`Capacity`), the server works on at most N
requests at once, as a rate-limited API does: a request that arrives while N are
being answered gets an immediate 429 with ``retry-after-ms`` (``--retry-after-ms``,
default 100) and ``Retry-After`` (the same wait in whole seconds, rounded up),
and is not counted as in flight. ``GET /_capacity`` returns ``{"capacity",
"in_flight", "peak", "admitted", "rejected"}``. This is what the adaptive
concurrency of Oloproof is tested and measured against (``bench/adaptive.py``).

Scripted faults (failing statuses, drops, timeouts, garbage, held requests)
are test machinery and live with the tests (``tests/fakes/provider.py``),
which builds on the answers defined here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit

from oloproof._records import dataclass, field
from oloproof.providers.verdict import read_section
from oloproof.testing.fake_stream import stream_if_asked

__all__ = [
    "ANTHROPIC_PATH",
    "OPENAI_PATH",
    "ROUTES",
    "SYSTEM_PATH",
    "Capacity",
    "Handler",
    "JudgeRule",
    "OfflineProvider",
    "Reply",
    "answer",
    "capacity_reply",
    "json_reply",
    "main",
    "model_answer",
    "model_error_rate",
    "score_verdict",
]

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"
SYSTEM_PATH = "/system"
ROUTES = (ANTHROPIC_PATH, OPENAI_PATH, SYSTEM_PATH)


@dataclass(frozen=True)
class JudgeRule:
    """How the fake judge decides, and which API key it accepts (any, when None)."""

    pass_keyword: str | None = None
    fail_keyword: str = "FAIL"
    expected_api_key: str | None = None


@dataclass
class Reply:
    """One answer: an HTTP status and body (tests also use ``"drop"``/``"timeout"``)."""

    status: int | str
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def json_reply(status: int, data: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status, json.dumps(data, ensure_ascii=False).encode("utf-8"), headers=headers or {}
    )


def _judged_output(user_prompt: str) -> str | None:
    return read_section(user_prompt, "output")


# -- scored judges (a prompt that asks for a score on a scale) -------------------------

#: The fake scored judge gives one point above the scale's low per this many words.
WORDS_PER_POINT = 4
_SCALE_ASKED = re.compile(r'"score": <a whole number from (-?\d+) to (-?\d+)>')


def _scale_asked(user_prompt: str) -> tuple[int, int] | None:
    """The scale a scored judge's prompt asks for (on its last line), or None."""
    match = _SCALE_ASKED.search(user_prompt.rsplit("\n", 1)[-1])
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def score_verdict(output: str | None, scale: tuple[int, int], rule: JudgeRule) -> dict[str, Any]:
    """The fake's deterministic answer to a scored prompt about ``output``."""
    low, high = scale
    if output is None:
        return {"score": low, "reason": "no <output> section in the prompt"}
    if rule.pass_keyword is not None:
        found = rule.pass_keyword in output
        return {"score": high if found else low,
                "reason": f"the output {'contains' if found else 'lacks'} {rule.pass_keyword!r}"}
    if not output:
        return {"score": low, "reason": "the output is empty"}
    if rule.fail_keyword and rule.fail_keyword in output:
        return {"score": low, "reason": f"the output contains {rule.fail_keyword!r}"}
    words = _words(output)
    score = min(high, low + words // WORDS_PER_POINT)
    return {"score": score, "reason": f"{words} words: {score} on a scale of {low} to {high}"}


# -- a model as the system under test ------------------------------------------------

#: The share of cases a fake model gets wrong, by a word of its name (first match).
MODEL_ERROR_RATES: tuple[tuple[str, float], ...] = (("small", 0.3), ("large", 0.12))
DEFAULT_MODEL_ERROR_RATE = 0.2
_CATEGORIES = re.compile(r"^\s*categories\s*:\s*(?P<names>.+)$", re.IGNORECASE | re.MULTILINE)


def model_error_rate(model: str, prompt: str) -> float:
    """The fake model's error rate for this model name and prompt (see the module's doc)."""
    rate = next((r for word, r in MODEL_ERROR_RATES if word in model.lower()),
                DEFAULT_MODEL_ERROR_RATE)
    if "step by step" in prompt.lower():
        rate /= 2
    if any(line.lstrip().lower().startswith("example") for line in prompt.splitlines()):
        rate /= 2
    return rate


def model_answer(model: str, system: str, user: str) -> str:
    """The fake model's reply to a prompt that is not a judge's (see the module's doc)."""
    prompt = f"{system}\n{user}" if system else user
    found = _CATEGORIES.search(prompt)
    if found is None:
        return "I cannot tell."
    labels = [w.strip().lower() for w in re.split(r"[,|/]", found.group("names")) if w.strip()]
    rest = [
        line for line in prompt.splitlines()
        if not _CATEGORIES.match(line) and not line.lstrip().lower().startswith("example")
    ]
    words = re.findall(r"[a-z0-9_]+", "\n".join(rest).lower())
    label = next((w for w in words if w in labels), "unknown")
    draw = int.from_bytes(hashlib.sha256(f"{model}\0{prompt}".encode()).digest()[:8], "big")
    if label in labels and draw / 2**64 < model_error_rate(model, prompt):
        label = labels[(labels.index(label) + 1) % len(labels)]
    if "JSON" not in prompt:
        return label
    text = json.dumps({"label": label})
    return f"```json\n{text}\n```" if "code fence" in prompt.lower() else text


def _is_judge_prompt(user_prompt: str) -> bool:
    return _judged_output(user_prompt) is not None or _scale_asked(user_prompt) is not None


def _reply_text(model: str, system: str, user: str, rule: JudgeRule) -> str:
    prompt = f"{system}\n{user}"
    if _is_judge_prompt(user) or _CATEGORIES.search(prompt) is None:
        return _verdict_text(user, rule)
    return model_answer(model, system, user)


def _verdict_text(user_prompt: str, rule: JudgeRule) -> str:
    scale = _scale_asked(user_prompt)
    if scale is not None:
        return json.dumps(score_verdict(_judged_output(user_prompt), scale, rule))
    output = _judged_output(user_prompt)
    if output is None:
        verdict = {"pass": False, "reason": "no <output> section in the prompt"}
    elif rule.pass_keyword is not None:
        found = rule.pass_keyword in output
        verdict = {
            "pass": found,
            "reason": f"the output {'contains' if found else 'lacks'} {rule.pass_keyword!r}",
        }
    elif not output:
        verdict = {"pass": False, "reason": "the output is empty"}
    elif rule.fail_keyword and rule.fail_keyword in output:
        verdict = {"pass": False, "reason": f"the output contains {rule.fail_keyword!r}"}
    else:
        verdict = {"pass": True, "reason": "the output is present and unflagged"}
    return json.dumps(verdict)


def _words(text: str) -> int:
    return len(text.split())


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def _anthropic_error(status: int, kind: str, message: str) -> Reply:
    return json_reply(status, {"type": "error", "error": {"type": kind, "message": message}})


def _anthropic(headers: Any, body: Any, rule: JudgeRule, text: str | None) -> Reply:
    # The official SDK sends x-api-key, or Authorization: Bearer with an auth token.
    key = headers.get("x-api-key")
    auth = headers.get("authorization") or ""
    if not key and auth.startswith("Bearer ") and auth[7:].strip():
        key = auth[7:].strip()
    if not key:
        return _anthropic_error(
            401, "authentication_error", "x-api-key or Authorization: Bearer header is required"
        )
    if rule.expected_api_key is not None and key != rule.expected_api_key:
        return _anthropic_error(401, "authentication_error", f"invalid x-api-key: {key}")
    if not headers.get("anthropic-version"):
        return _anthropic_error(
            400, "invalid_request_error", "anthropic-version header is required"
        )
    if not isinstance(body, dict):
        return _anthropic_error(400, "invalid_request_error", "body must be a JSON object")
    problems = []
    if not isinstance(body.get("model"), str):
        problems.append("model: Field required")
    if not isinstance(body.get("max_tokens"), int):
        problems.append("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: Field required")
    if problems:
        return _anthropic_error(400, "invalid_request_error", "; ".join(problems))
    if isinstance(body.get("thinking"), dict) and body.get("temperature", 1) != 1:
        # As the Messages API answers: extended thinking takes the default temperature only.
        return _anthropic_error(
            400, "invalid_request_error",
            "`temperature` may only be set to 1 when thinking is enabled.",
        )
    assert isinstance(messages, list)
    user = "".join(
        _block_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") == "user"
    )
    system = _block_text(body.get("system"))
    reply_text = text if text is not None else _reply_text(body["model"], system, user, rule)
    return json_reply(
        200,
        {
            "id": "msg_fake_" + hashlib.sha256(user.encode()).hexdigest()[:20],
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": reply_text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": _words(system) + _words(user),
                "output_tokens": _words(reply_text),
            },
        },
    )


def _openai_error(message: str, code: str | None = None, status: int = 401) -> Reply:
    error: dict[str, Any] = {"message": message, "type": "invalid_request_error"}
    if status == 401:
        error["code"] = code
    return json_reply(status, {"error": error})


def _openai(headers: Any, body: Any, rule: JudgeRule, text: str | None) -> Reply:
    auth = headers.get("authorization") or ""
    if not auth.startswith("Bearer ") or not auth[7:].strip():
        return _openai_error("You didn't provide an API key.")
    key = auth[7:].strip()
    if rule.expected_api_key is not None and key != rule.expected_api_key:
        return _openai_error(f"Incorrect API key provided: {key}.", "invalid_api_key")
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return _openai_error("you must provide a model parameter", status=400)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return _openai_error("messages: field required", status=400)
    if REASONING_MARK in body["model"]:
        refused = _reasoning_refusal(body)
        if refused is not None:
            return refused
    user = "".join(
        _block_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") == "user"
    )
    system = "".join(
        _block_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") == "system"
    )
    reply_text = text if text is not None else _reply_text(body["model"], system, user, rule)
    prompt_tokens = _words(system) + _words(user)
    return json_reply(
        200,
        {
            "id": "chatcmpl-fake" + hashlib.sha256(user.encode()).hexdigest()[:20],
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply_text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": _words(reply_text),
                "total_tokens": prompt_tokens + _words(reply_text),
            },
        },
    )


#: A model whose name holds this behaves as OpenAI's reasoning models do.
REASONING_MARK = "reasoning"


def _reasoning_refusal(body: dict[str, Any]) -> Reply | None:
    """OpenAI's 400s for a reasoning model: no ``max_tokens``, no temperature but 1."""
    if "max_tokens" in body:
        message = (
            "Unsupported parameter: 'max_tokens' is not supported with this model."
            " Use 'max_completion_tokens' instead."
        )
        return json_reply(400, {"error": {
            "message": message, "type": "invalid_request_error", "param": "max_tokens",
            "code": "unsupported_parameter"}})
    if "temperature" in body and body["temperature"] != 1:
        message = (
            f"Unsupported value: 'temperature' does not support {body['temperature']} with"
            " this model. Only the default (1) value is supported."
        )
        return json_reply(400, {"error": {
            "message": message, "type": "invalid_request_error", "param": "temperature",
            "code": "unsupported_value"}})
    return None


def _system(method: str, case_input: Any, headers: Any = None) -> Reply:
    if isinstance(case_input, dict) and isinstance(case_input.get("echo_header"), str):
        # A careless endpoint that echoes a request header back in its output.
        name = case_input["echo_header"]
        value = headers.get(name) if headers is not None else None
        return json_reply(200, {"answer": f"your {name} header was {value}", "label": "echo"})
    if isinstance(case_input, dict) and "respond_raw" in case_input:
        status = int(case_input.get("status", 200))
        return Reply(
            status, str(case_input["respond_raw"]).encode("utf-8"), "text/plain; charset=utf-8"
        )
    if isinstance(case_input, dict) and "respond" in case_input:
        return json_reply(int(case_input.get("status", 200)), case_input["respond"])
    text: str | None = None
    if isinstance(case_input, dict):
        for name in ("question", "text"):
            if isinstance(case_input.get(name), str):
                text = case_input[name]
                break
    if text is None:
        text = json.dumps(case_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    reply = f"You asked: {text}"
    first = "".join(ch for ch in (text.split() or ["unknown"])[0].lower() if ch.isalnum())
    return json_reply(
        200,
        {
            "answer": reply,
            "label": first or "unknown",
            "length": len(text),
            "method": method,
            "input": case_input,
            "usage": {"input_tokens": _words(text), "output_tokens": _words(reply)},
        },
    )


def answer(
    method: str,
    path: str,
    query: str,
    raw: bytes,
    headers: Any,
    rule: JudgeRule,
    judge_text: str | None = None,
) -> Reply:
    """The normal answer to one request (``judge_text`` replaces a judge's reply text)."""
    if path not in ROUTES or (path != SYSTEM_PATH and method != "POST"):
        return json_reply(404, {"error": f"no route {method} {path}"})
    if method == "GET":
        body: Any = dict(parse_qsl(query, keep_blank_values=True))
    else:
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            return json_reply(400, {"error": {"message": "the body is not JSON"}})
    # "stream": true gets the same answer as server-sent events (testing/fake_stream.py).
    if path == ANTHROPIC_PATH:
        return stream_if_asked(path, body, _anthropic(headers, body, rule, judge_text))
    if path == OPENAI_PATH:
        return stream_if_asked(path, body, _openai(headers, body, rule, judge_text))
    return _system(method, body, headers)


class Capacity:
    """At most ``limit`` requests answered at once; the others are refused (thread-safe)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a capacity is at least 1")
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self.admitted = 0
        self.rejected = 0
        self._lock = threading.Lock()

    def admit(self) -> bool:
        """Take a place if one is free (then call :meth:`leave`); False: refuse the request."""
        with self._lock:
            if self.in_flight >= self.limit:
                self.rejected += 1
                return False
            self.in_flight += 1
            self.admitted += 1
            self.peak = max(self.peak, self.in_flight)
            return True

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def to_json(self) -> dict[str, int]:
        with self._lock:
            return {
                "capacity": self.limit, "in_flight": self.in_flight, "peak": self.peak,
                "admitted": self.admitted, "rejected": self.rejected,
            }


def capacity_reply(retry_after_ms: int | None = 100, retry_after: str | None = None) -> Reply:
    """The 429 of a server at capacity, with ``retry-after-ms`` and ``Retry-After``.

    ``retry_after`` (the ``Retry-After`` value) defaults to ``retry_after_ms`` in
    whole seconds, rounded up.
    """
    headers: dict[str, str] = {}
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
        if retry_after is None:
            retry_after = str(max(1, math.ceil(retry_after_ms / 1000)))
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return json_reply(
        429,
        {"error": {"type": "rate_limit_error", "message": "too many requests in flight"}},
        headers,
    )


class Server(ThreadingHTTPServer):
    """A threaded HTTP server that can close its open keep-alive connections."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        self.rule = JudgeRule()
        self.delay_s = 0.0
        self.capacity: Capacity | None = None
        self.retry_after_ms: int | None = 100
        self.stopping = threading.Event()
        super().__init__(address, handler)

    def close_connections(self) -> None:
        with self.connections_lock:
            connections = list(self.connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive (httpx pools connections); answers with :func:`answer`."""

    protocol_version = "HTTP/1.1"
    server_version = "OloproofFake/1"
    # TCP_NODELAY: a reply is written as its head, then its body; with Nagle's
    # algorithm the body waited for the client's delayed ACK, some 40 ms per request
    # on Linux, which made every answer ~45 ms slower than its --delay.
    disable_nagle_algorithm = True
    timeout = 60  # an idle keep-alive connection is closed after this
    server: Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet

    def do_GET(self) -> None:
        self.handle_request("GET")

    def do_POST(self) -> None:
        self.handle_request("POST")

    def do_PUT(self) -> None:
        self.handle_request("PUT")

    def read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def send(self, reply: Reply) -> None:
        assert isinstance(reply.status, int)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def handle_request(self, method: str) -> None:
        parts = urlsplit(self.path)
        try:
            raw = self.read_body()
        except OSError:
            self.close_connection = True
            return
        capacity = self.server.capacity
        if parts.path == "/_capacity" and method == "GET":
            self.send(json_reply(200, capacity.to_json() if capacity is not None else None))
            return
        if capacity is not None and not capacity.admit():
            self.send(capacity_reply(self.server.retry_after_ms))
            return
        try:
            reply = answer(method, parts.path, parts.query, raw, self.headers, self.server.rule)
            if self.server.delay_s > 0:
                self.server.stopping.wait(self.server.delay_s)
        finally:
            # Out of flight before the answer is written: a client that starts its next
            # call on receipt must not find this one still counted.
            if capacity is not None:
                capacity.leave()
        self.send(reply)


class OfflineProvider:
    """The fake provider and system, served from a background thread on 127.0.0.1."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        delay_s: float = 0.0,
        rule: JudgeRule | None = None,
        capacity: int | None = None,
        retry_after_ms: int | None = 100,
    ) -> None:
        self._server = Server((host, port), Handler)
        self._server.delay_s = delay_s
        self._server.capacity = Capacity(capacity) if capacity else None
        self._server.retry_after_ms = retry_after_ms
        self._server.rule = rule or JudgeRule()
        self._thread: threading.Thread | None = None
        self.host = host
        self.port: int = self._server.server_address[1]

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"offline-provider-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._server.stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.close_connections()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def capacity(self) -> Capacity | None:
        return self._server.capacity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m oloproof.testing.fake_provider",
        description="Serve a fake LLM provider and system under test on 127.0.0.1.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before every answer")
    parser.add_argument(
        "--pass-keyword", help="the judge passes an output only if it contains this text"
        " (default: any output that is not empty and has no FAIL in it)",
    )
    parser.add_argument(
        "--capacity", type=int, default=None,
        help="answer at most N requests at once; refuse the others with 429 at once",
    )
    parser.add_argument(
        "--retry-after-ms", type=int, default=100,
        help="the wait a 429 at capacity asks for, in ms (default 100)",
    )
    args = parser.parse_args(argv)

    server = OfflineProvider(
        args.host, args.port, delay_s=args.delay, rule=JudgeRule(pass_keyword=args.pass_keyword),
        capacity=args.capacity, retry_after_ms=args.retry_after_ms,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    print(server.url, flush=True)
    try:
        while not stop.wait(0.2):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
