"""A run from Python whose project code a test has patched stores nothing under the files'
identity: a later `oloproof run` never reads a fake's answers from the cache."""

from __future__ import annotations

import os
import sys
import time
import unittest.mock
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

import oloproof
from oloproof.systems import loading

#: 40 cases, the real helper right on half of them: 50%, which `min: 0.8` FAILs (exit 1).
RELEASE = """
version: 1
rules:
  - id: floor
    metric: exact_label
    min: 0.8
"""
APP = """
from helpers import lookup

def answer(case_input):
    return {"label": lookup(case_input["n"])}
"""
HELPERS = """
import enum
import functools
from dataclasses import dataclass
from typing import NamedTuple

from words import LABELS


def lookup(n):
    return Rules().label(n)


@functools.lru_cache(maxsize=None)
def cached(n):
    return n


def kept(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)
    return wrapper


@kept
def decorated(n):
    return n


@dataclass
class Rules:
    strict: bool = True

    def label(self, n):
        return LABELS[n % 2]


class Kind(enum.Enum):
    OK = "ok"


class Pair(NamedTuple):
    first: int
    second: int = 0

    def total(self):
        return self.first + self.second
"""
WORDS = 'LABELS = ["wrong", "ok"]\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The project on the caller's sys.path, as a test suite beside it has it; its files
    older than the process (else a module the test imported is imported afresh)."""
    root = write_project(tmp_path / "bot", app=APP, cases=labelled_cases(40), release=RELEASE,
                         system_extra="code_paths: [helpers.py, words.py]",
                         extra_files={"helpers.py": HELPERS, "words.py": WORDS})
    for name in ("app", "helpers", "words"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(loading, "_STARTED", [time.time_ns() + 5 * 10**9])
    yield root
    for name in ("app", "helpers", "words"):
        sys.modules.pop(name, None)


def _run(root: Path) -> tuple[oloproof.RunResult, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = oloproof.run(root)
    patched = [str(w.message) for w in caught if issubclass(w.category, oloproof.PatchedCodeWarning)]
    return result, patched


def _labels(result: oloproof.RunResult) -> set[str]:
    return {c.output["label"] for c in result.cases()}


def _cli_run_calls_the_real_code(root: Path, hits: int = 0) -> None:
    """The real command, in a process of its own: the files' code, and from the cache only
    what the files' code answered (``hits``), never the fake's answers."""
    done = run_cli("run", cwd=root)
    assert done.code == 1, done.text  # 20 of 40: FAIL; with the fake's answers it was 0
    assert f"executions {hits} hits · {40 - hits} misses" in done.text, done.text


def test_a_helper_patched_with_monkeypatch_is_not_cached(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import helpers  # type: ignore[import-not-found]

    monkeypatch.setattr(helpers, "lookup", lambda n: "ok")
    result, patched = _run(project)
    assert _labels(result) == {"ok"}  # the test's fake ran, as the test asked
    assert result.cache["execution_misses"] == 40
    assert len(patched) == 1 and "helpers.lookup replaced" in patched[0], patched
    shown = run_cli("inspect", result.run_id, cwd=project)
    assert "patched   helpers.lookup" in shown.out, shown.text
    _cli_run_calls_the_real_code(project)


def test_a_run_of_patched_code_never_allows(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake's 40 of 40 PASS the rule, but they are not the project's evidence: the run
    itself, `oloproof gate` of it (after a pytest session, `gate latest`), `runs` and
    `read_run` all block, exit 5, saying why; the decision itself is kept."""
    import helpers

    monkeypatch.setattr(helpers, "lookup", lambda n: "ok")
    result, _ = _run(project)
    assert [d.state for d in result.decisions] == ["PASS"]
    assert (result.gate, result.exit_code) == ("BLOCK", 5)
    assert any(n.startswith("Patched code: helpers.lookup replaced") for n in result.gate_notes)
    with pytest.raises(AssertionError, match="Patched code: helpers.lookup"):
        result.assert_allowed()
    gate = run_cli("gate", "latest", cwd=project)
    assert gate.code == 5, gate.text
    assert "Patched code: helpers.lookup replaced" in gate.out, gate.text
    assert "BLOCK (exit 5)" in run_cli("runs", cwd=project).out
    assert oloproof.read_run(result.run_id, project).exit_code == 5
    page = project / "report.html"
    assert run_cli("report", result.run_id, "-o", str(page), cwd=project).code == 0
    assert "Patched code: helpers.lookup replaced" in page.read_text()


def test_the_system_function_patched_is_not_cached(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module named for the system, as a test gets it after a first run (the caller
    imported its own app.py before that, which Oloproof imports afresh: not patched)."""
    _run(project)
    import app  # type: ignore[import-not-found]

    monkeypatch.setattr(app, "answer", lambda case_input: {"label": "ok"})
    result, patched = _run(project)
    assert _labels(result) == {"ok"} and result.cache["execution_hits"] == 0
    assert patched and "app.answer replaced" in patched[0], patched
    _cli_run_calls_the_real_code(project, hits=40)  # the first run's, of the real code


def test_a_mock_patch_as_a_context_manager_is_not_cached(project: Path) -> None:
    with unittest.mock.patch("helpers.lookup", return_value="ok"):
        result, patched = _run(project)
    assert _labels(result) == {"ok"}
    assert patched and "helpers.lookup" in patched[0], patched
    _cli_run_calls_the_real_code(project)


def test_a_patched_class_method_is_not_cached(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import helpers

    monkeypatch.setattr(helpers.Rules, "label", lambda self, n: "ok")
    result, patched = _run(project)
    assert _labels(result) == {"ok"}
    assert patched and "helpers.Rules.label" in patched[0], patched
    _cli_run_calls_the_real_code(project)


def test_a_patch_after_a_first_run_is_seen_and_the_cache_is_not_read(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The modules the first run imported stay (the caller's path reaches them): a patch on
    them afterwards is seen by what they held when imported; the patched run reads none of
    the real answers the first run cached, and the next clean run reads them again."""
    first, patched = _run(project)
    assert _labels(first) == {"ok", "wrong"} and not patched
    import app

    assert app is sys.modules["app"] and hasattr(app, "__oloproof_bindings__")
    with monkeypatch.context() as m:
        m.setattr(app, "lookup", lambda n: "ok")  # where it is used, as mock's docs advise
        second, patched = _run(project)
    assert _labels(second) == {"ok"} and second.cache["execution_hits"] == 0
    assert patched and "app.lookup replaced" in patched[0], patched
    third, patched = _run(project)
    assert not patched and third.cache["execution_hits"] == 40
    assert _labels(third) == {"ok", "wrong"}


def test_a_module_imported_while_a_helper_was_patched_is_imported_afresh_after(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """app.py's `from helpers import lookup` bound the fake while it was in place; once the
    patch is undone, the next run must not call the fake app still held."""
    import helpers

    with monkeypatch.context() as m:
        m.setattr(helpers, "lookup", lambda n: "ok")
        _, patched = _run(project)
        assert patched
    result, patched = _run(project)
    assert not patched, patched
    assert _labels(result) == {"ok", "wrong"}


def test_code_as_its_files_define_it_is_not_called_patched(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller's own imports of the project, unpatched: `from words import LABELS`,
    `functools.wraps` and `lru_cache` decorators and a dataclass's generated methods are the
    files' code, as are the methods enum and NamedTuple give a class; so is a helper Oloproof imports afresh because it changed on disk (the
    caller's patched module is then not what the run calls)."""
    import app
    import helpers

    assert app.lookup is helpers.lookup
    assert loading.patched_code([app, helpers, sys.modules["words"]]) == []
    result, patched = _run(project)
    assert not patched and result.cache["execution_misses"] == 40
    rerun = run_cli("run", cwd=project)
    assert "executions 40 hits" in rerun.text, rerun.text
    # A patched helper whose file then changed: Oloproof imports it afresh, no patch runs.
    monkeypatch.setattr(helpers, "lookup", lambda n: "ok")
    (project / "helpers.py").write_text(HELPERS + "# edited\n")
    result, patched = _run(project)
    assert not patched, patched
    assert _labels(result) == {"ok", "wrong"}


def test_what_counts_as_patched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison itself, on a module the caller imported: only names its own source
    defines (def, class) and its top-level `from project_module import name`."""
    root = write_project(tmp_path / "p", app="def answer(x):\n    return x\n", cases=[],
                         extra_files={"helpers.py": HELPERS, "words.py": WORDS})
    monkeypatch.syspath_prepend(str(root))
    for name in ("helpers", "words"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import helpers
    import words  # type: ignore[import-not-found]

    modules: list[Any] = [helpers, words]
    assert loading.patched_code(modules) == []
    with monkeypatch.context() as m:
        m.setattr(helpers, "LABELS", ["x", "y"])  # an imported name bound to something else
        assert loading.patched_code(modules) == ["helpers.LABELS"]
    with monkeypatch.context() as m:
        m.setattr(helpers, "cached", lambda n: n)  # a def replaced by a lambda
        m.setattr(helpers, "decorated", unittest.mock.MagicMock())
        m.setattr(helpers.Rules, "label", unittest.mock.create_autospec(helpers.Rules.label))
        assert loading.patched_code(modules) == [
            "helpers.Rules.label", "helpers.cached", "helpers.decorated"]
    assert loading.patched_code(modules) == []
    sys.modules.pop("helpers", None)
    sys.modules.pop("words", None)


CHECKS = """
import rules


def strict(output, case):
    return rules.ok(output["label"])
"""


def test_a_patched_custom_check_caches_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A custom evaluator's helper patched to pass everything: its verdicts were cached
    under the evaluator's identity (its file and code_paths), keyed by the outputs, which
    the system (not patched) gives again; `oloproof run` then read 40 passing verdicts
    from the cache and allowed. Now the run reads and stores no verdict, and blocks."""
    root = write_project(
        tmp_path / "bot", app=APP, cases=labelled_cases(40), release=RELEASE,
        system_extra="code_paths: [helpers.py, words.py]",
        extra_files={"helpers.py": HELPERS, "words.py": WORDS, "checks.py": CHECKS,
                     "rules.py": "def ok(label):\n    return label == 'ok'\n"},
        evaluators="""
          - type: custom
            criterion: exact_label
            function: checks:strict
            code_paths: [rules.py]
        """,
    )
    for name in ("app", "helpers", "words", "checks", "rules"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(loading, "_STARTED", [time.time_ns() + 5 * 10**9])
    import rules  # type: ignore[import-not-found]

    monkeypatch.setattr(rules, "ok", lambda label: True)
    result, patched = _run(root)
    assert [d.state for d in result.decisions] == ["PASS"]  # 40 of 40, by the fake check
    assert result.exit_code == 5 and patched and "rules.ok replaced" in patched[0], patched
    assert result.cache["execution_misses"] == 40  # what the system gave is cached
    done = run_cli("run", cwd=root)
    assert done.code == 1, done.text
    assert "executions 40 hits · 0 misses   judgments 0 hits · 40 misses" in done.text
    for name in ("app", "helpers", "words", "checks", "rules"):
        sys.modules.pop(name, None)


def test_a_mocked_client_the_project_holds_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual fake of an LLM call: `mock.patch("client.Client")`, the client being a
    package outside the project that a helper imports (`import client`), or
    `mock.patch.object(Client, "label")` where it holds the class. Neither is the project's
    file, so nothing compared them: the fake answers were cached and `oloproof run` allowed
    from them."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "client.py").write_text(
        "class Client:\n    def label(self, n):\n        return 'ok' if n % 2 else 'wrong'\n")
    app = ("import client\nfrom client import Client\n\n"
           "def answer(case_input):\n"
           "    n = case_input['n']\n"
           "    return {'label': (client.Client() if n < 20 else Client()).label(n)}\n")
    root = write_project(tmp_path / "bot", app=app, cases=labelled_cases(40), release=RELEASE)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "client", raising=False)
    monkeypatch.delitem(sys.modules, "app", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    _run(root)  # the real client, cached: what `oloproof run` reads afterwards
    import client  # type: ignore[import-not-found]

    with unittest.mock.patch("client.Client") as fake:
        fake.return_value.label.return_value = "ok"
        result, patched = _run(root)
    assert patched and "client.Client replaced" in patched[0], patched
    assert result.exit_code == 5 and result.cache["execution_hits"] == 0
    with unittest.mock.patch.object(client.Client, "label", return_value="ok"):
        result, patched = _run(root)
    assert patched and "client.Client.label replaced" in patched[0], patched
    done = run_cli("run", cwd=root)
    assert done.code == 1 and "executions 40 hits · 0 misses" in done.text, done.text
    sys.modules.pop("app", None)


def test_a_shard_of_patched_code_is_not_merged(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shard 2/2 run from a test with the fake, shard 1/2 by the command: `merge` took the
    fake's half as evidence, and the merged run, described as shard 1/2's system, was
    decided on it with no word of the patch. It is refused, exit 2, naming the shard."""
    import helpers

    with monkeypatch.context() as m:
        m.setattr(helpers, "lookup", lambda n: "ok")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            oloproof.run(project, shard="2/2")
    assert run_cli("run", "--shard", "1/2", cwd=project).code in (1, 5)  # a FAIL or a shard
    merged = run_cli("merge", cwd=project)
    assert merged.code == 2, merged.text
    assert "shard 2/2" in merged.err and "ran patched code (helpers.lookup)" in merged.err


def test_a_comparison_with_a_run_of_patched_code_never_allows(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`oloproof compare FAKE REAL`: the fake's 40 of 40 against the real 20 of 40 passed
    `non_inferiority` and the comparison allowed, exit 0. It blocks now, exit 5, saying
    which run was patched."""
    import helpers

    with monkeypatch.context() as m:
        m.setattr(helpers, "lookup", lambda n: "ok")
        fake, _ = _run(project)
    real = run_cli("run", cwd=project)
    assert real.code == 1
    baseline = real.out.split()[1]  # "Run run_… [DECIDED/COMPLETE]"
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n"
        "  - {id: no-worse, kind: non_inferiority, metric: exact_label, margin: 0.5}\n")
    compared = run_cli("compare", fake.run_id, baseline, cwd=project)
    assert compared.code == 5, compared.text
    assert f"the candidate run {fake.run_id} ran patched code (helpers.lookup" in compared.out
