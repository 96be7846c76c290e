"""Issue 10, project files: what `oloproof run` refuses, through the real CLI.

Each test builds a real project on disk, stores a first good run, breaks one
thing, and checks: the exit code (2: usage/config), one clear message and no
traceback, and that the run stored before is still there, unchanged.
"""

from __future__ import annotations

import json
import os
import sqlite3
import textwrap
import time
from pathlib import Path

import pytest
from tests.conftest import RELEASE_FLOOR, Result, labelled_cases, run_cli, write_project

from oloproof.store.db import store_path

pytestmark = pytest.mark.slow

APP = """
from oloproof import system

@system(name="t", version="1")
def answer(case_input):
    return {"label": "ok", "items": [{"label": "first"}, {"label": "last"}]}
"""



def _runs(root: Path) -> list[dict[str, object]]:
    result = run_cli("runs", "--json", cwd=root)
    assert result.code == 0, result.text
    runs = json.loads(result.out)
    assert isinstance(runs, list)
    return runs


def _good_project(root: Path) -> list[dict[str, object]]:
    """A project with one stored, decided run; returns `runs --json`."""
    write_project(root, app=APP, cases=labelled_cases(12), release=RELEASE_FLOOR)
    first = run_cli("run", cwd=root)
    assert first.code == 0, first.text
    runs = _runs(root)
    assert len(runs) == 1 and runs[0]["status"] == "DECIDED"
    return runs


def _refused(result: Result, *needles: str) -> None:
    assert result.code == 2, result.text
    assert "Traceback" not in result.text
    for needle in needles:
        assert needle in result.text, (needle, result.text)


def _integrity(root: Path) -> None:
    assert os.path.isfile(store_path(root))
    conn = sqlite3.connect(f"file:{store_path(root)}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def _unchanged(root: Path, before: list[dict[str, object]]) -> None:
    assert _runs(root) == before
    _integrity(root)


def _append_config(root: Path, text: str) -> None:
    with (root / "oloproof.yaml").open("a", encoding="utf-8") as f:
        f.write(text)


# -- item 3: no policy is not a silent pass ------------------------------------


@pytest.mark.parametrize(
    ("saved_as", "hint"),
    [
        (None, None),
        ("release.yml", "found release.yml; Oloproof reads release.yaml"),
        ("Release.yaml", "found Release.yaml; Oloproof reads release.yaml"),
    ],
)
def test_missing_release_policy_is_a_usage_error(
    project_dir: Path, saved_as: str | None, hint: str | None
) -> None:
    before = _good_project(project_dir)
    policy = project_dir / "release.yaml"
    if saved_as is None:
        policy.unlink()
    else:
        policy.rename(project_dir / saved_as)
    result = run_cli("run", cwd=project_dir)
    _refused(result, "release.yaml", "policy: none", "--policy")
    if hint is not None:
        assert hint in result.text
    assert "Gate" not in result.out
    _unchanged(project_dir, before)


def test_policy_none_declares_no_rules_and_says_so(project_dir: Path) -> None:
    before = _good_project(project_dir)
    (project_dir / "release.yaml").unlink()
    _append_config(project_dir, "policy: none\n")
    result = run_cli("run", cwd=project_dir)
    assert result.code == 0, result.text
    assert "declares no release rules (policy: none in oloproof.yaml)" in result.out
    assert "Gate      ALLOW" in result.out
    runs = _runs(project_dir)
    assert runs[1:] == before or runs[:1] == before or before[0] in runs
    assert len(runs) == 2
    assert all(r["status"] == "DECIDED" for r in runs)
    # `gate` on that stored run says the same: an ALLOW by declaration, not by evidence.
    gate = run_cli("gate", "latest", cwd=project_dir)
    assert gate.code == 0, gate.text
    assert "declares no release rules (policy: none in oloproof.yaml)" in gate.out


@pytest.mark.parametrize("part", [["--limit", "4"], ["--shard", "1/2"]], ids=["subset", "shard"])
def test_policy_none_on_part_of_the_suite_never_says_allow(
    project_dir: Path, part: list[str]
) -> None:
    """A subset (or shard) of a `policy: none` project blocks (exit 5): its report said
    `Gate ALLOW by declaration` above `Gate BLOCK exit code 5`."""
    write_project(project_dir, app=APP, cases=labelled_cases(12))  # policy: none
    result = run_cli("run", *part, cwd=project_dir)
    assert result.code == 5, result.text
    assert "ALLOW" not in result.out, result.out
    assert "No release rules, by declaration (policy: none in oloproof.yaml)." in result.out
    assert "Gate      BLOCK   exit code 5" in result.out
    whole = run_cli("run", cwd=project_dir)
    assert whole.code == 0, whole.text
    assert "Gate ALLOW by declaration: this project declares no release rules" in whole.out


def test_policy_path_in_config_is_read(project_dir: Path) -> None:
    before = _good_project(project_dir)
    (project_dir / "policies").mkdir()
    (project_dir / "release.yaml").rename(project_dir / "policies" / "strict.yaml")
    strict = (project_dir / "policies" / "strict.yaml").read_text().replace("0.5", "0.99")
    (project_dir / "policies" / "strict.yaml").write_text(strict)
    _append_config(project_dir, "policy: policies/strict.yaml\n")
    result = run_cli("run", "--json", cwd=project_dir)
    # 12 of 12 right cannot prove a 99% floor at 95%: a blocking INSUFFICIENT_EVIDENCE.
    assert result.code == 3, result.text
    assert len(_runs(project_dir)) == 2 and before[0] in _runs(project_dir)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("policy: missing.yaml\n", "release policy file not found: missing.yaml"),
        ("policy:\n", "write policy: none"),
    ],
)
def test_bad_policy_field(project_dir: Path, line: str, needle: str) -> None:
    before = _good_project(project_dir)
    _append_config(project_dir, line)
    _refused(run_cli("run", cwd=project_dir), needle)
    _unchanged(project_dir, before)


# -- item 9: resource bombs in config -------------------------------------------

ALIAS_BOMB = """
x0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
x1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]
x2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]
x3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]
x4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]
x5: &a5 [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]
x6: &a6 [*a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5]
x7: &a7 [*a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6]
x8: &a8 [*a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7]
"""


@pytest.mark.parametrize("target", ["oloproof.yaml", "release.yaml"])
def test_yaml_alias_bomb_is_refused_quickly(project_dir: Path, target: str) -> None:
    before = _good_project(project_dir)
    assert len(ALIAS_BOMB.encode()) < 1100
    with (project_dir / target).open("a", encoding="utf-8") as f:
        f.write(ALIAS_BOMB)
    started = time.monotonic()
    result = run_cli("run", cwd=project_dir, timeout=60)
    assert time.monotonic() - started < 30
    _refused(result, target, "alias bomb")
    _unchanged(project_dir, before)


def test_config_that_is_a_device_is_refused(project_dir: Path) -> None:
    before = _good_project(project_dir)
    result = run_cli("run", "--config", "/dev/zero", cwd=project_dir, timeout=60)
    _refused(result, "/dev/zero", "not a regular file")
    _unchanged(project_dir, before)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("which", ["config", "dataset", "policy", "rubric"])
def test_fifo_is_refused_without_hanging(project_dir: Path, which: str) -> None:
    before = _good_project(project_dir)
    fifo = project_dir / "pipe"
    os.mkfifo(fifo)
    args = ["run"]
    if which == "config":
        args += ["--config", "pipe"]
    elif which == "policy":
        args += ["--policy", "pipe"]
    elif which == "rubric":
        _append_config(
            project_dir,
            "  - type: rubric_judge\n    criterion: helpful\n    provider: anthropic\n"
            "    model: m\n    rubric_file: pipe\n",
        )
    else:
        text = (project_dir / "oloproof.yaml").read_text()
        (project_dir / "oloproof.yaml").write_text(text.replace("data/cases.jsonl", "pipe"))
    result = run_cli(*args, cwd=project_dir, timeout=60)
    _refused(result, "pipe", "not a regular file")
    _unchanged(project_dir, before)


def test_oversized_config_is_refused(project_dir: Path) -> None:
    before = _good_project(project_dir)
    _append_config(project_dir, "# " + "x" * (1 << 20) + "\n")
    _refused(run_cli("run", cwd=project_dir), "oloproof.yaml", "larger than the limit of 1 MiB")
    _unchanged(project_dir, before)


@pytest.mark.parametrize(
    ("system", "judge", "field", "needle"),
    [
        ("true", "4", "concurrency.system", "expected a whole number, got true"),
        ("8", "1e8", "concurrency.judge", "expected a whole number, got 1e8"),
        ("8", "100000000", "concurrency.judge", "must be at most 256"),
        ("5000", "4", "concurrency.system", "must be at most 1024"),
        ("8", "2.0", "concurrency.judge", "expected a whole number, got 2.0"),
        ("0", "4", "concurrency.system", "must be at least 1"),
    ],
)
def test_concurrency_values_are_bounded_whole_numbers(
    project_dir: Path, system: str, judge: str, field: str, needle: str
) -> None:
    before = _good_project(project_dir)
    text = (project_dir / "oloproof.yaml").read_text()
    text = text.replace("  system: 8\n  judge: 4\n", f"  system: {system}\n  judge: {judge}\n")
    (project_dir / "oloproof.yaml").write_text(text)
    _refused(run_cli("run", cwd=project_dir), field, needle)
    _unchanged(project_dir, before)


# -- item 5: text that is not valid UTF-8 in the suite -----------------------------


@pytest.mark.parametrize(
    ("line", "needles"),
    [
        (b'{"id": "bad", "input": "\xff\xfe"}\n', ("cases.jsonl:13", "not valid UTF-8")),
        (b'{"id": "bad\\ud800", "input": 1}\n', ("cases.jsonl:13", "id", "lone UTF-16 surrogate")),
        (b'{"id": "bad", "input": {"q": "\\udfff"}}\n', ("cases.jsonl:13", "input", "surrogate")),
        (
            b'{"id": "bad", "input": 1, "expected": {"\\ud800": 1}}\n',
            ("cases.jsonl:13", "expected", "surrogate"),
        ),
        (b'{"id": "bad", "input": 1, "\\ud800": 1}\n', ("cases.jsonl:13", "unknown key")),
    ],
)
def test_suite_text_that_cannot_be_stored_is_refused(
    project_dir: Path, line: bytes, needles: tuple[str, ...]
) -> None:
    before = _good_project(project_dir)
    with (project_dir / "data" / "cases.jsonl").open("ab") as f:
        f.write(line)
    _refused(run_cli("run", cwd=project_dir), *needles)
    _unchanged(project_dir, before)


def test_a_valid_surrogate_pair_is_accepted(project_dir: Path) -> None:
    before = _good_project(project_dir)
    with (project_dir / "data" / "cases.jsonl").open("ab") as f:
        f.write(b'{"id": "emoji", "input": "\\ud83d\\ude00", "expected": {"label": "ok"}}\n')
    result = run_cli("run", cwd=project_dir)
    assert result.code == 0, result.text
    runs = _runs(project_dir)
    assert len(runs) == 2 and before[0] in runs
    _integrity(project_dir)


def test_suite_line_and_size_limits(project_dir: Path) -> None:
    before = _good_project(project_dir)
    env = {"OLOPROOF_MAX_SUITE_LINE_BYTES": "200"}
    with (project_dir / "data" / "cases.jsonl").open("a") as f:
        f.write(json.dumps({"id": "long", "input": "x" * 300}) + "\n")
    _refused(
        run_cli("run", cwd=project_dir, env=env),
        "cases.jsonl:13", "longer than the limit of 200 bytes", "OLOPROOF_MAX_SUITE_LINE_BYTES",
    )
    _refused(
        run_cli("run", cwd=project_dir, env={"OLOPROOF_MAX_SUITE_BYTES": "1000"}),
        "cases.jsonl", "larger than the limit of 1000 bytes", "OLOPROOF_MAX_SUITE_BYTES",
    )
    _refused(
        run_cli("run", cwd=project_dir, env={"OLOPROOF_MAX_SUITE_BYTES": "lots"}),
        "OLOPROOF_MAX_SUITE_BYTES", "expected a whole number of bytes",
    )
    _unchanged(project_dir, before)


# -- item 7: evaluators that would reach out or never compile ------------------------


@pytest.mark.parametrize(
    ("evaluator", "needles"),
    [
        (
            """
            - type: json_schema
              criterion: shape
              schema: {"$ref": "https://example.invalid/schema.json"}
            """,
            ("evaluators[1].schema.$ref", "never fetches", "https://example.invalid"),
        ),
        (
            """
            - type: json_schema
              criterion: shape
              schema:
                type: object
                properties:
                  label: {"$ref": "file:///etc/passwd"}
            """,
            ("evaluators[1].schema.properties.label.$ref", "outside the schema"),
        ),
        (
            """
            - type: json_schema
              criterion: shape
              schema: {"type": "objekt"}
            """,
            ("evaluators[1].schema.type", "not a valid JSON Schema"),
        ),
        (
            """
            - type: regex
              criterion: shape
              pattern: "(unclosed"
            """,
            ("evaluators[1].pattern", "not a valid regular expression"),
        ),
    ],
)
def test_evaluator_config_refused_at_load(
    project_dir: Path, evaluator: str, needles: tuple[str, ...]
) -> None:
    before = _good_project(project_dir)
    text = (project_dir / "oloproof.yaml").read_text()
    block = textwrap.indent(textwrap.dedent(evaluator).strip("\n"), "  ")
    (project_dir / "oloproof.yaml").write_text(text + block + "\n")
    _refused(run_cli("run", cwd=project_dir), "oloproof.yaml", *needles)
    _unchanged(project_dir, before)


def test_local_refs_and_negative_index_fields_work(project_dir: Path) -> None:
    before = _good_project(project_dir)
    text = (project_dir / "oloproof.yaml").read_text()
    text += (
        "  - type: json_schema\n"
        "    criterion: shape\n"
        "    field: items\n"
        '    schema: {"type": "array", "items": {"$ref": "#/$defs/item"},'
        ' "$defs": {"item": {"type": "object", "required": ["label"]}}}\n'
        "  - type: regex\n"
        "    criterion: last_item\n"
        "    field: items.-1.label\n"
        "    pattern: ^LAST$\n"
        "    flags: [IGNORECASE]\n"
    )
    (project_dir / "oloproof.yaml").write_text(text)
    result = run_cli("run", "--json", cwd=project_dir)
    assert result.code == 0, result.text
    runs = _runs(project_dir)
    assert len(runs) == 2 and before[0] in runs
    inspected = run_cli("inspect", "latest", "--json", cwd=project_dir)
    assert inspected.code == 0, inspected.text
    metrics = {m["metric"]: m for m in json.loads(inspected.out)["metrics"]}
    # Every case has a list of items whose last label is "last": both criteria
    # observed on all 12 cases and passed by all (a missing path would fail them).
    for criterion in ("shape", "last_item"):
        assert metrics[criterion]["observed"] == 12, metrics[criterion]
        assert metrics[criterion]["passed"] == 12, metrics[criterion]
        assert metrics[criterion]["missing"] == 0
    _integrity(project_dir)


def test_suite_number_too_long_to_read_is_refused(project_dir: Path) -> None:
    # Found by test_fuzz_hostile: a 5,000-digit integer ended the run with exit 70.
    before = _good_project(project_dir)
    with (project_dir / "data" / "cases.jsonl").open("a") as f:
        f.write('{"id": "huge", "input": ' + "9" * 5000 + "}\n")
    _refused(run_cli("run", cwd=project_dir), "cases.jsonl:13", "a number is too long to read")
    _unchanged(project_dir, before)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("which", ["release.yaml", "oloproof.yaml"])
def test_a_checked_file_turned_into_a_fifo_is_refused_without_hanging(
    project_dir: Path, which: str
) -> None:
    """The configuration snapshot (project/_snapshot.py) hashes the files it rests on before
    anything is validated: one that became a named pipe must send the run to the
    validation, which refuses it, not block the run reading it."""
    _good_project(project_dir)
    for _ in range(2):  # the second run keeps the snapshot
        assert run_cli("run", cwd=project_dir).code in (0, 3)
    assert list((project_dir / ".oloproof" / "snapshots").glob("config-*.json"))
    (project_dir / which).unlink()
    os.mkfifo(project_dir / which)
    result = run_cli("run", cwd=project_dir, timeout=60)
    _refused(result, which, "not a regular file")
