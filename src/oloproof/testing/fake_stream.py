"""Streamed replies of the fake provider: server-sent events in each provider's format.

A request with ``"stream": true`` gets the same answer as without, as the official SDKs read
a stream: ``text/event-stream``, the reply text cut into several deltas, the usage where
each API puts it. Without this the fake answered a stream request with one JSON document,
which OpenAI's SDK read as a stream of no chunks and Anthropic's ``messages.stream()``
failed on.

- Anthropic Messages: ``message_start`` (the input tokens), ``content_block_start``,
  ``ping``, one ``content_block_delta`` (``text_delta``) per piece, ``content_block_stop``,
  ``message_delta`` (``stop_reason`` and the output tokens), ``message_stop``.
- OpenAI Chat Completions: ``chat.completion.chunk`` objects on ``data:`` lines, the first
  with the role, one per piece, the last with ``finish_reason``; with
  ``stream_options.include_usage`` a final chunk with no choices and the usage (and
  ``"usage": null`` on the others, as the API does); then ``data: [DONE]``.

An error (401, 400, 429 ...) is a JSON document whether or not a stream was asked for, as
the real APIs answer before they start streaming.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oloproof.testing.fake_provider import Reply

__all__ = ["pieces", "stream_if_asked"]

_ANTHROPIC = "/v1/messages"
_OPENAI = "/v1/chat/completions"
_PIECE = re.compile(r"\S+\s*|\s+")


def pieces(text: str, words: int = 3) -> list[str]:
    """``text`` cut into deltas of a few words each (whitespace kept, so they join back to
    exactly ``text``); an empty text is one empty delta."""
    tokens = _PIECE.findall(text)
    chunks = ["".join(tokens[i:i + words]) for i in range(0, len(tokens), words)]
    return chunks or [""]


def stream_if_asked(path: str, body: Any, reply: Reply) -> Reply:
    """``reply`` (a :class:`~oloproof.testing.fake_provider.Reply`) as a stream of events
    when the request asked for one and the answer is a success; otherwise unchanged."""
    if reply.status != 200 or not isinstance(body, dict) or body.get("stream") is not True:
        return reply
    try:
        message = json.loads(reply.body)
    except (ValueError, TypeError):
        return reply
    if path == _ANTHROPIC:
        events = _anthropic_events(message)
    elif path == _OPENAI:
        events = _openai_events(message, body)
    else:
        return reply
    from oloproof.testing.fake_provider import Reply  # the module that calls this one

    return Reply(200, events.encode("utf-8"), "text/event-stream; charset=utf-8",
                 {"Cache-Control": "no-cache"})


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"{head}data: {payload}\n\n"


def _anthropic_events(message: dict[str, Any]) -> str:
    text = "".join(b.get("text", "") for b in message.get("content", []) if isinstance(b, dict))
    usage = message.get("usage") or {}
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": 0}}
    out = [
        _sse({"type": "message_start", "message": start}, "message_start"),
        _sse({"type": "content_block_start", "index": 0,
              "content_block": {"type": "text", "text": ""}}, "content_block_start"),
        _sse({"type": "ping"}, "ping"),
    ]
    for piece in pieces(text):
        out.append(_sse({"type": "content_block_delta", "index": 0,
                         "delta": {"type": "text_delta", "text": piece}}, "content_block_delta"))
    out += [
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _sse({"type": "message_delta",
              "delta": {"stop_reason": message.get("stop_reason", "end_turn"),
                        "stop_sequence": None},
              "usage": {"output_tokens": usage.get("output_tokens", 0)}}, "message_delta"),
        _sse({"type": "message_stop"}, "message_stop"),
    ]
    return "".join(out)


def _openai_events(message: dict[str, Any], body: dict[str, Any]) -> str:
    choice = (message.get("choices") or [{}])[0]
    text = str((choice.get("message") or {}).get("content") or "")
    options = body.get("stream_options")
    with_usage = isinstance(options, dict) and options.get("include_usage") is True
    base = {"id": message.get("id"), "object": "chat.completion.chunk",
            "created": message.get("created", 0), "model": message.get("model")}
    extra = {"usage": None} if with_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish}], **extra})

    out = [chunk({"role": "assistant", "content": ""}, None)]
    out += [chunk({"content": piece}, None) for piece in pieces(text) if piece]
    out.append(chunk({}, choice.get("finish_reason", "stop")))
    if with_usage:
        out.append(_sse({**base, "choices": [], "usage": message.get("usage")}))
    out.append(_sse("[DONE]"))
    return "".join(out)
