"""A comparison's discordant cases, read the light way (each case's outcome from its status
and packed verdicts, the outputs and reasons of the cases shown only), are the ones
``compare``'s own pairing gives: checked against that pairing (build_comparison, every case
loaded whole) on real runs that disagree, on rates and on means, across suites that differ."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import write_project

from oloproof.analysis.compare import build_comparison
from oloproof.analysis.report import comparison_report_document, criterion_outcome
from oloproof.cli.main import main
from oloproof.enums import MetricKind
from oloproof.store.db import open_store_readonly, store_path

APP = """
import os
from oloproof import system

@system(name="variants", version="1")
def answer(case_input):
    n, variant = case_input["n"], int(os.environ.get("OLOPROOF_TEST_VARIANT", "0"))
    if variant and n % 11 == 3:
        raise RuntimeError("variant broke")
    label = "ok" if (n + variant) % 4 else "no"
    return {"label": label, "days": (n * (variant + 1)) % 6}
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: absolute_error
  criterion: days_error
  field: days
  range: [0, 10]
"""


def _reference(conn: Any, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """What the report listed before it read cases the light way (the code of 2f619c0^)."""
    cmp = build_comparison(conn, doc["candidate"]["run_id"], doc["baseline"]["run_id"],
                           float(doc["confidence_level"]))
    cand = {c.case_id: c for c in cmp.candidate_cases}
    base = {c.case_id: c for c in cmp.baseline_cases}
    out = []
    for name, pm in cmp.metrics.items():
        rows: list[dict[str, Any]] = []
        for cid in cmp.pairing.shared:
            c, b = cand[cid], base[cid]
            co, bo = criterion_outcome(pm.kind, c, name), criterion_outcome(pm.kind, b, name)
            common = {"candidate_output": c.output, "baseline_output": b.output,
                      "candidate_reason": c.judgments[name].reason if name in c.judgments else None,
                      "baseline_reason": b.judgments[name].reason if name in b.judgments else None}
            if pm.kind == MetricKind.BINARY:
                if {co, bo} == {"passed", "failed"}:
                    rows.append({"id": cid, "candidate": co, "baseline": bo, "direction":
                                 "candidate_only" if co == "passed" else "baseline_only", **common})
            elif co == "scored" and bo == "scored":
                cs, bs = c.judgments[name].score, b.judgments[name].score
                if cs is not None and bs is not None and cs != bs:
                    rows.append({"id": cid, "candidate": f"{cs:g}", "baseline": f"{bs:g}",
                                 "difference": cs - bs, "direction":
                                 "candidate_only" if cs > bs else "baseline_only", **common})
        if pm.kind != MetricKind.BINARY:
            rows.sort(key=lambda r: -abs(r["difference"]))
        out.append({"metric": name, "kind": pm.kind, "cases": rows, "total": len(rows)})
    return out


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    mp = pytest.MonkeyPatch()
    root = write_project(
        tmp_path_factory.mktemp("discordant") / "p", app=APP, evaluators=EVALUATORS,
        cases=[{"id": f"c{n:03d}", "input": {"n": n}, "expected": {"label": "ok", "days": 2}}
               for n in range(120)],
    )
    config = str(root / "oloproof.yaml")
    try:
        mp.setenv("OLOPROOF_TEST_VARIANT", "0")
        assert main(["run", "--config", config]) in (0, 1, 3)
        # The candidate: other answers, on a suite with 10 cases fewer and 5 of its own.
        cases = [json.loads(line) for line in (root / "data" / "cases.jsonl").read_text().splitlines()]
        cases = cases[10:] + [{"id": f"new{n}", "input": {"n": n}, "expected": {"label": "ok", "days": 2}}
                              for n in range(5)]
        (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
        mp.setenv("OLOPROOF_TEST_VARIANT", "1")
        assert main(["run", "--no-cache", "--config", config]) in (0, 1, 3, 5)
    finally:
        mp.undo()
    conn = open_store_readonly(store_path(root))
    try:
        ids = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY created_at DESC")]
    finally:
        conn.close()
    import io
    from contextlib import redirect_stdout

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        main(["compare", ids[0], ids[1], "--config", config])
    cmp_id = re.search(r"cmp_[0-9A-Z]{26}", buffer.getvalue())
    assert cmp_id is not None
    return root, cmp_id.group()


def test_the_light_way_finds_what_compares_pairing_finds(compared: tuple[Path, str]) -> None:
    root, cmp_id = compared
    conn = open_store_readonly(store_path(root))
    try:
        doc = comparison_report_document(conn, cmp_id)
        reference = _reference(conn, doc["comparison"])
    finally:
        conn.close()
    assert doc["discordant"] == reference
    by_metric = {d["metric"]: d for d in doc["discordant"]}
    assert by_metric["exact_label"]["total"] > 20
    assert by_metric["days_error"]["total"] > 20
    directions = {r["direction"] for r in by_metric["exact_label"]["cases"]}
    assert directions == {"candidate_only", "baseline_only"}


def test_the_discordant_cases_are_capped_and_counted(compared: tuple[Path, str]) -> None:
    root, cmp_id = compared
    conn = open_store_readonly(store_path(root))
    try:
        whole = comparison_report_document(conn, cmp_id)
        capped = comparison_report_document(conn, cmp_id, limit=7)
    finally:
        conn.close()
    for full, cut in zip(whole["discordant"], capped["discordant"], strict=True):
        assert cut["total"] == full["total"] == len(full["cases"])
        assert cut["cases"] == full["cases"][:7]
