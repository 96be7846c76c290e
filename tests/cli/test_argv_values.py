"""What a command line may hold as a value: not the empty text (a shell variable that is not
set: ``--policy "$POLICY"``), and, for what names a stored thing (a run id, a case id, a
metadata key), not bytes that are not UTF-8. Both are refused by the parser (cli/_values.py),
exit 2, before anything is read or run: the fast parser and argparse alike
(tests/cli/test_fast_args.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import RELEASE_FLOOR, labelled_cases, run_cli, write_project

APP = """
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 5 else "no"}
"""

STRICT = """
version: 1
rules:
  - id: strict
    metric: exact_label
    min: 0.99
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with one stored run: 24 of 30 right, PASSes release.yaml (exit 0) and FAILs
    strict.yaml (exit 1)."""
    root = write_project(
        tmp_path_factory.mktemp("argv") / "proj", app=APP, cases=labelled_cases(30),
        release=RELEASE_FLOOR, policy="release.yaml", extra_files={"strict.yaml": STRICT},
    )
    assert run_cli("run", cwd=root).code == 0
    assert run_cli("gate", "latest", "--policy", "strict.yaml", cwd=root).code == 1
    return root


def _runs(root: Path) -> list[str]:
    result = run_cli("runs", "--json", cwd=root)
    assert result.code == 0, result.text
    return [r["id"] for r in json.loads(result.out)]


def _refused(result_err: str, argument: str) -> None:
    lines = result_err.splitlines()
    assert lines[-1].startswith("oloproof "), result_err
    assert f"error: argument {argument}: " in lines[-1], result_err
    assert "Traceback" not in result_err and "internal error" not in result_err


def test_an_empty_policy_is_refused_not_taken_for_the_stored_one(project: Path) -> None:
    """``plan RUN --run --policy ''`` planned under the policy stored with the run and
    exited 0 (a `--policy "$POLICY"` with the variable unset): the file asked for was never
    read. ``gate`` refused it, but only as "is a directory, expected a file"."""
    result = run_cli("plan", "latest", "--run", "--policy", "", cwd=project)
    assert result.code == 2, result.text
    _refused(result.err, "--policy")
    assert "empty" in result.err
    assert result.out == ""
    result = run_cli("gate", "latest", "--policy", "", cwd=project)
    assert result.code == 2, result.text
    _refused(result.err, "--policy")


def test_an_empty_junit_path_is_refused_before_the_suite_runs(project: Path) -> None:
    """``run --junit-xml ''`` called the system on every case and stored the run, then could
    not write the report."""
    before = _runs(project)
    result = run_cli("run", "--no-cache", "--junit-xml", "", cwd=project)
    assert result.code == 2, result.text
    _refused(result.err, "--junit-xml")
    assert _runs(project) == before


def test_an_empty_report_path_writes_nothing(project: Path) -> None:
    """``report latest -o ''`` wrote the report to its default name instead."""
    result = run_cli("report", "latest", "-o", "", cwd=project)
    assert result.code == 2, result.text
    _refused(result.err, "--output/-o")
    assert list(project.glob("*.html")) == []


def test_an_empty_metadata_key_is_refused(project: Path) -> None:
    """``gate latest --group-by ''`` added a group of no key (``exact_label[=null]``)."""
    result = run_cli("gate", "latest", "--group-by", "", "--json", cwd=project)
    assert result.code == 2, result.text
    _refused(result.err, "--group-by")


@pytest.mark.parametrize("args, argument", [
    (["gate", "run_\udcff"], "RUN_ID"),
    (["inspect", "run_\udcff"], "RUN_ID"),
    (["inspect", "cmp_\udcff"], "RUN_ID"),
    (["inspect", "latest", "--case", "q\udce9"], "--case"),
    (["report", "cmp_\udcff"], "RUN_ID|CMP_ID|MX_ID"),
    (["plan", "mx_\udcff"], "RUN_ID|CMP_ID|MX_ID"),
    (["plan", "run_\udcff", "--run"], "RUN_ID|CMP_ID|MX_ID"),
    (["compare", "run_\udcff", "latest"], "CANDIDATE"),
])
def test_an_id_of_bytes_that_are_not_utf8_is_a_usage_error(
    project: Path, args: list[str], argument: str
) -> None:
    """A run id typed as bytes that are not UTF-8 (``$'run_\\xff'``: a lone surrogate to
    Python) reached SQLite, which cannot encode it: "internal error: UnicodeEncodeError",
    exit 70, for every command that reads a stored run, comparison or matrix."""
    result = run_cli(*args, cwd=project)
    assert result.code == 2, result.text
    _refused(result.err, argument)
    assert "not UTF-8" in result.err


def test_a_file_name_of_such_bytes_is_still_a_file_name(project: Path) -> None:
    """A file's name may hold any bytes: a policy in one is read, and decides."""
    name = "\udcffstrict.yaml"
    (project / name).write_text(STRICT)
    try:
        result = run_cli("gate", "latest", "--policy", name, cwd=project)
    finally:
        (project / name).unlink()
    assert result.code == 1, result.text


@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_a_port_out_of_range_is_a_usage_error(project: Path, port: str) -> None:
    """``view --port 99999`` (or -1) reached the socket's bind: "internal error:
    OverflowError: bind(): port must be 0-65535", exit 70."""
    result = run_cli("view", "--no-open", "--port", port, cwd=project, timeout=60)
    assert result.code == 2, result.text
    _refused(result.err, "--port")
    assert "0 (any free one) to 65535" in result.err


def test_init_into_an_empty_name_creates_nothing(tmp_path: Path) -> None:
    """``oloproof init "$DIR"`` with DIR not set created the starter project in the current
    directory ("Created the 'starter' project in .")."""
    result = run_cli("init", "", cwd=tmp_path)
    assert result.code == 2, result.text
    _refused(result.err, "DIR")
    assert list(tmp_path.iterdir()) == []
    result = run_cli("merge", "", cwd=tmp_path)
    assert result.code == 2, result.text
    _refused(result.err, "PATH")
