"""Custom evaluators (issue 13): their own concurrency limit, off the loop, async awaited,
their own latency, params, a per-evaluator timeout. In-process runs on real projects."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import labelled_cases, write_project

import oloproof

APP = """
from oloproof import system

@system(name="instant", version="1")
def answer(case_input):
    return {"label": "ok", "n": case_input["n"]}
"""

CHECKS = """
import asyncio, threading, time

_lock = threading.Lock()
_now = 0
peak = 0

def slow(output, case, pause=0.15):
    global _now, peak
    with _lock:
        _now += 1
        peak = max(peak, _now)
    time.sleep(pause)
    with _lock:
        _now -= 1
    return output["n"] % 3 != 0

async def slow_async(output, case, pause=0.1):
    global _now, peak
    with _lock:  # the sync ones count from other threads
        _now += 1
        peak = max(peak, _now)
    await asyncio.sleep(pause)
    with _lock:
        _now -= 1
    return output["n"] % 2 == 0

def report_peak(output):
    return float(peak)

def sleeps(output, seconds):
    time.sleep(seconds)
    return True

async def sleeps_async(output):
    await asyncio.sleep(5)
    return True
"""


@pytest.fixture(autouse=True)
def _importable(project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The project's folder on this test's own sys.path, so that `import checks` (_peak)
    gets the module the run used: a run takes away the folder it put there itself, and
    the modules found through it."""
    monkeypatch.syspath_prepend(str(project_dir))


def _project(root: Path, evaluators: str, *, evaluator_limit: int | None = 4, n: int = 12,
             system: int = 1) -> Path:
    write_project(root, app=APP, cases=labelled_cases(n), evaluators=evaluators,
                  concurrency=(system, 2), extra_files={"checks.py": CHECKS},
                  policy="none")
    if evaluator_limit is not None:
        cfg = root / "oloproof.yaml"
        cfg.write_text(cfg.read_text().replace("  judge: 2\n", f"  judge: 2\n  evaluator: {evaluator_limit}\n"))
    return root


def _custom(criterion: str, function: str, *more: str) -> str:
    """One ``custom`` evaluator's YAML: ``criterion``, ``checks:<function>``, then the
    ``more`` lines as written (``params: {...}``, ``timeout_s: ...``)."""
    lines = ["- type: custom", f"  criterion: {criterion}", f"  function: checks:{function}"]
    return "\n".join([*lines, *("  " + line for line in more)]) + "\n"


def _peak(result: oloproof.RunResult) -> int:
    import checks  # type: ignore[import-not-found]  # the project's module, imported by the run

    return int(checks.peak)


@pytest.mark.slow  # evaluators that sleep: real time
def test_sync_evaluators_run_concurrently_under_their_own_limit(project_dir: Path) -> None:
    _project(project_dir, _custom("slow", "slow"))
    result = oloproof.run(project_dir)
    # One system slot, yet four evaluations at once: the limit is concurrency.evaluator.
    assert _peak(result) == 4
    m = result.metrics["slow"]
    assert (m.passed, m.observed) == (8, 12)
    for case in result.cases():
        judgment = case.judgments["slow"]
        # The evaluator's time is the judgment's latency, never the system's.
        assert case.latency_ms is not None and case.latency_ms < 100
        assert judgment.latency_ms is not None and judgment.latency_ms >= 140


@pytest.mark.slow  # evaluators that sleep: real time
def test_async_evaluators_are_awaited_concurrently(project_dir: Path) -> None:
    _project(project_dir, _custom("even", "slow_async"), evaluator_limit=3)
    result = oloproof.run(project_dir)
    m = result.metrics["even"]
    assert (m.passed, m.observed, m.missing) == (6, 12, 0)
    assert _peak(result) == 3
    assert all((c.judgments["even"].latency_ms or 0) >= 90 for c in result.cases())


@pytest.mark.slow  # evaluators that sleep: real time
def test_sync_and_async_evaluators_share_one_limit(project_dir: Path) -> None:
    _project(project_dir, _custom("slow", "slow") + _custom("even", "slow_async"),
             evaluator_limit=3)
    result = oloproof.run(project_dir)
    # Sync calls are queued ahead of their threads only when no evaluator is async: the
    # limit is on every call at once, whichever kind.
    assert _peak(result) == 3
    assert result.metrics["slow"].observed == result.metrics["even"].observed == 12


def test_params_are_passed_and_are_part_of_the_identity(project_dir: Path) -> None:
    _project(project_dir, _custom("slow", "slow", "params: {pause: 0.01}"), n=6)
    first = oloproof.run(project_dir)
    assert all((c.judgments["slow"].latency_ms or 0) < 140 for c in first.cases())
    assert oloproof.run(project_dir).cache == {
        "execution_hits": 6, "execution_misses": 0, "judgment_hits": 6, "judgment_misses": 0}
    cfg = project_dir / "oloproof.yaml"
    cfg.write_text(cfg.read_text().replace("pause: 0.01", "pause: 0.02"))
    again = oloproof.run(project_dir)
    assert again.cache is not None and again.cache["judgment_misses"] == 6


def test_an_unknown_param_is_a_configuration_error(project_dir: Path) -> None:
    _project(project_dir, _custom("slow", "slow", "params: {paws: 1}"))
    with pytest.raises(oloproof.ConfigError) as info:
        oloproof.run(project_dir)
    message = str(info.value)
    # The file as the caller named it, and (issue 30) the line of the field.
    lines = (project_dir / "oloproof.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "paws" in text)
    assert (f"{project_dir / 'oloproof.yaml'}:{line}: evaluators[0].params.paws: checks:slow"
            " takes no parameter named 'paws'") in message
    assert "(accepted: case, pause)" in message
    assert not (project_dir / ".oloproof" / "store.sqlite").exists()


@pytest.mark.slow  # evaluators that sleep: real time
def test_a_per_evaluator_timeout_makes_slow_calls_missing(project_dir: Path) -> None:
    _project(project_dir,
             _custom("quick", "sleeps", "params: {seconds: 3}", "timeout_s: 0.2")
             + _custom("quick_async", "sleeps_async", "timeout_s: 0.2"), n=3)
    result = oloproof.run(project_dir)
    for name in ("quick", "quick_async"):
        m = result.metrics[name]
        assert (m.observed, m.missing) == (0, 3), name
    reasons = {c.judgments["quick_async"].reason for c in result.cases()}
    assert reasons == {"the evaluator gave no verdict within timeout_s = 0.2s"}


def test_the_evaluator_limit_defaults_to_the_cpu_count(project_dir: Path) -> None:
    import os

    from oloproof.project import load_project

    _project(project_dir, "- {type: custom, criterion: slow, function: 'checks:slow'}",
             evaluator_limit=None)
    config = load_project(project_dir / "oloproof.yaml").config
    assert config.concurrency.evaluator is None
    assert config.concurrency.evaluator_limit() == (os.cpu_count() or 1)
