"""What a run of repeated trials says case by case: the flaky cases (docs/repeated-trials.md).

A case is **flaky** on a BINARY criterion when its observed trials disagree: at least one
passed and at least one failed. A case whose observed trials agree but some of whose trials
are missing is not listed (it may or may not be flaky: the ``flaky_share`` metric counts it
as missing, never as steady).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oloproof._records import dataclass
from oloproof.enums import MetricKind
from oloproof.evidence import Outcome, classify_outcome
from oloproof.store.reader import RunRecord, load_trial_outcomes

if TYPE_CHECKING:
    from typing import Any

    from oloproof.store.dbapi import Connection

__all__ = ["FlakyCase", "flaky_cases", "flaky_json"]


@dataclass(frozen=True)
class FlakyCase:
    """One case whose trials disagree on one criterion.

    ``verdicts`` is the case's trials in order: True (passed), False (failed) or None
    (missing or excluded)."""

    case_id: str
    criterion: str
    passed: int
    failed: int
    missing: int
    verdicts: tuple[bool | None, ...]

    @property
    def trials_text(self) -> str:
        """``✓✗✓✓✗`` (``·`` for a trial with no verdict)."""
        return "".join("·" if v is None else ("✓" if v else "✗") for v in self.verdicts)

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case_id, "criterion": self.criterion, "passed": self.passed,
            "failed": self.failed, "missing": self.missing, "verdicts": list(self.verdicts),
        }


def flaky_cases(conn: Connection, run: RunRecord) -> list[FlakyCase]:
    """The flaky cases of a stored run, by criterion in declared order, then suite order.
    Empty for a run of one trial per case."""
    if run.trials < 2:
        return []
    binary = [m["criterion"] for m in run.metrics if m.get("kind") == MetricKind.BINARY]
    outcomes = load_trial_outcomes(conn, run)
    out: list[FlakyCase] = []
    for criterion in binary:
        for case_id, trials in outcomes.get(criterion, {}).items():
            verdicts: list[bool | None] = []
            missing = 0
            for status, passed, score in trials:
                sorted_as = classify_outcome(MetricKind.BINARY, status, passed, score)
                verdicts.append(bool(passed) if sorted_as is Outcome.OBSERVED else None)
                missing += sorted_as is Outcome.MISSING
            p = sum(1 for v in verdicts if v is True)
            f = sum(1 for v in verdicts if v is False)
            if p and f:
                out.append(FlakyCase(case_id, criterion, p, f, missing, tuple(verdicts)))
    return out


def flaky_json(run: RunRecord, flaky: list[FlakyCase], cases: int) -> dict[str, Any]:
    """``inspect --flaky --json``: the run, how many cases, and the flaky ones."""
    return {
        "run_id": run.id, "trials": run.trials, "cases": cases,
        "flaky": [f.to_json() for f in flaky],
    }
