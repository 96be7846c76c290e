"""Issue 29: one depth limit (100 levels of arrays and objects, oloproof._json
MAX_JSON_DEPTH), applied by every reader: a suite line, a labels line, the project's
YAML, a system's output, an HTTP body, a judge's reply, a configuration snapshot, JSON
read back from the store. Whatever one part accepts, every command can print.

Each file a user supplies is tried with a value nested far too deep (5,000 levels: the
parser's own recursion used to end the command with exit 70) and one level too deep."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest
from tests.store._support import snapshot, strict_json
from tests.trust._support import (
    cli,
    integrity_ok,
    no_traceback,
    project,
    runs,
    send_body,
    serving,
)

LIMIT = 100
APP = "def answer(inp):\n    return {'label': 'ok'}\n"
DEEP_APP = """
def answer(inp):
    value = "leaf"
    for _ in range(inp["depth"]):
        value = [value]
    return {"label": "ok", "deep": value}
"""


def nested(levels: int, leaf: str = '"leaf"') -> str:
    """JSON text of ``levels`` arrays around ``leaf``."""
    return "[" * levels + leaf + "]" * levels


def _one_line_refusal(result: object, *needles: str) -> None:
    code, err = result.code, result.err  # type: ignore[attr-defined]
    assert code == 2, result
    for needle in needles:
        assert needle in err, err
    assert len(err.strip().splitlines()) == 1, err
    no_traceback(result)  # type: ignore[arg-type]


def _good(root: Path, app: str = APP, **kw: object) -> tuple[Path, dict[str, tuple[str, int, int]]]:
    """A project with one finished run, and its store's files as they are after it."""
    project(root, app, n=12, **kw)  # type: ignore[arg-type]
    first = cli(root, "run")
    assert first.code == 0, first.text
    return root, snapshot(root / ".oloproof")


@pytest.mark.parametrize("levels", [5000, LIMIT])
def test_a_deep_suite_line_is_refused_naming_the_line(tmp_path: Path, levels: int) -> None:
    # LIMIT levels inside "input" make the line LIMIT + 1 deep.
    root, before = _good(tmp_path / "p")
    with (root / "data" / "cases.jsonl").open("a") as f:
        f.write('{"id": "deep", "input": ' + nested(levels) + "}\n")
    _one_line_refusal(cli(root, "run"), "data/cases.jsonl:13", f"nested deeper than {LIMIT} levels")
    assert snapshot(root / ".oloproof") == before and len(runs(root)) == 1


@pytest.mark.parametrize("levels", [5000, LIMIT])
def test_deep_yaml_is_refused_in_every_project_file(tmp_path: Path, levels: int) -> None:
    root, before = _good(tmp_path / "p")
    config = (root / "oloproof.yaml").read_text()
    for name, text in (
        ("oloproof.yaml", config + f"metadata_note: {nested(levels, '1')}\n"),
        ("release.yaml", "version: 1\nrules: []\nnote: " + nested(levels, "1") + "\n"),
    ):
        original = (root / name).read_text()
        (root / name).write_text(text)
        # Past about 1,000 levels PyYAML's own limit speaks first (one line too).
        expected = f"nested deeper than {LIMIT} levels" if levels == LIMIT else "nesting depth"
        _one_line_refusal(cli(root, "run"), name, expected)
        (root / name).write_text(original)
    assert snapshot(root / ".oloproof") == before


def test_an_http_depth_limit_above_the_one_limit_is_refused(tmp_path: Path) -> None:
    root, before = _good(tmp_path / "p")
    path = root / "oloproof.yaml"
    path.write_text(path.read_text().replace("evaluators:", "limits:\n  max_json_depth: 1000\nevaluators:"))
    _one_line_refusal(cli(root, "run"), "limits.max_json_depth", f"{LIMIT}")
    assert snapshot(root / ".oloproof") == before


def _labelled_project(root: Path, base_url: str) -> Path:
    evaluators = (
        "  - type: rubric_judge\n    criterion: helpful\n    provider: openai_compatible\n"
        f"    model: m\n    base_url: {base_url}\n    rubric_text: Is it ok?\n"
    )
    return project(root, APP, n=3, evaluators=evaluators,
                   extra="human_labels: data/labels.jsonl\npolicy: none\n")


@pytest.mark.parametrize(
    ("line", "needles"),
    [
        # 5,000 levels: json's RecursionError ended `run` with exit 70.
        ('{"id": "q0", "criterion": "helpful", "pass": true, "note": ' + nested(5000) + "}",
         [f"nested deeper than {LIMIT} levels"]),
        # Two "pass" keys: the last one was taken, silently.
        ('{"id": "q0", "criterion": "helpful", "pass": true, "pass": false}',
         ["the key 'pass' appears twice"]),
        # A lone surrogate was accepted (and stored as U+FFFD).
        ('{"id": "q\\ud800", "criterion": "helpful", "pass": true}',
         ["id: holds a lone UTF-16 surrogate"]),
    ],
    ids=["deep", "duplicate-pass", "lone-surrogate"],
)
def test_a_bad_labels_line_is_refused_naming_file_and_line(
    tmp_path: Path, line: str, needles: list[str]
) -> None:
    root = _labelled_project(tmp_path / "p", "http://127.0.0.1:9/v1")  # never called
    (root / "data" / "labels.jsonl").write_text(
        '{"id": "q1", "criterion": "helpful", "pass": true}\n' + line + "\n"
    )
    _one_line_refusal(cli(root, "run"), "data/labels.jsonl:2", *needles)
    assert not (root / ".oloproof" / "store.sqlite").exists()


def test_deep_outputs_are_refused_and_everything_stored_prints(tmp_path: Path) -> None:
    """A system's output one level past the limit (and far past it) is that case's error;
    a suite line and an output exactly at the limit are stored, and every command prints
    them (inspect --json, inspect --case, inspect --failures, report, gate --json)."""
    cases = [
        {"id": "at_limit_out", "input": {"depth": LIMIT - 1}, "expected": {"label": "ok"}},
        {"id": "past_limit_out", "input": {"depth": LIMIT}, "expected": {"label": "ok"}},
        {"id": "far_past_out", "input": {"depth": 5000}, "expected": {"label": "ok"}},
    ] + [{"id": f"q{i}", "input": {"depth": 1}, "expected": {"label": "ok"}} for i in range(12)]
    root = project(tmp_path / "p", DEEP_APP, cases=cases, extra="policy: none\n")
    # A suite line exactly at the limit: {"input": {"depth": ..., "d": [[...]]}} and its
    # metadata, LIMIT levels in all.
    with (root / "data" / "cases.jsonl").open("a") as f:
        f.write('{"id": "at_limit_in", "input": {"depth": 1, "d": ' + nested(LIMIT - 2)
                + '}, "metadata": {"m": ' + nested(LIMIT - 2) + "}}\n")
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 0, result.text
    doc = strict_json(cli(root, "inspect", "latest", "--json").out)
    by_id = {c["id"]: c for c in doc["cases"]}
    for case_id in ("past_limit_out", "far_past_out"):
        assert by_id[case_id]["status"] == "ERROR", by_id[case_id]
    assert f"nested deeper than {LIMIT} levels" in by_id["past_limit_out"]["error"]
    assert by_id["at_limit_out"]["status"] == "OK"
    assert by_id["at_limit_in"]["status"] == "OK"
    # Every command prints what is stored, the deepest values included.
    for args in (["inspect", "latest", "--case", "at_limit_out"],
                 ["inspect", "latest", "--case", "at_limit_in"],
                 ["inspect", "latest", "--case", "at_limit_in", "--json"],
                 ["inspect", "latest", "--failures"], ["inspect", "latest"],
                 ["gate", "latest", "--json"], ["runs"], ["plan", "latest", "--run"],
                 ["report", "latest", "-o", "report.html"]):
        shown = cli(root, *args)
        no_traceback(shown)
        assert shown.code in (0, 3), (args, shown.text)
    assert '"leaf"' in cli(root, "inspect", "latest", "--case", "at_limit_in", "--json").out
    assert (root / "report.html").stat().st_size > 0
    assert integrity_ok(root)


def test_deep_json_in_the_store_is_one_line_and_exit_5(tmp_path: Path) -> None:
    """JSON read back from the store passes the same limit: a store another tool (or an
    older version) wrote deeper cannot crash a reader."""
    root, _ = _good(tmp_path / "p")
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    conn.execute("UPDATE run_cases SET input_json = ? WHERE case_id = 'q3'",
                 ('{"d": ' + nested(5000) + "}",))
    conn.commit()
    conn.close()
    for args in (["inspect", "latest", "--json"], ["inspect", "latest", "--case", "q3"],
                 ["report", "latest", "-o", "r.html"]):
        result = cli(root, *args)
        assert result.code == 5, (args, result.text)
        assert "input of case 'q3'" in result.err and f"nested deeper than {LIMIT}" in result.err
        assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.text
    # What does not need that column still reads the run.
    assert cli(root, "gate", "latest").code == 0


def test_a_deep_snapshot_is_not_read(tmp_path: Path) -> None:
    root, _ = _good(tmp_path / "p")
    assert cli(root, "run").code == 0
    kept = sorted((root / ".oloproof" / "snapshots").glob("*.json"))
    assert kept
    for path in kept:
        path.write_text('{"format": 1, "deps": ' + nested(5000, "[]") + "}")
    for args in (["run"], ["gate", "latest"]):
        result = cli(root, *args)
        no_traceback(result)
        assert result.code == 0, (args, result.text)
    # Written again by the run that validated the files instead.
    for path in kept:
        assert json.loads(path.read_text())["format"] == 1
        assert "deps" in json.loads(path.read_text()) or "stored" in json.loads(path.read_text())
    assert len(runs(root)) == 3


def test_a_deep_where_value_is_a_usage_error(tmp_path: Path) -> None:
    root, _ = _good(tmp_path / "p")
    _one_line_refusal(cli(root, "run", "--where", "metadata.x == " + nested(5000, "1")),
                      "--where", f"nested deeper than {LIMIT} levels")


class _DeepJudge(BaseHTTPRequestHandler):
    """An OpenAI-compatible judge whose reply nests its reason ``levels`` deep."""

    levels: ClassVar[int] = 5000

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        text = '{"pass": true, "reason": ' + nested(self.levels) + "}"
        body = json.dumps({"model": "m", "choices": [{"message": {"content": text}}]}).encode()
        send_body(self, body)


@pytest.fixture(params=[5000, LIMIT])
def deep_judge(request: pytest.FixtureRequest) -> Iterator[str]:
    handler = type("Judge", (_DeepJudge,), {"levels": request.param})
    with serving(handler) as base:
        yield f"{base}/v1"


def test_a_deep_judge_reply_is_that_cases_error(tmp_path: Path, deep_judge: str) -> None:
    evaluators = (
        "  - type: rubric_judge\n    criterion: helpful\n    provider: openai_compatible\n"
        f"    model: m\n    base_url: {deep_judge}\n    rubric_text: Is it ok?\n"
    )
    root = project(tmp_path / "p", APP, n=3, evaluators=evaluators, extra="policy: none\n")
    result = cli(root, "run")
    no_traceback(result)
    # No reply of the judge could be read: the run holds no result of it (SPEC §5).
    assert result.code == 5, result.text
    assert "Stopped: incomplete: judge helpful" in result.out, result.out
    doc = strict_json(cli(root, "inspect", "latest", "--json").out)
    for case in doc["cases"]:
        judgment = case["judgments"]["helpful"]
        assert judgment["status"] == "ERROR", judgment
        assert f"nested deeper than {LIMIT} levels" in judgment["reason"], judgment
