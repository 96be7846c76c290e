"""Configuration values that a run used to take silently, through the real CLI (a subprocess,
real files, a real store): a version YAML reads as a number, a group_by key no case has, a URL
or a header no request can carry, a store URL's secret parameters."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from tests.conftest import Result
from tests.trust._support import cli, no_traceback, project, runs

pytestmark = pytest.mark.slow

RIGHT = """
    def answer(inp):
        return {"label": "ok"}
"""


def _one_error_line(result: Result) -> str:
    no_traceback(result)
    assert result.code == 2, result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_versions_yaml_reads_as_one_number_are_three_identities(tmp_path: Path) -> None:
    """1.1, 1.10 and 1.100 are one number to YAML: each run after the first hit the cache of
    the other version, and `runs` listed the system as 1.1 each time."""
    root = project(tmp_path / "p", RIGHT, system="  callable: app:answer\n")
    config = root / "oloproof.yaml"
    for version in ("1.1", "1.10", "1.100", "010", "8"):
        config.write_text(re.sub(r"(?m)^  version: .*$", f"  version: {version}",
                                 config.read_text()))
        done = cli(root, "run")
        assert done.code == 0, done.text
        assert "executions 0 hits · 6 misses" in done.out, (version, done.out)
    versions = [r["system"]["version"] for r in runs(root)]
    assert versions == ["8", "010", "1.100", "1.10", "1.1"]
    done = cli(root, "run")  # the same version again: every execution from the cache
    assert "executions 6 hits · 0 misses" in done.out, done.out


def test_a_group_by_key_no_case_has_is_refused(tmp_path: Path) -> None:
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": "ok"},
              "metadata": {"lang": "en", "tier": i % 2}} for i in range(6)]
    evaluators = ("  - type: exact_match\n    criterion: exact_label\n    field: label\n"
                  "    group_by: [langue]\n")
    root = project(tmp_path / "p", RIGHT, cases=cases, evaluators=evaluators)
    line = _one_error_line(cli(root, "run"))
    assert line == (
        "oloproof run: error: oloproof.yaml:15: evaluators[0].group_by[0]: no case of"
        " data/cases.jsonl has the metadata key 'langue': every case would be in the one"
        " group langue=null; did you mean 'lang'? (accepted: a key of the cases' metadata:"
        " lang, tier)"), line
    assert not (root / ".oloproof" / "store.sqlite").exists()
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("[langue]", "[lang]"))
    line = _one_error_line(cli(root, "run", "--group-by", "teir"))
    assert line.startswith("oloproof run: error: --group-by teir: no case of data/cases.jsonl"
                           " has the metadata key 'teir'"), line
    assert "did you mean 'tier'?" in line
    done = cli(root, "run", "--group-by", "tier")
    assert done.code == 0, done.text
    assert "exact_label[tier=1]" in done.out


def test_a_url_or_a_header_no_request_can_carry_is_refused_before_the_run(
    tmp_path: Path,
) -> None:
    """Port 65536 failed every call with `ExceptionGroup: unhandled errors in a TaskGroup`,
    naming neither the URL nor the field; an invalid header name failed every call too."""
    for http, expected in (
        ("    url: http://127.0.0.1:65536/triage\n",
         "oloproof.yaml:9: system.http.url: port 65536 is out of range"),
        ("    url: http://127.0.0.1:8000/triage\n    headers: {\"Bad Header\": x}\n",
         ("oloproof.yaml:10: system.http.headers.Bad Header: 'Bad Header' is not a header"
          " name")),
        (("    url: http://127.0.0.1:8000/triage\n    headers:\n"
          "      Authorization: \"Bearer ${INTAKE_TOKEN\"\n"),
         ("oloproof.yaml:11: system.http.headers.Authorization: '${INTAKE_TOKEN' is not"
          " closed: write ${INTAKE_TOKEN}")),
    ):
        root = project(tmp_path / str(len(http)), RIGHT,
                       system="  http:\n    version: v1\n" + http)
        line = _one_error_line(cli(root, "run"))
        assert f"oloproof run: error: {expected}" in line, line
        assert not (root / ".oloproof" / "store.sqlite").exists()


def test_a_store_url_never_shows_a_secret_parameter(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = (f"postgresql://ana@127.0.0.1:{port}/evals?sslpassword=hunter2&password=pw-SECRET"
           "&connect_timeout=2")
    root = project(tmp_path / "p", RIGHT, extra=f"store: {json.dumps(url)}\n")
    for command in ("run", "runs"):
        done = cli(root, command)
        no_traceback(done)
        assert done.code != 0, done.text
        assert "hunter2" not in done.text and "pw-SECRET" not in done.text, done.text
        assert "sslpassword=***&password=***" in done.err, done.err


def test_a_variable_written_into_a_url_is_refused_not_sent_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """${NAME} is filled only in header values: in a URL it went out as written (the server
    got '/triage?key=${INTAKE_TOKEN}', and a judge's base_url host '${JUDGE_HOST}'), so a key
    meant for the query string was never sent and every call failed at the server."""
    from http.server import BaseHTTPRequestHandler

    from tests.trust._support import send_body, serving

    seen: list[str] = []

    class Answer(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            seen.append(self.path)
            send_body(self, b'{"label": "ok"}')

    monkeypatch.setenv("INTAKE_TOKEN", "intake-token-value")
    monkeypatch.setenv("JUDGE_HOST", "127.0.0.1")
    with serving(Answer) as base:
        root = project(tmp_path / "http", RIGHT, system=(
            f"  http:\n    version: v1\n    url: {base}/triage?key=${{INTAKE_TOKEN}}\n"))
        line = _one_error_line(cli(root, "run"))
        assert line.startswith(
            "oloproof run: error: oloproof.yaml:9: system.http.url: a URL is sent as written,"
            " and ${NAME} in it is not filled from the environment"), line
        judge = ("  - type: rubric_judge\n    criterion: exact_label\n    provider:"
                 " openai_compatible\n    model: m\n    rubric_text: ok?\n"
                 "    base_url: http://${JUDGE_HOST}:8000/v1\n")
        root = project(tmp_path / "judge", RIGHT, evaluators=judge)
        line = _one_error_line(cli(root, "run"))
        assert "evaluators[0].base_url: a URL is sent as written" in line, line
        assert not (root / ".oloproof" / "store.sqlite").exists()
    assert seen == []


def test_a_judges_key_that_cannot_be_sent_names_that_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key with a line break in it was refused as 'oloproof.yaml:11: evaluators.api_key_env'
    (the line of `evaluators:`): in a panel whose judges each read their own key, it said not
    which judge's key to fix."""
    monkeypatch.setenv("GOOD_KEY", "judge-key-for-tests")
    monkeypatch.setenv("BAD_KEY", "judge-key\r\nX-Injected: 1")
    judge = ("  - type: rubric_judge\n    criterion: exact_label\n    provider: openai_compatible\n"
             "    model: m\n    rubric_text: ok?\n    base_url: http://127.0.0.1:9/v1\n"
             "    api_key_env: GOOD_KEY\n    panel:\n      - {}\n      - api_key_env: BAD_KEY\n")
    root = project(tmp_path / "p", RIGHT, evaluators=judge)
    line = _one_error_line(cli(root, "run"))
    assert line.startswith("oloproof run: error: oloproof.yaml:21: evaluators[0].panel[1]"
                           ".api_key_env: the API key must be ASCII"), line
    assert "X-Injected" not in line
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("GOOD_KEY", "BAD_KEY"))
    line = _one_error_line(cli(root, "run"))
    # The first judge inherits the evaluator's key: it is the one named.
    assert line.startswith("oloproof run: error: oloproof.yaml:20: evaluators[0].panel[0]"
                           ".api_key_env: the API key must be ASCII"), line
