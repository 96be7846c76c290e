"""ALLOW is earned through the policy and the data: suites and policies (not user code)
under which the gate allowed (exit 0) what the evidence did not show, through the real CLI
(a subprocess, real files, a real store). Each test failed on the code before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.trust._support import cases_by_id, cli, no_traceback, project, runs

pytestmark = pytest.mark.slow

WRONG = """
    def answer(inp):
        return {"label": "totally wrong"}
"""
CONTAINS = ("  - type: contains\n    criterion: mentions\n    field: label\n"
            "    expected_field: keywords\n")
FLOOR = "version: 1\nrules:\n  - {id: mentions-floor, metric: mentions, min: 0.5}\n"


def _keyword_cases(empty: object, n_empty: int, n_real: int) -> list[dict[str, object]]:
    return [
        {"id": f"q{i:02d}", "input": {"n": i},
         "expected": {"keywords": empty if i < n_empty else ["refund"]}}
        for i in range(n_empty + n_real)
    ]


@pytest.mark.parametrize("empty", ["", [], [""]], ids=["text", "list", "list-of-text"])
def test_contains_with_an_empty_expected_excludes_the_case(tmp_path: Path, empty: object) -> None:
    """`contains` with `expected.keywords` blank ("" or []: a data export that lost them)
    passed every output, "totally wrong" included (a suite of 30 such cases PASSed a floor
    of 50%, exit 0). Such a case asks for no text, so it is excluded; here the 10 cases
    with a keyword decide the rule, and they FAIL it."""
    root = project(tmp_path / "p", WRONG, cases=_keyword_cases(empty, 20, 10),
                   evaluators=CONTAINS, release=FLOOR)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 1, result.text
    assert "0 / 10 observed · 0 missing · 20 excluded" in result.out, result.out
    case = cases_by_id(root)["q00"]
    judgment = case["judgments"]["mentions"]
    assert judgment["status"] == "EXCLUDED", judgment
    assert "is empty" in judgment["reason"] and "no text to look for" in judgment["reason"]
    [run] = runs(root)
    assert (run["exit_code"], run["gate"]) == (1, "BLOCK")


def test_contains_whose_every_expected_is_empty_is_refused(tmp_path: Path) -> None:
    """Every case's keywords blank: every case would be excluded, as with a misspelt field,
    so it is refused before anything runs (exit 2), naming the evaluator's line."""
    root = project(tmp_path / "p", WRONG, cases=_keyword_cases([], 30, 0),
                   evaluators=CONTAINS, release=FLOOR)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 2, result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(
        "oloproof run: error: oloproof.yaml:15: evaluators[0].expected_field: every case of"
        " data/cases.jsonl that has expected.keywords holds an empty value ([])"), lines[0]
    assert not (root / ".oloproof" / "store.sqlite").exists() or runs(root) == []


def test_evidence_that_cannot_fail_warns_when_insufficient_does_not_block(tmp_path: Path) -> None:
    """`block_on: [FAIL]` (INSUFFICIENT_EVIDENCE in neither list), 39 of 40 cases excluded by
    a misspelt expected key, every answer wrong: `max_failures: 5` on the one case left is
    `evidence_cannot_fail`, and it printed `ALLOW` beside it and `Gate ALLOW`, as if the rule
    had been met. It warns, as a rule with no observed case does (docs/statistics.md)."""
    cases = [{"id": f"q{i:02d}", "input": {"n": i},
              "expected": {"label" if i == 0 else "lable": "ok"}} for i in range(40)]
    release = ("version: 1\nblock_on: [FAIL]\n"
               "rules: [{id: few-failures, metric: exact_label, max_failures: 5}]\n")
    root = project(tmp_path / "p", WRONG, cases=cases, release=release)
    for result in (cli(root, "run"), cli(root, "gate", "latest")):
        no_traceback(result)
        assert result.code == 0, result.text
        row = next(line for line in result.out.splitlines() if "few-failures" in line)
        assert "evidence_cannot_fail" in row and " WARN " in row and "ALLOW" not in row, row
        assert "Gate      WARN   exit code 0" in result.out, result.out
    [run] = runs(root)
    assert (run["exit_code"], run["gate"]) == (0, "WARN")


def test_exact_match_tells_booleans_from_numbers(tmp_path: Path) -> None:
    """`expected: {"approved": false}` and a system answering `0`: Python's `0 == False`
    made exact_match pass every case, and a floor of 80% PASSed with exit 0. JSON `false`
    is not `0`, nor `true` `1`, at any depth; numbers still equal by value (1 and 1.0)."""
    cases = [{"id": f"q{i:02d}", "input": {"n": i}, "expected": {"approved": False}}
             for i in range(30)]
    app = """
        def answer(inp):
            return {"approved": 0}
    """
    evaluators = "  - type: exact_match\n    criterion: approved_ok\n    field: approved\n"
    release = "version: 1\nrules:\n  - {id: approved-floor, metric: approved_ok, min: 0.8}\n"
    root = project(tmp_path / "p", app, cases=cases, evaluators=evaluators, release=release)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 1, result.text
    assert "0 / 30 observed · 0 missing · 0 excluded" in result.out, result.out
    reason = cases_by_id(root)["q00"]["judgments"]["approved_ok"]["reason"]
    assert reason == "expected False, got 0", reason


def test_absolute_error_reads_no_boolean_as_a_number(tmp_path: Path) -> None:
    """`expected: {"days": true}` (a column of flags exported where the days belong) was
    read as 1, so an answer of 1 scored an error of 0 on every case and `max: 2` PASSed
    with exit 0. A boolean is not a number: the case is missing, and a run whose every
    case is missing for the criterion is incomplete (exit 5)."""
    cases = [{"id": f"q{i:02d}", "input": {"n": i}, "expected": {"days": True}}
             for i in range(30)]
    app = """
        def answer(inp):
            return {"days": 1}
    """
    evaluators = ("  - type: absolute_error\n    criterion: days_error\n    field: days\n"
                  "    range: [0, 10]\n")
    release = "version: 1\nrules:\n  - {id: days-ceiling, metric: days_error, max: 2}\n"
    root = project(tmp_path / "p", app, cases=cases, evaluators=evaluators, release=release)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text
    assert "not a number: output 1, expected True" in result.out, result.out


def _regex_project(root: Path, pattern: str) -> Path:
    evaluators = ("  - type: regex\n    criterion: has_order_number\n    field: label\n"
                  f"    pattern: '{pattern}'\n    pass_if: match\n")
    release = "version: 1\nrules:\n  - {id: order-floor, metric: has_order_number, min: 0.8}\n"
    return project(root, WRONG, n=30, evaluators=evaluators, release=release)


@pytest.mark.parametrize("pattern", [r"[0-9]*", "refund|", "(order )?", "$", ".*"])
def test_a_regex_that_matches_every_text_is_refused(tmp_path: Path, pattern: str) -> None:
    """`pattern: '[0-9]*'` (meant: `[0-9]+`) with `pass_if: match` finds an empty match in
    any text: "totally wrong" passed 30 of 30 and a floor of 80% PASSed, exit 0. Such a
    pattern cannot fail a case, so it is refused before anything runs, as `min: 0` is."""
    root = _regex_project(tmp_path / "p", pattern)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 2, result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(
        f"oloproof run: error: oloproof.yaml:15: evaluators[0].pattern: pattern '{pattern}'"
        " matches every text, the empty one included"), lines[0]
    assert "(accepted: a pattern that some text does not match)" in lines[0]
    assert not (root / ".oloproof" / "store.sqlite").exists() or runs(root) == []


@pytest.mark.parametrize("pattern", [r"[0-9]+", "^$", r"^[0-9]"])
def test_a_regex_that_some_text_does_not_match_is_decided(tmp_path: Path, pattern: str) -> None:
    root = _regex_project(tmp_path / "p", pattern)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code in (1, 3), result.text  # decided: never refused


@pytest.mark.parametrize(("schema", "said"), [
    ("{}", ""),
    ("{title: answer}", ""),
    ("{x-note: checked by hand}", ("; JSON Schema ignores keywords it does not know, such as"
                                  " 'x-note'")),
])
def test_a_json_schema_that_checks_nothing_is_refused(
    tmp_path: Path, schema: str, said: str
) -> None:
    """`schema: {}` (or only a title, or a keyword JSON Schema does not know, which it
    ignores) validates every output: `max_failures: 0` on it PASSed with exit 0 whatever the system
    answered. Refused before anything runs, at the schema's line."""
    evaluators = f"  - type: json_schema\n    criterion: fmt\n    schema: {schema}\n"
    release = "version: 1\nrules:\n  - {id: all-valid, metric: fmt, max_failures: 0}\n"
    root = project(tmp_path / "p", WRONG, n=30, evaluators=evaluators, release=release)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 2, result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert lines == [
        ("oloproof run: error: oloproof.yaml:14: evaluators[0].schema: the schema holds no"
        " keyword that checks anything, so every output is valid and a rule on the criterion"
        f" could not fail{said} (accepted: a schema with a constraint, such as"
        " {type: object, required: [answer]})")], result.err


@pytest.mark.parametrize(("schema", "where", "word", "hint"), [
    ("{type: object, requried: [answer]}", "schema.requried", "requried", "required"),
    ("{type: object, required: [answer], properties: {answer: {tpye: string}}}",
     "schema.properties.answer.tpye", "tpye", "type"),
    ("{type: object, anyOf: [{additionalproperties: false}]}",
     "schema.anyOf[0].additionalproperties", "additionalproperties", "additionalProperties"),
])
def test_a_misspelt_json_schema_keyword_is_refused(
    tmp_path: Path, schema: str, where: str, word: str, hint: str
) -> None:
    """`requried: [answer]` beside `type: object`: JSON Schema ignores a keyword it does not
    know, so every object passed, with or without `answer`, and `max_failures: 0` PASSed
    with exit 0 on outputs that all lacked it. A keyword close to a known one is refused,
    at any depth; one that is close to none (`nullable`, `x-note`) is left alone."""
    evaluators = f"  - type: json_schema\n    criterion: fmt\n    schema: {schema}\n"
    release = "version: 1\nrules:\n  - {id: all-valid, metric: fmt, max_failures: 0}\n"
    root = project(tmp_path / "p", WRONG, n=30, evaluators=evaluators, release=release)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 2, result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert lines == [
        (f"oloproof run: error: oloproof.yaml:14: evaluators[0].{where}: '{word}' is not a"
        " JSON Schema keyword, so it checks nothing (JSON Schema ignores keywords it does"
        f" not know); did you mean '{hint}'? (accepted: a keyword such as {hint})")
    ], result.err
    # A keyword close to no known one is an extension JSON Schema allows: decided.
    (root / "oloproof.yaml").write_text((root / "oloproof.yaml").read_text().replace(
        schema, "{type: object, required: [label], nullable: true, x-note: by hand}"))
    assert cli(root, "run").code == 0


def test_a_no_match_regex_with_doubled_backslashes_is_refused(tmp_path: Path) -> None:
    """The PII check `pattern: '\\\\b\\\\d{3}-\\\\d{2}-\\\\d{4}\\\\b'` in single quotes (written as for
    a Python string) looks for backslashes followed by b and d, which no answer holds: with
    `pass_if: no_match` every answer passed, each of them holding an SSN, and
    `max_failures: 0` PASSed with exit 0. Refused at load; one backslash is decided."""
    app = """
        def answer(inp):
            return {"label": f"call me, my SSN is 123-45-{6789 - inp['n']}"}
    """
    doubled = r"\\b\\d{3}-\\d{2}-\\d{4}\\b"
    evaluators = ("  - type: regex\n    criterion: pii_free\n    field: label\n"
                  f"    pattern: '{doubled}'\n    pass_if: no_match\n")
    release = "version: 1\nrules:\n  - {id: no-pii, metric: pii_free, max_failures: 0}\n"
    root = project(tmp_path / "p", app, n=30, evaluators=evaluators, release=release)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 2, result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(
        f"oloproof run: error: oloproof.yaml:15: evaluators[0].pattern: pattern '{doubled}'"
        r" holds '\\b', which looks for a backslash followed by 'b', not the escape \b"
    ), lines[0]
    assert r"to look for a backslash itself, write [\\]b" in lines[0]
    # One backslash, as YAML's single quotes keep it: every answer fails the check.
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace(doubled, r"\b\d{3}-\d{2}-\d{4}\b"))
    decided = cli(root, "run")
    assert decided.code == 1, decided.text
    assert "0 / 30 observed" in decided.out, decided.out
