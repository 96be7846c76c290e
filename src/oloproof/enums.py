"""The words Oloproof stores, prints and streams, each defined once.

Every state, kind and status is a :class:`enum.StrEnum`: a member *is* its
string (``MetricKind.BINARY == "BINARY"``, ``json.dumps`` writes ``"BINARY"``),
so what is stored in SQLite and written to ``--json`` is unchanged, while code
names the member and a typo fails at import time instead of at a decision.

This module is the bottom layer: it imports nothing of Oloproof's.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = [
    "JUDGMENT_MISSING",
    "CaseStatus",
    "Completeness",
    "ExitCode",
    "GateAction",
    "JudgmentStatus",
    "MetricKind",
    "RuleState",
    "RunStatus",
]


class MetricKind(StrEnum):
    """What one criterion measures: a pass rate or a mean score (SPEC §1)."""

    BINARY = "BINARY"
    MEAN = "MEAN"


class RuleState(StrEnum):
    """The state of one decided rule (SPEC §5)."""

    PASS = "PASS"
    FAIL = "FAIL"
    INSUFFICIENT_EVIDENCE = "INSUFFICIENT_EVIDENCE"
    MANUAL_REVIEW = "MANUAL_REVIEW"


class RunStatus(StrEnum):
    """Where a stored run is: still going, decided, or stopped before deciding."""

    RUNNING = "RUNNING"
    DECIDED = "DECIDED"
    RUN_ERROR = "RUN_ERROR"


class Completeness(StrEnum):
    """Whether every case of the suite was run (a PARTIAL run is never decided).

    ``SUBSET``: every case of a chosen part of the suite ran (``--limit``, ``--case``,
    ``--where``); its rules are decided on that part, and its gate never allows a
    release (exit 5 unless a rule FAILs): docs/python-api.md, "Subsets".
    """

    COMPLETE = "COMPLETE"
    PARTIAL = "PARTIAL"
    SUBSET = "SUBSET"
    #: A sequential run (docs/sequential-decisions.md): its cases in a seeded order, decided
    #: by anytime-valid tests on the prefix of that order it read; it may stop before the
    #: suite's end once every rule is decided.
    SEQUENTIAL = "SEQUENTIAL"


class CaseStatus(StrEnum):
    """How one call of the system ended (SPEC §6, ``case_executed.status``)."""

    OK = "OK"
    ERROR = "ERROR"
    TIMEOUT = "TIMEOUT"


class JudgmentStatus(StrEnum):
    """How one case was judged on one criterion (``case_judged.status``).

    ``OK`` is observed, ``ERROR`` is missing, ``EXCLUDED`` does not apply (SPEC §4).
    """

    OK = "OK"
    ERROR = "ERROR"
    EXCLUDED = "EXCLUDED"


# A case with no output to judge: its judgments are stored and streamed as MISSING.
JUDGMENT_MISSING = "MISSING"


class GateAction(StrEnum):
    """What a rule's state does to the release (SPEC §5)."""

    ALLOW = "ALLOW"
    WARN = "WARN"
    BLOCK = "BLOCK"


class ExitCode(IntEnum):
    """The process exit codes of the contract (SPEC §5), plus the two extras of design-notes."""

    OK = 0
    FAIL = 1
    USAGE = 2
    INSUFFICIENT_EVIDENCE = 3
    MANUAL_REVIEW = 4
    INCOMPLETE = 5
    INTERNAL = 70
    INTERRUPTED = 130
