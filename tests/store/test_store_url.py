"""A team store's URL and its secrets (storeurl.py)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

from oloproof.storeurl import masked, scrub

RELEASE = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"label": "ok"}
"""


def test_a_scram_key_in_the_url_is_never_shown(tmp_path: Path) -> None:
    """libpq 18's ``scram_client_key`` (and ``scram_server_key``) log in without the
    password: it was shown as written wherever the store was, in every error that names
    it."""
    key = "c2NyYW0tY2xpZW50LWtleQ"
    url = f"postgresql://ana@127.0.0.1:1/evals?scram_client_key={key}&scram_server_key={key}2"
    assert masked(url) == (
        "postgresql://ana@127.0.0.1:1/evals?scram_client_key=***&scram_server_key=***")
    assert key not in scrub(f"bad key {key}2 ({key})", url)
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(8), release=RELEASE)
    result = run_cli("runs", cwd=root, env={"OLOPROOF_STORE": url})
    assert result.code == 5 and "scram_client_key=***" in result.err, result.text
    assert key not in result.text
