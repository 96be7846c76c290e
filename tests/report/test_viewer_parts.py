"""The parts of ``oloproof view`` that need no server: how its token is chosen, the file that
opens a browser, the socket it listens on, and the addresses of cases."""

from __future__ import annotations

import socket
import stat
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from oloproof.cli.view import _bind, _opener, choose_token
from oloproof.errors import UsageError
from oloproof.render.html import case_url
from oloproof.render.html.viewer import ViewerAccess, _without_token

TOKEN = "a-chosen-token-0123456789_ABCdef"


def test_the_token_comes_from_the_flag_then_the_environment_then_chance() -> None:
    assert choose_token(None, {"OLOPROOF_VIEW_TOKEN": TOKEN}) == TOKEN
    assert choose_token(TOKEN + "2", {"OLOPROOF_VIEW_TOKEN": TOKEN}) == TOKEN + "2"
    drawn = {choose_token(None, {}) for _ in range(50)}
    assert len(drawn) == 50 and all(len(t) >= 40 for t in drawn)


@pytest.mark.parametrize("bad", ["", "short", "x" * 15, "with space 0123456789", "ünïcode-0123456789",
                                 "semi;colon-0123456789", "quote\"0123456789"])
def test_a_weak_or_unsafe_token_is_refused(bad: str) -> None:
    with pytest.raises(UsageError, match="at least 16 characters"):
        choose_token(bad, {})
    with pytest.raises(UsageError, match="OLOPROOF_VIEW_TOKEN"):
        choose_token(None, {"OLOPROOF_VIEW_TOKEN": bad})


def test_the_opener_is_its_owners_alone(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:1234/?token={TOKEN}"
    page = _opener(url, tmp_path)
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert f'content="0;url={url}"' in page.read_text()


def test_the_socket_sends_small_answers_at_once() -> None:
    sock = _bind(0)
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


def test_tokens_are_compared_whole() -> None:
    access = ViewerAccess(TOKEN, "c")
    assert access.matches(TOKEN.encode())
    for wrong in (b"", TOKEN[:-1].encode(), (TOKEN + "x").encode(), TOKEN.upper().encode(),
                  "é".encode() * 20):
        assert not access.matches(wrong)


def test_the_token_leaves_the_address_and_nothing_else_does() -> None:
    assert _without_token(b"token=abc") == b""
    assert _without_token(b"a=1&token=abc&b=%2F") == b"a=1&b=%2F"
    assert _without_token(b"tok%65n=abc&x=token") == b"x=token"
    assert _without_token(b"token=1&token=2&q=a+b") == b"q=a+b"


@pytest.mark.parametrize("case_id", [".", "..", "/", "a/b", "%", "%2e", "?", "#", "+", " ",
                                     "é", "日本語", "🙂", "\\", "a&b=c", "..%2F"])
def test_a_case_address_carries_its_id_whole(case_id: str) -> None:
    url = case_url("run_X", case_id)
    parts = urlsplit(url)
    assert parts.path == "/runs/run_X/case" and parts.fragment == ""
    assert parse_qs(parts.query, keep_blank_values=True)["id"] == [case_id]
    assert all(ord(ch) < 128 and ch not in " #" for ch in url)
