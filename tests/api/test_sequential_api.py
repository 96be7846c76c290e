"""``oloproof.run(..., sequential=True)`` (issue 26): BINARY, bounded MEAN, group and family
rules decided sequentially, read back by ``read_run`` the same way, and the cache shared
with a fixed run of the same project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.conftest import Backend, write_project

import oloproof
from oloproof.enums import Completeness

APP = """
from oloproof import system

@system(name="seq", version="1")
def answer(case_input):
    n = case_input["n"]
    return {"label": "ok" if n % 10 else "no", "days": n % 3}
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
  group_by: [lang]
- type: absolute_error
  criterion: days_error
  field: days
  range: [0, 10]
"""

RELEASE = """
version: 1
families:
  quality: {multiplicity: bonferroni}
rules:
  - id: label-floor
    metric: exact_label
    min: 0.7
    family: quality
  - id: french-floor
    metric: exact_label
    group: {lang: fr}
    min: 0.6
    family: quality
  - id: days-budget
    metric: days_error
    max: 3.0
"""

TOTAL = 600

pytestmark = pytest.mark.slow  # each runs a 600-case suite, a few seconds


def _project(root: Path) -> Path:
    cases = [
        {"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok", "days": 0},
         "metadata": {"lang": "fr" if i % 3 == 0 else "en"}}
        for i in range(TOTAL)
    ]
    return write_project(root, app=APP, cases=cases, evaluators=EVALUATORS, release=RELEASE)


def test_sequential_run_decides_every_rule_and_read_run_agrees(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    result = oloproof.run(root, sequential=True)
    assert result.completeness == Completeness.SEQUENTIAL
    assert result.exit_code == 0, result.summary()
    assert [d.state for d in result.decisions] == ["PASS", "PASS", "PASS"]
    read = result.sequential
    assert read is not None and read["decided"] and read["read"] < TOTAL
    # A run stopped early never claims more cases than it read.
    label = result.metrics["exact_label"]
    assert label.observed + label.missing + label.excluded == read["read"]
    assert "anytime-valid" in label.method
    # Families split their error by Bonferroni: each of the two at 1 - 0.05/2.
    by_rule = {d.rule: d for d in result.decisions}
    assert by_rule["label-floor"].confidence_level == 1 - 0.05 / 2
    assert by_rule["days-budget"].confidence_level == 0.95
    assert "betting confidence sequence" in by_rule["days-budget"].detail
    assert "beta-binomial mixture e-process" in by_rule["label-floor"].detail
    assert by_rule["french-floor"].metric == "exact_label[lang=fr]"
    last = max(int(d.detail.split("after ")[1].split(" of")[0]) for d in result.decisions)
    assert last == read["read"]
    again = oloproof.read_run(result.run_id, root)
    assert [(d.rule, d.state, d.detail) for d in again.decisions] == [
        (d.rule, d.state, d.detail) for d in result.decisions
    ]
    assert again.sequential == read and again.exit_code == result.exit_code
    # A fixed run of the same project reuses every call the sequential one made.
    fixed = oloproof.run(root)
    assert fixed.completeness == Completeness.COMPLETE
    assert fixed.cache is not None and fixed.cache["execution_hits"] == read["stored"]


def test_a_different_seed_reads_a_different_order_and_still_decides(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "sequential:\n  seed: 7\n")
    result = oloproof.run(root)  # sequential: in oloproof.yaml
    assert result.completeness == Completeness.SEQUENTIAL
    assert result.sequential is not None and result.sequential["seed"] == 7
    assert result.exit_code == 0
    off = oloproof.run(root, sequential=False)
    assert off.completeness == Completeness.COMPLETE


def test_a_sequential_run_on_each_store_backend(tmp_path: Path, backend: Backend) -> None:
    """SQLite and the team store (PostgreSQL) keep the same order and decide the same way."""
    root = _project(tmp_path / "p")
    result = oloproof.run(root, sequential=True)
    assert result.completeness == Completeness.SEQUENTIAL and result.exit_code == 0
    assert result.sequential is not None
    assert backend.count(root, "run_sequential") == 1
    assert backend.count(root, "run_cases") == result.sequential["stored"]
    again = oloproof.read_run(result.run_id, root)
    assert [(d.rule, d.state, d.detail) for d in again.decisions] == [
        (d.rule, d.state, d.detail) for d in result.decisions
    ]


def test_a_sequential_run_with_a_baseline_on_each_store_backend(
    tmp_path: Path, backend: Backend
) -> None:
    """``baseline=``: the comparison rule is decided against the stored baseline on either
    store, the run stops short of the suite, and read_run decides it again the same way."""
    root = _project(tmp_path / "p")
    base = oloproof.run(root)
    assert base.completeness == Completeness.COMPLETE
    (root / "app.py").write_text(APP.replace('version="1"', 'version="2"').replace(
        '"ok" if n % 10 else "no"', '"ok"'))
    (root / "compare.yaml").write_text(
        "version: 1\nrules:\n  - id: label-better\n    kind: superiority\n"
        "    metric: exact_label\n")
    result = oloproof.run(root, sequential=True, baseline=base.run_id)
    assert result.exit_code == 0
    assert result.sequential is not None and result.sequential["baseline"] == base.run_id
    assert result.sequential["read"] < TOTAL
    better = next(d for d in result.decisions if d.rule == "label-better")
    assert better.state == "PASS" and better.reason == "sequential_pass"
    # decided at a case of the order no later than the last rule's, with its pairs counted
    assert re.search(rf"decided after (\d+) of {TOTAL} cases \(\1 pairs with baseline", better.detail)
    at = int(better.detail.split("decided after ")[1].split(" ")[0])
    assert at <= result.sequential["read"]
    assert backend.count(root, "run_cases", "run_id = ?", (result.run_id,)) == (
        result.sequential["stored"])
    again = oloproof.read_run(result.run_id, root)
    assert [(d.rule, d.state, d.detail) for d in again.decisions] == [
        (d.rule, d.state, d.detail) for d in result.decisions
    ]
