"""A chat provider whose every reply a test writes, over real HTTP on 127.0.0.1.

``ScriptedChat(answer)`` serves ``POST /v1/chat/completions`` (and ``/v1/messages``):
``answer(body)`` gets the request's JSON body and returns the reply's JSON body (status
200), so a test can answer each case and each model as it needs (an error on some
cases, thinking written into the text...). ``requests`` holds every body received.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["ScriptedChat", "openai_reply", "user_text"]

Answer = Callable[[dict[str, Any]], dict[str, Any]]


def openai_reply(content: str | None, finish_reason: str = "stop",
                 model: str = "m") -> dict[str, Any]:
    """A Chat Completions reply holding ``content``."""
    return {"id": "x", "object": "chat.completion", "model": model,
            "usage": {"prompt_tokens": 9, "completion_tokens": 4},
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}]}


def user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message."""
    return str(body["messages"][-1]["content"])


class ScriptedChat(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answer: Answer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedChat
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        with self.server._lock:
            self.server.requests.append(body)
        data = json.dumps(self.server.answer(body)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
