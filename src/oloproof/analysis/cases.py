"""A stored run case by case, as ``oloproof inspect`` shows it: each case as a document
(``--json``), which cases failed and why (``--failures``), the run as one document.

Plain data in, plain data out: ``render/inspect.py`` draws it, ``cli/inspect.py`` prints it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from oloproof._records import dataclass
from oloproof.enums import JUDGMENT_MISSING, CaseStatus, JudgmentStatus, RuleState
from oloproof.store.reader import CaseRow, JudgmentRow, RunRecord, TrialRow
from oloproof.textsafe import first_line

if TYPE_CHECKING:
    from typing import Any

    from oloproof.policy.decide import MetricSummary
    from oloproof.policy.judges import AnyJudgeReport

__all__ = [
    "FailureRow", "case_json", "failure_rows", "failures", "is_failure", "run_json", "trial_json",
]

_MISSING_STATES = (JudgmentStatus.ERROR, JUDGMENT_MISSING)


def case_json(c: CaseRow) -> dict[str, Any]:
    """One case as ``inspect --case ID --json`` prints it."""
    return {
        "id": c.case_id, "input": c.input, "expected": c.expected, "metadata": c.metadata,
        "status": c.status, "output": c.output, "error": c.error, "attempts": c.attempts,
        "latency_ms": c.latency_ms, "usage": c.usage, "from_cache": c.from_cache,
        "judgments": {
            k: {
                "status": j.status, "passed": j.passed, "score": j.score, "reason": j.reason,
                "from_cache": j.from_cache, "attempts": j.attempts, "latency_ms": j.latency_ms,
                "usage": j.usage,
            }
            for k, j in c.judgments.items()
        },
    }


def trial_json(t: TrialRow) -> dict[str, Any]:
    """One later trial of a case (trials 1 to k - 1)."""
    return {
        "trial": t.trial, "status": t.status, "output": t.output, "error": t.error,
        "attempts": t.attempts, "latency_ms": t.latency_ms, "usage": t.usage,
        "from_cache": t.from_cache,
        "judgments": {
            k: {"status": j.status, "passed": j.passed, "score": j.score, "reason": j.reason,
                "from_cache": j.from_cache}
            for k, j in t.judgments.items()
        },
    }


def _is_bad(j: JudgmentRow) -> bool:
    return j.status in _MISSING_STATES or (j.status == JudgmentStatus.OK and j.passed is False)


def is_failure(c: CaseRow) -> bool:
    """The case's call failed, or one of its judgments failed or is missing."""
    if c.status != CaseStatus.OK:
        return True
    return any(_is_bad(j) for j in c.judgments.values())


def failures(cases: Sequence[CaseRow]) -> list[CaseRow]:
    return [c for c in cases if is_failure(c)]


@dataclass(frozen=True, slots=True)
class FailureRow:
    """One row of ``inspect --failures``: a failed case's call, or one of its failed or
    missing judgments. The case's own columns are empty on the rows after its first."""

    case_id: str
    execution: str
    attempts: str
    criterion: str
    state: str
    reason: str


def failure_rows(failed: Sequence[CaseRow]) -> list[FailureRow]:
    """The rows of ``inspect --failures``: one per bad judgment of each failed case (one for
    a case whose call failed: its first error line is the reason)."""
    rows = []
    for c in failed:
        bad: list[JudgmentRow | None] = [j for j in c.judgments.values() if _is_bad(j)]
        first = True
        for j in bad or [None]:
            if c.status != CaseStatus.OK:
                reason = first_line(c.error)
            else:
                reason = (j.reason if j else "") or ""
            state = ""
            if j is not None:
                state = RuleState.FAIL if j.status == JudgmentStatus.OK else j.status
            rows.append(FailureRow(
                c.case_id if first else "", c.status if first else "",
                str(c.attempts) if first else "", j.criterion if j else "", state, reason,
            ))
            first = False
    return rows


def run_json(
    run: RunRecord, cases: Sequence[CaseRow], decisions: list[dict[str, Any]],
    summaries: Sequence[MetricSummary], judges: Sequence[AnyJudgeReport],
) -> dict[str, Any]:
    """The whole run as ``inspect RUN --json`` prints it."""
    return {
        "run": {
            "id": run.id, "project": run.project, "created_at": run.created_at,
            "finished_at": run.finished_at, "status": run.status,
            "completeness": run.completeness, "gate": run.gate,
            "exit_code": run.exit_code, "suite_digest": run.suite_digest,
            "cases_total": run.cases_total, "cases_stored": len(cases),
            "system": run.system, "system_identity": run.system_identity,
            "cache": run.cache, "stop_reason": run.stop_reason,
            **({"trials": run.trials} if run.trials > 1 else {}),
        },
        "decisions": decisions,
        "metrics": [s.to_json() for s in summaries],
        "judges": [r.to_json() for r in judges],
        "cases": [case_json(c) for c in cases],
    }
