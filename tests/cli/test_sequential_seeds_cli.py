"""Trying seeds until one passes is not evidence. Each seed's order keeps a sequential
run's error level on its own; choosing among several does not (simulated at a true rate on
the floor: 1.8% false passes with one seed, 26% with twenty), and the cache makes every
try cheap. So a sequential PASS of a system and suite that were run sequentially under
another seed before is MANUAL_REVIEW (``other_seeds_tried``), never an ALLOW, in the run
and in every later ``gate``; the first seed's own decision is untouched."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, write_project

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    return {"label": "ok" if x["n"] % 10 else "no"}
"""

CASES = [{"id": f"c{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(300)]

FLOOR = """
version: 1
rules:
  - {id: floor, metric: exact_label, min: 0.6}
"""


def _with_seed(root: Path, seed: int) -> None:
    cfg = root / "oloproof.yaml"
    text = cfg.read_text().split("\nsequential:")[0].rstrip("\n")
    cfg.write_text(f"{text}\nsequential:\n  seed: {seed}\n")


def _floor(out: str) -> dict[str, object]:
    [d] = json.loads(out)["decisions"]
    return d


def test_a_pass_under_a_second_seed_is_manual_review(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=CASES, release=FLOOR)
    _with_seed(project_dir, 0)
    first = run_cli("run", cwd=project_dir)
    assert first.code == 0, first.text  # 90% right against a floor of 60%: PASS
    first_id = json.loads(run_cli("runs", "--json", cwd=project_dir).out)[0]["id"]

    _with_seed(project_dir, 7)
    second = run_cli("run", cwd=project_dir)
    assert second.code == 4, second.text  # MANUAL_REVIEW blocks
    assert "other_seeds_tried" in second.out, second.out
    gated = run_cli("gate", "latest", "--json", cwd=project_dir)
    assert gated.code == 4, gated.text
    d = _floor(gated.out)
    assert (d["state"], d["reason"]) == ("MANUAL_REVIEW", "other_seeds_tried"), d
    assert f"seed 0 ({first_id})" in str(d["detail"]) and "the rule alone: PASS" in str(
        d["detail"]), d["detail"]

    # The first seed's decision was made before any other seed was tried: it stands.
    again = run_cli("gate", first_id, "--json", cwd=project_dir)
    assert again.code == 0, again.text
    assert _floor(again.out)["state"] == "PASS"


def test_the_same_seed_again_and_a_changed_system_are_not_held(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=CASES, release=FLOOR)
    _with_seed(project_dir, 3)
    assert run_cli("run", cwd=project_dir).code == 0
    rerun = run_cli("run", cwd=project_dir)  # the same seed: the same order, from the cache
    assert rerun.code == 0, rerun.text
    # A new version of the system is another experiment: its first seed is its own.
    app = project_dir / "app.py"
    app.write_text(app.read_text().replace('"ok" if x["n"] % 10', '"ok" if x["n"] % 20'))
    _with_seed(project_dir, 4)
    changed = run_cli("run", cwd=project_dir)
    assert changed.code == 0, changed.text
    assert "other_seeds_tried" not in changed.out


def _with_margin(root: Path, margin: float) -> None:
    cfg = root / "oloproof.yaml"
    text = cfg.read_text().split("\nsequential:")[0].rstrip("\n")
    cfg.write_text(f"{text}\nsequential:\n  seed: 0\n  margin: {margin}\n")


def test_a_pass_under_a_second_margin_is_manual_review(project_dir: Path) -> None:
    """The margin tunes the test's prior as the seed picks its order: each is a valid test on
    its own, and at a true rate on the floor (2,000 cases, simulated) margins 0.01 to 0.19
    pass 0.1% to 2.3% each and 3.7% at least one of six. A second margin on the same seed
    was not held: only a different seed was."""
    write_project(project_dir, app=APP, cases=CASES, release=FLOOR)
    _with_margin(project_dir, 0.05)
    assert run_cli("run", cwd=project_dir).code == 0
    first_id = json.loads(run_cli("runs", "--json", cwd=project_dir).out)[0]["id"]
    _with_seed(project_dir, 0)  # the default margin, 0.05, said otherwise: the same test
    assert run_cli("run", cwd=project_dir).code == 0
    _with_margin(project_dir, 0.2)
    second = run_cli("run", "--json", cwd=project_dir)
    assert second.code == 4, second.text
    d = json.loads(second.out.splitlines()[-1])["decisions"][0]
    assert (d["state"], d["reason"]) == ("MANUAL_REVIEW", "other_seeds_tried"), d
    assert f"a sequential run under seed 0 with margin 0.05 ({first_id}" in d["detail"], d
    assert "the rule alone: PASS" in d["detail"]


def _lucky_start() -> tuple[list[dict[str, object]], str]:
    """300 cases whose first 45 in seed 0's order are right and the rest right one time in
    two: 57.5% in all, a floor of 60% that the whole suite cannot show."""
    from oloproof.policy.sequential import sequential_order

    ids = [f"c{i:03d}" for i in range(300)]
    order = sequential_order(ids, 0)
    good = set(order[:45]) | {c for j, c in enumerate(order[45:]) if j % 2}
    cases = [{"id": c, "input": {"good": c in good}, "expected": {"label": "ok"}} for c in ids]
    return cases, 'def answer(x):\n    return {"label": "ok" if x["good"] else "no"}\n'


def test_a_sequential_pass_after_a_fixed_run_that_did_not_allow_is_manual_review(
    project_dir: Path,
) -> None:
    """A fixed run of the whole suite: INSUFFICIENT_EVIDENCE, exit 3. The same system and
    suite run again with --sequential, every case from the cache: it PASSed after 38 cases,
    ALLOW, exit 0, though the store held all 300 and they did not show the floor. Trying
    the sequential test after the fixed one is one more try (simulated at a true rate on a
    floor of 0.8, 2,000 cases: 2.2% false passes fixed, 4.0% fixed or else sequential)."""
    cases, app = _lucky_start()
    write_project(project_dir, app=app, cases=cases, release=FLOOR)
    fixed = run_cli("run", cwd=project_dir)
    assert fixed.code == 3, fixed.text
    fixed_id = json.loads(run_cli("runs", "--json", cwd=project_dir).out)[0]["id"]
    seq = run_cli("run", "--sequential", "--json", cwd=project_dir)
    assert seq.code == 4, seq.text
    d = json.loads(seq.out.splitlines()[-1])["decisions"][0]
    assert (d["state"], d["reason"]) == ("MANUAL_REVIEW", "other_seeds_tried"), d
    assert ("a fixed run of the whole suite that did not allow, exit 3"
            f" ({fixed_id})") in d["detail"], d
    assert "the rule alone: PASS (decided after" in d["detail"]
    assert run_cli("gate", "latest", cwd=project_dir).code == 4


def test_a_sequential_run_after_a_fixed_run_that_allowed_or_a_subset_is_not_held(
    project_dir: Path,
) -> None:
    write_project(project_dir, app=APP, cases=CASES, release=FLOOR)
    assert run_cli("run", "--limit", "20", cwd=project_dir).code == 5  # a subset: never allows
    assert run_cli("run", cwd=project_dir).code == 0  # 90% right, floor 60%: ALLOW
    seq = run_cli("run", "--sequential", cwd=project_dir)
    assert seq.code == 0, seq.text
    assert "other_seeds_tried" not in seq.out
