"""The fake provider streams (issue 30): OpenAI's ``stream=True`` and Anthropic's
``messages.stream()`` through the official client libraries, against the fake over real
HTTP on 127.0.0.1. Before, the first got a stream of 0 chunks and the second failed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from oloproof.testing.fake_provider import OfflineProvider
from oloproof.testing.fake_stream import pieces

# Two large client libraries to import: out of the fast tier. They are imported by the tests
# that use them, not at collection (every `make test-fast` worker collects this module: the
# import of `anthropic` alone took about 2 s of each one's collection).
pytestmark = pytest.mark.slow

# Not a judge prompt of Oloproof's (no framed output section): the fake answers with its
# verdict on that, a JSON object of a dozen words, which is enough to stream in pieces.
PROMPT = "Is the refund window 30 days?"


@pytest.fixture(scope="module")
def server() -> Iterator[OfflineProvider]:
    with OfflineProvider() as provider:
        yield provider


def test_openai_stream_gives_the_reply_in_chunks(server: OfflineProvider) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k-1", max_retries=0)
    messages = [{"role": "system", "content": "You judge."}, {"role": "user", "content": PROMPT}]
    whole = client.chat.completions.create(model="fake-judge", messages=messages)
    chunks = list(client.chat.completions.create(
        model="fake-judge", messages=messages, stream=True,
        stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert json.loads(text)["pass"] is False
    deltas = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) == len(pieces(text)) >= 3  # streamed, not one piece
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    # Without include_usage: no usage chunk, as the API does.
    plain = list(client.chat.completions.create(model="fake-judge", messages=messages,
                                                stream=True))
    assert all(c.choices and c.usage is None for c in plain)


def test_anthropic_stream_gives_the_reply_and_its_usage(server: OfflineProvider) -> None:
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=server.url, api_key="k-1", max_retries=0)
    kwargs = {"model": "fake-judge", "max_tokens": 256,
              "messages": [{"role": "user", "content": PROMPT}]}
    whole = client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text and json.loads(text)["pass"] is False
    assert final.content[0].text == text and final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (
        whole.usage.input_tokens, whole.usage.output_tokens)
    # The lower-level stream=True: the events in their order.
    kinds = [e.type for e in client.messages.create(**kwargs, stream=True)]
    assert kinds[:3] == ["message_start", "content_block_start", "content_block_delta"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_an_error_is_json_even_when_a_stream_is_asked_for(server: OfflineProvider) -> None:
    request = urllib.request.Request(
        f"{server.url}/v1/chat/completions", method="POST",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}],
                         "stream": True}).encode(),
        headers={"Content-Type": "application/json"})  # no API key: 401
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 401
    assert info.value.headers["Content-Type"] == "application/json"
    assert "API key" in json.loads(info.value.read())["error"]["message"]


def test_pieces_join_back_to_the_text() -> None:
    for text in ("", "one", "a b c d e f g", "  spaced   out \n text  "):
        assert "".join(pieces(text)) == text
