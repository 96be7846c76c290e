"""Oloproof's plain output format (render/plain.py), held by golden files.

Each report kind is rendered from fixed data and compared with its file in ``golden/``: the
format is ours, and a change to it shows up here as a diff to review. To accept a change,
run with ``OLOPROOF_UPDATE_GOLDEN=1`` and read the diff of ``tests/render/golden/``.
Random tables then check what every output must hold, whatever the text: no trailing
space, nothing cut, a table within ``COLUMNS`` when it is set.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oloproof._records import replace
from oloproof.analysis.cases import failure_rows
from oloproof.analysis.trials import FlakyCase
from oloproof.api._results import RunInfo
from oloproof.enums import Completeness, GateAction, MetricKind, RuleState, RunStatus
from oloproof.evidence import LabelledVerdicts
from oloproof.policy.decide import Decision, MetricSummary
from oloproof.policy.judges import judge_report
from oloproof.render import plain
from oloproof.render.compare import comparison_report
from oloproof.render.doc import Blocks, Column, Line, Table, line
from oloproof.render.inspect import case_view, failures_table, flaky_view, run_view
from oloproof.render.runs import comparisons_table, runs_table
from oloproof.render.tables import judges_table, run_report
from oloproof.store.comparisons import ComparisonRecord
from oloproof.store.reader import CaseRow, JudgmentRow, RunRecord, TrialRow

GOLDEN = Path(__file__).parent / "golden"
RUN_ID = "run_01M8NAV1DWQA6DWWHQYEX1Q2MA"

DECISIONS = [
    Decision(rule="exact-label-floor", metric="exact_label", kind="interval_threshold",
             state=RuleState.INSUFFICIENT_EVIDENCE, reason="interval_contains_threshold",
             detail="95% CP [46.5%, 90.4%] contains 70.0%", action=GateAction.BLOCK),
    Decision(rule="valid-format", metric="format_valid", kind="observed_count",
             state=RuleState.PASS, reason="failures_within_budget",
             detail="0 failed, 0 missing; at most 0 allowed"),
    Decision(rule="error-budget", metric="days_error", kind="interval_threshold",
             state=RuleState.FAIL, reason="interval_above_threshold",
             detail="95% t [1.62, 2.90] above 1.5", action=GateAction.BLOCK),
]
SUMMARIES = [
    MetricSummary(metric="exact_label", kind=MetricKind.BINARY, estimate=13 / 18,
                  lower=0.46520, upper=0.90305, observed=18, missing=0, excluded=0, passed=13),
    MetricSummary(metric="days_error", kind=MetricKind.MEAN, estimate=2.2611, lower=1.6204,
                  upper=2.8999, observed=17, missing=1, excluded=0),
    MetricSummary(metric="helpful", kind=MetricKind.BINARY, estimate=None, lower=None,
                  upper=None, observed=0, missing=18, excluded=0, passed=0),
]
RUN = RunRecord(
    id=RUN_ID, project="support-bot-example", created_at="2026-12-01T10:00:00.000000Z",
    finished_at="2026-12-01T10:00:01.000000Z", status=RunStatus.DECIDED,
    completeness=Completeness.COMPLETE, exit_code=3, gate=GateAction.BLOCK,
    suite_digest="sha256:30babea686d7e2a1f00c0ffee", dataset="data/support.jsonl",
    cases_total=18, system_identity="sha256:1", system={"name": "support-bot",
                                                        "version": "keywords-v1"},
    metrics=[], policy=None, policy_path="release.yaml", stop_reason=None, pid=None,
    cache={"execution_hits": 18, "execution_misses": 0, "judgment_hits": 54,
           "judgment_misses": 0},
)


def _judgment(criterion: str, passed: bool | None, reason: str, status: str = "OK") -> JudgmentRow:
    return JudgmentRow(criterion, status, passed, None, reason, False, 1.5, 1,
                       {"input_tokens": 9, "output_tokens": 13, "cost_usd": 0.000044})


CASES = [
    CaseRow("refund_03", 3, {"question": "Où est mon remboursement ?"}, {"label": "refund"},
            None, "OK", {"answer": "…", "label": "other"}, None, 1, 6.6, None, False,
            {"exact_label": _judgment("exact_label", False, "expected 'refund', got 'other'"),
             "helpful": _judgment("helpful", None, "the judge answered no JSON", "ERROR")}),
    CaseRow("日本語_01", 7, {"question": "返品できますか"}, {"label": "refund"}, None, "ERROR",
            None, "RuntimeError: the upstream model timed out\n  at line 3", 4, 30001.0, None,
            False, {}),
]


def _judges() -> Table:
    labels = {f"q{i}": i % 3 != 0 for i in range(10)}
    verdicts = {f"q{i}": (None if i == 4 else i % 2 == 0) for i in range(20)}
    return judges_table([judge_report(LabelledVerdicts("helpful", verdicts, labels), 0.95)])


def _report() -> Blocks:
    return run_report(
        run_id=RUN_ID, status=RunStatus.DECIDED, completeness=Completeness.COMPLETE,
        decisions=DECISIONS, summaries=SUMMARIES, cache=RUN.cache, gate=GateAction.BLOCK,
        exit_code=3, note="Failed calls: 1 of 18 (a timeout).", policy_arg="strict.yaml",
    )


def _comparison() -> Blocks:
    run = {"run_id": RUN_ID, "system": RUN.system, "cases_stored": 18,
           "state": "DECIDED/COMPLETE"}
    return comparison_report({
        "comparison_id": "cmp_01M8NBDG1CHNSN6BNRDJ4G2PC1", "candidate": run, "baseline": run,
        "pairing": {"shared": 17, "only_candidate": ["new_01"], "only_baseline": []},
        "decisions": [{"rule": "label-better", "metric": "exact_label", "kind": "superiority",
                       "state": "INSUFFICIENT_EVIDENCE", "reason": "interval_contains_margin",
                       "detail": "superiority: 95% Newcombe [-1.6, +45.3] pts contains 0",
                       "action": "BLOCK"}],
        "metrics": [{"metric": "exact_label", "kind": "BINARY", "candidate": 17 / 18,
                     "baseline": 13 / 18, "difference": 4 / 18, "lower": -0.016,
                     "upper": 0.453, "pairs": 18, "both_pass": 13, "both_fail": 1,
                     "candidate_only": 4, "baseline_only": 0, "dropped_missing": 0,
                     "dropped_excluded": 0}],
        "confidence_level": 0.95, "gate": "BLOCK", "exit_code": 3,
    })


def _odd_cells() -> Table:
    """What a cell may hold: lines, wide and combining characters, a tab, nothing."""
    table = Table(line("Odd cells"), (Column("Case"), Column("Two\nlines"), Column(""),
                                      Column("Reason", min_width=16)))
    table.add_row(line("中文_1"), line("first\nsecond\nthird"), line(""), line("e\u0301te\u0301"))
    table.add_row(line("tab"), line("a\tb"), line(""), line("ｆｕｌｌ　ｗｉｄｔｈ"))
    table.add_row(line("escape"), line("\x1b[31mred\x1b[0m"), line(""), line("[bold]x[/]"))
    return table


# name: (what to render, COLUMNS, encoding)
KINDS: dict[str, tuple[Callable[[], Line | Table | Blocks], int | None, str]] = {
    "run-report": (_report, None, "utf-8"),
    "run-report-columns-80": (_report, 80, "utf-8"),
    "run-report-columns-200": (_report, 200, "utf-8"),
    "run-report-ascii": (_report, None, "ascii"),
    "judges": (_judges, None, "utf-8"),
    "judges-columns-100": (_judges, 100, "utf-8"),
    "inspect-run": (lambda: run_view(RUN, CASES, DECISIONS, SUMMARIES), None, "utf-8"),
    "inspect-case": (lambda: case_view(RUN, CASES[0], []), None, "utf-8"),
    "inspect-case-trials": (lambda: case_view(
        replace(RUN, trials=2), CASES[0],
        [TrialRow("refund_03", 1, "OK", {"label": "refund"}, None, 1, 5.0, None, True,
                  {"exact_label": _judgment("exact_label", True, "")})]), None, "utf-8"),
    "inspect-failures": (lambda: failures_table(RUN_ID, failure_rows(CASES), 2, 18), None,
                         "utf-8"),
    "inspect-failures-columns-60": (lambda: failures_table(RUN_ID, failure_rows(CASES), 2, 18),
                                    60, "utf-8"),
    "inspect-flaky": (lambda: flaky_view(
        replace(RUN, trials=3),
        [FlakyCase("refund_03", "exact_label", 2, 1, 0, (True, False, True))], 18), None,
        "utf-8"),
    "runs": (lambda: Blocks([
        runs_table([RunInfo.from_record(RUN), RunInfo.from_record(replace(
            RUN, status=RunStatus.RUN_ERROR, completeness=Completeness.PARTIAL, gate=None,
            exit_code=5, stop_reason="interrupted (Ctrl-C)"))]),
        comparisons_table([ComparisonRecord(
            "cmp_01M8NBDG1CHNSN6BNRDJ4G2PC1", "support-bot-example", "2026-12-01T10:05:00Z",
            RUN_ID, RUN_ID, 0.95, {}, None, "BLOCK", 3, {}, [])])]), None, "utf-8"),
    "comparison": (_comparison, None, "utf-8"),
    "comparison-columns-80": (_comparison, 80, "utf-8"),
    "odd-cells": (_odd_cells, None, "utf-8"),
    "odd-cells-columns-30": (_odd_cells, 30, "utf-8"),
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_report_kind_is_its_golden_file(name: str) -> None:
    make, width, encoding = KINDS[name]
    got = plain.render(make(), width=width, encoding=encoding)
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("OLOPROOF_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8"), f"{path} differs (OLOPROOF_UPDATE_GOLDEN=1)"
    assert "\x1b" not in got and all(x == x.rstrip() for x in got.split("\n"))
    if encoding == "ascii":
        assert not set("┏━┳┓┡╇┩└─┴┘┃│") & set(got)
        got.encode("ascii")  # every character one the stream can write


def test_every_golden_file_has_its_case() -> None:
    assert {p.stem for p in GOLDEN.glob("*.txt")} == set(KINDS)


PIECES = ["a", "Z", " ", "[", "/", "·", "…", "é", "e\u0301", "中", "ｶ", "한", "\n", "\t", "😀",
          "\u200d", "\x1b", "→"]


@st.composite
def _tables(draw: st.DrawFn) -> Table:
    cell = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)
    header = st.lists(st.sampled_from([p for p in PIECES if p not in "\x1b\n\t"]),
                      min_size=1, max_size=8).map("".join)
    columns = draw(st.lists(st.tuples(header, st.none() | st.integers(0, 20)), min_size=1,
                            max_size=5))
    table = Table(line(draw(cell)), tuple(Column(h, min_width=m) for h, m in columns))
    for _ in range(draw(st.integers(0, 5))):
        table.add_row(*(line(draw(cell)) for _ in columns))
    return table


@settings(max_examples=100, deadline=None)
@given(_tables(), st.none() | st.integers(1, 120))
def test_what_every_table_holds(table: Table, width: int | None) -> None:
    out = plain.render(table, width=width)
    lines = out.split("\n")
    assert lines[-1] == "" and all(x == x.rstrip() for x in lines)
    drawn = [x for x in lines if x[:1] in ("┏", "┃", "│", "┡", "└")]
    if drawn:  # a box: every line of it as wide as the others, within the width if any
        widths = {plain.cell_width(x) for x in drawn}
        assert len(widths) == 1
        assert width is None or widths.pop() <= width
    else:  # stacked: only where the table would not fit
        assert width is not None
    # Nothing is cut: every word of every cell is on a line of the output.
    for row in table.rows:
        for cell in row:
            for word in cell.plain.expandtabs(8).split():
                assert word in out, (word, out)
