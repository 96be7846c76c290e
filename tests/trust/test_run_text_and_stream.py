"""Issue 10, classes 5 and 10: text that is not valid UTF-8 never crashes a run or blocks
a commit; in --json mode nothing but events reaches standard output."""

from __future__ import annotations

import json
from pathlib import Path

from tests.trust._support import (
    SMALL_RELEASE,
    cases_by_id,
    cli,
    integrity_ok,
    no_traceback,
    project,
    runs,
)

SURROGATES = """
    from oloproof import Verdict


    def answer(inp):
        n = inp["n"]
        if n == 1:
            return {"label": "ok\\ud800"}  # a lone surrogate in an output
        if n == 2:
            raise ValueError("bad \\udcff text")  # ... in an error message
        return {"label": "ok", "note": "fine"}


    def check(output, case):
        if case.input["n"] == 3:
            return Verdict(passed=True, reason="reason \\ud834 with a half pair")
        return True
"""


def test_lone_surrogates_never_crash_or_block_commits(tmp_path: Path) -> None:
    evaluators = (
        "  - type: exact_match\n    criterion: exact_label\n    field: label\n"
        "  - type: custom\n    criterion: custom_ok\n    function: app:check\n"
    )
    root = project(tmp_path / "p", SURROGATES, n=6, evaluators=evaluators)
    result = cli(root, "run", "--json")
    no_traceback(result)
    assert result.code == 3, result.text  # 4 of 6 pass the label: too few for the floor
    events = [json.loads(line) for line in result.out.splitlines()]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "DECIDED"
    [run] = runs(root)
    assert (run["status"], run["exit_code"]) == ("DECIDED", 3)
    cases = cases_by_id(root)
    assert len(cases) == 6  # the bad rows did not block the others
    assert cases["q1"]["output"]["label"] == "ok\ufffd"
    assert cases["q1"]["judgments"]["exact_label"]["passed"] is False
    assert cases["q2"]["status"] == "ERROR" and "bad \ufffd text" in cases["q2"]["error"]
    assert cases["q3"]["judgments"]["custom_ok"]["reason"] == "reason \ufffd with a half pair"
    assert all(cases[c]["status"] == "OK" for c in ("q0", "q3", "q4", "q5"))
    assert integrity_ok(root)
    # A second run reads the cache back: still whole.
    again = cli(root, "run")
    assert again.code == 3, again.text


NOISY = """
    import logging
    import os
    import subprocess
    import sys

    logging.basicConfig(stream=sys.stdout, level=logging.INFO)
    print("printed at import")


    def answer(inp):
        print("print from the system", inp["n"])
        logging.getLogger("app").info("logged from the system %s", inp["n"])
        subprocess.run([sys.executable, "-c", "print('from a subprocess')"], check=True)
        os.write(1, b"raw write to fd 1\\n")
        sys.stdout.flush()
        return {"label": "ok"}
"""


def test_json_mode_keeps_every_other_write_off_standard_output(tmp_path: Path) -> None:
    root = project(tmp_path / "p", NOISY, n=4, release=SMALL_RELEASE)
    result = cli(root, "run", "--json")
    no_traceback(result)
    assert result.code == 3, result.text
    lines = result.out.splitlines()
    events = [json.loads(line) for line in lines]  # every line is an event
    assert all("type" in e and "run_id" in e for e in events)
    assert events[-1]["type"] == "run_finished"
    assert sum(e["type"] == "case_executed" for e in events) == 4
    for noise in ("printed at import", "print from the system", "logged from the system",
                  "from a subprocess", "raw write to fd 1"):
        assert noise not in result.out
        assert noise in result.err, noise
    [run] = runs(root)
    assert run["status"] == "DECIDED" and run["exit_code"] == 3
    assert len(cases_by_id(root)) == 4


SEPARATORS = """
    def answer(inp):
        if inp["n"] == 1:
            raise ValueError("cut \\u2029 here \\x85 and \\x9b2J there")
        return {"label": "ok \\u2028 \\x9b31m"}
"""


def test_json_lines_stay_one_line_each_whatever_the_text_holds(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 end a line for str.splitlines() (and for readers built on
    it); the C1 controls (U+009B is CSI) drive some terminals. JSON may escape any
    character: the stream escapes those, and the values read back are the same."""
    ids = ["a\u2028b", "c\x85d", "e\u2029f", "g\x9b2Jh"]
    cases = [{"id": cid, "input": {"n": i}, "expected": {"label": "ok"}}
             for i, cid in enumerate(ids)]
    root = project(tmp_path / "p", SEPARATORS, cases=cases, release=SMALL_RELEASE)
    result = cli(root, "run", "--json")
    no_traceback(result)
    lines = result.out.splitlines()
    assert len(lines) == result.out.count("\n"), "an event was split in two"
    events = [json.loads(line) for line in lines]
    assert events[-1]["type"] == "run_finished"
    assert {e["scenario_id"] for e in events if e["type"] == "case_executed"} == set(ids)
    failed = next(e for e in events if e["type"] == "case_executed" and e["status"] == "ERROR")
    assert "cut \u2029 here \x85 and \x9b2J there" in failed["error"]
    for raw in ("\u2028", "\u2029", "\x85", "\x9b"):
        assert raw not in result.out
    for command in (("inspect", "latest", "--json"), ("runs", "--json"),
                    ("inspect", "latest", "--case", "a\u2028b", "--json")):
        shown = cli(root, *command)
        assert shown.code == 0, shown.text
        assert not any(raw in shown.out for raw in ("\u2028", "\u2029", "\x85", "\x9b"))
        json.loads(shown.out)


def test_an_error_is_not_cut_at_an_invisible_line_separator(tmp_path: Path) -> None:
    """The failures table and the report show an error's first line: a line ends at a
    newline, not at a U+2029 or U+0085 inside a model's words (str.splitlines() cut the
    reason there and hid the rest)."""
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(3)]
    root = project(tmp_path / "p", SEPARATORS, cases=cases, release=SMALL_RELEASE)
    cli(root, "run")
    failures = cli(root, "inspect", "latest", "--failures")
    assert failures.code == 0, failures.text
    assert "cut \\u2029 here \\x85 and \\x9b2J there" in failures.out, failures.out
    report = cli(root, "report", "latest", "-o", "-")
    assert report.code == 0, report.text
    assert "cut \\u2029 here \\x85 and \\x9b2J there" in report.out


BIDI = """
    def answer(inp):
        if inp["n"] == 1:
            raise ValueError("PASS\\u202e LIAF \\u200b\\U000e0041")
        return {"label": "ok\\u2066 \\ufeff"}
"""
# Invisible characters that reorder or hide what a terminal shows (Trojan Source):
# right-to-left override, isolate, zero-width space, byte order mark, a tag character.
INVISIBLE = ("\u202e", "\u2066", "\u200b", "\ufeff", "\U000e0041")


def test_json_output_escapes_bidi_overrides_and_invisible_characters(tmp_path: Path) -> None:
    """JSON leaves U+202E and the other format characters raw, so a case id holding one
    reversed the rest of a --json line on a terminal (`"state":"FAIL"` shown backwards)
    and a zero-width space made two ids look the same. The tables already showed them as
    escapes; --json lines and documents now write them as \\uXXXX, the values unchanged."""
    ids = ["rtl\u202eLIAF", "iso\u2066x", "zero\u200bw", "tag\U000e0041t"]
    cases = [{"id": cid, "input": {"n": i}, "expected": {"label": "ok"}}
             for i, cid in enumerate(ids)]
    root = project(tmp_path / "p", BIDI, cases=cases, release=SMALL_RELEASE)
    result = cli(root, "run", "--json")
    no_traceback(result)
    events = [json.loads(line) for line in result.out.splitlines()]
    assert {e["scenario_id"] for e in events if e["type"] == "case_executed"} == set(ids)
    failed = next(e for e in events if e["type"] == "case_executed" and e["status"] == "ERROR")
    assert "PASS\u202e LIAF \u200b\U000e0041" in failed["error"]
    assert not any(raw in result.out for raw in INVISIBLE), result.out
    for command in (("inspect", "latest", "--json"), ("runs", "--json"),
                    ("gate", "latest", "--json"), ("inspect", "latest", "--failures", "--json")):
        shown = cli(root, *command)
        assert not any(raw in shown.out for raw in INVISIBLE), (command, shown.out)
        json.loads(shown.out)
    doc = json.loads(cli(root, "inspect", "latest", "--json").out)
    assert {c["id"] for c in doc["cases"]} == set(ids)
