"""A run whose every result is cached runs without an event loop (engine.run_cached):
the same events, stored rows and decisions as the same run on a loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Backend, labelled_cases, write_project

import oloproof
from oloproof.engine.pipeline import Engine

APP = """
def answer(case_input):
    n = case_input["n"]
    return {"label": "ok" if n % 5 else "no", "text": f"case {n}", "score": n % 7}
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: regex
  criterion: no_digits
  field: text
  pattern: '9'
  pass_if: no_match
- type: absolute_error
  criterion: err
  field: score
  expected_field: label_score
  range: [0, 10]
- type: custom
  criterion: short
  function: checks:short
"""

CHECKS = """
def short(output, case):
    return len(output["text"]) < 7
"""

RELEASE = """\
version: 1
rules:
  - {id: label-floor, metric: exact_label, min: 0.5}
  - {id: short-ok, metric: short, max_failures: 29}
"""

_VOLATILE = {"run_id", "timestamp", "latency_ms"}


def _project(root: Path, trials: int) -> Path:
    cases = labelled_cases(30)
    for case in cases:
        case["expected"]["label_score"] = 3
    write_project(root, app=APP, cases=cases, evaluators=EVALUATORS, release=RELEASE,
                  extra_files={"checks.py": CHECKS})
    if trials > 1:
        config = root / "oloproof.yaml"
        config.write_text(config.read_text() + f"trials: {trials}\n")
    return root


def _collect(root: Path) -> tuple[oloproof.RunResult, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    result = oloproof.run(root, on_event=lambda e: seen.append(e.to_json()))
    return result, [{k: v for k, v in e.items() if k not in _VOLATILE} for e in seen]


# Both tests run on both store backends (tests/conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")


def _rows(root: Path, run_id: str) -> list[Any]:
    from oloproof.store.db import open_store_readonly
    from oloproof.store.location import locate

    conn = open_store_readonly(locate(root / "oloproof.yaml"))
    try:
        out: list[Any] = []
        for table in ("run_cases", "run_judgments", "trial_cases", "trial_judgments"):
            columns = [d[0] for d in conn.execute(f"SELECT * FROM {table} LIMIT 0").description]
            keep = [c for c in columns if c not in ("run_id", "finished_at")]
            out.append(sorted(map(repr, conn.execute(
                f"SELECT {', '.join(keep)} FROM {table} WHERE run_id = ?", (run_id,)))))
        return out
    finally:
        conn.close()


@pytest.mark.slow  # its runs start the regex guard's child processes
@pytest.mark.parametrize("trials", [1, 3])
def test_a_cached_run_without_a_loop_is_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trials: int
) -> None:
    root = _project(tmp_path / "p", trials)
    first, _ = _collect(root)
    cached_calls: list[bool] = []
    real = Engine.all_cached

    def spy(self: Engine) -> bool:
        cached_calls.append(real(self))
        return cached_calls[-1]

    monkeypatch.setattr(Engine, "all_cached", spy)
    replayed, replay_events = _collect(root)
    assert cached_calls == [True]
    monkeypatch.setattr(Engine, "all_cached", lambda self: False)  # the same, on a loop
    looped, loop_events = _collect(root)

    assert [e for e in replay_events if e.get("from_cache") is False] == []
    # The loop runs cases concurrently: the same events, perhaps in another order.
    assert sorted(map(repr, replay_events)) == sorted(map(repr, loop_events))
    assert replay_events[0]["type"] == "run_started"
    assert replay_events[-1]["type"] == "run_finished"
    for result in (replayed, looped):
        assert result.exit_code == first.exit_code
        assert [d.to_json() for d in result.decisions] == [d.to_json() for d in first.decisions]
    assert _rows(root, replayed.run_id) == _rows(root, looped.run_id)


@pytest.mark.slow  # its runs start the regex guard's child processes
def test_a_run_with_one_result_missing_runs_on_a_loop(tmp_path: Path, backend: Backend) -> None:
    root = _project(tmp_path / "p", 1)
    oloproof.run(root)
    conn = backend.connect(root)
    (key,) = conn.execute("SELECT key FROM judge_cache LIMIT 1").fetchone()
    conn.execute("DELETE FROM judge_cache WHERE key = ?", (key,))
    conn.close()
    _, events = _collect(root)
    fresh = [e for e in events if e.get("from_cache") is False]
    assert len(fresh) == 1 and fresh[0]["type"] == "case_judged"
