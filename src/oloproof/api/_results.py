"""The typed results of the Python API: plain data, readable without a terminal.

A :class:`RunResult` holds what a run decided (gate, exit code, decisions, metrics); its
cases are read from the store only when asked (:meth:`RunResult.cases`), so a result of a
100,000-case run costs nothing until it is iterated.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from oloproof._records import asdict, dataclass, field
from oloproof.enums import Completeness, ExitCode, GateAction, RunStatus
from oloproof.store.reader import panels_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.analysis.trials import FlakyCase
    from oloproof.policy.compare import PairedMetric
    from oloproof.policy.decide import Decision, MetricSummary
    from oloproof.store.reader import CaseRow, RunRecord, TrialRow

__all__ = [
    "CaseResult",
    "ComparisonResult",
    "GateNotAllowed",
    "Judgment",
    "RunInfo",
    "RunResult",
    "Subset",
]


class GateNotAllowed(AssertionError):
    """Raised by :meth:`RunResult.assert_allowed` when something blocks the release.

    An ``AssertionError``, so that pytest reports it as a failed assertion; the message
    lists every blocking rule with its reason and interval. Public as
    ``oloproof.GateNotAllowed``, the name tracebacks and pytest show."""


# Tracebacks (and pytest's report) name an exception by its __module__: the public path,
# not this private module's (``oloproof.GateNotAllowed`` is what users catch and import).
GateNotAllowed.__module__ = "oloproof"


@dataclass(frozen=True)
class Subset:
    """How a run chose part of its suite (``--limit``, ``--sample``, ``--case``, ``--where``).

    ``suite_cases`` is the size of the whole suite; ``selected`` how many cases ran. A run
    of a subset is stored with completeness ``SUBSET``: it never allows a release on the
    full policy (see docs/python-api.md, "Subsets")."""

    suite_cases: int
    selected: int
    limit: int | None = None
    sample: bool = False
    seed: int | None = None
    case_ids: tuple[str, ...] = ()
    where: str | None = None
    #: ``(I, K)`` for shard I of K (``--shard I/K``): a fixed slice of the whole suite that
    #: ``oloproof merge`` joins with the other K - 1 into one run.
    shard: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["case_ids"] = list(self.case_ids)
        if self.shard is None:
            del data["shard"]  # a subset stores what it always stored
        else:
            data["shard"] = list(self.shard)
        return data

    @classmethod
    def from_json(cls, data: Any) -> Subset | None:
        if not isinstance(data, dict):
            return None
        try:
            shard = data.get("shard")
            return cls(
                suite_cases=int(data["suite_cases"]), selected=int(data["selected"]),
                limit=data.get("limit"), sample=bool(data.get("sample")),
                seed=data.get("seed"), case_ids=tuple(data.get("case_ids") or ()),
                where=data.get("where"),
                shard=None if shard is None else (int(shard[0]), int(shard[1])),
            )
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def describe(self) -> str:
        """One line: ``20 of 164 cases (a seeded sample, seed 7)``, ``shard 2/4: 41 of 164
        cases``."""
        if self.shard is not None:
            return (f"shard {self.shard[0]}/{self.shard[1]}: {self.selected} of"
                    f" {self.suite_cases} cases")
        how = []
        if self.case_ids:
            how.append(f"--case × {len(self.case_ids)}")
        if self.where:
            how.append(f"--where {self.where}")
        if self.limit is not None:
            how.append(
                f"a random sample of {self.limit} (seed {self.seed})" if self.sample
                else f"the first {self.limit}"
            )
        return f"{self.selected} of {self.suite_cases} cases ({'; '.join(how)})"


@dataclass(frozen=True)
class Judgment:
    """One case judged on one criterion.

    ``status``: ``OK`` (observed: ``passed`` for a BINARY metric, ``score`` for a MEAN one),
    ``EXCLUDED`` (the evaluator does not apply), ``ERROR`` (the evaluator failed: missing),
    ``MISSING`` (the system gave no output to judge)."""

    criterion: str
    status: str
    passed: bool | None
    score: float | None
    reason: str | None
    from_cache: bool
    latency_ms: float | None
    attempts: int
    usage: dict[str, Any] | None


@dataclass(frozen=True)
class TrialResult:
    """One more trial of a case (trials 1 .. k - 1 of a run with repeated trials): its call
    and its judgments. Trial 0 is the :class:`CaseResult` itself."""

    trial: int
    status: str  # OK | ERROR | TIMEOUT
    output: Any
    error: str | None
    attempts: int
    latency_ms: float | None
    usage: dict[str, Any] | None
    from_cache: bool
    judgments: dict[str, Judgment] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: TrialRow) -> TrialResult:
        return cls(
            row.trial, row.status, row.output, row.error, row.attempts, row.latency_ms,
            row.usage, row.from_cache,
            {name: Judgment(**asdict(j)) for name, j in row.judgments.items()},
        )


@dataclass(frozen=True)
class CaseResult:
    """One case of a stored run: what went in, what came out, and every judgment.

    In a run with repeated trials these are the case's trial 0, and ``trials`` holds the
    others in order (empty for a run of one trial)."""

    id: str
    index: int
    input: Any
    expected: Any
    metadata: Any
    status: str  # OK | ERROR | TIMEOUT
    output: Any
    error: str | None
    attempts: int
    latency_ms: float | None
    usage: dict[str, Any] | None
    from_cache: bool
    judgments: dict[str, Judgment] = field(default_factory=dict)
    trials: tuple[TrialResult, ...] = ()

    @classmethod
    def from_row(cls, row: CaseRow, trials: list[TrialRow] | None = None) -> CaseResult:
        return cls(
            row.case_id, row.idx, row.input, row.expected, row.metadata, row.status, row.output,
            row.error, row.attempts, row.latency_ms, row.usage, row.from_cache,
            {name: Judgment(**asdict(j)) for name, j in row.judgments.items()},
            tuple(TrialResult.from_row(t) for t in trials or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self) -> dict[str, Any]:
        """One flat row: the case's fields, then ``<criterion>.status``, ``.passed`` and
        ``.score`` per criterion (what :meth:`RunResult.to_pandas` puts in a frame)."""
        row: dict[str, Any] = {
            "case_id": self.id, "index": self.index, "status": self.status,
            "latency_ms": self.latency_ms, "attempts": self.attempts,
            "from_cache": self.from_cache, "error": self.error, "input": self.input,
            "expected": self.expected, "metadata": self.metadata, "output": self.output,
        }
        for name, j in self.judgments.items():
            row[f"{name}.status"] = j.status
            row[f"{name}.passed"] = j.passed
            row[f"{name}.score"] = j.score
        return row

    def trial_records(self) -> list[dict[str, Any]]:
        """One flat row per trial (trial 0 first): ``case_id``, ``trial``, the call's
        fields, then ``<criterion>.status``, ``.passed`` and ``.score``."""
        first = {"case_id": self.id, "trial": 0, "status": self.status,
                 "latency_ms": self.latency_ms, "attempts": self.attempts,
                 "from_cache": self.from_cache, "error": self.error, "output": self.output}
        rows = [(first, self.judgments)]
        for t in self.trials:
            rows.append(({"case_id": self.id, "trial": t.trial, "status": t.status,
                          "latency_ms": t.latency_ms, "attempts": t.attempts,
                          "from_cache": t.from_cache, "error": t.error, "output": t.output},
                         t.judgments))
        out = []
        for row, judgments in rows:
            for name, j in judgments.items():
                row[f"{name}.status"] = j.status
                row[f"{name}.passed"] = j.passed
                row[f"{name}.score"] = j.score
            out.append(row)
        return out


@dataclass(frozen=True)
class RunInfo:
    """One stored run as :func:`oloproof.list_runs` lists it (no evidence read)."""

    run_id: str
    project: str
    created_at: str
    finished_at: str | None
    status: RunStatus
    completeness: Completeness
    gate: GateAction | None
    exit_code: int | None
    cases_total: int
    system: dict[str, Any]
    suite_digest: str
    stop_reason: str | None
    #: The cases it stored: ``cases_total`` for a run decided on all of them, fewer for a
    #: sequential run that stopped once every rule was decided, or a run stopped part way.
    cases_stored: int | None = None

    @classmethod
    def from_record(cls, r: RunRecord) -> RunInfo:
        return cls(
            r.id, r.project, r.created_at, r.finished_at, r.status, r.completeness, r.gate,
            r.exit_code, r.cases_total, r.system, r.suite_digest, r.stop_reason,
            r.cases_stored,
        )

    @property
    def cases_text(self) -> str:
        """The "Cases" of ``oloproof runs``: ``120``, or ``65 of 2000`` when it stored fewer
        cases than it was given (a sequential run, a run stopped or still going)."""
        if self.cases_stored is None or self.cases_stored == self.cases_total:
            return str(self.cases_total)
        return f"{self.cases_stored} of {self.cases_total}"

    @property
    def state(self) -> str:
        """``STATUS/COMPLETENESS``: ``DECIDED/COMPLETE``, ``RUN_ERROR/PARTIAL``."""
        return f"{self.status}/{self.completeness}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunResult:
    """A run, as stored and decided.

    - ``status`` / ``completeness``: ``DECIDED/COMPLETE``, ``DECIDED/SUBSET`` (part of the
      suite, chosen on purpose), ``RUN_ERROR/PARTIAL`` (stopped; ``stop_reason`` says why).
    - ``gate`` and ``exit_code``: what ``oloproof run`` exits with (0 nothing blocks,
      1 FAIL, 3 INSUFFICIENT_EVIDENCE, 4 MANUAL_REVIEW, 5 incomplete).
    - ``decisions``: one per rule, in the policy's order; ``metrics``: one per criterion,
      in declared order, each with its exact interval.
    - :meth:`cases` reads the cases from the store, lazily.
    """

    run_id: str
    status: RunStatus
    completeness: Completeness
    gate: GateAction
    exit_code: int
    decisions: list[Decision]
    metrics: dict[str, MetricSummary]
    project_dir: str
    cache: dict[str, int] | None = None
    stop_reason: str | None = None
    notice: str | None = None
    policy_path: str | None = None
    subset: Subset | None = None
    #: The project's name and the ids of the policy's rules (what CI reports list).
    project: str = ""
    rule_ids: list[str] = field(default_factory=list)
    #: Each judge against the human labels (``policy.judges.JudgeReport``), if any.
    judges: list[Any] = field(default_factory=list)
    #: Per judge panel: ``(cases its judges disagreed on, cases judged)``.
    panels: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Calls of the system per case, and the cases whose trials disagree (on each BINARY
    #: criterion; empty with one trial). docs/repeated-trials.md.
    trials: int = 1
    flaky: list[FlakyCase] = field(default_factory=list)
    #: Lines to show with the gate: rules whose evidence is incomplete (more missing than
    #: ``max_missing``); and what the policy declares about the gate (``FAIL does not
    #: block, by declaration``), or None.
    gate_notes: list[str] = field(default_factory=list)
    declaration: str | None = None
    #: A sequential run (docs/sequential-decisions.md): its seed, margin and size, how many
    #: cases of its order the decision read, how many were stored; None for any other run.
    sequential: dict[str, Any] | None = None
    #: That reading in one sentence (the reports' note).
    sequential_note: str | None = None
    #: False when the store's file was removed or replaced during the run: what the run
    #: wrote went with it (``stop_reason`` says so), and no later run finds it.
    kept: bool = True
    #: The configuration file the run was made with (its ``store:`` says where the run
    #: is); None: the project directory's oloproof.yaml.
    config_path: str | None = None

    @property
    def allowed(self) -> bool:
        """Whether nothing blocks the release (exit code 0; WARN still allows)."""
        return self.exit_code == ExitCode.OK

    def cases(self) -> Iterator[CaseResult]:
        """The run's cases in suite order, read from the store (read-only) when iterated."""
        from oloproof.store.db import open_store_readonly
        from oloproof.store.location import locate
        from oloproof.store.reader import load_cases, load_trial_cases

        config = self.config_path or os.path.join(self.project_dir, "oloproof.yaml")
        conn = open_store_readonly(locate(config))
        try:
            rows = load_cases(conn, self.run_id)
            trials = load_trial_cases(conn, self.run_id) if self.trials > 1 else {}
        finally:
            conn.close()
        for row in rows:
            yield CaseResult.from_row(row, trials.get(row.case_id))

    def to_trial_records(self) -> list[dict[str, Any]]:
        """One plain dict per case and trial (:meth:`CaseResult.trial_records`)."""
        return [r for case in self.cases() for r in case.trial_records()]

    def to_records(self) -> list[dict[str, Any]]:
        """One plain dict per case (:meth:`CaseResult.record`), without pandas."""
        return [case.record() for case in self.cases()]

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame``, one row per case (:meth:`to_records`).

        pandas is an optional extra: ``pip install 'oloproof[pandas]'``."""
        try:
            import pandas as pd  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            raise ImportError(
                "RunResult.to_pandas() needs pandas, an optional extra:"
                " pip install 'oloproof[pandas]' (or use RunResult.to_records())"
            ) from None
        return pd.DataFrame(self.to_records())

    def to_dict(self) -> dict[str, Any]:
        """The result as plain JSON-ready data (what ``oloproof gate --json`` prints, plus
        the stop reason and the subset)."""
        return {
            "run_id": self.run_id, "status": str(self.status),
            "completeness": str(self.completeness), "gate": str(self.gate),
            "exit_code": self.exit_code,
            "decisions": [d.to_json() for d in self.decisions],
            "metrics": [m.to_json() for m in self.metrics.values()],
            "cache": self.cache, "stop_reason": self.stop_reason, "notice": self.notice,
            "gate_notes": list(self.gate_notes), "declaration": self.declaration,
            "subset": self.subset.to_json() if self.subset else None,
            "judges": [r.to_json() for r in self.judges],
            "panels": panels_json(self.panels),
            **({"trials": self.trials, "flaky": [f.to_json() for f in self.flaky]}
               if self.trials > 1 else {}),
            **({"sequential": dict(self.sequential)} if self.sequential is not None else {}),
        }

    def summary(self) -> str:
        """A few plain lines: the run, the gate, and each decision."""
        lines = [
            (f"Run {self.run_id} [{self.status}/{self.completeness}]: gate {self.gate}"
            f" (exit {self.exit_code})")
        ]
        if self.subset is not None:
            lines.append(f"  subset: {self.subset.describe()}")
        if self.sequential_note:
            lines.append(f"  {self.sequential_note}")
        if self.stop_reason:
            lines.append(f"  stopped: {self.stop_reason}")
        lines.extend(f"  {note}" for note in self.gate_notes)
        if self.declaration:
            lines.append(f"  {self.declaration}")
        for d in self.decisions:
            lines.append(f"  {d.rule} ({d.metric}): {d.state} [{d.action}]: {d.detail}")
        return "\n".join(lines)

    def assert_allowed(self) -> RunResult:
        """Raise :class:`GateNotAllowed` (an ``AssertionError``) unless nothing blocks the
        release; return the result otherwise, so calls chain."""
        __tracebackhide__ = True  # pytest shows the caller's line, not this one
        if not self.allowed:
            raise GateNotAllowed(self.summary())
        return self


@dataclass(frozen=True)
class ComparisonResult:
    """A comparison made and stored (``cmp_`` id): paired metrics, decisions, gate.

    ``document`` is what ``oloproof compare --json`` prints and the store keeps."""

    comparison_id: str
    candidate_run: str
    baseline_run: str
    gate: GateAction
    exit_code: int
    decisions: list[Decision]
    metrics: dict[str, PairedMetric]
    warnings: list[str]
    document: dict[str, Any]

    @property
    def allowed(self) -> bool:
        return self.exit_code == ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return dict(self.document)
