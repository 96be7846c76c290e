"""The fake LLM provider and system of the tests, with scripted faults, over real HTTP.

The answers themselves are the shipped offline provider's
(:mod:`oloproof.testing.fake_provider`); this module adds what only tests need:
failing statuses, drops, timeouts, garbage, slow trickled bodies, requests held
until a concurrency peak, and statistics of every call.

Tests and offline examples need the outside world (an LLM provider, a deployed
endpoint) without the network. This module serves it from a stdlib
``ThreadingHTTPServer`` on 127.0.0.1, so it runs apart from the client's event
loop, keeps HTTP/1.1 connections alive (httpx pools them) and takes hundreds
of connections at once.

In a test::

    with FakeServer() as srv:
        srv.configure("/system", fail_first_n=1, fail_status=429, retry_after="1")
        ... call srv.system_url ...
        assert srv.peak_in_flight("/system") == 8

As a process, from the repository root (the URL is the first line of standard output)::

    python -m tests.fakes.provider --port 8765

Endpoints
---------
``POST /v1/messages``
    Anthropic Messages format. Needs ``x-api-key`` and ``anthropic-version``
    (401 / 400 otherwise) and a body with ``model``, ``max_tokens`` and
    ``messages``.
``POST /v1/chat/completions``
    OpenAI Chat Completions format. Needs ``Authorization: Bearer ...`` (401
    otherwise) and a body with ``model`` and ``messages``.
``POST|PUT|GET /system``
    A system under test. The input is the JSON body (or, for GET, the query
    parameters). It answers ``{"answer": "You asked: <text>", "label": <first
    word of text, lower case>, "length": <len(text)>, "method": ..., "input":
    <input>, "usage": {"input_tokens": <words in text>, "output_tokens": <words
    in answer>}}`` where text is the input's ``question`` or ``text`` field, or
    the input as compact JSON. An input ``{"echo_header": NAME}`` gets that
    request header's value back in its ``answer`` (a careless endpoint that
    echoes a secret). An input object with a ``respond`` field gets
    that value back as the JSON body, with status ``status`` (default 200);
    with ``respond_raw`` (a string) it gets that text as a ``text/plain`` body.
``POST /_control``
    ``{"action": "configure", "path": "/system" | null, "behaviour": {...}}``
    sets a :class:`Behaviour` for one path (or the default for all, with
    ``null``); ``{"action": "reset"}`` clears behaviours and statistics.
``GET /_stats``
    ``{"paths": {path: {"in_flight", "peak_in_flight", "total"}}, "calls":
    [{"t", "path", "key", "attempt", "status", "method"}]}``.

The judge's rule
----------------
The judged output is the text between the last ``<output>`` and the last
``</output>`` of the user prompt (see :mod:`oloproof.providers.verdict`). By
default the verdict is pass iff that text is not empty and does not contain
``FAIL`` (``fail_keyword``). With ``pass_keyword`` set, it is pass iff the
text contains that keyword. The reply text is exactly one JSON object
``{"pass": ..., "reason": ...}``; usage counts whitespace-separated words.

Keys and attempts
-----------------
Each request's **key** is a digest of its method, query and body: the same
case sent again has the same key, so ``fail_first_n=1`` fails each case's
first call and lets its retry through. Attempt numbers are counted per path
and key, and every scripted behaviour "for the first n" compares against
that number.
"""

from __future__ import annotations

import argparse
import dataclasses
import email.utils
import hashlib
import json
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

from oloproof.testing.fake_provider import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    ROUTES,
    SYSTEM_PATH,
    Capacity,
    Handler,
    JudgeRule,
    Reply,
    Server,
    answer,
    capacity_reply,
    json_reply,
)

__all__ = ["Behaviour", "FakeServer", "LoggedCall", "main"]

__all__ += ["ANTHROPIC_PATH", "OPENAI_PATH", "ROUTES", "SYSTEM_PATH"]
GARBAGE_BODY = "<html><body>502 Bad Gateway (upstream sent garbage)</body></html>"
GARBAGE_VERDICT = "I looked at the output carefully and I have mixed feelings about it."


@dataclass
class Behaviour:
    """What a path does besides answering. Attempts are counted per request key.

    Precedence for one attempt: ``drop``, then ``timeout``, then a failing
    status (``fail_always``, or ``fail_first_n``), then an error body with 200
    (``error_body_always``, ``error_body_first_n``), then ``garbage``, then the
    normal answer. ``delay_s`` is waited before any answer (not before a drop).
    """

    delay_s: float = 0.0
    # Send the head at once, then the body one byte every trickle_s seconds:
    # bytes keep coming, the answer never completes in time.
    trickle_s: float = 0.0
    fail_first_n: int = 0
    fail_status: int = 503
    fail_always: int | None = None  # a status answered to every call
    retry_after: str | None = None  # Retry-After header on failing statuses ("1", a date)
    retry_after_date_in_s: float | None = None  # send an HTTP-date this far ahead
    drop_first_n: int = 0  # close the connection without answering
    timeout_first_n: int = 0  # hold the request timeout_sleep_s, then close
    timeout_sleep_s: float = 5.0
    garbage_first_n: int = 0
    garbage_always: bool = False
    # "body": a non-JSON 200; "verdict": a judge reply with no verdict in it;
    # "shape": JSON of the wrong shape; "auto": "body" for /system, else "verdict".
    garbage_kind: str = "auto"
    # Hold each request until this many have been in flight at once (at most
    # hold_max_s): a deterministic way to prove the server takes that many.
    hold_until_peak: int = 0
    hold_max_s: float = 10.0
    pass_keyword: str | None = None
    fail_keyword: str = "FAIL"
    # A judge's reply text, as written, instead of the fake's own answer (a scored judge
    # answering 7 on [1, 5], say).
    judge_text: str | None = None
    expected_api_key: str | None = None  # a different key gets 401 quoting it (as some APIs do)
    require_headers: dict[str, str] = field(default_factory=dict)
    # A rate-limited API: at most ``capacity`` requests answered at once (0: no bound);
    # one more gets an immediate 429 with retry-after-ms / Retry-After (extra headers
    # from capacity_headers, e.g. x-ratelimit-remaining-requests: "0").
    capacity: int = 0
    capacity_retry_after_ms: int | None = 100
    capacity_retry_after: str | None = None
    capacity_headers: dict[str, str] = field(default_factory=dict)
    # A 200 whose JSON body is an error, as some gateways and proxies answer: error_body
    # (default {"error": {"code": 429, "message": "rate limited"}}) to each key's first
    # error_body_first_n attempts, or to every attempt with error_body_always; Retry-After
    # as retry_after says.
    error_body_first_n: int = 0
    error_body_always: bool = False
    error_body: Any = None
    # Headers added to every reply of the path (rate-limit headers on a 200, say).
    reply_headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Behaviour:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown behaviour fields: {sorted(unknown)}")
        return cls(**data)


@dataclass(frozen=True)
class LoggedCall:
    """One request as the server saw it; ``t`` is the server's ``time.monotonic()``."""

    t: float
    path: str
    key: str
    attempt: int
    status: int | str  # an HTTP status, "drop" or "timeout"
    method: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _PathStats:
    in_flight: int = 0
    peak_in_flight: int = 0
    total: int = 0


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.stopping = threading.Event()
        self.behaviours: dict[str | None, Behaviour] = {}
        self.paths: dict[str, _PathStats] = {}
        self.attempts: dict[tuple[str, str], int] = {}
        self.log: list[LoggedCall] = []
        self.capacities: dict[str, Capacity] = {}

    def capacity(self, path: str, limit: int) -> Capacity:
        with self.lock:
            cap = self.capacities.get(path)
            if cap is None or cap.limit != limit:
                cap = self.capacities[path] = Capacity(limit)
            return cap

    def behaviour(self, path: str) -> Behaviour:
        with self.lock:
            return self.behaviours.get(path) or self.behaviours.get(None) or Behaviour()

    def begin(self, path: str, key: str) -> int:
        with self.lock:
            stats = self.paths.setdefault(path, _PathStats())
            stats.in_flight += 1
            stats.total += 1
            stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
            attempt = self.attempts.get((path, key), 0) + 1
            self.attempts[(path, key)] = attempt
            self.changed.notify_all()
            return attempt

    def hold_until_peak(self, path: str, peak: int, max_s: float) -> None:
        deadline = time.monotonic() + max_s
        with self.changed:
            while self.paths[path].peak_in_flight < peak and not self.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.changed.wait(min(left, 0.1))

    def record(self, call: LoggedCall) -> None:
        with self.lock:
            self.log.append(call)

    def end(self, path: str) -> None:
        with self.lock:
            self.paths[path].in_flight -= 1

    def reset(self) -> None:
        with self.lock:
            self.behaviours.clear()
            self.paths.clear()
            self.attempts.clear()
            self.log.clear()
            self.capacities.clear()

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "paths": {p: dataclasses.asdict(s) for p, s in self.paths.items()},
                "calls": [c.to_json() for c in self.log],
            }


# --------------------------------------------------------------------------- #
# The server
# --------------------------------------------------------------------------- #


class _Server(Server):
    def __init__(self, address: tuple[str, int], state: _State) -> None:
        self.state = state
        super().__init__(address, _Handler)


class _Handler(Handler):
    server: _Server

    def _abort(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_trickled(self, reply: Reply, gap_s: float) -> None:
        """The reply's head at once, then its body one byte every ``gap_s``."""
        assert isinstance(reply.status, int)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.flush()
            for i in range(len(reply.body)):
                if self.server.state.stopping.wait(gap_s):
                    break
                self.wfile.write(reply.body[i : i + 1])
                self.wfile.flush()
        except OSError:
            self.close_connection = True

    # -- requests -----------------------------------------------------------

    def handle_request(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path, parts.query
        try:
            raw = self.read_body()
        except OSError:
            self.close_connection = True
            return
        state = self.server.state
        if path == "/_stats" and method == "GET":
            self.send(json_reply(200, state.snapshot()))
            return
        if path == "/_control" and method == "POST":
            self.send(self._control(raw))
            return
        if path not in ROUTES or (path != SYSTEM_PATH and method != "POST"):
            self.send(json_reply(404, {"error": f"no route {method} {path}"}))
            return

        key = hashlib.sha256(method.encode() + b"?" + query.encode() + b"\n" + raw).hexdigest()[:16]
        attempt = state.begin(path, key)
        ended = False
        admitted: Capacity | None = None
        try:
            behaviour = state.behaviour(path)
            if behaviour.capacity > 0:
                cap = state.capacity(path, behaviour.capacity)
                if not cap.admit():
                    reply = capacity_reply(
                        behaviour.capacity_retry_after_ms, behaviour.capacity_retry_after
                    )
                    reply.headers.update(behaviour.capacity_headers)
                    state.record(LoggedCall(time.monotonic(), path, key, attempt, 429, method))
                    state.end(path)
                    ended = True
                    self.send(reply)
                    return
                admitted = cap
            reply = self._decide(method, path, query, raw, attempt, behaviour)
            state.record(LoggedCall(time.monotonic(), path, key, attempt, reply.status, method))
            if reply.status == "drop":
                state.end(path)
                ended = True
                self._abort()
                return
            if reply.status == "timeout":
                state.stopping.wait(behaviour.timeout_sleep_s)
                state.end(path)
                ended = True
                self._abort()
                return
            if behaviour.hold_until_peak > 0:
                state.hold_until_peak(path, behaviour.hold_until_peak, behaviour.hold_max_s)
            if behaviour.delay_s > 0:
                state.stopping.wait(behaviour.delay_s)
            # Out of flight before the answer is written: a client that starts
            # its next call on receipt must never see this one still counted.
            state.end(path)
            ended = True
            if admitted is not None:
                admitted.leave()
                admitted = None
            reply.headers.update(behaviour.reply_headers)
            if behaviour.trickle_s > 0:
                self._send_trickled(reply, behaviour.trickle_s)
            else:
                self.send(reply)
        finally:
            if not ended:
                state.end(path)
            if admitted is not None:
                admitted.leave()

    def _decide(
        self, method: str, path: str, query: str, raw: bytes, attempt: int, behaviour: Behaviour
    ) -> Reply:
        if attempt <= behaviour.drop_first_n:
            return Reply("drop")
        if attempt <= behaviour.timeout_first_n:
            return Reply("timeout")
        for name, value in behaviour.require_headers.items():
            received = self.headers.get(name)
            if received != value:
                # Quoting what was sent, as some real APIs do: a client must mask it.
                return json_reply(
                    401, {"error": f"missing or wrong header {name}: got {received!r}"}
                )
        if behaviour.fail_always is not None or attempt <= behaviour.fail_first_n:
            status = (
                behaviour.fail_always
                if behaviour.fail_always is not None
                else behaviour.fail_status
            )
            headers: dict[str, str] = {}
            if behaviour.retry_after_date_in_s is not None:
                headers["Retry-After"] = email.utils.formatdate(
                    time.time() + behaviour.retry_after_date_in_s, usegmt=True
                )
            elif behaviour.retry_after is not None:
                headers["Retry-After"] = behaviour.retry_after
            return json_reply(
                status,
                {"error": {"message": f"scripted failure {status}", "attempt": attempt}},
                headers,
            )
        if behaviour.error_body_always or attempt <= behaviour.error_body_first_n:
            body = behaviour.error_body
            if body is None:
                body = {"error": {"code": 429, "message": "rate limited"}}
            extra = {} if behaviour.retry_after is None else {"Retry-After": behaviour.retry_after}
            return json_reply(200, body, extra)
        garbage = attempt <= behaviour.garbage_first_n or behaviour.garbage_always
        kind = behaviour.garbage_kind
        if kind == "auto":
            kind = "body" if path == SYSTEM_PATH else "verdict"
        if garbage and kind == "body":
            return Reply(200, GARBAGE_BODY.encode(), "text/html; charset=utf-8")
        if garbage and kind == "shape":
            return json_reply(200, {"unexpected": "a JSON body of the wrong shape"})
        rule = JudgeRule(behaviour.pass_keyword, behaviour.fail_keyword, behaviour.expected_api_key)
        verdict = GARBAGE_VERDICT if garbage else behaviour.judge_text
        return answer(method, path, query, raw, self.headers, rule, verdict)

    def _control(self, raw: bytes) -> Reply:
        state = self.server.state
        try:
            command = json.loads(raw.decode("utf-8"))
            action = command.get("action")
            if action == "reset":
                state.reset()
            elif action == "configure":
                behaviour = Behaviour.from_json(command.get("behaviour") or {})
                with state.lock:
                    state.behaviours[command.get("path")] = behaviour
            else:
                raise ValueError(f"unknown action {action!r} (configure, reset)")
        except (ValueError, TypeError, AttributeError) as exc:
            return json_reply(400, {"error": str(exc)})
        return json_reply(200, {"ok": True})


class FakeServer:
    """The fake provider and system, served from a background thread on 127.0.0.1."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._state = _State()
        self._server = _Server((host, port), self._state)
        self._thread: threading.Thread | None = None
        self.host = host
        self.port: int = self._server.server_address[1]

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"fake-provider-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._state.stopping.set()
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

    # -- addresses ----------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def system_url(self) -> str:
        return self.url + SYSTEM_PATH

    @property
    def anthropic_base_url(self) -> str:
        """For ``base_url`` of an ``anthropic`` judge (``/v1/messages`` is appended)."""
        return self.url

    @property
    def openai_base_url(self) -> str:
        """For ``base_url`` of an ``openai`` / ``openai_compatible`` judge."""
        return self.url + "/v1"

    # -- scripting ----------------------------------------------------------

    def configure(self, path: str | None = None, **fields: Any) -> Behaviour:
        """Set the behaviour of ``path`` (all paths without their own when ``None``)."""
        behaviour = Behaviour(**fields)
        with self._state.lock:
            self._state.behaviours[path] = behaviour
        return behaviour

    def reset(self) -> None:
        """Forget behaviours, statistics and attempt counts."""
        self._state.reset()

    # -- observing ----------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The same JSON as ``GET /_stats``."""
        return self._state.snapshot()

    def calls(self, path: str | None = None) -> list[LoggedCall]:
        with self._state.lock:
            return [c for c in self._state.log if path is None or c.path == path]

    def calls_by_key(self, path: str | None = None) -> dict[str, list[LoggedCall]]:
        grouped: dict[str, list[LoggedCall]] = {}
        for call in self.calls(path):
            grouped.setdefault(call.key, []).append(call)
        return grouped

    def _path_stats(self, path: str) -> _PathStats:
        with self._state.lock:
            return dataclasses.replace(self._state.paths.get(path) or _PathStats())

    def in_flight(self, path: str) -> int:
        return self._path_stats(path).in_flight

    def peak_in_flight(self, path: str) -> int:
        return self._path_stats(path).peak_in_flight

    def total_calls(self, path: str) -> int:
        return self._path_stats(path).total

    def capacity_stats(self, path: str) -> dict[str, int] | None:
        """``{"capacity", "in_flight", "peak", "admitted", "rejected"}`` of a path with a
        ``capacity`` behaviour, or None."""
        with self._state.lock:
            cap = self._state.capacities.get(path)
        return None if cap is None else cap.to_json()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.provider",
        description="Serve a fake LLM provider and system under test on 127.0.0.1.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before every answer")
    args = parser.parse_args(argv)

    server = FakeServer(args.host, args.port)
    if args.delay > 0:
        server.configure(None, delay_s=args.delay)
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
