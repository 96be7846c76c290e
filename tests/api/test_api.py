"""The Python API (issue 13), in-process: real projects in tmp dirs, real SQLite stores."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from tests.conftest import RELEASE_FLOOR, labelled_cases, run_cli, write_project

import oloproof
from oloproof.events import Event

APP = """
import time
from oloproof import system

@system(name="t", version="1")
def answer(case_input):
    if case_input.get("sleep"):
        time.sleep(case_input["sleep"])
    return {"label": "ok" if case_input["n"] % 5 else "no"}
"""


PUBLIC = [
    "CaseContext", "CaseResult", "CaseView", "ComparisonPlan", "ComparisonResult",
    "ConfigError", "Decision", "GateNotAllowed", "Judgment", "MatrixResult", "MetricSummary",
    "OloproofError", "PatchedCodeWarning", "RunInfo", "RunPlan", "RunResult",
    "StaleCacheWarning", "Subset",
    "TransientError", "UsageError", "VariantResult", "Verdict",
    "__version__", "compare", "current_case", "list_runs", "merge", "plan", "read_run", "run",
    "run_async", "system",
]


def _project(root: Path, n: int = 40, cases: list[dict[str, Any]] | None = None) -> Path:
    return write_project(root, app=APP, cases=cases or labelled_cases(n), release=RELEASE_FLOOR)


def _statuses(root: Path) -> list[str]:
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        return [r[0] for r in conn.execute("SELECT status FROM runs")]
    finally:
        conn.close()


def test_public_names_are_pinned() -> None:
    assert oloproof.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(oloproof, name) is not None, name
    assert set(PUBLIC) <= set(dir(oloproof))
    with pytest.raises(AttributeError):
        _ = oloproof.not_a_name  # type: ignore[attr-defined]


def test_run_returns_a_typed_decided_result(project_dir: Path) -> None:
    _project(project_dir)
    result = oloproof.run(project_dir)
    assert result.run_id.startswith("run_")
    assert (result.status, result.completeness) == ("DECIDED", "COMPLETE")
    assert (result.gate, result.exit_code, result.allowed) == ("ALLOW", 0, True)
    assert [d.rule for d in result.decisions] == ["floor"]
    assert result.decisions[0].state == "PASS"
    metric = result.metrics["exact_label"]
    assert (metric.passed, metric.observed, metric.missing) == (32, 40, 0)
    assert metric.lower is not None and metric.lower < 0.8 < metric.upper  # type: ignore[operator]
    assert result.cache == {"execution_hits": 0, "execution_misses": 40,
                            "judgment_hits": 0, "judgment_misses": 40}
    cases = list(result.cases())
    assert [c.id for c in cases] == [f"q{i:03d}" for i in range(40)]
    assert cases[0].output == {"label": "no"} and cases[0].judgments["exact_label"].passed is False
    records = result.to_records()
    assert records[1]["case_id"] == "q001" and records[1]["exact_label.passed"] is True
    assert result.assert_allowed() is result
    # The rerun is all cache, and the oloproof.yaml path works as well as the directory.
    again = oloproof.run(project_dir / "oloproof.yaml")
    assert again.cache is not None and again.cache["execution_hits"] == 40


def test_to_pandas_when_pandas_is_installed(project_dir: Path) -> None:
    pd = pytest.importorskip("pandas")
    _project(project_dir, n=10)
    frame = oloproof.run(project_dir).to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert len(frame) == 10 and frame["exact_label.passed"].sum() == 8


def test_read_list_compare_plan(project_dir: Path) -> None:
    _project(project_dir)
    first = oloproof.run(project_dir)
    second = oloproof.run(project_dir)
    runs = oloproof.list_runs(project_dir)
    assert [r.run_id for r in runs] == [second.run_id, first.run_id]
    assert runs[0].state == "DECIDED/COMPLETE" and runs[0].cases_total == 40
    read = oloproof.read_run("latest", project_dir)
    assert read.run_id == second.run_id
    assert [d.to_json() for d in read.decisions] == [d.to_json() for d in second.decisions]
    assert read.metrics["exact_label"].to_json() == second.metrics["exact_label"].to_json()
    # Re-decided under another policy, as `oloproof gate --policy` does.
    strict = project_dir / "strict.yaml"
    strict.write_text("version: 1\nrules:\n  - {id: high, metric: exact_label, min: 0.95}\n")
    blocked = oloproof.read_run(first.run_id, project_dir, policy=strict)
    assert (blocked.decisions[0].state, blocked.exit_code) == ("FAIL", 1)
    with pytest.raises(oloproof.GateNotAllowed, match="high .*FAIL"):
        blocked.assert_allowed()
    cmp = oloproof.compare(second, first, project=project_dir)
    assert cmp.comparison_id.startswith("cmp_") and cmp.exit_code == 0
    assert cmp.metrics["exact_label"].estimate == 0.0
    run_plan = oloproof.plan(first, project=project_dir)
    assert isinstance(run_plan, oloproof.RunPlan) and run_plan.rules[0].plan == "decided"
    cmp_plan = oloproof.plan(cmp.comparison_id, project=project_dir)
    assert isinstance(cmp_plan, oloproof.ComparisonPlan)
    with pytest.raises(oloproof.UsageError, match="neither a run id"):
        oloproof.plan("nonsense", project=project_dir)


def test_configuration_errors_raise_before_anything_is_stored(project_dir: Path) -> None:
    _project(project_dir)
    (project_dir / "release.yaml").write_text("version: 1\nrules:\n  - {id: x, metric: nope, min: 0.5}\n")
    with pytest.raises(oloproof.ConfigError, match="release.yaml.*unknown metric 'nope'"):
        oloproof.run(project_dir)
    assert not (project_dir / ".oloproof" / "store.sqlite").exists()
    with pytest.raises(oloproof.UsageError, match="no such file"):
        oloproof.run(project_dir / "elsewhere")


def test_run_inside_a_running_loop_and_run_async(project_dir: Path) -> None:
    _project(project_dir, n=20)
    seen: list[Event] = []

    async def main() -> tuple[oloproof.RunResult, oloproof.RunResult]:
        inside = oloproof.run(project_dir)  # a helper thread: no asyncio.run() error
        awaited = await oloproof.run_async(project_dir, on_event=seen.append)
        return inside, awaited

    inside, awaited = asyncio.run(main())
    assert inside.status == awaited.status == "DECIDED"
    assert _statuses(project_dir) == ["DECIDED", "DECIDED"]
    # The callback gets the same events as `--json`, each valid against the shipped schema.
    schema = json.loads(resources.files("oloproof").joinpath("schemas/events.schema.json").read_text())
    validator = Draft202012Validator(schema)
    for event in seen:
        validator.validate(event.to_json())
    types = [e.type for e in seen]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert types.count("case_executed") == 20 and types.count("case_judged") == 20


def test_the_runner_refuses_a_running_loop_before_storing(project_dir: Path) -> None:
    from oloproof.runner import execute, prepare

    _project(project_dir, n=6)

    async def main() -> None:
        execute(prepare(project_dir / "oloproof.yaml", None), use_cache=True, sinks=[])

    with pytest.raises(oloproof.OloproofError, match="event loop is running"):
        asyncio.run(main())
    assert not (project_dir / ".oloproof" / "store.sqlite").exists() or _statuses(project_dir) == []


@pytest.mark.slow  # waits on real time (a cancellation half a second into a run)
def test_cancelling_run_async_stores_a_partial_run(project_dir: Path) -> None:
    cases = [{"id": f"s{i}", "input": {"n": i, "sleep": 0.02}, "expected": {"label": "ok"}}
             for i in range(200)]
    write_project(project_dir, app=APP, cases=cases, release=RELEASE_FLOOR, concurrency=(1, 1))

    async def main() -> None:
        task = asyncio.create_task(oloproof.run_async(project_dir))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    result = oloproof.read_run("latest", project_dir)
    assert (result.status, result.completeness, result.exit_code) == ("RUN_ERROR", "PARTIAL", 5)
    assert result.stop_reason is not None and "cancelled by the caller" in result.stop_reason
    assert _statuses(project_dir) == ["RUN_ERROR"]


_CTRL_C_SCRIPT = """
import asyncio, signal, sys
import oloproof

# Python's own handler, as in a terminal or a notebook's kernel: a suite started from a
# background job (`make test &` in a script) passed its ignored SIGINT on to this script,
# whose Ctrl-C then did nothing, and the tests failed on how they were started.
signal.signal(signal.SIGINT, signal.default_int_handler)

def started(event):
    if event.type == "case_executed" and not started.said:
        started.said = True
        print("started", flush=True)
started.said = False

async def both():
    await asyncio.gather(*(oloproof.run_async(p, on_event=started) for p in sys.argv[1:]))

async def blocking():
    oloproof.run(sys.argv[1], on_event=started)  # in a helper thread: a loop runs here
    await asyncio.sleep(0)

if __name__ == "__main__":
    if sys.argv[1] == "asyncio.run":
        del sys.argv[1]
        asyncio.run(blocking())
    else:
        loop = asyncio.new_event_loop()  # as a notebook's kernel runs a cell
        loop.run_until_complete(both())
"""


def _interrupted(tmp_path: Path, *args: str) -> str:
    """Run the script above with ``args``, send SIGINT once a case has run, and return
    what it wrote on standard error; it must have ended by a KeyboardInterrupt."""
    import os
    import signal
    import subprocess

    (tmp_path / "go.py").write_text(_CTRL_C_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "go.py"), *args], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "started\n", line + proc.communicate(timeout=60)[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
    return err


def _slow_projects(tmp_path: Path, count: int) -> list[Path]:
    cases = [{"id": f"s{i}", "input": {"n": i, "sleep": 0.3}, "expected": {"label": "ok"}}
             for i in range(40)]
    return [write_project(tmp_path / f"p{i}", app=APP, cases=cases, release=RELEASE_FLOOR,
                          concurrency=(2, 2)) for i in range(count)]


def _stopped_by_ctrl_c(root: Path) -> None:
    stored = oloproof.read_run("latest", root)
    assert (stored.status, stored.completeness) == ("RUN_ERROR", "PARTIAL"), root
    assert stored.stop_reason == "interrupted (Ctrl-C)"
    assert stored.metrics["exact_label"].observed < 40


@pytest.mark.parametrize("projects", [1, 2], ids=["one-run", "two-runs-gathered"])
def test_ctrl_c_in_run_until_complete_of_run_async_stops_the_run(
    tmp_path: Path, projects: int
) -> None:
    """The first Ctrl-C while `loop.run_until_complete(oloproof.run_async(...))` waited
    (Python's own SIGINT handler in place, as in an IPython kernel): KeyboardInterrupt was
    raised in the loop at once, the run went on in its thread, and the process ended with
    it RUNNING for good. It now stops each run awaited on the loop as `oloproof run`'s first
    Ctrl-C does (stored RUN_ERROR/PARTIAL, "interrupted (Ctrl-C)"), then raises."""
    roots = _slow_projects(tmp_path, projects)
    _interrupted(tmp_path, *map(str, roots))
    for root in roots:
        _stopped_by_ctrl_c(root)


def test_ctrl_c_while_run_blocks_inside_asyncio_run_stops_the_run(tmp_path: Path) -> None:
    """`oloproof.run()` called in an `async def` main under `asyncio.run` (it runs in a
    helper thread and blocks): asyncio's SIGINT handler only cancelled the main task, which
    the blocked wait did not see, so the first Ctrl-C let the run go on to its end (all 40
    cases, stored DECIDED/COMPLETE) and the KeyboardInterrupt came after. It now stops the
    run first, then asyncio's handler goes on as before."""
    (root,) = _slow_projects(tmp_path, 1)
    _interrupted(tmp_path, "asyncio.run", str(root))
    _stopped_by_ctrl_c(root)


def test_a_callback_that_raises_stops_the_run(project_dir: Path) -> None:
    _project(project_dir, n=30)

    def callback(event: Event) -> None:
        if event.type == "case_executed":
            raise ValueError("my dashboard broke")

    result = oloproof.run(project_dir, on_event=callback)
    assert (result.status, result.exit_code) == ("RUN_ERROR", 5)
    assert "on_event callback raised ValueError: my dashboard broke" in (result.stop_reason or "")
    assert _statuses(project_dir) == ["RUN_ERROR"]


def test_progress_goes_to_logging_never_to_stdout(
    project_dir: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(project_dir, n=12)
    with caplog.at_level(logging.INFO, logger="oloproof"):
        result = oloproof.run(project_dir)
    messages = [r.getMessage() for r in caplog.records if r.name == "oloproof"]
    assert any("run_started" in m for m in messages)
    assert f"run {result.run_id} finished: DECIDED/COMPLETE, exit code {result.exit_code}" in messages
    assert capsys.readouterr() == ("", "")


def test_subsets_are_stored_as_such_and_never_allow(project_dir: Path) -> None:
    cases = [
        {"id": f"c{i:02d}", "input": {"n": i + 1}, "expected": {"label": "ok"},
         "metadata": {"lang": "fr" if i % 2 else "en", "level": i % 3}}
        for i in range(40)
    ]
    write_project(project_dir, app=APP, cases=cases,
                  release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.3}\n")
    full = oloproof.run(project_dir)
    assert (full.completeness, full.exit_code) == ("COMPLETE", 0)
    # The same rule PASSes on the first 20 cases, and still the subset does not allow.
    first = oloproof.run(project_dir, limit=20)
    assert (first.status, first.completeness) == ("DECIDED", "SUBSET")
    assert first.decisions[0].state == "PASS"
    assert (first.gate, first.exit_code, first.allowed) == ("BLOCK", 5, False)
    assert [c.id for c in first.cases()] == [f"c{i:02d}" for i in range(20)]
    assert first.subset == oloproof.Subset(suite_cases=40, selected=20, limit=20)
    # Read back: the same subset, the same gate.
    back = oloproof.read_run(first.run_id, project_dir)
    assert (back.completeness, back.exit_code, back.subset) == ("SUBSET", 5, first.subset)
    # A seeded sample is reproducible; where and case filters compose.
    a = oloproof.run(project_dir, limit=5, sample=True, seed=11)
    b = oloproof.run(project_dir, limit=5, sample=True, seed=11)
    assert [c.id for c in a.cases()] == [c.id for c in b.cases()] != [f"c{i:02d}" for i in range(5)]
    fr = oloproof.run(project_dir, where=['metadata.lang == "fr"', "metadata.level in [0, 1]"])
    ids = [c.id for c in fr.cases()]
    assert ids and all(int(i[1:]) % 2 == 1 and int(i[1:]) % 3 in (0, 1) for i in ids)
    picked = oloproof.run(project_dir, cases=["c07", "c03"])
    assert [c.id for c in picked.cases()] == ["c03", "c07"]
    # A limit at or above the suite's size is the whole suite.
    assert oloproof.run(project_dir, limit=100).completeness == "COMPLETE"
    # A FAIL on a subset still blocks as a FAIL (exit 1).
    (project_dir / "high.yaml").write_text("version: 1\nrules:\n  - {id: hi, metric: exact_label, min: 0.99}\n")
    failing = oloproof.run(project_dir, policy=project_dir / "high.yaml", limit=30)
    assert (failing.decisions[0].state, failing.exit_code) == ("FAIL", 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"where": "lang = fr"}, "cannot be read .*accepted: PATH OP VALUE"),
        ({"where": "metadata.lang == fr"}, "is not JSON"),
        ({"where": "metadata.lang in \"fr\""}, "needs a JSON list"),
        ({"cases": ["nope"]}, "no such case in the suite: 'nope'"),
        ({"where": 'metadata.lang == "xx"'}, "the subset is empty"),
        ({"limit": 0}, "1 or more"),
        ({"sample": True}, "needs its size"),
        ({"seed": 3, "limit": 2}, "applies to a random sample only"),
        ({"seed": 3}, "applies to a random sample only"),
        ({"limit": 2.5}, "a whole number of cases"),
        ({"limit": "3"}, "a whole number of cases"),
        ({"limit": 2, "sample": True, "seed": 1.5}, "seed: expected a whole number"),
    ],
)
def test_bad_subsets_are_usage_errors(project_dir: Path, kwargs: dict[str, Any], message: str) -> None:
    _project(project_dir, n=6)  # the fewest cases on which the floor of 50% could fail
    with pytest.raises(oloproof.UsageError, match=message):
        oloproof.run(project_dir, **kwargs)
    assert not (project_dir / ".oloproof" / "store.sqlite").exists()


def test_each_project_runs_its_own_current_app_module(tmp_path: Path) -> None:
    """Two projects with an app.py each, in one process, then an edit between runs."""
    answer = 'from oloproof import system\n\n@system(name="t", version="1")\ndef answer(case_input):\n    return {{"label": "{label}"}}\n'
    for name, label in (("a", "ok"), ("b", "no")):
        write_project(tmp_path / name, app=answer.format(label=label), cases=labelled_cases(3))
    assert oloproof.run(tmp_path / "a").metrics["exact_label"].passed == 3
    assert oloproof.run(tmp_path / "b").metrics["exact_label"].passed == 0
    (tmp_path / "a" / "app.py").write_text(answer.format(label="changed"))
    edited = oloproof.run(tmp_path / "a")
    assert edited.metrics["exact_label"].passed == 0
    assert edited.cache is not None and edited.cache["execution_misses"] == 3


def test_each_project_runs_its_own_helper_modules(tmp_path: Path) -> None:
    """Two projects whose app.py are the same and import helpers of the same names
    (helpers.py, a package lib/, a namespace folder ns/) that differ: in one process (a
    test session, a notebook) the second project ran the first one's helpers, stored
    those results in its own cache under its own code's identity, and then `oloproof run`
    in a new process allowed it from that cache."""
    app = (
        "from oloproof import system\nfrom helpers import LABEL\nfrom lib.words import WORD\n"
        "from ns.more import MORE\n\n"
        '@system(name="t", version="1")\ndef answer(case_input):\n'
        '    return {"label": LABEL if LABEL == WORD == MORE else "mixed"}\n'
    )
    for name, label in (("a", "ok"), ("b", "no")):
        write_project(tmp_path / name, app=app, cases=labelled_cases(6), release=RELEASE_FLOOR,
                      system_extra="code_paths: [helpers.py, lib/, ns/]", extra_files={
                          "helpers.py": f'LABEL = "{label}"\n',
                          "lib/__init__.py": "", "lib/words.py": f'WORD = "{label}"\n',
                          "ns/more.py": f'MORE = "{label}"\n',
                      })
    first = oloproof.run(tmp_path / "a")
    assert first.metrics["exact_label"].passed == 6 and first.allowed
    second = oloproof.run(tmp_path / "b")
    assert {c.output["label"] for c in second.cases()} == {"no"}, "b ran a's helpers"
    assert not second.allowed
    again = oloproof.run(tmp_path / "a", use_cache=False)
    assert again.metrics["exact_label"].passed == 6, "a ran b's helpers"
    # A project without those helpers cannot import them, as in a new process: a's folder
    # is no longer on sys.path and its modules are forgotten.
    write_project(tmp_path / "c", app=app, cases=labelled_cases(6), release=RELEASE_FLOOR)
    with pytest.raises(oloproof.ConfigError, match="No module named 'helpers'"):
        oloproof.run(tmp_path / "c")
    assert str(tmp_path / "a") not in sys.path



def test_a_code_paths_file_edited_between_runs_in_one_process_is_read_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt file under code_paths that the system's module (and a custom evaluator's)
    reads when it is imported, edited between two runs in one process (a notebook, a test
    session): the identity followed the file, so the second run missed the cache, but the
    modules were not imported again and ran with the old text. Those answers and verdicts
    were cached under the new identity, and `oloproof run` in a new process then allowed
    the edited project from that cache (exit 0) though it fails every case."""
    app = (
        "import os\n"
        "LABEL = open(os.path.join(os.path.dirname(__file__), 'prompts', 'label.txt')).read().strip()\n"
        "def answer(case_input):\n    return {'label': LABEL}\n"
    )
    checks = (
        "import os\n"
        "WANT = open(os.path.join(os.path.dirname(__file__), 'rules', 'want.txt')).read().strip()\n"
        "def check(output, case):\n    return output['label'] == WANT\n"
    )
    evaluators = """
      - type: exact_match
        criterion: exact_label
        field: label
      - type: custom
        criterion: checked
        function: checks:check
        code_paths: [rules]
    """
    root = write_project(
        tmp_path / "p", app=app, cases=labelled_cases(6), evaluators=evaluators,
        release=RELEASE_FLOOR, system_extra="code_paths: [prompts]",
        extra_files={"prompts/label.txt": "ok\n", "rules/want.txt": "ok\n",
                     "checks.py": checks},
    )
    from oloproof.systems import loading

    # Found from the files' content, whatever their times say (a clock that is behind).
    monkeypatch.setattr(loading, "_written_since", lambda *_: False)
    first = oloproof.run(root)
    assert first.metrics["exact_label"].passed == 6 and first.allowed
    (root / "prompts" / "label.txt").write_text("wrong\n")
    edited = oloproof.run(root)
    assert edited.cache is not None and edited.cache["execution_misses"] == 6
    assert {c.output["label"] for c in edited.cases()} == {"wrong"}, "ran the old prompt"
    assert edited.metrics["exact_label"].passed == 0 and not edited.allowed
    # The custom evaluator's own code_paths file, alone.
    (root / "rules" / "want.txt").write_text("wrong\n")
    rechecked = oloproof.run(root)
    assert rechecked.cache is not None and rechecked.cache["judgment_misses"] == 6
    assert rechecked.metrics["checked"].passed == 6, "checked against the old rule"
    # A new process reads the same evidence from the cache: the edited system still fails.
    result = run_cli("run", cwd=root)
    assert result.code == 1 and "BLOCK" in result.out, result.out + result.err



def test_a_module_shared_by_the_system_and_an_evaluator_is_imported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system and a custom evaluator in one module, each with code_paths of its own:
    the module is imported once (a module that loads a model when imported loads it
    once), and again only once one of those files changes."""
    import time

    from oloproof.systems import loading

    monkeypatch.setattr(loading, "_TIME_MARGIN_NS", 0)  # the files are only just written
    app = (
        "import os\n"
        "HERE = os.path.dirname(__file__)\n"
        "open(os.path.join(HERE, 'imports.log'), 'a').write('imported\\n')\n"
        "LABEL = open(os.path.join(HERE, 'prompts', 'label.txt')).read().strip()\n"
        "def answer(case_input):\n    return {'label': LABEL}\n"
        "def check(output, case):\n    return True\n"
    )
    root = write_project(
        tmp_path / "p", app=app, cases=labelled_cases(6), release=RELEASE_FLOOR,
        system_extra="code_paths: [prompts]",
        evaluators="""
          - type: exact_match
            criterion: exact_label
            field: label
          - type: custom
            criterion: checked
            function: app:check
            code_paths: [rules]
        """,
        extra_files={"prompts/label.txt": "ok\n", "rules/r.txt": "r\n"},
    )
    time.sleep(0.05)
    log = root / "imports.log"
    assert oloproof.run(root).allowed
    assert log.read_text().count("imported") == 1
    assert oloproof.run(root).allowed
    assert log.read_text().count("imported") == 1
    (root / "prompts" / "label.txt").write_text("wrong\n")
    assert oloproof.run(root).metrics["exact_label"].passed == 0
    assert log.read_text().count("imported") == 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: oloproof.plan(None, project=p),  # type: ignore[arg-type]
         "plan() argument 'run_or_cmp' must be a run id .* not NoneType"),
        (lambda p: oloproof.plan(7, project=p),  # type: ignore[arg-type]
         "plan() argument 'run_or_cmp' must be .* not int"),
        (lambda p: oloproof.read_run(None, p),  # type: ignore[arg-type]
         "read_run() argument 'run_id' must be a run id .* not NoneType"),
        (lambda p: oloproof.compare(None, "latest", project=p),  # type: ignore[arg-type]
         "compare() argument 'candidate' must be .* not NoneType"),
        (lambda p: oloproof.compare("latest", 3, project=p),  # type: ignore[arg-type]
         "compare() argument 'baseline' must be .* not int"),
    ],
    ids=["plan-None", "plan-int", "read_run-None", "compare-candidate", "compare-baseline"],
)
def test_an_id_that_is_not_text_is_a_clear_type_error(
    project_dir: Path, call: Any, message: str
) -> None:
    # plan(None) raised AttributeError: 'NoneType' object has no attribute 'startswith'.
    _project(project_dir, n=10)
    oloproof.run(project_dir)
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(project_dir)


def test_a_helper_imported_by_name_at_call_time_and_edited_runs_its_new_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A system that imports its helper by name when called (``importlib.import_module``),
    the helper listed in code_paths, edited between two runs in one process within the
    second its bytecode was written, to the same size: the identity followed the file (the
    second run missed the cache), but the import machinery trusted the old bytecode, so
    the old code ran and its answers were stored under the new identity (6 of 6 passed,
    where the edited helper fails all 6)."""
    import os
    import time

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    app = (
        "import importlib\n\n"
        "def answer(case_input):\n"
        "    return {'label': importlib.import_module('helpers').label()}\n"
    )
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(6), release=RELEASE_FLOOR,
                         system_extra="code_paths: [helpers.py]",
                         extra_files={"helpers.py": "def label():\n    return 'ok'\n"})
    helper = root / "helpers.py"
    second = int(time.time()) + 5  # both versions "written" in one second, as by an editor
    os.utime(helper, (second, second))
    first = oloproof.run(root)
    assert first.metrics["exact_label"].passed == 6
    helper.write_text("def label():\n    return 'no'\n")  # the same size
    os.utime(helper, (second, second))
    edited = oloproof.run(root)
    assert edited.cache is not None and edited.cache["execution_misses"] == 6
    assert {c.output["label"] for c in edited.cases()} == {"no"}, "ran the old helper"
    assert not edited.allowed


def test_a_helper_imported_by_name_is_warned_about_and_read_afresh(tmp_path: Path) -> None:
    """``importlib.import_module("helpers")`` in the function, helpers.py not in
    code_paths: no StaleCacheWarning named it (only import statements and globals were
    looked at), and after an edit to it, a run without the cache in the same process
    still called the old helper (6 of 6 passed; `oloproof run --no-cache` fails all 6)."""
    app = (
        "import importlib\n\n"
        "def answer(case_input):\n"
        "    return {'label': importlib.import_module('helpers').label()}\n"
    )
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(6), release=RELEASE_FLOOR,
                         extra_files={"helpers.py": "def label():\n    return 'ok'\n"})
    with pytest.warns(oloproof.StaleCacheWarning, match=r"\(helpers\.py\)"):
        assert oloproof.run(root).metrics["exact_label"].passed == 6
    (root / "helpers.py").write_text("def label():\n    return 'not ok'\n")
    again = oloproof.run(root, use_cache=False)
    assert {c.output["label"] for c in again.cases()} == {"not ok"}, "ran the old helper"
    assert again.metrics["exact_label"].passed == 0


def test_a_helper_the_caller_imported_before_an_edit_is_not_run_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook imports the project's helper (to try it), the helper is edited, then the
    project runs: the system's `from helpers import label` got the module the notebook had
    imported, of the old file, while the identity (helpers.py in code_paths) is the new
    file's; the old answers were stored under it (6 of 6 passed) and a later `oloproof
    run` would read them from the cache."""
    import os
    import time

    app = "from helpers import label\n\ndef answer(case_input):\n    return {'label': label()}\n"
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(6), release=RELEASE_FLOOR,
                         system_extra="code_paths: [helpers.py]",
                         extra_files={"helpers.py": "def label():\n    return 'ok'\n"})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "helpers", raising=False)
    import helpers  # type: ignore[import-not-found]

    assert helpers.label() == "ok"
    (root / "helpers.py").write_text("def label():\n    return 'not ok'\n")
    an_hour_ago = time.time() - 3600  # edited well after its bytecode was written
    os.utime(root / "helpers.py", (an_hour_ago, an_hour_ago))
    result = oloproof.run(root)
    assert {c.output["label"] for c in result.cases()} == {"not ok"}, "ran the old helper"
    assert not result.allowed


def test_two_projects_loaded_at_once_in_threads_each_import_their_own_app(
    tmp_path: Path,
) -> None:
    """Two projects with an app.py each, run at once from two threads of one process
    (`asyncio.gather` of two `run_async`, a thread pool): the second one's load took the
    first one's `app` out of sys.modules while it was being imported, and the first run
    failed with "cannot import module 'app': KeyError: 'app'" (or, a moment later, imported
    the second project's app.py and ran it under its own project). Loading is now one at a
    time."""
    import threading

    slow = (
        "import os, time\n"
        "open(os.path.join(os.path.dirname(__file__), 'importing'), 'w').close()\n"
        "time.sleep(0.5)\n"
        "def answer(case_input):\n    return {'label': 'ok'}\n"
    )
    fast = "def answer(case_input):\n    return {'label': 'no'}\n"
    a = write_project(tmp_path / "a", app=slow, cases=labelled_cases(6))
    b = write_project(tmp_path / "b", app=fast, cases=labelled_cases(6))
    results: dict[str, Any] = {}

    def run(name: str, root: Path) -> None:
        try:
            results[name] = oloproof.run(root)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results[name] = exc

    first = threading.Thread(target=run, args=("a", a))
    first.start()
    while first.is_alive() and not (a / "importing").exists():
        first.join(0.01)
    second = threading.Thread(target=run, args=("b", b))
    second.start()
    first.join()
    second.join()
    assert not isinstance(results["a"], Exception), results["a"]
    assert not isinstance(results["b"], Exception), results["b"]
    assert {c.output["label"] for c in results["a"].cases()} == {"ok"}
    assert {c.output["label"] for c in results["b"].cases()} == {"no"}


def test_a_run_leaves_the_callers_modules_and_path_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run imported the project's helpers.py (and put the project's folder first on
    sys.path) and left both there: the caller's own `helpers` (a notebook's, a test
    suite's), taken out for the run, was the project's afterwards, and `import helpers`
    gave the project's module. Now what the run put there goes, what it took is back, and
    the project's modules wait for its next run (imported once, as before)."""
    import importlib
    import os
    import time

    app = (
        "import os\nfrom helpers import LABEL\n"
        "open(os.path.join(os.path.dirname(__file__), 'imports.log'), 'a').write('x\\n')\n"
        "def answer(case_input):\n    return {'label': LABEL}\n"
    )
    a, b = (write_project(tmp_path / name, app=app, cases=labelled_cases(3),
                          system_extra="code_paths: [helpers.py]",
                          extra_files={"helpers.py": f"LABEL = {label!r}\n"})
            for name, label in (("a", "ok"), ("b", "no")))
    an_hour_ago = time.time() - 3600  # written well before their bytecode: never racy
    for file in (a / "app.py", a / "helpers.py"):
        os.utime(file, (an_hour_ago, an_hour_ago))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "helpers.py").write_text("LABEL = 'mine'\n")
    monkeypatch.syspath_prepend(str(mine))
    monkeypatch.delitem(sys.modules, "helpers", raising=False)
    path = list(sys.path)
    import helpers  # type: ignore[import-not-found]

    assert oloproof.run(a).metrics["exact_label"].passed == 3
    assert sys.modules["helpers"] is helpers, "the caller's helpers is the project's"
    assert sys.path == path
    del sys.modules["helpers"]
    assert oloproof.run(b).metrics["exact_label"].passed == 0
    assert importlib.import_module("helpers").LABEL == "mine"
    assert oloproof.run(a).metrics["exact_label"].passed == 3
    assert importlib.import_module("helpers").LABEL == "mine"
    assert sys.path == path
    assert (a / "imports.log").read_text() == "x\n", "a's app.py imported again"


def test_a_package_the_caller_can_import_itself_stays_after_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package under the project's folder that the caller imports by other means (a
    `src/` layout installed in development mode) is the caller's as much as the run's: it
    stays in sys.modules after the run, one module with one state, not a second copy at
    the caller's next import."""
    app = "import mybot\n\ndef answer(case_input):\n    return {'label': mybot.LABEL}\n"
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(3),
                         system_extra="code_paths: [src]",
                         extra_files={"src/mybot/__init__.py": "LABEL = 'ok'\n"})
    monkeypatch.syspath_prepend(str(root / "src"))
    monkeypatch.delitem(sys.modules, "mybot", raising=False)
    assert oloproof.run(root).metrics["exact_label"].passed == 3
    assert "mybot" in sys.modules
    assert sys.modules["mybot"].__file__ == str(root / "src" / "mybot" / "__init__.py")


def test_a_helper_imported_before_and_not_edited_since_the_process_began_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of importing afresh a helper the caller imported: one whose file has
    not changed since the process started was read as it is, and stays the caller's
    module (a test session that set something on it first keeps it so)."""
    import time

    from oloproof.systems import loading

    app = "import helpers\n\ndef answer(case_input):\n    return {'label': helpers.label()}\n"
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(3),
                         system_extra="code_paths: [helpers.py]",
                         extra_files={"helpers.py": "def label():\n    return 'real'\n"})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "helpers", raising=False)
    import helpers  # type: ignore[import-not-found]

    monkeypatch.setattr(helpers, "label", lambda: "ok")
    # As if the session began after the files were written (it began before: tmp files).
    monkeypatch.setattr(loading, "_STARTED", [time.time_ns() + 5 * 10**9])
    with pytest.warns(oloproof.PatchedCodeWarning, match="helpers.label replaced"):
        result = oloproof.run(root)  # so nothing of it is cached (tests/systems/test_patched_code.py)
    assert {c.output["label"] for c in result.cases()} == {"ok"}
    assert sys.modules["helpers"] is helpers
