"""YAML mistakes through the CLI (issue 30): PyYAML's own words get a line that says what to
look at, with that line of the file shown; errors found after validation (a callable that
cannot be imported, a rule on groups) carry their line; a release.yaml or compare.yaml
beside the project is named as oloproof.yaml is (as the user can open it, never by its
absolute path)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

APP = """
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 4 else "no"}
"""
RELEASE = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"


def _project(root: Path) -> Path:
    return write_project(root, app=APP, cases=labelled_cases(8), release=RELEASE)


def _error(result_err: str) -> list[str]:
    assert "Traceback" not in result_err
    return result_err.rstrip("\n").split("\n")


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (old, text)
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        # An evaluator key indented one space less than its siblings.
        ([("    field: label\n", "   field: label\n")], [
            ("oloproof run: error: oloproof.yaml:14: not valid YAML: did not find expected '-'"
            " indicator at column 4 (while parsing a block collection on line 12)"),
            "  check the indentation of line 14:",
            "  14 |    field: label",
            "     |    ^",
        ]),
        # A key indented under a value.
        ([("  callable: app:answer\n", "  callable: app:answer\n    timeout_s: 3\n")], [
            ("oloproof run: error: oloproof.yaml:8: not valid YAML: mapping values are not"
            " allowed in this context at column 14"),
            "  check the indentation of line 8; a value that holds ': ' must be quoted:",
            "  8 |     timeout_s: 3",
            "    |              ^",
        ]),
        # A quote never closed.
        ([("project: test-project\n", "project: 'test-project\n")], [
            ("oloproof run: error: oloproof.yaml:15: not valid YAML: found unexpected end of"
            " stream at column 1 (while scanning a quoted scalar on line 2)"),
            "  the quoted value that starts on line 2 is never closed:",
            "  2 | project: 'test-project",
            "    |          ^",
        ]),
        # A closing quote forgotten: PyYAML stops lines later, after the next quote.
        ([("project: test-project\n", "project: 'test-project\n"),
          ("callable: app:answer", "callable: 'app:answer'")], [
            ("oloproof run: error: oloproof.yaml:7: not valid YAML: did not find expected key at"
            " column 14 (while parsing a block mapping on line 1)"),
            ("  the quoted value that starts on line 2 runs on to line 7; is its closing quote"
            " missing:"),
            "  2 | project: 'test-project",
            "    |          ^",
        ]),
        # A regex in double quotes: \d is no YAML escape.
        ([("    field: label\n", '    field: "\\d+"\n')], [
            ("oloproof run: error: oloproof.yaml:14: not valid YAML: found unknown escape"
            " character at column 13 (while parsing a quoted scalar on line 14)"),
            ("  in double quotes a backslash starts an escape: write \\\\ for a backslash"
            " (\"\\\\d+\"), or use single quotes ('\\d+'), on line 14:"),
            '  14 |     field: "\\d+"',
            "     |             ^",
        ]),
        # A tab in the indentation, shown as an arrow.
        ([("  callable: app:answer\n", "\tcallable: app:answer\n")], [
            ("oloproof run: error: oloproof.yaml:7: not valid YAML: found character that cannot"
            " start any token at column 1 (while scanning for the next token on line 7);"
            " indent with spaces, not tabs"),
            "  replace the tab on line 7 with spaces:",
            "  7 | \u2192callable: app:answer",
            "    | ^",
        ]),
        # A no-break space as indentation: PyYAML stops on the next line, about colons.
        ([("  name: test-system\n", "\xa0 name: test-system\n")], [
            ("oloproof run: error: oloproof.yaml:5: not valid YAML: column 1 holds U+00A0"
             " (NO-BREAK SPACE), which looks like a space but is not one (the parser said:"
             " mapping values are not allowed in this context on line 6)"),
            "  replace it with a space, on line 5:",
            "  5 | \\xa0 name: test-system",
            "    | ^",
        ]),
        # A no-break space after a colon: PyYAML stops a line later.
        ([("    field: label\n", "    field:\xa0label\n")], [
            ("oloproof run: error: oloproof.yaml:14: not valid YAML: column 11 holds U+00A0"
             " (NO-BREAK SPACE), which looks like a space but is not one (the parser said:"
             " could not find expected ':' on line 15)"),
            "  replace it with a space, on line 14:",
            "  14 |     field:\\xa0label",
            "     |           ^",
        ]),
        # A zero-width space before the space after a colon.
        ([("  system: 8\n", "  system:\u200b 8\n")], [
            ("oloproof run: error: oloproof.yaml:9: not valid YAML: column 10 holds U+200B"
             " (ZERO WIDTH SPACE), an invisible character (the parser said: mapping values"
             " are not allowed in this context on line 10)"),
            "  delete it, on line 9:",
            "  9 |   system:\\u200b 8",
            "    |          ^",
        ]),
        # Control characters: PyYAML names a position in the text, not a line.
        ([("concurrency:\n", "concurrency:\x0c\n")], [
            ("oloproof run: error: oloproof.yaml:8: not valid YAML: column 13 holds U+000C"
             " (FORM FEED), a control character, which YAML does not accept (the parser said:"
             " unacceptable character #x000c: control characters are not allowed)"),
            "  delete it, on line 8:",
            "  8 | concurrency:\\x0c",
            "    |             ^",
        ]),
        ([("project: test-project\n", "project: test-\x1bproject\x00\n")], [
            ("oloproof run: error: oloproof.yaml:2: not valid YAML: column 15 holds U+001B"
             " (ESCAPE), a control character, which YAML does not accept (the parser said:"
             " unacceptable character #x001b: control characters are not allowed)"),
            "  delete it, on line 2:",
            "  2 | project: test-\\x1bproject\\x00",
            "    |               ^",
        ]),
        # A zero-width space in a key: valid YAML, and "unknown key" would not show it.
        ([("concurrency:\n", "concurrency\u200b:\n")], [
            ("oloproof run: error: oloproof.yaml:8: concurrency\\u200b: column 12 holds"
             " U+200B (ZERO WIDTH SPACE), an invisible character, in the key"
             " 'concurrency\\u200b'"),
            "  delete it, on line 8:",
            "  8 | concurrency\\u200b:",
            "    |            ^",
        ]),
    ],
    ids=["dedented-key", "key-under-a-value", "quote-never-closed", "quote-runs-on", "escape",
         "tab", "nbsp-indent", "nbsp-after-colon", "zwsp-after-colon", "form-feed", "esc-nul",
         "zwsp-in-key"],
)
def test_raw_yaml_errors_say_what_to_look_at(
    tmp_path: Path, edits: list[tuple[str, str]], expected: list[str]
) -> None:
    root = _project(tmp_path / "p")
    for old, new in edits:
        _replace(root / "oloproof.yaml", old, new)
    result = run_cli("run", cwd=root)
    assert result.code == 2, result.text
    assert _error(result.err) == expected, (root / "oloproof.yaml").read_text()


def test_a_callable_error_has_its_line_and_the_path_as_given(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    _replace(root / "oloproof.yaml", "app:answer", "app:answr")
    inside = run_cli("run", cwd=root)
    assert inside.code == 2
    assert _error(inside.err) == [
        ("oloproof run: error: oloproof.yaml:7: system.callable: module 'app' has no attribute"
        " 'answr' (accepted: answer)")]
    beside = run_cli("run", "--config", "p/oloproof.yaml", cwd=tmp_path)
    assert _error(beside.err)[0].startswith("oloproof run: error: p/oloproof.yaml:7: system.callable:")
    _replace(root / "oloproof.yaml", "app:answr", "nowhere:answer")
    missing = run_cli("run", cwd=root)
    assert _error(missing.err)[0].startswith(
        "oloproof run: error: oloproof.yaml:7: system.callable: cannot import module 'nowhere'")


def test_policy_errors_name_the_file_as_oloproof_yaml_is_named(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "release.yaml").write_text("version: 1\nrules:\n  - id: floor\n    min: 0.5\n")
    for cwd, config, shown in ((root, "oloproof.yaml", "release.yaml"),
                               (tmp_path, "p/oloproof.yaml", "p/release.yaml")):
        result = run_cli("run", "--config", config, cwd=cwd)
        assert result.code == 2
        assert _error(result.err) == [
            f"oloproof run: error: {shown}:3: rules[0].metric: required field is missing"]
        assert str(tmp_path) not in result.err

    # A rule on groups the metric does not have: found after validation, with its line.
    (root / "release.yaml").write_text(
        RELEASE + "  - id: french\n    metric: exact_label\n    min: 0.5\n    group: {lang: fr}\n")
    result = run_cli("run", "--config", "p/oloproof.yaml", cwd=tmp_path)
    assert _error(result.err)[0].startswith(
        "oloproof run: error: p/release.yaml:9: rules[1].group: rule french targets groups")

    # compare.yaml beside the project, the same way.
    (root / "release.yaml").write_text(RELEASE)
    assert run_cli("run", cwd=root).code == 3  # 6 of 8 against 0.5: undecided
    (root / "compare.yaml").write_text(
        "version: 1\nrules:\n  - id: x\n    kind: superiority\n    metric: nope\n")
    result = run_cli("compare", "latest", "latest", "--config", "p/oloproof.yaml", cwd=tmp_path)
    assert result.code == 2
    assert _error(result.err)[0].startswith(
        "oloproof compare: error: p/compare.yaml:5: rules[0].metric: unknown metric 'nope'")


@pytest.mark.parametrize(("name", "command"), [("release.yaml", "run"), ("compare.yaml", "compare")])
def test_a_pasted_character_is_named_in_the_policies_too(
    tmp_path: Path, name: str, command: str
) -> None:
    root = _project(tmp_path / "p")
    args = ["run"]
    if command == "compare":
        assert run_cli("run", cwd=root).code in (0, 1, 3)
        args = ["compare", "latest", "latest"]
    (root / name).write_text(RELEASE.replace("    metric:", "\xa0   metric:"))
    result = run_cli(*args, cwd=root)
    assert result.code == 2, result.text
    assert _error(result.err) == [
        (f"oloproof {command}: error: {name}:4: not valid YAML: column 1 holds U+00A0"
         " (NO-BREAK SPACE), which looks like a space but is not one (the parser said: mapping"
         " values are not allowed in this context on line 5)"),
        "  replace it with a space, on line 4:",
        "  4 | \\xa0   metric: exact_label",
        "    | ^",
    ]


def test_the_store_locator_names_the_line_of_a_character_yaml_refuses(tmp_path: Path) -> None:
    # `runs` reads only as much of oloproof.yaml as finds the store: a quoted store: needs
    # PyYAML, whose own error has a position in the text, not a line.
    root = _project(tmp_path / "p")
    _replace(root / "oloproof.yaml", "dataset:", 'store: "sqlite"\ndataset:')
    _replace(root / "oloproof.yaml", "concurrency:\n", "é\u00e9concurrency:\x0c\n")
    result = run_cli("runs", cwd=root)
    assert result.code == 2, result.text
    assert _error(result.err) == [
        ("oloproof runs: error: oloproof.yaml:9: cannot be read to find its store (unacceptable"
        " character #x000c: special characters are not allowed; `oloproof run` says more)")]


def test_a_no_break_space_written_on_purpose_above_is_not_blamed(tmp_path: Path) -> None:
    # The context of this error is "while parsing a block mapping on line 1": the quoted
    # value on line 2 is not on the lines the parser read last, and is not the cause.
    root = _project(tmp_path / "p")
    _replace(root / "oloproof.yaml", "project: test-project\n", "project: 'test\xa0project'\n")
    _replace(root / "oloproof.yaml", '  version: "1"\n', ' version: "1"\n')
    result = run_cli("run", cwd=root)
    assert result.code == 2, result.text
    assert _error(result.err)[0] == (
        "oloproof run: error: oloproof.yaml:6: not valid YAML: did not find expected key at"
        " column 2 (while parsing a block mapping on line 1)")
