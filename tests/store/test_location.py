"""Where a project's store is (store/location.py) and how a store URL is shown (storeurl.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from oloproof.errors import ConfigError
from oloproof.store.location import PostgresLocation, _plain, locate, store_path
from oloproof.storeurl import masked, scrub, store_setting

URL = "postgresql://ana:S3cr%40t:x@db.example:5432/evals?sslmode=require"


def test_without_a_setting_the_store_is_the_sqlite_file(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLOPROOF_STORE", raising=False)
    config = tmp_path / "oloproof.yaml"
    config.write_text("version: 1\nproject: p\n# the store is the default\n")
    assert locate(config) == store_path(tmp_path)
    config.write_text("version: 1\nproject: p\nstore: sqlite\n")
    assert locate(config) == store_path(tmp_path)


def test_the_environment_wins_over_the_file(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "oloproof.yaml"
    config.write_text(f"version: 1\nproject: 'quoted name'\nstore: {URL}\n")
    monkeypatch.delenv("OLOPROOF_STORE", raising=False)
    assert locate(config) == PostgresLocation(URL, "quoted name")
    monkeypatch.setenv("OLOPROOF_STORE", "sqlite")
    assert locate(config) == store_path(tmp_path)
    monkeypatch.setenv("OLOPROOF_STORE", "postgres://other/db")
    assert locate(config) == PostgresLocation("postgres://other/db", "quoted name")


def test_a_bad_setting_is_refused_without_showing_a_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "oloproof.yaml"
    config.write_text("version: 1\nproject: p\nstore: mysql://root:hunter2@db/x\n")
    monkeypatch.delenv("OLOPROOF_STORE", raising=False)
    with pytest.raises(ConfigError) as caught:
        locate(config)
    assert "hunter2" not in str(caught.value) and "mysql://root:***@db/x" in str(caught.value)
    assert "accepted: a postgresql:// URL" in str(caught.value)
    with pytest.raises(ConfigError, match="expected text"):
        store_setting(5, "oloproof.yaml")
    # Empty is a mistake, as policy: "" is; the default store is written sqlite.
    for empty in ("", "  "):
        with pytest.raises(ConfigError, match="the store is empty: write store: sqlite"):
            store_setting(empty, "oloproof.yaml")
    config.write_text('version: 1\nproject: p\nstore: ""\n')
    with pytest.raises(ConfigError, match="the store is empty"):
        locate(config)
    config.write_text(f"version: 1\nstore: {URL}\n")  # a team store needs the project's name
    with pytest.raises(ConfigError, match="project"):
        locate(config)


def test_a_location_never_shows_its_password() -> None:
    loc = PostgresLocation(URL, "p")
    for text in (str(loc), repr(loc), loc.display):
        assert "S3cr" not in text and "ana:***@db.example" in text
    assert masked("postgresql://u@h/d?password=abc&x=1") == "postgresql://u@h/d?password=***&x=1"
    assert masked("postgresql://h/d") == "postgresql://h/d"
    # Every parameter named for a secret, not only password=.
    assert masked("postgresql://h/d?sslpassword=hunter2&sslmode=require&PASSWORD=x") == (
        "postgresql://h/d?sslpassword=***&sslmode=require&PASSWORD=***")
    assert masked("host=h sslpassword='a b' dbname=d") == "host=h sslpassword=*** dbname=d"
    assert scrub("bad key hunter2", "postgresql://h/d?sslpassword=hunter2") == "bad key ***"
    # A driver's message that quotes the password, as written or percent-decoded.
    said = "invalid token 'S3cr%40t:x' (S3cr@t:x) in " + URL
    cleaned = scrub(said, URL)
    assert "S3cr" not in cleaned and "ana:***@" in cleaned
    # What libpq reads as a password: '?' and '#' unencoded (the user part ends at the
    # first '@' before a '/'), and a parameter whose name is percent-encoded.
    assert masked("postgresql://u:a?b#c@h:5/d") == "postgresql://u:***@h:5/d"
    assert masked("postgresql://h/d?pass%77ord=s3c&x=1") == "postgresql://h/d?pass%77ord=***&x=1"
    assert scrub("bad s3c", "postgresql://h/d?pass%77ord=s3c") == "bad ***"
    # A '/' unencoded is not libpq's password (it ends the host part), but still one.
    assert masked("postgresql://u:ab/cd@h/d") == "postgresql://u:***@h/d"
    # Not a password: a port, then an '@' in the query string.
    assert masked("postgresql://h:5432/d?user=a@b") == "postgresql://h:5432/d?user=a@b"


_VALUE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\r\n\x85\u2028\u2029"),
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(
    value=_VALUE,
    before=st.lists(st.sampled_from(["version: 1", "x: 2", "# c", "", "  - y", "y:"]), max_size=3),
    after=st.lists(st.sampled_from(["version: 1", "  more", "# c", "", "\tz", "z: 1"]), max_size=3),
    key=st.sampled_from(["project", "store"]),
)
def test_a_value_read_off_its_line_is_what_yaml_reads(
    value: str, before: list[str], after: list[str], key: str
) -> None:
    data = "\n".join([*before, f"{key}: {value}", *after]).encode()
    found = _plain(data, key)
    if found is None:
        return  # left to PyYAML
    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError:
        return  # not YAML at all: `run` refuses the file whatever this read
    assert isinstance(doc, dict) and doc.get(key) == found


@pytest.mark.parametrize("value", [
    ".nan", ".NaN", "+.inf", ".Inf", ".5", "1:20", "0x1F", "0b11", "+1", "=", "<<",
    "2001-12-14t21:59:43.10-05:00",
])
def test_a_value_yaml_reads_as_no_text_is_left_to_yaml(value: str) -> None:
    # Hypothesis found `project: .nan`: read here as the name ".nan", by PyYAML as a float
    # (and `1:20` as 80, `0x1F` as 31, a timestamp as a datetime).
    # `=` and `<<` PyYAML refuses as a value: left to it too, which says so.
    data = f"version: 1\nproject: {value}\n".encode()
    try:
        read: object = yaml.safe_load(data)["project"]
    except yaml.YAMLError:
        read = None
    assert not isinstance(read, str)
    assert _plain(data, "project") is None


def test_the_store_sql_reaches_postgresql_as_written(pg_url: str) -> None:
    """The translation of the store's SQL (``?``, a literal ``%``, ``BEGIN IMMEDIATE``) and
    of its values (booleans as SQLite's integers, NUL)."""
    from oloproof.store.postgres import connect, translate

    assert translate("SELECT '?', ? WHERE x LIKE '5%'") == "SELECT '?', %s WHERE x LIKE '5%%'"
    conn = connect(PostgresLocation(pg_url, "p"))
    try:
        assert conn.execute("SELECT '100%'").fetchone()[0] == "100%"
        assert conn.execute("SELECT '100%' || ?, '?'", ("x",)).fetchone() == ("100%x", "?")
        conn.execute("CREATE TABLE t (a BIGINT, b TEXT)")
        conn.execute("BEGIN IMMEDIATE")
        assert conn.in_transaction
        conn.execute("INSERT INTO t VALUES (?, ?)", (True, "a\x00b"))
        conn.execute("COMMIT")
        assert not conn.in_transaction
        assert conn.execute("SELECT a, b FROM t").fetchall() == [(1, "a\ufffdb")]
    finally:
        conn.close()
