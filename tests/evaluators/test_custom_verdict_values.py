"""What a custom evaluator returns is read by its type, never by its truth value: a
Verdict whose ``passed`` is the text 'false' (a judge's JSON reply read as text) passed
every case, and the gate allowed; NumPy's booleans and numbers are what they say."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

from oloproof.engine.pipeline import _key_identity
from oloproof.evaluators.custom import Custom
from oloproof.project.config import CustomEvaluator

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"label": "wrong"}
"""

RELEASE = """
version: 1
block_on: [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]
rules:
  - id: floor
    metric: checked
    min: 0.8
"""

MEAN_RELEASE = """
version: 1
block_on: [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]
rules:
  - id: small
    metric: checked
    max: 10
"""


def _project(root: Path, body: str, *, kind: str = "binary", processes: bool = False) -> Path:
    evaluators = f"""
      - type: custom
        criterion: checked
        function: checks:check
        kind: {kind}
    """ + ("    range: [0, 100]\n" if kind == "mean" else "")
    project = write_project(
        root, app=APP, cases=labelled_cases(40), evaluators=evaluators,
        release=RELEASE if kind == "binary" else MEAN_RELEASE,
        extra_files={"checks.py": "from oloproof import Verdict\n\n"
                     f"def check(output, case):\n    {body}\n"},
    )
    if processes:
        config = project / "oloproof.yaml"
        config.write_text(config.read_text().replace(
            "concurrency:\n", "concurrency:\n  evaluator_processes: 1\n"))
    return project


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
@pytest.mark.parametrize(("body", "shown"), [
    ("return Verdict(passed=output['label'] == 'ok' and 'true' or 'false')",
     "the Verdict's passed is str 'false', not True or False"),
    ("return Verdict(passed=[0])", "the Verdict's passed is list [0], not True or False"),
    ("return Verdict(passed=1)", "the Verdict's passed is int 1, not True or False"),
])
def test_a_verdict_passed_that_is_not_a_bool_never_passes(
    tmp_path: Path, body: str, shown: str, processes: bool
) -> None:
    project = _project(tmp_path / "p", body, processes=processes)
    result = run_cli("run", cwd=project)
    assert result.code == 5, result.out  # every call failed: incomplete, never ALLOW
    assert shown in result.out
    with sqlite3.connect(project / ".oloproof" / "store.sqlite") as db:
        assert db.execute("SELECT count(*) FROM run_judgments WHERE passed = 1").fetchone()[0] == 0


def test_a_verdict_excluded_that_is_not_a_bool_is_an_error(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", "return Verdict(excluded='no', passed=False)")
    result = run_cli("run", cwd=project)
    assert result.code == 5, result.out
    assert "the Verdict's excluded is str 'no', not True or False" in result.out


def test_verdicts_cached_by_the_truthy_reading_are_judged_again(tmp_path: Path) -> None:
    """A verdict stored as passed by the earlier reading (Verdict(passed='false')) is not
    taken from the cache: custom verdicts are cached under a new key, while the
    evaluator's identity (what compare and merge match runs on) stays as it was."""
    (tmp_path / "checks.py").write_text("def check(output, case):\n    return True\n")
    config = CustomEvaluator(criterion="checked", function="checks:check")
    custom = Custom(config, str(tmp_path), file="oloproof.yaml", field="evaluators[0].function")
    assert _key_identity(custom) != custom.identity


def test_a_ray_worker_evaluator_keys_verdicts_as_the_local_one(tmp_path: Path) -> None:
    """Under --executor ray a custom evaluator is a RayCustom: it keyed its verdicts on the
    unsalted identity (no cache_identity of its own), so a Ray run reused verdicts cached by
    the truthy reading and stored other judge keys than a local run of the same project."""
    from oloproof.runner.ray_executor import RayCustom

    (tmp_path / "helper.py").write_text("LIMIT = 3\n")
    (tmp_path / "checks.py").write_text(
        "from helper import LIMIT\n\ndef check(output, case):\n    return True\n"
    )
    config = CustomEvaluator(criterion="checked", function="checks:check")
    custom = Custom(config, str(tmp_path), file="oloproof.yaml", field="evaluators[0].function")
    remote = RayCustom(None, custom)  # type: ignore[arg-type]  # no executor: nothing is called
    assert _key_identity(remote) == _key_identity(custom) != custom.identity
    assert remote.outside_identity == custom.outside_identity == ["helper.py"]
    assert remote.module_file == custom.module_file


def test_numpy_booleans_and_numbers_are_read_as_such(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    failing = _project(tmp_path / "b", "import numpy; return numpy.bool_(False)")
    result = run_cli("run", cwd=failing, env={"COLUMNS": "200"})
    assert result.code == 1, result.out  # a FAIL on 40 observed failures, not 40 errors
    assert "0 / 40 observed · 0 missing" in result.out
    for number in ("numpy.float32(0.0)", "numpy.int64(0)", "__import__('decimal').Decimal(0)"):
        scored = _project(tmp_path / number[:11], f"import numpy; return {number}", kind="mean")
        result = run_cli("run", cwd=scored, env={"COLUMNS": "200"})
        assert "40 observed · 0 missing" in result.out, (number, result.out)


@pytest.mark.parametrize(("body", "shown"), [
    ("return Verdict(score=True)", "the Verdict's score is bool True, not a number"),
    ("return Verdict(score='0.5')", "the Verdict's score is str '0.5', not a number"),
])
def test_a_verdict_score_that_is_not_a_number_is_an_error(
    tmp_path: Path, body: str, shown: str
) -> None:
    project = _project(tmp_path / "p", body, kind="mean")
    result = run_cli("run", cwd=project)
    assert result.code == 5, result.out
    assert shown in result.out
