"""``plan CMP_ID`` on superiority rules with a margin, through the CLI, against a brute-force
search with the independent Newcombe implementation of tests/stats/test_stats_sizes_grid.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scipy import stats
from tests.conftest import run_cli
from tests.stats.test_stats_sizes_grid import _newcombe, _rule, _scale

RUN_ID = re.compile(r"Run (run_[0-9A-Z]{26})")
CMP_ID = re.compile(r"Comparison (cmp_[0-9A-Z]{26})")


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("cmpm")
    project = root / "cmp"
    assert run_cli("init", str(project), "--example", "compare", cwd=root).code == 0
    baseline = run_cli("run", "--config", "baseline.yaml", cwd=project)
    candidate = run_cli("run", cwd=project)
    base = RUN_ID.search(baseline.out + baseline.err)
    cand = RUN_ID.search(candidate.out + candidate.err)
    assert base and cand
    return project, cand.group(1), base.group(1)


def _brute(cells: tuple[int, int, int, int], kind: str, margin: float) -> int:
    z = float(stats.norm.ppf(0.975))
    for size in range(sum(cells) + 1, 20_000):
        if _rule(*_newcombe(*_scale(cells, size), z), kind, margin) is not None:
            return size
    raise AssertionError("no size")


@pytest.mark.parametrize(("kind", "margin"), [("superiority", 0.05), ("superiority", 0.15),
                                              ("equivalence", 0.3)])
def test_plan_comparison_with_a_margin_equals_brute_force(
    example: tuple[Path, str, str], kind: str, margin: float
) -> None:
    project, cand, base = example
    policy = project / f"cmp-{kind}-{margin}.yaml"
    policy.write_text(
        f"version: 1\nrules:\n  - {{id: r, kind: {kind}, metric: exact_label, margin: {margin}}}\n"
    )
    made = run_cli("compare", cand, base, "--policy", str(policy), cwd=project)
    found = CMP_ID.search(made.out)
    assert found, made.text
    plan = run_cli("plan", found.group(1), cwd=project)
    assert plan.code == 0, plan.text
    # the example's paired table: 13 both pass, 4 candidate only, 0 baseline only, 1 both fail
    total = _brute((13, 4, 0, 1), kind, margin)
    assert (
        f"r: about {total - 18} more paired cases would decide it, if the observed paired"
        f" outcomes hold ({total} in total)"
    ) in plan.out
