"""The one rule for observed / missing / excluded (SPEC §4), and the counts built on it."""

from __future__ import annotations

import pytest

from oloproof.enums import MetricKind
from oloproof.evidence import CriterionEvidence, Outcome, classify_outcome


@pytest.mark.parametrize(
    "kind, status, passed, score, expected",
    [
        (MetricKind.BINARY, "OK", True, None, Outcome.OBSERVED),
        (MetricKind.BINARY, "OK", False, None, Outcome.OBSERVED),
        (MetricKind.BINARY, "OK", None, None, Outcome.MISSING),  # OK without a verdict
        (MetricKind.BINARY, "EXCLUDED", None, None, Outcome.EXCLUDED),
        (MetricKind.BINARY, "ERROR", None, None, Outcome.MISSING),
        (MetricKind.BINARY, "MISSING", None, None, Outcome.MISSING),
        (MetricKind.BINARY, "SOMETHING NEW", True, None, Outcome.MISSING),
        (MetricKind.MEAN, "OK", None, 0.5, Outcome.OBSERVED),
        (MetricKind.MEAN, "OK", True, None, Outcome.MISSING),  # OK without a score
        (MetricKind.MEAN, "EXCLUDED", None, None, Outcome.EXCLUDED),
        (MetricKind.MEAN, "TIMEOUT", None, None, Outcome.MISSING),
    ],
)
def test_classify(kind: MetricKind, status: str, passed: bool | None, score: float | None,
                  expected: Outcome) -> None:
    assert classify_outcome(kind, status, passed, score) is expected


def test_counts_add_up() -> None:
    ev = CriterionEvidence("exact", MetricKind.BINARY)
    outcomes = [("OK", True), ("OK", False), ("OK", True), ("ERROR", None), ("EXCLUDED", None),
                ("MISSING", None), ("OK", None)]
    for status, passed in outcomes:
        ev.add(status, passed, None)
    assert (ev.passed, ev.failed, ev.observed, ev.missing, ev.excluded) == (2, 1, 3, 3, 1)
    assert ev.observed + ev.missing + ev.excluded == len(outcomes)

    mean = CriterionEvidence("tone", MetricKind.MEAN, (0.0, 1.0))
    for status, score in [("OK", 0.25), ("OK", 1.0), ("ERROR", None), ("OK", None)]:
        mean.add(status, None, score)
    assert mean.scores == [0.25, 1.0] and mean.observed == 2 and mean.missing == 2
