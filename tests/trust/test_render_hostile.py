"""Issue 10 §8 and §5 (reading side), §11 (NaN): whatever a user or a model put in an
id, an output, a reason or an error is shown as text. Markup is not read, control
characters and escape sequences are not written raw to a terminal, and invalid text in
the store never crashes a reader or breaks a --json document."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pexpect
from tests.conftest import OLOPROOF, run_cli, write_project
from tests.report._browser import chromium, needs_chromium
from tests.store._support import runs_json, store_of, strict_json

# An OSC sequence that would retitle the terminal, and SGR 8 that would hide text.
OSC = "\x1b]0;PWNED\x07"
HIDE = "\x1b[8m"

HOSTILE_IDS = [
    "[/x]",
    "[bold red]boom[/]",
    ":smile: [link=https://example.invalid]click[/link]",
    f"osc{OSC}tail",
    "bidi\u202etxt",
    "plain",
    # Invisible: a zero-width space, the line and paragraph separators, a byte order mark;
    # a NUL and a tag character (U+E0041).
    "zero\u200bwidth\u2028sep\u2029\ufeff",
    "nul\x00\U000e0041tag",
]
# Each as it must be shown: a visible escape.
INVISIBLE_SHOWN = ["zero\\u200bwidth\\u2028sep\\u2029\\ufeff", "nul\\x00\\U000e0041tag"]

APP = f'''
from oloproof import system

@system(name="hostile", version="1")
def answer(case_input):
    n = case_input["n"]
    if n == 0:
        raise ValueError("[/err] boom {HIDE!s}hidden{OSC!s}")
    if n == 1:
        return {{"label": "[/out]{HIDE!s}no"}}
    if n == 2:
        return {{"label": "ok", "v": float("nan"), "w": float("inf")}}
    return {{"label": "ok"}}
'''.replace("{HIDE!s}", HIDE.encode("unicode_escape").decode()).replace(
    "{OSC!s}", OSC.encode("unicode_escape").decode()
)

CHECKS = f'''
from oloproof import Verdict

def polite(output, case):
    return Verdict(passed=case.id != "plain" and not case.id.startswith(("zero", "nul")), reason="[/reason] [bold]{OSC.encode("unicode_escape").decode()}")
'''

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: custom
  criterion: polite
  function: checks:polite
"""

# Rules that 8 cases can fail; two of the eight cases fail on purpose (25% missing).
RELEASE = """\
version: 1
max_missing: 0.5
rules:
  - id: "[/rule] [bold red]r1"
    metric: exact_label
    min: 0.9
  - id: "[red]r2[/red]"
    kind: observed_count
    metric: polite
    max_failures: 2
"""


def _project(root: Path) -> Path:
    cases = [
        {"id": cid, "input": {"n": i}, "expected": {"label": "ok"}}
        for i, cid in enumerate(HOSTILE_IDS)
    ]
    return write_project(
        root, app=APP, cases=cases, evaluators=EVALUATORS, release=RELEASE,
        extra_files={"checks.py": CHECKS},
    )


def _no_raw_escapes(text: str) -> None:
    assert OSC not in text and "\x1b]" not in text, "an OSC sequence reached the output raw"
    assert HIDE not in text, "an SGR sequence from a model reached the output raw"
    for char in "\u202e\u200b\u2028\u2029\ufeff\x00\U000e0041":
        assert char not in text, f"U+{ord(char):04X} reached the output raw"


def test_hostile_text_in_plain_output(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    run = run_cli("run", cwd=root)
    assert run.code in (0, 1, 3), run.text
    assert "Traceback" not in run.text and "internal error" not in run.text
    stored = runs_json(root)
    assert stored[0]["exit_code"] == run.code and stored[0]["status"] == "DECIDED"

    doc = strict_json(run_cli("inspect", "latest", "--json", cwd=root).out)
    assert [c["id"] for c in doc["cases"]] == HOSTILE_IDS  # every case, as it was given
    nan_case = doc["cases"][2]  # NaN and infinity are not JSON: a per-case error, nothing stored
    assert nan_case["status"] == "ERROR" and nan_case["output"] is None, nan_case
    assert "not JSON" in nan_case["error"], nan_case

    for args in (["run"], ["runs"], ["inspect", "latest"], ["inspect", "latest", "--failures"],
                 ["gate", "latest"], ["inspect", "latest", "--case", "[/x]"],
                 ["inspect", "latest", "--case", f"osc{OSC}tail"]):
        result = run_cli(*args, cwd=root)
        assert result.code in (0, 1, 3), (args, result.text)
        assert "Traceback" not in result.text and "internal error" not in result.text, args
        _no_raw_escapes(result.out)
        _no_raw_escapes(result.err)
    plan = run_cli("plan", "latest", "--run", cwd=root)  # rule ids are user text here too
    assert plan.code in (0, 2), plan.text
    assert "Traceback" not in plan.text
    _no_raw_escapes(plan.out)
    shown = run_cli("inspect", "latest", "--failures", cwd=root).out
    # The markup is shown literally, the escapes visibly.
    assert "[/x]" in shown and "[bold red]boom[/]" in shown
    assert "[/reason] [bold]\\x1b]0;PWNED\\x07" in shown
    assert "[/err] boom \\x1b[8mhidden" in shown
    rules = run_cli("gate", "latest", cwd=root).out
    assert "[/rule] [bold red]r1" in rules and "[red]r2[/red]" in rules
    case = run_cli("inspect", "latest", "--case", f"osc{OSC}tail", cwd=root).out
    assert "osc\\x1b]0;PWNED\\x07tail" in case
    for text in INVISIBLE_SHOWN:
        assert text in shown
    case = run_cli("inspect", "latest", "--case", HOSTILE_IDS[-2], cwd=root).out
    assert INVISIBLE_SHOWN[0] in case


def test_hostile_text_in_the_html_report(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    assert run_cli("run", cwd=root).code in (0, 1, 3)
    report = run_cli("report", "latest", "-o", "r.html", cwd=root)
    assert report.code == 0, report.text
    data = (root / "r.html").read_bytes()
    # No C0 control but tab, newline and carriage return, no DEL, no C1 (as UTF-8) raw.
    raw = re.findall(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]", data)
    assert not raw, raw
    _no_raw_escapes(data.decode("utf-8"))
    text = data.decode("utf-8")
    for shown in [*INVISIBLE_SHOWN, "osc\\x1b]0;PWNED\\x07tail"]:
        assert f'<code class="case-id">{shown}</code>' in text, shown


def _in_terminal(args: list[str], cwd: Path) -> tuple[str, int]:
    child = pexpect.spawn(
        OLOPROOF[0], [*OLOPROOF[1:], *args], cwd=str(cwd), dimensions=(50, 250),
        encoding="utf-8", codec_errors="replace", timeout=60,
        env={"PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"},
    )
    child.expect(pexpect.EOF)
    transcript = child.before or ""
    child.close()
    assert child.exitstatus is not None, f"killed by signal {child.signalstatus}"
    return transcript, child.exitstatus


def test_hostile_text_in_a_terminal(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    transcript, code = _in_terminal(["run"], root)
    assert code in (0, 1, 3), transcript
    assert runs_json(root)[0]["exit_code"] == code
    for args in (["run"], ["inspect", "latest", "--failures"], ["runs"], ["gate", "latest"],
                 ["inspect", "latest", "--case", "[/x]"]):
        transcript, code = _in_terminal(args, root)
        assert code in (0, 1, 3), (args, transcript)
        assert "Traceback" not in transcript and "internal error" not in transcript, args
        _no_raw_escapes(transcript)
    transcript, _ = _in_terminal(["inspect", "latest", "--failures"], root)
    visible = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", transcript)  # rich's own styling
    assert "[bold red]boom[/]" in visible and "\\x1b]0;PWNED\\x07" in visible
    for text in INVISIBLE_SHOWN:
        assert text in visible


def _corrupt_text(root: Path) -> str:
    """Put what Python's sqlite3 cannot decode, and lone surrogates as JSON escapes, in the store."""
    conn = sqlite3.connect(store_of(root))
    case_id = conn.execute("SELECT case_id FROM run_cases ORDER BY idx LIMIT 1").fetchone()[0]
    conn.execute(
        "UPDATE run_cases SET output_json = ?, error = CAST(X'6261641DFF FE' AS TEXT)"
        " WHERE case_id = ?".replace(" FE'", "FE'"),
        ('{"label": "\\udcff\\ud800", "k\\udfff": 1}', case_id),
    )
    conn.execute(
        "UPDATE run_judgments SET reason = CAST(X'C3286869' AS TEXT) WHERE case_id = ?",
        (case_id,),
    )
    conn.execute(
        "UPDATE runs SET stop_reason = CAST(X'73746F70FF' AS TEXT)"
    )
    conn.commit()
    conn.close()
    return str(case_id)


def test_invalid_text_in_the_store_never_crashes_a_reader(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    first = run_cli("run", cwd=root)
    assert first.code in (0, 1, 3), first.text
    case_id = _corrupt_text(root)
    for args in (["runs", "--json"], ["inspect", "latest", "--json"],
                 ["inspect", "latest", "--failures", "--json"],
                 ["inspect", "latest", "--case", case_id, "--json"], ["gate", "latest", "--json"]):
        result = run_cli(*args, cwd=root)
        assert result.code == first.code or (result.code == 0 and args[0] != "gate"), (args, result.text)
        strict_json(result.out)
    for args in (["runs"], ["inspect", "latest"], ["inspect", "latest", "--failures"],
                 ["inspect", "latest", "--case", case_id], ["gate", "latest"]):
        result = run_cli(*args, cwd=root)
        assert result.code in (0, first.code), (args, result.text)
        assert "Traceback" not in result.text and "internal error" not in result.text
        result.out.encode("utf-8")
    doc = strict_json(run_cli("inspect", "latest", "--json", cwd=root).out)
    assert len(doc["cases"]) == len(HOSTILE_IDS)  # nothing lost
    bad = next(c for c in doc["cases"] if c["id"] == case_id)
    assert bad["output"]["label"] == "\ufffd\ufffd" and "k\ufffd" in bad["output"]


SPOOF_APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"label": "no"}
"""


def test_a_case_id_cannot_lay_out_lines_of_its_own(tmp_path: Path) -> None:
    """A case id holding newlines (`"q1\\n  Execution  OK\\n..."`): `inspect --failures` in a
    pipe and at COLUMNS=20 lays each failed case out as a block of lines under its id, and
    the id's newlines printed lines of their own: a block that read as another case's, a
    case `new` that does not exist. A case id is now shown on one line, its newlines and
    tabs written `\\n` and `\\t`; so is the header of `inspect --case`."""
    spoof = "q1\n  Execution  OK\n  Status     PASS\nnew"
    cases = [{"id": spoof, "input": {"n": 0}, "expected": {"label": "ok"}},
             {"id": "tab\there", "input": {"n": 1}, "expected": {"label": "ok"}}]
    root = write_project(tmp_path / "p", app=SPOOF_APP, cases=cases)
    assert run_cli("run", cwd=root).code == 0
    shown = spoof.replace("\n", "\\n")
    for env in ({}, {"COLUMNS": "20"}):
        failures = run_cli("inspect", "latest", "--failures", cwd=root, env=env)
        assert failures.code == 0, failures.text
        lines = failures.out.splitlines()
        assert "new" not in [s.strip() for s in lines], failures.out
        assert not any(s.strip() == "Status     PASS" for s in lines), failures.out
        assert shown in failures.out.replace("\n", "") or any(
            s.strip() == shown for s in lines), failures.out
        assert "tab\\there" in failures.out, failures.out
    case = run_cli("inspect", "latest", "--case", spoof, cwd=root)
    assert case.code == 0, case.text
    assert case.out.splitlines()[0].startswith(f"Case {shown}  in run_"), case.out


@needs_chromium
def test_ids_a_newline_or_a_space_apart_look_different_in_the_report(tmp_path: Path) -> None:
    """Two cases `c\\nnew` and `c new`: in the report's case table and on each case's
    heading, HTML laid the newline out as a space, and the two ids read the same. Each id is
    now written on one line, its newline as `\\n`, in Chromium as in the terminal."""
    cases = [{"id": i, "input": {"n": n}, "expected": {"label": "ok"}}
             for n, i in enumerate(["c\nnew", "c new", "t\tab"])]
    root = write_project(tmp_path / "p", app=SPOOF_APP, cases=cases)
    assert run_cli("run", cwd=root).code == 0
    assert run_cli("report", "latest", "-o", "r.html", cwd=root).code == 0
    with chromium() as browser:
        page = browser.new_page()
        page.goto((root / "r.html").as_uri())
        page.wait_for_load_state("load")
        ids = [str(t).strip() for t in page.eval_on_selector_all(
            "td.case-id a", "els => els.map(e => e.innerText)")]
        assert ids == ["c\\nnew", "c new", "t\\tab"], ids
        heads = [str(t).strip() for t in page.eval_on_selector_all(
            "code.case-id", "els => els.map(e => e.innerText)")]
        assert sorted(heads) == sorted(ids), heads
