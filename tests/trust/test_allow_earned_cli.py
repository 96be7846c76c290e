"""Issue 25, "What was seen": each way the gate printed ALLOW (exit 0) on evidence that could
not fail, reproduced through the real CLI (a subprocess, real files, a real store, a real
HTTP port). Each test asserts the exit code, the one line that says why, and what the store
holds afterwards (nothing, for a refusal; the stopped run, for an outage).

Every one of these exited 0 before the fix.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from pathlib import Path

import pytest
from tests.conftest import Result
from tests.fakes.provider import FakeServer
from tests.trust._support import cli, inspect, integrity_ok, no_traceback, project, runs

pytestmark = pytest.mark.slow

WRONG = """
    def answer(inp):
        return {"label": "wrong"}
"""
FAILING = """
    def answer(inp):
        raise RuntimeError("the model is down")
"""


def _cases(n: int, lang: str = "en") -> list[dict[str, object]]:
    return [{"id": f"q{i:02d}", "input": {"n": i}, "expected": {"label": "ok"},
             "metadata": {"lang": lang}} for i in range(n)]


def _stored(root: Path) -> list[tuple[str, str, int]]:
    """The runs in the store (status, completeness, exit code); none when there is no store."""
    path = root / ".oloproof" / "store.sqlite"
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [tuple(row) for row in conn.execute(  # type: ignore[misc]
            "SELECT status, completeness, exit_code FROM runs ORDER BY id")]
    finally:
        conn.close()


def _refused(result: Result, *needles: str) -> str:
    """Exit 2, one line on standard error holding every needle, no traceback; the line."""
    no_traceback(result)
    assert result.code == 2, result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_a_group_no_case_has_is_refused(tmp_path: Path) -> None:
    """`group: {lang: fr}` on a suite with only `lang: en`, every answer wrong,
    `max_failures: 0`: it read PASS "0 failed, 0 missing" (docs/groups.md promised otherwise)."""
    release = """\
version: 1
rules:
  - id: french
    metric: exact_label
    kind: observed_count
    max_failures: 0
    group: {lang: fr}
"""
    evaluators = ("  - type: exact_match\n    criterion: exact_label\n    field: label\n"
                  "    group_by: [lang]\n")
    root = project(tmp_path / "p", WRONG, cases=_cases(30), release=release,
                   evaluators=evaluators)
    _refused(cli(root, "run"),
             "release.yaml:7: rules[0].group.lang: rule french: no case of data/cases.jsonl"
             " has lang = 'fr'", "(accepted: en)")
    assert _stored(root) == []
    # A near miss is named.
    french = [{"id": f"f{i}", "input": {"n": i}, "expected": {"label": "ok"},
               "metadata": {"lang": "fre"}} for i in range(3)]
    (root / "data" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in _cases(10) + french))
    _refused(cli(root, "run"), "has lang = 'fr'", "(accepted: en, fre; did you mean 'fre'?)")
    # The same check on a stored run: gate --policy against the run's own cases.
    (root / "release.yaml").write_text(release.replace("{lang: fr}", "{lang: fre}"))
    done = cli(root, "run")
    assert done.code == 1, done.text  # 3 French cases, all wrong: a visible FAIL
    (root / "other.yaml").write_text(release.replace("{lang: fr}", "{lang: de}"))
    _refused(cli(root, "gate", "latest", "--policy", "other.yaml"),
             "other.yaml:7: rules[0].group.lang: rule french: no case of run run_",
             "has lang = 'de'")


def test_an_evaluator_field_no_case_holds_is_refused(tmp_path: Path) -> None:
    """`field: lable` (a typo) excluded every case and `max_failures: 0` passed."""
    release = "version: 1\nrules:\n  - {id: none-wrong, metric: exact_label, max_failures: 0}\n"
    typo = "  - type: exact_match\n    criterion: exact_label\n    field: lable\n"
    root = project(tmp_path / "p", WRONG, n=30, release=release, evaluators=typo)
    _refused(cli(root, "run"),
             "oloproof.yaml:14: evaluators[0].field: no case of data/cases.jsonl has"
             " expected.lable", "did you mean 'label'?", "(accepted: a key of the cases'"
             " expected: label)")
    assert _stored(root) == []
    # A suite with no expected at all, for an evaluator that needs one: the same.
    bare = project(tmp_path / "b", WRONG, release=release,
                   cases=[{"id": f"q{i}", "input": {"n": i}} for i in range(30)])
    _refused(cli(bare, "run"), "oloproof.yaml:12: evaluators[0]: exact_match (exact_label)"
             " compares each output with the case's expected value, and no case of"
             " data/cases.jsonl has an expected")
    assert _stored(bare) == []


def test_a_custom_evaluator_that_excludes_everything_is_not_a_pass(tmp_path: Path) -> None:
    """What only the run can show: every case excluded. No observed case: never a PASS."""
    evaluators = "  - type: custom\n    criterion: checked\n    function: checks:never\n"
    checks = """
        from oloproof import Verdict

        def never(output):
            return Verdict(excluded=True, reason="does not apply")
    """
    release = "version: 1\nrules:\n  - {id: none-wrong, metric: checked, max_failures: 0}\n"
    root = project(tmp_path / "p", WRONG, n=30, release=release, evaluators=evaluators,
                   files={"checks.py": checks})
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 3, result.text
    assert "no_observed_cases" in result.out, result.out
    assert "no observed case: 0 observed, 0 missing, 30 excluded" in result.out
    # No plan hint: more cases like these would be excluded too.
    assert "every case was excluded from checked" in result.out and "plan" not in result.out
    [run] = runs(root)
    assert (run["status"], run["exit_code"], run["gate"]) == ("DECIDED", 3, "BLOCK")


def test_cases_excluded_by_a_typo_leave_a_budget_that_cannot_fail(tmp_path: Path) -> None:
    """40 cases, 39 with `"lable"` in their expected (a typo): every answer wrong, and
    `max_failures: 5` read PASS ALLOW on the 1 case left ("0 / 1 observed · 39 excluded")."""
    cases = [{"id": f"q{i:02d}", "input": {"n": i},
              "expected": {"label" if i == 0 else "lable": "ok"}} for i in range(40)]
    release = "version: 1\nrules: [{id: few-failures, metric: exact_label, max_failures: 5}]\n"
    root = project(tmp_path / "p", WRONG, cases=cases, release=release)
    for result in (cli(root, "run"), cli(root, "gate", "latest")):
        no_traceback(result)
        assert result.code == 3, result.text
        assert "evidence_cannot_fail" in result.out and "PASS  " not in result.out
        detail = " ".join(result.out.split())
        assert ("1 case in scope after 39 excluded: no outcome of it could fail"
                " `max_failures: 5`") in detail, result.out
        # No plan hint: more cases like these would not widen the scope.
        assert "too few cases in its scope to fail it" in detail and "plan" not in detail
    [run] = runs(root)
    assert (run["exit_code"], run["gate"]) == (3, "BLOCK")


def test_a_custom_evaluator_that_applies_to_one_case_cannot_pass(tmp_path: Path) -> None:
    """200 cases, a custom evaluator excluding all but one: `min: 0.02` (which 183 cases can
    fail, so it is not refused at load) and `max_failures: 3` both read PASS on 1 case."""
    evaluators = "  - type: custom\n    criterion: checked\n    function: checks:first\n"
    checks = """
        from oloproof import Verdict

        def first(output, case):
            if case.id != "q0":
                return Verdict(excluded=True, reason="does not apply")
            return Verdict(passed=True)
    """
    release = ("version: 1\nrules:\n  - {id: floor, metric: checked, min: 0.02}\n"
               "  - {id: count, metric: checked, max_failures: 3}\n")
    root = project(tmp_path / "p", WRONG, n=200, release=release, evaluators=evaluators,
                   files={"checks.py": checks}, concurrency=8)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 3, result.text
    decided = inspect(root)["decisions"]
    assert [(e["rule"], e["state"], e["reason"]) for e in decided] == [
        ("floor", "INSUFFICIENT_EVIDENCE", "evidence_cannot_fail"),
        ("count", "INSUFFICIENT_EVIDENCE", "evidence_cannot_fail"),
    ], decided
    assert decided[0]["detail"].startswith(
        "1 case in scope after 199 excluded: no outcome of it could fail `min: 0.02`: even if"
        " every case failed, its 95% CP interval [0.0%, 97.5%] would not lie below 2.0%")


@pytest.mark.parametrize("bound", ["min: 0", "max: 1"])
def test_a_rate_bound_at_its_edge_is_refused(tmp_path: Path, bound: str) -> None:
    """Every call failing and `min: 0` (or `max: 1`) on a rate: PASS "0 observed, 30 missing"."""
    release = f"version: 1\nrules:\n  - {{id: edge, metric: exact_label, {bound}}}\n"
    root = project(tmp_path / "p", FAILING, n=30, release=release)
    name = bound.split(":")[0]
    _refused(cli(root, "run"), f"release.yaml:3: rules[0].{name}: rule edge: {bound} on a"
             " rate cannot fail", "(accepted: a number strictly between 0 and 1)")
    assert _stored(root) == []


MEAN = """\
  - type: custom
    criterion: days_error
    function: checks:days
    kind: mean
    range: [{low}, {high}]
"""
DAYS = """
    def days(output):
        return output["days"]
"""


def test_a_mean_floor_below_its_range_is_refused(tmp_path: Path) -> None:
    """`range: [0, 1]` MEAN with `min: -1`, every call failing: PASS."""
    release = "version: 1\nrules:\n  - {id: floor, metric: days_error, min: -1}\n"
    root = project(tmp_path / "p", FAILING, n=30, release=release,
                   evaluators=MEAN.format(low=0, high=1), files={"checks.py": DAYS})
    _refused(cli(root, "run"), "release.yaml:3: rules[0].min: rule floor: min: -1 is at or"
             " below the bottom of days_error's declared range [0, 1]",
             "(accepted: a number above 0 and below 1)")
    assert _stored(root) == []


def test_a_mean_ceiling_above_its_range_is_refused(tmp_path: Path) -> None:
    """`range: [0, 30]` and `max: 35`: every score (44-46) out of range, 30 missing, PASS
    with interval [-1.05, 31.05]."""
    app = """
        def answer(inp):
            return {"days": 44 + inp["n"] % 3}
    """
    release = "version: 1\nrules:\n  - {id: ceiling, metric: days_error, max: 35}\n"
    root = project(tmp_path / "p", app, n=30, release=release,
                   evaluators=MEAN.format(low=0, high=30), files={"checks.py": DAYS})
    _refused(cli(root, "run"), "release.yaml:3: rules[0].max: rule ceiling: max: 35 is at or"
             " above the top of days_error's declared range [0, 30]")
    assert _stored(root) == []
    # With a ceiling inside the range, the out-of-range scores are missing: incomplete.
    (root / "release.yaml").write_text(release.replace("max: 35", "max: 25"))
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text
    assert "Incomplete evidence: ceiling (100% missing)" in result.out, result.out
    [run] = runs(root)
    assert (run["status"], run["exit_code"]) == ("DECIDED", 5)


def test_a_policy_without_rules_is_refused(tmp_path: Path) -> None:
    """`rules: []`, every call failing: exit 0 with no "no rules, by declaration" line."""
    root = project(tmp_path / "p", FAILING, n=30, release="version: 1\nrules: []\n")
    _refused(cli(root, "run"), "release.yaml:2: rules: the release policy declares no rules",
             "Write policy: none in oloproof.yaml")
    assert _stored(root) == []
    # The explicit way, `policy: none`: it runs, says so, and an outage still stops it (a
    # system whose every call times out).
    (root / "oloproof.yaml").write_text(
        (root / "oloproof.yaml").read_text().replace("dataset:", "policy: none\ndataset:")
        .replace("  callable: app:answer\n", "  callable: app:answer\n  timeout_s: 0.2\n"))
    (root / "app.py").write_text("import time\n\ndef answer(inp):\n    time.sleep(2)\n")
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text
    assert "failed 8 calls in a row" in result.out, result.out
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["exit_code"]) == ("RUN_ERROR", "PARTIAL", 5)


@pytest.mark.parametrize("block_on", ["[INSUFFICIENT_EVIDENCE]", "[]"])
def test_a_block_on_without_fail_is_refused(tmp_path: Path, block_on: str) -> None:
    """`block_on: [INSUFFICIENT_EVIDENCE]` (or `[]`), 30 of 30 wrong: FAIL │ ALLOW, exit 0."""
    release = f"version: 1\nblock_on: {block_on}\nrules:\n  - {{id: floor, metric: exact_label, min: 0.5}}\n"
    root = project(tmp_path / "p", WRONG, n=30, release=release)
    _refused(cli(root, "run"), "release.yaml:2: block_on: FAIL is not in block_on",
             "put FAIL in warn_on")
    assert _stored(root) == []


def test_fail_in_warn_on_is_a_declaration_the_gate_line_states(tmp_path: Path) -> None:
    release = ("version: 1\nblock_on: [INSUFFICIENT_EVIDENCE]\nwarn_on: [FAIL]\n"
               "rules:\n  - {id: floor, metric: exact_label, min: 0.5}\n")
    root = project(tmp_path / "p", WRONG, n=30, release=release)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 0, result.text
    gate = next(line for line in result.out.splitlines() if line.startswith("Gate "))
    assert "WARN" in gate and "FAIL does not block, by declaration" in gate, gate
    again = cli(root, "gate", "latest")
    assert again.code == 0 and "FAIL does not block, by declaration" in again.out


def test_a_budget_as_large_as_the_suite_is_refused(tmp_path: Path) -> None:
    """`max_failures: 1000` over 30 cases, every call failing: PASS."""
    release = "version: 1\nrules:\n  - {id: budget, metric: exact_label, max_failures: 1000}\n"
    root = project(tmp_path / "p", FAILING, n=30, release=release)
    _refused(cli(root, "run"), "release.yaml:3: rules[0].max_failures: rule budget:"
             " max_failures: 1000 allows as many failures as there can be (30 cases in"
             " data/cases.jsonl)", "(accepted: a whole number from 0 to 29)")
    assert _stored(root) == []


def _dead_url() -> str:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/extract"


CI_POLICY = """\
version: 1
block_on: [FAIL, MANUAL_REVIEW]
warn_on: [INSUFFICIENT_EVIDENCE]
rules:
  - {id: floor, metric: exact_label, min: 0.7}
"""


def test_a_dead_endpoint_is_an_outage_not_a_warning(tmp_path: Path) -> None:
    """The HTTP system down, `warn_on: [INSUFFICIENT_EVIDENCE]` (the shape
    docs/running-in-ci.md showed): `Gate WARN exit code 0` after retrying every case four
    times (134 s for 200 cases). Now: exit 5 within 20 s, one line naming the URL."""
    url = _dead_url()
    system = f"  http:\n    url: {url}?key=s3cret\n    version: v1\n"
    root = project(tmp_path / "p", "", n=200, system=system, release=CI_POLICY,
                   concurrency=8)
    started = time.monotonic()
    result = cli(root, "run")
    took = time.monotonic() - started
    no_traceback(result)
    assert result.code == 5, result.text
    assert took <= 20, took  # retries and their waits included (a few seconds when idle)
    [stopped] = [line for line in result.out.splitlines() if line.startswith("Stopped:")]
    assert f"POST {url}?…" in stopped and "could not connect" in stopped, stopped
    assert "failed 8 calls in a row" in stopped and "s3cret" not in result.text
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["exit_code"]) == ("RUN_ERROR", "PARTIAL", 5)
    assert f"POST {url}?…" in run["stop_reason"]
    assert integrity_ok(root)
    # `gate` of the stored run: still incomplete.
    assert cli(root, "gate", "latest").code == 5


def test_an_endpoint_that_answers_503_to_everything_stops_early(tmp_path: Path) -> None:
    with FakeServer() as srv:
        srv.configure("/system", fail_always=503)
        system = f"  http:\n    url: {srv.system_url}\n    version: v1\n"
        root = project(tmp_path / "p", "", n=200, system=system, release=CI_POLICY,
                       concurrency=4)
        result = cli(root, "run")
        no_traceback(result)
        assert result.code == 5, result.text
        calls = len(srv.calls("/system"))
    # 8 failed calls in a row end it: the 4 in flight and the next 4 to 8, 4 attempts each.
    assert calls <= 4 * (8 + 4), calls
    assert f"HTTP 503 from POST {srv.system_url}" in result.out, result.out


def test_a_judge_that_fails_every_call_stops_the_run_naming_its_url(tmp_path: Path) -> None:
    """A judge provider down (503 to every call, after four attempts each): an outage of the
    judge, not a run whose judged metric is merely undecided."""
    with FakeServer() as srv:
        srv.configure("/v1/chat/completions", fail_always=503)
        evaluators = (
            "  - type: exact_match\n    criterion: exact_label\n    field: label\n"
            "  - type: rubric_judge\n    criterion: helpful\n    provider: openai_compatible\n"
            f"    model: local-judge\n    base_url: {srv.openai_base_url}\n"
            "    rubric_text: Is it helpful?\n"
        )
        release = CI_POLICY + "  - {id: helpful-floor, metric: helpful, min: 0.7}\n"
        app = "def answer(inp):\n    return {'label': 'ok'}\n"
        root = project(tmp_path / "p", app, n=40, release=release, evaluators=evaluators,
                       concurrency=4)
        config = root / "oloproof.yaml"  # 8 judge calls at once: one wave of failures
        config.write_text(config.read_text().replace("  judge: 2\n", "  judge: 8\n"))
        result = cli(root, "run", timeout=120)
        calls = len(srv.calls("/v1/chat/completions"))
    no_traceback(result)
    assert result.code == 5, result.text
    [stopped] = [line for line in result.out.splitlines() if line.startswith("Stopped:")]
    url = f"{srv.openai_base_url}/chat/completions"
    assert f"judge helpful (openai_compatible local-judge at POST {url})" in stopped, stopped
    assert "failed 8 calls in a row" in stopped and f"HTTP 503 from POST {url}" in stopped
    assert calls < 40 * 4  # not every case's four attempts
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["exit_code"]) == ("RUN_ERROR", "PARTIAL", 5)
