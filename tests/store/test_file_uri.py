"""store/db.py's ``file_uri``: the text of ``Path.resolve().as_uri()``, made without pathlib
(which would bring urllib.parse and ipaddress to every ``gate``), and a store opened
read-only through it where its path holds what a URI must escape."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from oloproof.store.db import file_uri, open_store, open_store_readonly

NAMES = [
    "plain",
    "with space",
    "per%cent",
    "ask?mark",
    "hash#tag",
    "semi;colon&amp=eq",
    "quote'double\"",
    "tilde~dash-dot.under_score",
    "é accent",
    "日本語",
    "emoji 🚀",
    "plus+comma,at@",
    "back\\slash",
    "percent%2Fencoded",
]


@pytest.mark.parametrize("name", NAMES)
def test_the_uri_is_the_one_pathlib_makes(tmp_path: Path, name: str) -> None:
    folder = tmp_path / name
    folder.mkdir()
    store = folder / "store.sqlite"
    store.write_bytes(b"")
    assert file_uri(str(store)) == store.resolve().as_uri()
    # Relative, through a link, and a file that is not there: resolved the same way.
    link = tmp_path / f"link-{len(name)}"
    link.symlink_to(folder)
    assert file_uri(str(link / "store.sqlite")) == (link / "store.sqlite").resolve().as_uri()
    assert file_uri(str(folder / "absent.sqlite")) == (folder / "absent.sqlite").resolve().as_uri()
    here = os.getcwd()
    try:
        os.chdir(folder)
        assert file_uri("store.sqlite") == Path("store.sqlite").resolve().as_uri()
    finally:
        os.chdir(here)


def test_a_path_that_is_not_utf8_is_written_byte_for_byte(tmp_path: Path) -> None:
    raw = os.fsencode(str(tmp_path)) + b"/bad-\xff-name"
    path = os.fsdecode(raw)  # the byte kept as a lone surrogate
    assert file_uri(path) == Path(path).resolve().as_uri()
    assert file_uri(path).endswith("/bad-%FF-name")


@pytest.mark.parametrize("name", ["per%cent", "ask?mark", "hash#tag", "日本語 space"])
def test_a_store_whose_path_must_be_escaped_is_read(tmp_path: Path, name: str) -> None:
    folder = tmp_path / name / ".oloproof"
    conn = open_store(str(folder / "store.sqlite"))
    conn.execute("INSERT INTO meta(key, value) VALUES ('probe', 'kept')")
    conn.close()
    read = open_store_readonly(str(folder / "store.sqlite"))
    try:
        row = read.execute("SELECT value FROM meta WHERE key = 'probe'").fetchone()
        assert row == ("kept",)
        with pytest.raises(sqlite3.OperationalError):  # read-only, as the URI asked
            read.execute("INSERT INTO meta(key, value) VALUES ('other', 'x')")
    finally:
        read.close()
    # Nothing was created beside it under another name (a URI read wrongly would make a
    # new, empty database somewhere else).
    assert sorted(os.listdir(tmp_path / name)) == [".oloproof"]
