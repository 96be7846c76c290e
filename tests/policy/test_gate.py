"""Decisions and the gate (SPEC §5): states, actions and exit-code precedence."""

from __future__ import annotations

import pytest

from oloproof.policy.decide import (
    Decision,
    action_for,
    decide_observed_count,
    decide_run,
    gate,
)
from oloproof.project.config import ReleasePolicy
from oloproof.store.reader import CriterionEvidence


def _d(state: str, action: str = "BLOCK") -> Decision:
    return Decision(rule=state.lower(), metric="m", kind="interval_threshold", state=state,
                    reason="r", detail="d", action=action)


@pytest.mark.parametrize(
    "states, incomplete, expected",
    [
        ([], False, ("ALLOW", 0)),
        (["PASS"], False, ("ALLOW", 0)),
        (["INSUFFICIENT_EVIDENCE"], False, ("BLOCK", 3)),
        (["MANUAL_REVIEW", "INSUFFICIENT_EVIDENCE"], False, ("BLOCK", 4)),
        (["MANUAL_REVIEW", "INSUFFICIENT_EVIDENCE"], True, ("BLOCK", 5)),
        (["FAIL", "MANUAL_REVIEW"], True, ("BLOCK", 1)),
        (["PASS"], True, ("BLOCK", 5)),
    ],
)
def test_exit_code_precedence(states: list[str], incomplete: bool, expected: tuple[str, int]) -> None:
    decisions = [_d(s, "ALLOW" if s == "PASS" else "BLOCK") for s in states]
    assert gate(decisions, incomplete=incomplete) == expected


def test_warn_on_and_block_on() -> None:
    policy = ReleasePolicy.validate(
        {"version": 1, "block_on": ["FAIL"], "warn_on": ["INSUFFICIENT_EVIDENCE"], "rules": []}
    )
    assert action_for("FAIL", policy) == "BLOCK"
    assert action_for("INSUFFICIENT_EVIDENCE", policy) == "WARN"
    assert action_for("MANUAL_REVIEW", policy) == "ALLOW"
    assert gate([_d("INSUFFICIENT_EVIDENCE", "WARN")]) == ("WARN", 0)


@pytest.mark.parametrize(
    "failed, missing, max_failures, state",
    [(0, 0, 0, "PASS"), (1, 0, 0, "FAIL"), (0, 1, 0, "INSUFFICIENT_EVIDENCE"),
     (1, 1, 2, "PASS"), (2, 3, 3, "INSUFFICIENT_EVIDENCE"), (4, 0, 3, "FAIL")],
)
def test_observed_count(failed: int, missing: int, max_failures: int, state: str) -> None:
    ev = CriterionEvidence("m", "BINARY", None, passed=10, failed=failed, missing=missing)

    class Rule:
        id = "r"
        metric = "m"

    Rule.max_failures = max_failures  # type: ignore[attr-defined]
    assert decide_observed_count(Rule, ev).state == state


def _policy(rule: dict[str, object]) -> ReleasePolicy:
    return ReleasePolicy.validate({"version": 1, "rules": [{"id": "r", "metric": "m", **rule}]},
                                        context={"metrics": {"m": "BINARY"}})


@pytest.mark.parametrize(
    "k, n, m, rule, state",
    [
        (13, 18, 0, {"min": 0.70}, "INSUFFICIENT_EVIDENCE"),
        (95, 100, 0, {"min": 0.85}, "PASS"),     # CP lower 0.887 ≥ 0.85
        (60, 100, 0, {"min": 0.75}, "FAIL"),     # CP upper 0.698 < 0.75
        (95, 100, 0, {"min": 0.80}, "PASS"),
        # The same 95 of 100 with 5 missing: lower = CP lower of 95 of 105 = 0.832 < 0.85.
        (95, 100, 5, {"min": 0.85}, "INSUFFICIENT_EVIDENCE"),
        (2, 100, 0, {"max": 0.10}, "PASS"),      # upper 0.070 ≤ 0.10
        (30, 100, 0, {"max": 0.10}, "FAIL"),     # lower 0.212 > 0.10
        (0, 0, 30, {"min": 0.5}, "INSUFFICIENT_EVIDENCE"),
    ],
)
def test_interval_rules_follow_clopper_pearson(
    k: int, n: int, m: int, rule: dict[str, object], state: str
) -> None:
    from scipy.stats import beta

    ev = {"m": CriterionEvidence("m", "BINARY", None, passed=k, failed=n - k, missing=m)}
    decisions, summaries = decide_run(ev, _policy(rule))
    s = summaries["m"]
    lower = beta.ppf(0.025, k, n + m - k + 1) if k else 0.0
    upper = beta.ppf(0.975, k + m + 1, n - k) if k + m < n + m else 1.0
    assert s.lower == pytest.approx(lower, abs=1e-10)
    assert s.upper == pytest.approx(upper, abs=1e-10)
    assert decisions[0].state == state
