"""The pytest plugin (entry point pytest11): `oloproof_run(path).assert_allowed()` in a
real pytest session, in a subprocess, on real projects."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="t", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 10 else "no"}
"""


def test_a_release_gate_as_a_pytest_test(tmp_path: Path) -> None:
    write_project(tmp_path / "good", app=APP, cases=labelled_cases(60),
                  release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.6}\n")
    write_project(tmp_path / "bad", app=APP, cases=labelled_cases(60),
                  release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.99}\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_gates.py").write_text(textwrap.dedent("""
        def test_good(oloproof_run):
            result = oloproof_run("../good").assert_allowed()
            assert result.completeness == "COMPLETE"

        def test_bad(oloproof_run):
            oloproof_run("../bad").assert_allowed()
    """))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
    )
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out
    # Under its public name (issue 30), not the private module's.
    assert "oloproof.GateNotAllowed: Run run_" in out and "oloproof.api._results" not in out
    assert "[DECIDED/COMPLETE]: gate BLOCK (exit 1)" in out
    assert "floor (exact_label): FAIL [BLOCK]" in out


RULES = """version: 1
rules:
  - {id: floor-passes, metric: exact_label, min: 0.6}
  - {id: floor-fails, metric: exact_label, min: 0.99}
  - {id: floor-undecided, metric: exact_label, min: 0.85}
"""


def _pytest(tmp_path: Path, test_file: str, *args: str) -> subprocess.CompletedProcess[str]:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_rules.py").write_text(textwrap.dedent(test_file))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:randomly",
         *args, str(tests)],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=180,
    )


def _runs(root: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    finally:
        conn.close()


def test_one_item_per_rule_shows_which_rule_blocked(tmp_path: Path) -> None:
    # 54 of 60 right (90%): CP [79.5%, 96.2%] passes 0.6, fails 0.99, leaves 0.85 undecided.
    root = write_project(tmp_path / "bot", app=APP, cases=labelled_cases(60), release=RULES)
    proc = _pytest(tmp_path, """
        import pytest

        @pytest.mark.oloproof("../bot")
        def test_bot(oloproof_rule):
            oloproof_rule.assert_allowed()
    """)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "test_rules.py::test_bot[floor-passes] PASSED" in out
    assert "test_rules.py::test_bot[floor-fails] FAILED" in out
    assert "test_rules.py::test_bot[floor-undecided] FAILED" in out
    assert "2 failed, 1 passed" in out
    # The failure names the rule, under the public path of the exception.
    assert "oloproof.GateNotAllowed: rule floor-fails of run run_" in out
    assert "floor-fails (exact_label): FAIL [BLOCK]: 95% CP" in out
    assert "floor-undecided (exact_label): INSUFFICIENT_EVIDENCE [BLOCK]" in out
    assert "size it with: oloproof plan run_" in out
    # The command works as printed from where pytest ran, outside the project.
    hint = re.search(r"size it with: (oloproof plan .*)$", out, re.MULTILINE)
    assert hint is not None
    argv = shlex.split(hint.group(1))
    assert argv[-2:] == ["--config", str(root / "oloproof.yaml")]
    plan = run_cli(*argv[1:], cwd=tmp_path)
    assert plan.code == 0 and "floor-undecided: about " in plan.out, plan.text
    assert "oloproof.api._results" not in out
    assert _runs(root) == 1  # three items, one run


def test_a_run_that_cannot_allow_fails_every_item(tmp_path: Path) -> None:
    """A subset never allows a release: even the rule that passes on it fails its item."""
    write_project(tmp_path / "bot", app=APP, cases=labelled_cases(60), release=RULES)
    proc = _pytest(tmp_path, """
        import pytest

        @pytest.mark.oloproof("../bot", limit=30)
        def test_bot(oloproof_rule):
            oloproof_rule.assert_allowed()
    """)
    assert proc.returncode == 1 and "3 failed" in proc.stdout, proc.stdout
    assert "test_bot[floor-passes] FAILED" in proc.stdout
    assert "the run cannot allow a release: it is DECIDED/SUBSET" in proc.stdout


def test_a_comparison_rule_that_blocks_fails_every_item(tmp_path: Path) -> None:
    """A sequential run with a baseline (``baseline=`` in the marker) decides compare.yaml's
    rules too, after the release rules. The release rule passed and its item passed, the
    one item of the session, while `oloproof run --baseline` exited 3 on the comparison
    rule, which no item stood for."""
    from oloproof.api import run

    bot = write_project(tmp_path / "bot", app=APP, cases=labelled_cases(100),
                        release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n")
    (bot / "compare.yaml").write_text(
        "version: 1\nrules:\n  - {id: label-better, kind: superiority, metric: exact_label}\n")
    baseline = run(bot)
    assert baseline.allowed
    proc = _pytest(tmp_path, f"""
        import pytest

        @pytest.mark.oloproof("../bot", sequential=True, baseline="{baseline.run_id}")
        def test_bot(oloproof_rule):
            oloproof_rule.assert_allowed()
    """)
    out = proc.stdout
    assert proc.returncode == 1 and "test_bot[floor] FAILED" in out, out
    assert "the gate blocks for the run as a whole" in out
    assert "label-better (exact_label): INSUFFICIENT_EVIDENCE [BLOCK]" in out
    cli = run_cli("run", "--sequential", "--baseline", baseline.run_id, cwd=bot)
    assert cli.code == 3 and "Gate      BLOCK   exit code 3" in cli.out, cli.text


def test_no_rules_by_declaration_and_a_bad_policy(tmp_path: Path) -> None:
    write_project(tmp_path / "free", app=APP, cases=labelled_cases(20), policy="none")
    bad = write_project(tmp_path / "bad", app=APP, cases=labelled_cases(20), release=RULES)
    (bad / "strict.yaml").write_text("version: 1\nrules:\n  - {id: x, metric: nope, min: 0.5}\n")
    proc = _pytest(tmp_path, """
        import pytest

        @pytest.mark.oloproof("../free")
        def test_free(oloproof_rule):
            oloproof_rule.assert_allowed()

        @pytest.mark.oloproof("../bad", policy="../bad/strict.yaml")
        def test_bad(oloproof_rule):
            oloproof_rule.assert_allowed()
    """)
    out = proc.stdout
    assert "test_rules.py::test_free[gate] PASSED" in out, out
    # An error at set-up, with the configuration error as the command line prints it
    # (the policy path found from the test file's directory), without a traceback.
    assert "test_rules.py::test_bad[configuration] ERROR" in out, out
    assert f"{tmp_path / 'bad' / 'strict.yaml'}:3: rules[0].metric: unknown metric 'nope'" in out
    assert "Traceback" not in out


def test_the_project_runs_its_own_helpers_not_the_test_suites(tmp_path: Path) -> None:
    """The test suite has a tests/helpers.py of its own, imported by a test module before
    the gate runs; the project's app.py does `from helpers import LABEL` from its own
    helpers.py. The gate ran the test suite's helpers (which answer right) and passed, and
    stored those results in the project's cache, so `oloproof run` then allowed the
    project from the cache too (exit 0), where the project's own code fails."""
    app = ('from oloproof import system\nfrom helpers import LABEL\n\n'
           '@system(name="t", version="1")\ndef answer(case_input):\n'
           '    return {"label": LABEL}\n')
    bot = write_project(tmp_path / "bot", app=app, cases=labelled_cases(20),
                        release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.6}\n",
                        system_extra="code_paths: [helpers.py]",
                        extra_files={"helpers.py": 'LABEL = "no"\n'})
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "helpers.py").write_text('LABEL = "ok"\n')
    (tests / "test_gate.py").write_text(textwrap.dedent("""
        from helpers import LABEL

        def test_helpers():
            assert LABEL == "ok"

        def test_bot(oloproof_run):
            oloproof_run("../bot").assert_allowed()
    """))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
    )
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout
    assert "floor (exact_label): FAIL [BLOCK]" in proc.stdout
    cli = run_cli("run", cwd=bot)
    assert cli.code == 1 and "Gate      BLOCK   exit code 1" in cli.out, cli.text


def test_relative_policy_paths_are_found_from_the_test_file(tmp_path: Path) -> None:
    """tests/strict.yaml (min 0.99: FAILs) beside the test file; a lenient strict.yaml in
    the directory pytest runs in. ``oloproof_run("../bot", policy="strict.yaml")`` was
    decided under the lenient one and passed (started from tests/, the same test failed);
    a marker's ``compare_policy`` was found from there too."""
    from oloproof.api import run

    for name in ("bot", "compared"):  # two projects: a run of one is no earlier try of the other
        write_project(tmp_path / name, app=APP, cases=labelled_cases(100),
                      release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    for where, rule, floor in ((tests, "strict-floor", 0.99), (tmp_path, "cwd-floor", 0.5)):
        (where / "strict.yaml").write_text(
            f"version: 1\nrules:\n  - {{id: {rule}, metric: exact_label, min: {floor}}}\n")
    for where, rule in ((tests, "label-better"), (tmp_path, "cwd-better")):
        (where / "compare.yaml").write_text(
            f"version: 1\nrules:\n  - {{id: {rule}, kind: superiority, metric: exact_label}}\n")
    baseline = run(tmp_path / "compared")
    proc = _pytest(tmp_path, f"""
        import pytest

        def test_policy(oloproof_run):
            oloproof_run("../bot", policy="strict.yaml").assert_allowed()

        @pytest.mark.oloproof("../compared", sequential=True, baseline="{baseline.run_id}",
                              compare_policy="compare.yaml")
        def test_compared(oloproof_rule):
            oloproof_rule.assert_allowed()
    """)
    out = proc.stdout
    assert "test_rules.py::test_policy FAILED" in out, out
    assert "strict-floor (exact_label): FAIL [BLOCK]" in out and "cwd-floor" not in out, out
    assert "test_rules.py::test_compared[floor] FAILED" in out, out
    assert "label-better (exact_label): INSUFFICIENT_EVIDENCE [BLOCK]" in out, out
    assert "cwd-better" not in out, out


def test_a_test_that_patches_the_project_leaves_nothing_in_its_cache(tmp_path: Path) -> None:
    """A session runs the project, then a test patches its code where it is used
    (`monkeypatch.setattr(app, "lookup", ...)`, the project's folder on the test's path) and
    runs it again: that run passed on the fake's answers and stored them under the files'
    identity, so a later `oloproof run` allowed from the cache (exit 0) where the project's
    own code fails (exit 1). The patched run now warns, reads and stores no output of the
    system, never allows (exit 5: the test asserting it fails, saying why), and `oloproof
    run` reads only the first test's real answers."""
    app = ('from helpers import lookup\n\n'
           'def answer(case_input):\n    return {"label": lookup(case_input["n"])}\n')
    bot = write_project(tmp_path / "bot", app=app, cases=labelled_cases(20),
                        release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.6}\n",
                        system_extra="code_paths: [helpers.py]",
                        extra_files={"helpers.py": 'def lookup(n):\n    return "no"\n'})
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_gate.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(bot)!r})

        def test_real(oloproof_run):
            assert oloproof_run("../bot").exit_code == 1

        def test_with_a_fake(oloproof_run, monkeypatch):
            import app
            monkeypatch.setattr(app, "lookup", lambda n: "ok")
            oloproof_run("../bot").assert_allowed()
    """))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         str(tests)],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
    )
    assert "1 failed, 1 passed, 1 warning" in proc.stdout, proc.stdout
    assert "PatchedCodeWarning" in proc.stdout and "app.lookup replaced" in proc.stdout
    assert "gate BLOCK (exit 5)\nE         Patched code: app.lookup replaced" in proc.stdout
    cli = run_cli("run", cwd=bot)
    assert cli.code == 1 and "Gate      BLOCK   exit code 1" in cli.out, cli.text
    assert "executions 20 hits · 0 misses" in cli.out, cli.text  # test_real's, not the fake's


def test_a_blocked_items_reason_names_the_failed_calls_and_the_gates_notes() -> None:
    """A run whose rules all allow and whose gate blocks (its system patched by the test)
    with some calls failed: the item said only "3 calls failed", which hid why it blocks."""
    from types import SimpleNamespace

    from oloproof.testing.pytest_plugin import RuleOutcome

    run = SimpleNamespace(
        decisions=[], rule_ids=["floor"], status="DECIDED", completeness="COMPLETE",
        allowed=False, notice="3 calls failed.", stop_reason=None,
        gate_notes=["Patched code: app.lookup replaced."],
    )
    (first,) = RuleOutcome("floor", run).problems()  # type: ignore[arg-type]
    assert first == ("  the gate blocks for the run as a whole: 3 calls failed."
                     " Patched code: app.lookup replaced.")
