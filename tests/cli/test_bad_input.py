"""Every mistake a user can make in the project files: one clear message, exit 2,
no traceback, and the store left exactly as it was."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="echo", version="1")
def answer(case_input):
    return {"label": "ok", "answer": "fine"}
"""

RELEASE = """\
version: 1
rules:
  - id: label-floor
    metric: exact_label
    min: 0.5
"""


def _replace(name: str, old: str, new: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        path = root / name
        text = path.read_text()
        assert old in text, (old, text)
        path.write_text(text.replace(old, new, 1))

    return edit


def _append(name: str, text: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        with (root / name).open("a") as f:
            f.write(text)

    return edit


def _write(name: str, text: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        (root / name).write_text(text)

    return edit


def _rename(name: str, new: str | None) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        if new is None:
            (root / name).unlink()
        else:
            (root / name).rename(root / new)

    return edit


def _append_bytes(name: str, data: bytes) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        with (root / name).open("ab") as f:
            f.write(data)

    return edit


# (id, edit, strings the message must contain)
CASES: list[tuple[str, Callable[[Path], None], list[str]]] = [
    ("unknown-key", _replace("oloproof.yaml", "concurrency:", "concurency:"),
     ["oloproof.yaml:8", "concurency", "concurrency"]),
    ("wrong-type", _replace("oloproof.yaml", "  system: 8", "  system: many"),
     ["oloproof.yaml:9", "concurrency.system", "many"]),
    ("missing-field", _replace("oloproof.yaml", "dataset: data/cases.jsonl\n", ""),
     ["oloproof.yaml", "dataset"]),
    ("bad-yaml", _replace("oloproof.yaml", "project: test-project", "project: [test-project"),
     ["oloproof.yaml", "YAML"]),
    ("unknown-evaluator", _replace("oloproof.yaml", "type: exact_match", "type: exact"),
     ["oloproof.yaml:12", "evaluators[0].type", "exact_match"]),
    ("bad-regex", _append("oloproof.yaml", "  - type: regex\n    criterion: r\n    pattern: '([a-z'\n"),
     ["oloproof.yaml", "evaluators[1].pattern"]),
    ("dataset-not-json", _append("data/cases.jsonl", '{"id": "x", "input": {"n": 1}\n'),
     ["cases.jsonl:7", "JSON"]),
    ("duplicate-id", _append("data/cases.jsonl", '{"id": "q001", "input": {"n": 1}}\n'),
     ["cases.jsonl:7", "q001", "2"]),
    ("empty-id", _append("data/cases.jsonl", '{"id": "", "input": {"n": 1}}\n'),
     ["cases.jsonl:7", "id"]),
    ("unknown-metric", _write("release.yaml", RELEASE.replace("exact_label", "exact_lable")),
     ["release.yaml:4", "rules[0].metric", "exact_lable", "exact_label"]),
    ("callable-does-not-import", _replace("oloproof.yaml", "app:answer", "nowhere:answer"),
     ["oloproof.yaml", "system.callable", "nowhere"]),
    ("callable-syntax-error", _write("app.py", "def answer(x):\n    return {\n"),
     ["oloproof.yaml", "system.callable", "SyntaxError"]),
    ("missing-dataset-file", _replace("oloproof.yaml", "data/cases.jsonl", "data/nope.jsonl"),
     ["oloproof.yaml", "dataset", "nope.jsonl"]),
    ("rule-min-and-max", _write("release.yaml", RELEASE + "    max: 0.9\n"),
     ["release.yaml", "rules[0]", "min", "max"]),
    ("no-release-policy", _rename("release.yaml", None),
     ["release.yaml", "no release policy", "policy: none"]),
    ("release-saved-as-yml", _rename("release.yaml", "release.yml"),
     ["found release.yml; Oloproof reads release.yaml"]),
    ("policy-null", _append("oloproof.yaml", "policy:\n"), ["oloproof.yaml:15", "policy"]),
    ("judge-1e8", _replace("oloproof.yaml", "  judge: 4", "  judge: 1e8"),
     ["oloproof.yaml:10", "concurrency.judge", "got 1e8"]),
    ("system-bool", _replace("oloproof.yaml", "  system: 8", "  system: true"),
     ["oloproof.yaml:9", "concurrency.system", "true"]),
    ("alias-bomb", _append("release.yaml", "x: &a [1,1,1,1,1,1,1,1,1,1]\n"
                           "y: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                           "z: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                           "w: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"),
     ["release.yaml", "alias bomb"]),
    ("suite-invalid-utf8", _append_bytes("data/cases.jsonl", b'{"id": "x", "input": "\xc3"}\n'),
     ["cases.jsonl:7", "UTF-8"]),
    ("suite-lone-surrogate", _append("data/cases.jsonl", '{"id": "x", "input": "\\ud800"}\n'),
     ["cases.jsonl:7", "input", "surrogate"]),
    ("schema-remote-ref", _append("oloproof.yaml", "  - type: json_schema\n    criterion: s\n"
                                  "    schema: {$ref: 'https://example.invalid/s.json'}\n"),
     ["oloproof.yaml", "evaluators[1].schema.$ref", "never fetches"]),
]


def _fingerprint(db: Path) -> tuple[str, int, int]:
    conn = sqlite3.connect(db)
    try:
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        cases = conn.execute("SELECT count(*) FROM run_cases").fetchone()[0]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    return hashlib.sha256(db.read_bytes()).hexdigest(), runs, cases


@pytest.fixture(scope="module")
def good_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("good") / "proj"
    write_project(root, app=APP, cases=labelled_cases(6), release=RELEASE)
    result = run_cli("run", cwd=root)
    assert result.code == 0, result.text
    return root


@pytest.mark.parametrize("case_id, edit, expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input(
    good_project: Path, tmp_path: Path, case_id: str,
    edit: Callable[[Path], None], expected: list[str],
) -> None:
    import shutil

    root = tmp_path / "proj"
    shutil.copytree(good_project, root)
    db = root / ".oloproof" / "store.sqlite"
    before = _fingerprint(db)
    edit(root)
    result = run_cli("run", cwd=root)
    assert result.code == 2, result.text
    assert "Traceback" not in result.text
    message = result.err.strip()
    assert message.count("\n") <= 3, message
    for text in expected:
        assert text in message, f"{text!r} not in {message!r}"
    assert _fingerprint(db) == before


def test_debug_shows_the_traceback(good_project: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "proj"
    shutil.copytree(good_project, root)
    _replace("oloproof.yaml", "concurrency:", "concurency:")(root)
    result = run_cli("run", cwd=root, env={"OLOPROOF_DEBUG": "1"})
    assert result.code != 0
    assert "Traceback" in result.err


def test_store_from_a_newer_version_is_refused_untouched(good_project: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "proj"
    shutil.copytree(good_project, root)
    db = root / ".oloproof" / "store.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for args in (["run"], ["runs"], ["inspect", "latest"]):
        result = run_cli(*args, cwd=root)
        assert result.code == 2, result.text
        assert "newer" in result.err and "schema 99" in result.err
        assert "Traceback" not in result.text
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_a_file_that_is_not_a_store_is_refused(good_project: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "proj"
    shutil.copytree(good_project, root)
    db = root / ".oloproof" / "store.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    db.write_bytes(b"this is not sqlite at all" * 100)
    result = run_cli("run", cwd=root)
    assert result.code == 2
    assert "store" in result.err and "Traceback" not in result.text
    assert db.read_bytes() == b"this is not sqlite at all" * 100


@pytest.mark.parametrize(
    "args, expected",
    [
        (["inspect", "run_NOPE"], "no run 'run_NOPE'"),
        (["inspect", "banana"], "not a run id"),
        (["gate", "run_NOPE"], "no run 'run_NOPE'"),
        (["inspect", "latest", "--case", "nope"], "no case 'nope'"),
        (["init", "--example", "nope"], "unknown example 'nope'"),
        (["run", "--policy", "missing.yaml"], "missing.yaml"),
        # --seed chooses a random sample: alone it ran the whole suite and could allow.
        (["run", "--seed", "3"], "seed: applies to a random sample only"),
        # --ray-address names a Ray cluster: without Ray as the executor the run went on
        # locally, exit 0, with no word that the cluster named was not used.
        (["run", "--ray-address", "127.0.0.1:9"], "this run's executor is local"),
        (["run", "--executor", "local", "--ray-address", "127.0.0.1:9"],
         "this run's executor is local"),
    ],
)
def test_bad_command_arguments(good_project: Path, args: list[str], expected: str) -> None:
    result = run_cli(*args, cwd=good_project)
    assert result.code == 2, result.text
    assert expected in result.err
    assert "Traceback" not in result.text


@pytest.mark.parametrize("args", [
    ["runs", "--limit", "\x1b[2J\x1b]52;c;SGk=\x07"],
    ["report", "latest", "--cases", "\x1b[2J\x9b31m"],
    ["runs", "\x1b]8;;http://x\x07link\x1b]8;;\x07"],
])
def test_an_argument_quoted_in_an_error_cannot_drive_the_terminal(
    good_project: Path, args: list[str]
) -> None:
    """argparse's errors quote what was typed (a value pasted from a model's output, say);
    they went to the terminal raw (ESC[2J cleared it, OSC 52 set the clipboard)."""
    result = run_cli(*args, cwd=good_project)
    assert result.code == 2, result.text
    assert "\x1b" not in result.err and "\x9b" not in result.err and "\x07" not in result.err
    assert "\\x1b" in result.err, result.err
