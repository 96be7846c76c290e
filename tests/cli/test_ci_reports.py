"""CI outputs: --junit-xml (read back with junitparser), --github-annotations, and the
GitHub step summary, through the real CLI; and the renderers on hostile text."""

from __future__ import annotations

import json
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest
import xmlschema
from tests.conftest import labelled_cases, run_cli, write_project
from tests.progress._support import checked_events

from oloproof.enums import GateAction, RuleState
from oloproof.policy.decide import Decision
from oloproof.render.ci import CiRun, github_annotations, github_summary, junit_xml

# 40 cases: q000-q029 answer "ok", the rest "no" -> exact_label 30/40.
APP = """
def answer(inp):
    return {"label": "ok" if inp["n"] < 30 else "no"}
"""

RELEASE = """
version: 1
block_on: [FAIL]
warn_on: [INSUFFICIENT_EVIDENCE]
rules:
  - id: passes
    metric: exact_label
    min: 0.5
  - id: fails
    metric: exact_label
    min: 0.95
  - id: undecided-warns
    metric: exact_label
    min: 0.7
"""


def _project(root: Path, release: str = RELEASE) -> Path:
    return write_project(root, app=APP, cases=labelled_cases(40), release=release)


# The JUnit schema pytest validates its own reports against (tests/cli/test_junit_schema.py).
_SCHEMA = xmlschema.XMLSchema(str(Path(__file__).resolve().parents[1] / "fixtures" / "junit-10.xsd"))


def _cases(path: Path) -> dict[str, junitparser.TestCase]:
    """The report's test cases, once it is known to validate against the JUnit schema."""
    errors = [str(e.reason) for e in _SCHEMA.iter_errors(str(path))]
    assert not errors, errors
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = list(xml) if isinstance(xml, junitparser.JUnitXml) else [xml]
    assert len(suites) == 1
    return {case.name: case for case in suites[0]}


def test_run_writes_a_junit_report_annotations_and_a_step_summary(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    report = tmp_path / "out" / "report.xml"
    report.parent.mkdir()
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    result = run_cli(
        "run", "--junit-xml", str(report), "--github-annotations", cwd=root,
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert result.code == 1, result.text  # "fails" is a blocking FAIL
    cases = _cases(report)
    assert set(cases) == {"passes", "fails", "undecided-warns"}
    assert cases["passes"].is_passed
    [failure] = cases["fails"].result
    assert isinstance(failure, junitparser.Failure) and failure.type == "FAIL"
    assert "upper < 95.0%" in failure.message
    # INSUFFICIENT_EVIDENCE on a rule that only warns: skipped, with the detail.
    [skipped] = cases["undecided-warns"].result
    assert isinstance(skipped, junitparser.Skipped)
    assert "contains 70.0%" in skipped.message
    props = {p.name: p.value for p in next(iter(junitparser.JUnitXml.fromfile(str(report))))
             .properties()}
    assert props["gate"] == "BLOCK" and props["exit_code"] == "1"
    assert props["run_id"] == json.loads(run_cli("runs", "--json", cwd=root).out)[0]["id"]

    annotations = [line for line in result.out.splitlines() if line.startswith("::")]
    assert annotations[0].startswith("::error title=Oloproof rule fails::FAIL: ")
    assert annotations[1].startswith("::warning title=Oloproof rule undecided-warns::")
    assert len(annotations) == 2
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, never overwritten
    assert "### ❌ Oloproof gate: BLOCK (exit code 1)" in text
    assert "| fails | exact\\_label | FAIL | BLOCK |" in text

    # gate on the stored run writes the same report.
    again = tmp_path / "gate.xml"
    gated = run_cli("gate", "latest", "--junit-xml", str(again), "--json", cwd=root)
    assert gated.code == 1, gated.text
    json.loads(gated.out)  # --json keeps standard output one JSON document
    assert {n: c.is_passed for n, c in _cases(again).items()} == {
        n: c.is_passed for n, c in cases.items()
    }


def test_undecided_blocking_rule_is_a_failure_unless_asked_to_skip(tmp_path: Path) -> None:
    root = _project(
        tmp_path / "p",
        RELEASE.replace("block_on: [FAIL]\nwarn_on: [INSUFFICIENT_EVIDENCE]\n", ""),
    )
    assert run_cli("run", cwd=root).code == 1
    auto, skipped = tmp_path / "auto.xml", tmp_path / "skipped.xml"
    assert run_cli("gate", "latest", "--junit-xml", str(auto), cwd=root).code == 1
    [result] = _cases(auto)["undecided-warns"].result
    assert isinstance(result, junitparser.Failure) and result.type == "INSUFFICIENT_EVIDENCE"
    assert run_cli("gate", "latest", "--junit-xml", str(skipped),
                   "--junit-undecided", "skipped", cwd=root).code == 1
    [result] = _cases(skipped)["undecided-warns"].result
    assert isinstance(result, junitparser.Skipped)


def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    result = run_cli("run", "--junit-xml", str(tmp_path / "missing" / "r.xml"), cwd=root)
    assert result.code == 2, result.text
    assert "--junit-xml" in result.err and "does not exist" in result.err
    assert "Traceback" not in result.text
    assert not (root / ".oloproof").exists()  # nothing ran, nothing stored
    folder = run_cli("run", "--junit-xml", str(tmp_path), cwd=root)
    assert folder.code == 2 and "is a folder" in folder.err


HOSTILE = 'r|1 <script>alert(1)</script> & "q" \x1b[31m `x` ]]>'


def _hostile_run(completeness: str = "COMPLETE") -> CiRun:
    decisions = [
        Decision(rule=HOSTILE, metric="m|<b>", kind="interval_threshold",
                 state=RuleState.FAIL, reason="upper_bound_below_min",
                 detail="95% CP [1.0%, 2.0%]: upper < 50.0% \n%0A ]]> <img onerror=x>",
                 action=GateAction.BLOCK),
    ]
    status = "DECIDED" if completeness == "COMPLETE" else "RUN_ERROR"
    return CiRun(run_id="run_X", project="p<&>", status=status, completeness=completeness,
                 gate="BLOCK", exit_code=1, decisions=decisions, summaries=[],
                 rule_ids=[HOSTILE], stop_reason="stopped: <x> \n again")


@pytest.mark.parametrize("completeness", ["COMPLETE", "PARTIAL"])
def test_hostile_text_stays_text_in_every_format(tmp_path: Path, completeness: str) -> None:
    run = _hostile_run(completeness)
    path = tmp_path / "r.xml"
    path.write_text(junit_xml(run), encoding="utf-8")
    root = ET.parse(path).getroot()  # well-formed XML whatever the text
    [case] = root.iter("testcase")
    assert case.get("name") == HOSTILE.replace("\x1b", "\\x1b")
    results = _cases(path)[case.get("name") or ""].result
    if completeness == "PARTIAL":
        assert isinstance(results[0], junitparser.Error)
        assert "not decided: stopped: <x>" in (results[0].message or "")
    else:
        assert isinstance(results[0], junitparser.Failure)

    md = github_summary(run)
    assert "<script>" not in md and "<img" not in md and "<b>" not in md
    if completeness == "COMPLETE":
        assert "r\\|1 &lt;script&gt;" in md
    else:
        assert "Not decided: stopped: &lt;x&gt;" in md
    for line in md.splitlines():
        if line.startswith("| r"):
            assert line.count(" | ") == 4  # no cell broke the table

    for line in github_annotations(run):
        assert "\n" not in line and "\x1b" not in line
        _, _, rest = line.partition(" title=")
        title, _, message = rest.partition("::")
        assert "," not in title.replace("%2C", "") and ":" not in title.replace("%3A", "")
        if completeness == "COMPLETE":
            assert "%250A" in message  # the detail's literal "%0A" cannot act as a newline


# The gate's notes where a CI user reads them. 40 cases, every answer right but every 10th
# call failing (4 missing): `floor` (min 0.5) PASSes on 36 observed.
FLAKY_APP = """
def answer(inp):
    if inp["n"] % 10 == 0:
        raise RuntimeError("upstream down")
    return {"label": "ok"}
"""

FLOOR = "version: 1\nmax_missing: {limit}\nrules:\n  - {{id: floor, metric: exact_label, min: 0.5}}\n"


def _outputs(root: Path, tmp_path: Path, *args: str) -> tuple[int, dict[str, junitparser.TestCase],
                                                                list[str], str, str]:
    """``args`` run with every CI output: the exit code, the JUnit test cases, the
    annotation lines, the step summary and the JUnit document."""
    report, summary = tmp_path / "report.xml", tmp_path / "summary.md"
    for path in (report, summary):
        path.unlink(missing_ok=True)
    result = run_cli(*args, "--junit-xml", str(report), "--github-annotations", cwd=root,
                     env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert "Traceback" not in result.text
    annotations = [line for line in result.out.splitlines() if line.startswith("::")]
    return (result.code, _cases(report), annotations, summary.read_text(encoding="utf-8"),
            report.read_text(encoding="utf-8"))


def test_a_subset_that_blocks_on_passing_rules_is_red_and_says_why(tmp_path: Path) -> None:
    """`run --limit 10`: `floor` PASSes on 9 of 10 and the gate blocks, exit 5 (a subset
    never allows). The JUnit report was all green (one passing test case), no annotation
    was written and the step summary said `BLOCK (exit code 5)` with no reason: only the
    terminal said "Subset: … never allows a release"."""
    root = write_project(tmp_path / "p", app=FLAKY_APP, cases=labelled_cases(40),
                         release=FLOOR.format(limit=0.5))
    for args in (("run", "--limit", "10"), ("gate", "latest")):
        code, cases, annotations, summary, _ = _outputs(root, tmp_path, *args)
        assert code == 5
        assert cases["floor"].is_passed  # the rule is as decided
        [failure] = cases["gate"].result
        assert isinstance(failure, junitparser.Failure) and failure.type == "BLOCK"
        assert "Subset: 10 of 40 cases" in (failure.message or "")
        [line] = annotations
        assert line.startswith("::error title=Oloproof gate BLOCK::Subset: 10 of 40 cases")
        assert "- ❌ Subset: 10 of 40 cases" in summary


def test_a_pass_over_max_missing_is_a_failure_and_its_note_is_shown(tmp_path: Path) -> None:
    """4 of 40 missing over `max_missing: 0.05`: `floor` PASSes but blocks, exit 5. Its JUnit
    test case passed (the report green, the job red), and the "Incomplete evidence" note was
    in no CI output."""
    root = write_project(tmp_path / "p", app=FLAKY_APP, cases=labelled_cases(40),
                         release=FLOOR.format(limit=0.05))
    for args in (("run",), ("gate", "latest")):
        code, cases, annotations, summary, _ = _outputs(root, tmp_path, *args)
        assert code == 5
        [failure] = cases["floor"].result
        assert isinstance(failure, junitparser.Failure) and failure.type == "INCOMPLETE"
        assert "over max_missing 5%" in (failure.message or "")
        [skipped] = cases["gate"].result  # the rule is red already: the note goes beside it
        assert isinstance(skipped, junitparser.Skipped)
        assert "Incomplete evidence: floor (10% missing)" in (skipped.message or "")
        assert any(a.startswith("::warning title=Oloproof gate BLOCK::Incomplete evidence")
                   for a in annotations), annotations
        assert "Incomplete evidence: floor (10% missing)" in summary


def test_code_edited_since_an_allowing_run_is_said_in_every_ci_output(tmp_path: Path) -> None:
    """An ALLOW run, then app.py made to answer every case wrongly and nothing run again:
    `gate latest` says so beside `Gate ALLOW exit code 0`, and the exit code stays 0; the
    JUnit report, the annotations and the step summary said nothing of it."""
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40),
                         release=FLOOR.format(limit=0.05))
    assert run_cli("run", cwd=root).code == 0
    app = root / "app.py"
    app.write_text("def answer(inp):\n    return {'label': 'no'}\n")
    later = time.time() + 5
    os.utime(app, (later, later))
    code, cases, annotations, summary, _ = _outputs(root, tmp_path, "gate", "latest")
    assert code == 0  # the run's own exit code, as before
    assert cases["floor"].is_passed
    [skipped] = cases["gate"].result
    assert isinstance(skipped, junitparser.Skipped)
    assert "The code the run called has changed since it started" in (skipped.message or "")
    assert "app.py" in (skipped.message or "")
    [line] = annotations
    assert line.startswith("::warning title=Oloproof gate ALLOW::The code the run called has changed")
    assert "- ⚠️ The code the run called has changed since it started" in summary


@pytest.mark.parametrize("rule_id", ["floor\n::stop-commands::pwned", "floor\r::add-mask::x",
                                     "floor\u2028::error::fake", " "])
def test_a_rule_id_that_is_not_one_printable_line_is_refused(tmp_path: Path,
                                                            rule_id: str) -> None:
    """A rule id holding a newline was accepted, and the gate's note naming the rule
    ("Incomplete evidence: floor …") printed `::stop-commands::pwned (25% missing): …` at
    the start of a line of standard output, before the annotations: on GitHub Actions the
    runner stops reading workflow commands there, and the run's `::error` lines vanished."""
    release = FLOOR.format(limit=0.05).replace("{id: floor,", f"{{id: {json.dumps(rule_id)},")
    root = write_project(tmp_path / "p", app=FLAKY_APP, cases=labelled_cases(40),
                         release=release)
    result = run_cli("run", "--github-annotations", cwd=root)
    assert result.code == 2, result.text
    assert "release.yaml:4: rules[0].id: a rule id is a name on one line" in result.err
    assert "Traceback" not in result.text
    assert not [line for line in result.text.splitlines() if line.startswith("::")]
    assert not (root / ".oloproof").exists()  # refused before anything ran


def test_a_noncharacter_in_a_systems_error_keeps_the_report_well_formed(tmp_path: Path) -> None:
    """XML 1.0 has no U+FFFE or U+FFFF, which printable() leaves as they are: a system whose
    every call failed with `RuntimeError("boom \\ufffe\\uffff")` stopped the run (exit 5), and
    its JUnit report, the stop reason in each `<error>`, was "not well-formed (invalid
    token)" to every reader: the CI showed no test result at all."""
    app = 'def answer(inp):\n    raise RuntimeError("boom \\ufffe\\uffff end")\n'
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(10),
                         release=FLOOR.format(limit=0.05))
    report = tmp_path / "report.xml"
    assert run_cli("run", "--junit-xml", str(report), cwd=root).code == 5
    ET.parse(report)  # well-formed
    [error] = _cases(report)["floor"].result
    assert isinstance(error, junitparser.Error)
    assert "boom \\ufffe\\uffff end" in (error.message or "")


def test_run_finished_carries_the_gate_notes(tmp_path: Path) -> None:
    """`run --json`'s last event is what a CI script reads (docs/running-in-ci.md): 4 of 40
    missing over `max_missing: 0.05` exited 5 with `floor` PASS in it and no word of why;
    the "Incomplete evidence" note was only in the tables on standard error. The event
    now carries the gate's notes (an optional field of the shipped schema), and a run
    without any carries no such field."""
    root = write_project(tmp_path / "p", app=FLAKY_APP, cases=labelled_cases(40),
                         release=FLOOR.format(limit=0.05))
    result = run_cli("run", "--json", cwd=root)
    assert result.code == 5
    last = checked_events(result.out)[-1]  # every event valid against the shipped schema
    assert last["type"] == "run_finished" and last["exit_code"] == 5
    [note] = last["gate_notes"]
    assert note.startswith("Incomplete evidence: floor (10% missing)")
    assert note == json.loads(run_cli("gate", "latest", "--json", cwd=root).out)["gate_notes"][0]
    clean = write_project(tmp_path / "q", app=APP, cases=labelled_cases(40),
                          release=FLOOR.format(limit=0.05))
    result = run_cli("run", "--json", cwd=clean)
    assert result.code == 0
    assert "gate_notes" not in checked_events(result.out)[-1]


def test_a_rule_named_gate_keeps_its_own_test_case(tmp_path: Path) -> None:
    """The notes' test case is `gate` of its own class: a rule may be named `gate` too."""
    root = write_project(tmp_path / "p", app=FLAKY_APP, cases=labelled_cases(40),
                         release=FLOOR.format(limit=0.5).replace("id: floor", "id: gate"))
    *_, text = _outputs(root, tmp_path, "run", "--limit", "10")
    cases = {(c.get("classname"), c.get("name")): c for c in ET.fromstring(text).iter("testcase")}
    assert set(cases) == {("oloproof.test-project", "gate"), ("oloproof.test-project.gate", "gate")}
    assert cases["oloproof.test-project", "gate"].find("failure") is None  # the rule: PASS
    assert cases["oloproof.test-project.gate", "gate"].find("failure") is not None  # a subset


def _commands(text: str) -> list[str]:
    """The lines of ``text`` GitHub's runner reads as workflow commands (it trims blanks)."""
    return [line.lstrip() for line in text.splitlines() if line.lstrip().startswith("::")]


def test_no_line_of_a_report_acts_as_a_workflow_command(tmp_path: Path) -> None:
    """A rule id may be `::stop-commands::pw` (one printable line). Where the report
    puts it at the start of a line (a narrow log: `COLUMNS=40` prints a table as one block
    per row, headed by the id), GitHub's runner read that line as a command and ignored
    every later one, the run's `::error` annotations too; and a configuration error
    quoting a criterion `exact\\n::stop-commands::pw` on standard error did the same. Such a
    line's first colon is now written `\\x3a`; the annotations are the only commands."""
    release = FLOOR.format(limit=0.05).replace("id: floor", 'id: "::stop-commands::pw"')
    root = write_project(tmp_path / "p", app=FLAKY_APP, cases=labelled_cases(40),
                         release=release)
    for args in (("run", "--github-annotations"), ("gate", "latest", "--github-annotations"),
                 ("inspect", "latest")):
        result = run_cli(*args, cwd=root, env={"COLUMNS": "40"})
        assert result.code == (0 if args[0] == "inspect" else 5), result.text
        assert "\\x3a:stop-commands::pw" in result.out  # the id, shown, inert
        assert [c.partition(" ")[0] for c in _commands(result.text)] == (
            [] if args[0] == "inspect" else ["::warning", "::error"])
    evaluators = '- type: exact_match\n  criterion: "exact\\n::stop-commands::pw"\n  field: label\n'
    bad = write_project(tmp_path / "q", app=APP, cases=labelled_cases(4), evaluators=evaluators)
    result = run_cli("run", cwd=bad)
    assert result.code == 2 and "criterion name is made of letters" in result.err
    assert _commands(result.text) == []


def test_a_note_naming_a_file_with_a_newline_stays_one_line(tmp_path: Path) -> None:
    """The suite `data/a\\n::stop-commands::x.jsonl`, edited since the run: the note naming it
    printed `::stop-commands::x.jsonl has changed …` as a line of its own, in `gate` and
    `inspect`; the note is one line now, its newline written `\\n`."""
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40),
                         release=FLOOR.format(limit=0.05))
    name = "data/a\n::stop-commands::x.jsonl"
    (root / "data" / "cases.jsonl").rename(root / name)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("dataset: data/cases.jsonl",
                                                 f"dataset: {json.dumps(name)}"))
    assert run_cli("run", cwd=root).code == 0
    suite = root / name
    suite.write_text("".join(suite.read_text().splitlines(keepends=True)[:20]))
    later = time.time() + 5
    os.utime(suite, (later, later))
    for args in (("gate", "latest", "--github-annotations"), ("inspect", "latest")):
        result = run_cli(*args, cwd=root)
        assert result.code == 0, result.text
        assert "data/a\\n::stop-commands::x.jsonl has changed since this run started" in result.out
        assert [c.partition(" ")[0] for c in _commands(result.text)] == (
            ["::warning"] if args[0] == "gate" else [])
