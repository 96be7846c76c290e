"""A policy whose first line is ``rules:`` and a no-break space (pasted from a web page or
a chat) is one line of text to YAML, not a mapping. The refusal quoted it back as
``got 'rules: []'``, which looks exactly like a valid policy; it names the character."""

from __future__ import annotations

from pathlib import Path

import pytest

from oloproof.errors import ConfigError
from oloproof.project.loader import load_release_policy


@pytest.mark.parametrize(("text", "named"), [
    ("rules:\u00a0[]\n", ("U+00A0 (NO-BREAK SPACE), which looks like a space but is not one:"
                          " replace it with a space")),
    ("version:\u200b 1\n", "U+200B (ZERO WIDTH SPACE), an invisible character: delete it"),
])
def test_a_policy_that_is_one_line_of_text(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "release.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_release_policy(path, {}, display="release.yaml")
    message = str(info.value)
    assert message.startswith("release.yaml:1: expected a mapping of keys")
    assert named in message


def test_plain_text_is_not_said_to_hold_anything(tmp_path: Path) -> None:
    path = tmp_path / "release.yaml"
    path.write_text("hello\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_release_policy(path, {}, display="release.yaml")
    assert str(info.value).endswith("got 'hello'")
