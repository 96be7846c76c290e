"""What an HTML report or the viewer shows of a stored run or comparison, as plain data.

:func:`run_document` and :func:`comparison_report_document` read the store through the
same functions ``inspect`` and ``compare`` use and return JSON-able dictionaries; the
templates in :mod:`oloproof.render.html` draw them. Nothing here writes HTML or escapes
text: what a user or a model supplied is returned as stored, and the templates escape it.

Each case carries one **outcome** over all its criteria, the word the case table filters on:

* ``missing``: the execution failed, or some criterion is missing for it;
* ``failed``: nothing is missing and some criterion was observed failing (BINARY);
* ``passed``: everything observed passed (or was scored, for MEAN), nothing missing;
* ``excluded``: every criterion was excluded.

**Cost.** A run may hold tens of thousands of cases. Sorting them by outcome reads only
each case's status and each judgment's verdict (no input, output or reason); the full
rows (inputs, outputs, reasons, trials) are read by key for the cases a page shows: a
page of the viewer's case table (:class:`CasePage`), the cases a report file carries (at
most ``limit``, the failing ones first), or one case (:func:`case_page_document`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oloproof._json import compact_json
from oloproof._records import dataclass, field
from oloproof.analysis.compare import shared_metrics
from oloproof.analysis.stored import (
    StoredEvidenceError,
    decide_stored,
    sequential_report,
    stored_gate_notes,
    stored_labels,
    stored_policy,
)
from oloproof.analysis.trials import flaky_cases
from oloproof.enums import CaseStatus, Completeness, MetricKind
from oloproof.errors import OloproofError
from oloproof.evidence import Outcome, classify_outcome
from oloproof.policy.compare import pair_runs
from oloproof.policy.decide import (
    Decision,
    gate,
    gate_declaration,
    patched_notes,
)
from oloproof.policy.format import estimate_text, interval_text, level_text
from oloproof.store.comparisons import get_comparison
from oloproof.store.reader import (
    CaseRow,
    JudgmentRow,
    RunRecord,
    get_run,
    load_cases,
    load_trial_cases,
)
from oloproof.textsafe import TextHead, first_line, json_safe

if TYPE_CHECKING:
    from oloproof.store.dbapi import Connection

__all__ = [
    "OUTCOMES",
    "CasePage",
    "RunSummary",
    "case_document",
    "case_page_document",
    "comparison_report_document",
    "criterion_outcome",
    "run_document",
    "stored_gate",
    "summarize_run",
]

#: The outcomes a case table filters on (``scored``: a MEAN criterion's observed score).
OUTCOMES = ("passed", "failed", "missing", "excluded", "scored")

#: A short output in a case table's row: at most this many characters of its JSON.
SHORT_OUTPUT = 80
#: A reason in a case table's row, before it is expanded.
SHORT_REASON = 140
#: What an expanded row shows of the output (the case's page shows all of it).
LONG_OUTPUT = 2000
#: Flaky cases listed on a run's page (``oloproof inspect RUN --flaky`` lists them all).
FLAKY_SHOWN = 200


@dataclass(frozen=True)
class CasePage:
    """One page of a run's case table, as the viewer serves it: the cases whose outcome
    (over every criterion, or on ``criterion``) is ``outcome`` and whose text holds
    ``query`` (without regard to case), ``size`` at a time, page ``page`` (from 1)."""

    page: int = 1
    size: int = 100
    criterion: str | None = None
    outcome: str | None = None
    query: str = ""


def _state(kind: str, case_status: str, j: tuple[str, bool | None, float | None] | None) -> str:
    """``passed``, ``failed``, ``scored``, ``missing`` or ``excluded``, from a case's status
    and its judgment ``(status, passed, score)`` on one criterion (None: no judgment)."""
    if case_status != CaseStatus.OK or j is None:
        return "missing"
    sort = classify_outcome(kind, j[0], j[1], j[2])
    if sort is Outcome.MISSING:
        return "missing"
    if sort is Outcome.EXCLUDED:
        return "excluded"
    if kind == MetricKind.BINARY:
        return "passed" if j[1] else "failed"
    return "scored"


def criterion_outcome(kind: str, case: CaseRow, criterion: str) -> str:
    """``passed``, ``failed``, ``scored``, ``missing`` or ``excluded`` for one case and criterion."""
    j = case.judgments.get(criterion)
    return _state(kind, case.status, None if j is None else (j.status, j.passed, j.score))


def _case_outcome(per_criterion: dict[str, str], case_status: str) -> str:
    if not per_criterion:
        return "missing" if case_status != CaseStatus.OK else "passed"
    return _outcome_of(tuple(per_criterion.values()))


def _outcome_of(states: tuple[str, ...]) -> str:
    """A case's outcome from its states on its criteria (at least one)."""
    if "missing" in states:
        return "missing"
    if "failed" in states:
        return "failed"
    if all(s == "excluded" for s in states):
        return "excluded"
    return "passed"


def _trial_outcome(kind: str, j: JudgmentRow) -> str:
    """One trial's judgment as the case table words it: passed, failed, missing, excluded,
    or its score."""
    sorted_as = classify_outcome(kind, j.status, j.passed, j.score)
    if sorted_as is Outcome.OBSERVED:
        if kind == MetricKind.MEAN:
            return f"{j.score:g}"
        return "passed" if j.passed else "failed"
    return "excluded" if sorted_as is Outcome.EXCLUDED else "missing"


def _clip(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1].rstrip() + "…"




def _strip(text: str) -> str:
    """``text.strip()``; the start of a text too long to read whole stays one, and keeps
    its length (:class:`TextHead`)."""
    if isinstance(text, TextHead):
        return TextHead(text.strip(), text.chars, json=text.json)
    return text.strip()


def _why(case: CaseRow, per: dict[str, str]) -> list[dict[str, str]]:
    """Why a case did not pass: its execution error, then each failing or missing
    criterion with its judge's or evaluator's reason (empty for a case that passed)."""
    out = []
    if case.status != CaseStatus.OK:
        out.append({"criterion": "execution", "outcome": "missing",
                    "reason": _strip(case.error or case.status)})
        return out
    for name, state in per.items():
        if state not in ("failed", "missing"):
            continue
        j = case.judgments.get(name)
        reason = (j.reason if j is not None else None) or (
            "no judgment stored" if j is None else f"judgment {j.status}")
        out.append({"criterion": name, "outcome": state, "reason": _strip(reason)})
    return out


def case_document(case: CaseRow, kinds: dict[str, str]) -> dict[str, Any]:
    """One case: what went in and came out, every judgment, its outcome per criterion, and
    what its row in a case table shows (a short output, why it did not pass)."""
    per = {c: criterion_outcome(k, case, c) for c, k in kinds.items()}
    why = _why(case, per)
    if case.status != CaseStatus.OK:
        output_text = first_line(case.error) or str(case.status)
    elif isinstance(case.output, TextHead):
        output_text = str(case.output)  # already compact JSON, read no further
    else:
        output_text = compact_json(json_safe(case.output))
    first = why[0] if why else None
    return {
        "id": case.case_id,
        "index": case.idx,
        "status": case.status,
        "outcome": _case_outcome(per, case.status),
        "criteria": per,
        "input": case.input,
        "expected": case.expected,
        "metadata": case.metadata,
        "output": case.output,
        "error": case.error,
        "attempts": case.attempts,
        "latency_ms": case.latency_ms,
        "usage": case.usage,
        "from_cache": case.from_cache,
        "output_short": _clip(output_text, SHORT_OUTPUT),
        "output_long": _clip(output_text, LONG_OUTPUT),
        "why": why,
        "why_short": _clip(f"{first['criterion']}: {first_line(first['reason'])}", SHORT_REASON)
        if first else "",
        "judgments": [
            {
                "criterion": j.criterion, "status": j.status, "passed": j.passed,
                "score": j.score, "reason": j.reason, "from_cache": j.from_cache,
                "attempts": j.attempts, "latency_ms": j.latency_ms, "usage": j.usage,
                "outcome": per.get(j.criterion, "missing"),
            }
            for j in case.judgments.values()
        ],
    }


def _run_header(run: RunRecord, stored: int, errored: int) -> dict[str, Any]:
    policy = run.policy or {}
    return {
        "id": run.id,
        "project": run.project,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "status": run.status,
        "completeness": run.completeness,
        "state": run.state,
        "gate": run.gate,
        "exit_code": run.exit_code,
        "suite_digest": run.suite_digest,
        "dataset": run.dataset,
        "cases_total": run.cases_total,
        "cases_stored": stored,
        "cases_errored": errored,
        "system": run.system,
        "system_identity": run.system_identity,
        "cache": run.cache,
        "stop_reason": run.stop_reason,
        "policy_path": run.policy_path,
        "confidence_level": policy.get("confidence_level"),
        "trials": run.trials,
        "running": run.status == "RUNNING",
        "subset": run.subset,
    }


@dataclass
class _Index:
    """Every stored case of a run in suite order, sorted by outcome: no input, output or
    reason is read to make it."""

    ids: list[str]
    outcomes: list[str]
    #: Per criterion, each case's state on it (``passed``, ``failed``, ``missing``…).
    columns: dict[str, list[str]]
    errored: int


# What `_state` reads of a judgment, packed by SQL into one small integer (NULL: no
# judgment): 1 status OK, 2 status EXCLUDED (any other status reads as ERROR:
# classify_outcome treats every status but those two alike), 4 a verdict is stored, 8 it
# is a pass, 16 a score is stored. CASE and +, which SQLite and PostgreSQL both speak.
_JUDGMENT_CODE = (
    "CASE WHEN j{n}.criterion IS NULL THEN NULL ELSE"
    " (CASE WHEN j{n}.status = 'OK' THEN 1 WHEN j{n}.status = 'EXCLUDED' THEN 2 ELSE 0 END)"
    " + (CASE WHEN j{n}.passed IS NULL THEN 0 WHEN j{n}.passed <> 0 THEN 12 ELSE 4 END)"
    " + (CASE WHEN j{n}.score IS NULL THEN 0 ELSE 16 END) END"
)
# Criteria joined in one query (SQLite joins at most 64 tables).
_JOINS_PER_QUERY = 30


def _unpack(code: int | None) -> tuple[str, bool | None, float | None] | None:
    """A judgment as `_state` reads it, from its :data:`_JUDGMENT_CODE`."""
    if code is None:
        return None
    status = "OK" if code & 1 else "EXCLUDED" if code & 2 else "ERROR"
    passed = bool(code & 8) if code & 4 else None
    return status, passed, 0.0 if code & 16 else None


def _index(conn: Connection, run_id: str, kinds: dict[str, str]) -> _Index:
    """Every case's outcome, in one pass over the run's cases (each judgment found by key
    and packed by SQL into a small integer, so no text but the case id reaches Python)."""
    names = list(kinds)
    groups = [names[i:i + _JOINS_PER_QUERY] for i in range(0, len(names), _JOINS_PER_QUERY)]
    ids: list[str] = []
    ok: list[bool] = []
    codes: list[list[int | None]] = [[] for _ in names]
    for g, group in enumerate(groups or [[]]):
        joins = "".join(
            f" LEFT JOIN run_judgments j{n} ON j{n}.run_id = c.run_id"
            f" AND j{n}.case_id = c.case_id AND j{n}.criterion = ?"
            for n in range(len(group))
        )
        picked = "".join(", " + _JUDGMENT_CODE.format(n=n) for n in range(len(group)))
        rows = conn.execute(
            f"SELECT c.case_id, CASE WHEN c.status = 'OK' THEN 1 ELSE 0 END{picked}"
            f" FROM run_cases c{joins}"
            " WHERE c.run_id = ? ORDER BY c.idx",
            (*group, run_id),
        ).fetchall()
        if g == 0:
            ids = [r[0] for r in rows]
            ok = [bool(r[1]) for r in rows]
        elif len(rows) != len(ids):  # a case written between two queries of a live run
            raise StoredEvidenceError(f"run {run_id}: its cases changed while being read")
        offset = g * _JOINS_PER_QUERY
        for n in range(len(group)):
            codes[offset + n] = [r[2 + n] for r in rows]
    memo: dict[tuple[str, bool, int | None], str] = {}

    def state(kind: str, case_ok: bool, code: int | None) -> str:
        key = (kind, case_ok, code)
        found = memo.get(key)
        if found is None:
            found = memo[key] = _state(
                kind, CaseStatus.OK if case_ok else CaseStatus.ERROR, _unpack(code))
        return found

    columns = {
        name: [state(kinds[name], good, code) for good, code in zip(ok, codes[n], strict=True)]
        for n, name in enumerate(names)
    }
    outcomes = (
        [_outcome_of(states) for states in zip(*columns.values(), strict=True)] if columns
        else ["passed" if good else "missing" for good in ok]
    )
    return _Index(ids, outcomes, columns, ok.count(False))


def _matching(conn: Connection, run_id: str, query: str) -> set[str]:
    """The case ids whose id, input, expected value, output, error or reasons hold
    ``query``, without regard to case (the stored JSON text is searched as it is)."""
    needle = query.casefold()
    found: set[str] = set()
    for case_id, *texts in conn.execute(
        "SELECT case_id, input_json, expected_json, output_json, error FROM run_cases"
        " WHERE run_id = ?", (run_id,),
    ):
        if needle in " ".join([case_id, *(t or "" for t in texts)]).casefold():
            found.add(case_id)
    for case_id, reason in conn.execute(
        "SELECT case_id, reason FROM run_judgments WHERE run_id = ? AND reason IS NOT NULL",
        (run_id,),
    ):
        if needle in reason.casefold():
            found.add(case_id)
    return found


def _select_page(
    conn: Connection, run_id: str, index: _Index, page: CasePage
) -> tuple[list[str], dict[str, Any]]:
    """The case ids of one page of the table, and how the page sits among the others."""
    hits = set(_matching(conn, run_id, page.query)) if page.query else None
    states = index.columns.get(page.criterion or "", index.outcomes)
    chosen = [
        case_id
        for case_id, state in zip(index.ids, states, strict=True)
        if (page.outcome is None or state == page.outcome) and (hits is None or case_id in hits)
    ]
    size = max(1, page.size)
    pages = max(1, -(-len(chosen) // size))
    number = min(max(1, page.page), pages)
    start = (number - 1) * size
    return chosen[start:start + size], {
        "page": number, "pages": pages, "size": size, "matching": len(chosen),
        "first": start + 1 if chosen else 0, "last": min(start + size, len(chosen)),
        "criterion": page.criterion, "outcome": page.outcome, "query": page.query,
        "filtered": page.outcome is not None or bool(page.query),
    }


def _select_capped(index: _Index, limit: int) -> tuple[list[str], dict[str, Any] | None]:
    """At most ``limit`` case ids for a report file: every failed and missing case first
    (in suite order), then the others in suite order; and what was left out."""
    if len(index.ids) <= limit:
        return list(index.ids), None
    failing = [i for i, o in enumerate(index.outcomes) if o in ("failed", "missing")]
    keep = set(failing[:limit])
    for i, o in enumerate(index.outcomes):
        if len(keep) >= limit:
            break
        if o not in ("failed", "missing"):
            keep.add(i)
    left: dict[str, int] = {}
    for i, o in enumerate(index.outcomes):
        if i not in keep:
            left[o] = left.get(o, 0) + 1
    chosen = [index.ids[i] for i in sorted(keep)]
    return chosen, {
        "limit": limit, "shown": len(chosen), "total": len(index.ids),
        "left_out": sum(left.values()), "by_outcome": left,
        "failing_shown": min(len(failing), limit), "failing": len(failing),
    }


@dataclass
class RunSummary:
    """What a run's page shows above its cases, and every case's outcome: the part of a
    run document that reads the whole run. Once a run has finished it never changes, so
    the viewer keeps it (:attr:`finished` says whether it may)."""

    run: RunRecord
    kinds: dict[str, str]
    index: _Index
    metrics: list[dict[str, Any]]
    decisions: list[dict[str, Any]]
    level: float
    flaky: list[Any]
    #: A sequential run: what its decision read (analysis/sequential.py
    #: ``SequentialReading.report``); None for any other run.
    sequential: dict[str, Any] | None = None
    #: The policy it is decided under, and its decisions as ``gate`` makes them now.
    policy: Any = None
    decided: list[Decision] = field(default_factory=list)
    #: The project's directory, where the run's policy file is looked for first.
    root: str | None = None
    #: The human labels stored with the run (its judges are measured against them).
    labels: Any = None
    #: The project's oloproof.yaml, whose ``dataset:`` is the project's suite now.
    config: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the run has recorded its end (its rows will not change any more)."""
        return self.run.finished_at is not None and self.run.status != "RUNNING"

    def same_run(self, other: RunRecord) -> bool:
        return (self.run.id, self.run.status, self.run.finished_at) == (
            other.id, other.status, other.finished_at)


def summarize_run(
    conn: Connection, ref: str, root: str | None = None, config: str | None = None
) -> RunSummary:
    """The run ``ref`` names, decided from its store as ``gate`` decides it, with every
    case's outcome. ``root``: the project, whose kept form of the run's policy spares
    validating it again (as ``gate`` does); ``config``: its oloproof.yaml (the suite it
    names now is compared with the run's, as ``gate`` does)."""
    run = get_run(conn, ref)
    kinds = {m["criterion"]: m["kind"] for m in run.metrics}
    index = _index(conn, run.id, kinds)
    policy = stored_policy(run, root)
    labels = stored_labels(conn, run)
    decided, summaries = decide_stored(conn, run.id, policy, labels)
    metrics = []
    for s in summaries.values():
        m = s.to_json()
        m["estimate_text"] = estimate_text(s.estimate, s.kind)
        m["interval_text"] = interval_text(s.lower, s.upper, s.kind)
        if m["interval_text"] and s.kind == MetricKind.MEAN and s.guarantee == "approximate":
            m["interval_text"] += " approximate (t)"
        m["cases_text"] = s.cases_text()
        metrics.append(m)
    # The decisions ``gate`` makes of it now (those the run recorded, unless a later
    # version corrected them); none for a run still going or stopped part way.
    if run.status == "RUNNING" or run.completeness == Completeness.PARTIAL:
        decided = []
    decisions = [d.to_json() for d in decided]
    sequential = sequential_report(conn, run, policy)
    for d in decisions:
        d["metric_kind"] = kinds.get(d.get("metric", ""), MetricKind.BINARY)
        if sequential is not None:
            d["method"] = sequential["methods"].get(d.get("rule", ""))
    flaky = flaky_cases(conn, run) if run.trials > 1 else []
    return RunSummary(run, kinds, index, metrics, decisions,
                      float(policy.confidence_level), flaky, sequential, policy, decided,
                      root, labels, config)


def stored_gate(conn: Connection, run: RunRecord, root: str | None = None) -> tuple[str, int]:
    """The gate and exit code ``oloproof gate RUN`` exits on for ``run`` (decided again from
    its stored evidence, under its stored policy), without the rest of a page: what the
    viewer's index shows of each finished run. A run still going: what its row holds.

    Evidence or a policy that cannot be read is what ``gate`` makes of it: BLOCK, with the
    error's exit code (5 for a damaged store)."""
    if run.status == "RUNNING" or run.gate is None:
        return str(run.gate or ""), int(run.exit_code or 0)
    if run.completeness == Completeness.PARTIAL:
        label, code = gate([], incomplete=True)
        return str(label), int(code)
    try:
        decided, _ = decide_stored(conn, run, stored_policy(run, root))
    except OloproofError as exc:
        return "BLOCK", int(exc.exit_code)
    whole = run.completeness in (Completeness.COMPLETE, Completeness.SEQUENTIAL)
    patched = bool(patched_notes(run.system.get("patched")))  # a test's fake ran
    label, code = gate(decided, incomplete=not whole or patched)
    return str(label), int(code)


def _gate_document(summary: RunSummary) -> dict[str, Any]:
    """The gate a page shows: the one ``oloproof gate RUN`` exits on (the run decided again
    from its stored evidence, under its stored policy), with the lines the terminal prints
    beside it (incomplete evidence, a policy file changed since, FAIL declared not to
    block), and what the run itself recorded when that differs (a run stored by an earlier
    version, whose decision a later one corrected). None for a run still going."""
    run = summary.run
    if run.status == "RUNNING" or run.gate is None:
        return {"gate": run.gate, "exit_code": run.exit_code, "notes": [],
                "declaration": None, "recorded": None}
    decisions = summary.decided
    whole = run.completeness in (Completeness.COMPLETE, Completeness.SEQUENTIAL)
    patched = patched_notes(run.system.get("patched"))  # a test's fake ran: never allows
    label, code = gate(decisions, incomplete=not whole or bool(patched))
    recorded = None
    if (str(label), int(code)) != (str(run.gate), run.exit_code):
        recorded = {"gate": run.gate, "exit_code": run.exit_code}
    return {
        "gate": str(label), "exit_code": int(code),
        "notes": stored_gate_notes(run, summary.policy, summary.labels, decisions,
                                   summary.root, summary.config),
        "declaration": gate_declaration(summary.policy) if decisions else None,
        "recorded": recorded,
    }


def run_document(
    conn: Connection, ref: str, *, page: CasePage | None = None,
    limit: int | None = None, summary: RunSummary | None = None, root: str | None = None,
    head: int | None = None, config: str | None = None,
) -> dict[str, Any]:
    """A stored run: header, gate, decisions, metrics, and its cases (in suite order).

    The cases are every stored case; or with ``page``, one page of the viewer's table
    (``doc["paging"]`` says which); or with ``limit``, at most that many for a report file,
    the failed and missing ones first (``doc["capped"]`` says what was left out, None when
    nothing was). The outcome counts are always over every stored case. ``summary``: the
    run's :func:`summarize_run`, when the caller kept it. ``head``: read at most that many
    characters of each value (``load_cases``), for a page that writes only their start.

    The metrics are summarised at the level of the policy the run was decided under; the
    decisions and the gate are those ``oloproof gate RUN`` makes of its stored evidence
    (``doc["gate"]``: with the notes the terminal prints beside it, and what the run
    recorded when that differs). A run still going has no decisions yet, and its metrics
    are over the cases stored so far.
    """
    if summary is None:
        summary = summarize_run(conn, ref, root, config)
    run, kinds, index = summary.run, summary.kinds, summary.index
    paging: dict[str, Any] | None = None
    capped: dict[str, Any] | None = None
    if page is not None:
        shown, paging = _select_page(conn, run.id, index, page)
    elif limit is not None:
        shown, capped = _select_capped(index, max(0, limit))
    else:
        shown = index.ids
    cases = load_cases(conn, run.id, head=head) if shown is index.ids else load_cases(
        conn, run.id, case_ids=shown, head=head)
    case_docs = [case_document(c, kinds) for c in cases]
    if run.trials > 1:
        # Trials 1 .. k - 1 of each case, shown on its page after trial 0.
        others = load_trial_cases(
            conn, run.id, case_ids=None if shown is index.ids else shown)
        for doc in case_docs:
            doc["trials"] = [_trial_document(t, kinds) for t in others.get(doc["id"], [])]

    if summary.sequential is not None and summary.sequential["beyond"]:
        # The cases that finished after a sequential decision: stored, never read by it.
        order = (run.sequential or {}).get("order") or []
        read = set(order[:summary.sequential["read"]])
        for doc in case_docs:
            doc["not_read"] = doc["id"] not in read
    counts = {k: 0 for k in ("passed", "failed", "missing", "excluded")}
    for outcome in index.outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    shown_index = {c["id"]: c["index"] for c in case_docs}
    flaky = [
        {**f.to_json(), "trials_text": f.trials_text, "index": shown_index.get(f.case_id)}
        for f in summary.flaky[:FLAKY_SHOWN]
    ]
    return {
        "kind": "run",
        "flaky": flaky,
        "flaky_cases": len({f.case_id for f in summary.flaky}),
        "flaky_rows": len(summary.flaky),
        "run": _run_header(run, len(index.ids), index.errored),
        "gate": _gate_document(summary),
        "level_text": level_text(summary.level),
        "decisions": summary.decisions,
        "sequential": summary.sequential,
        "metrics": summary.metrics,
        "criteria": list(kinds),
        "criterion_kinds": kinds,
        "cases": case_docs,
        "outcome_counts": counts,
        "paging": paging,
        "capped": capped,
    }


def _trial_document(t: Any, kinds: dict[str, str]) -> dict[str, Any]:
    return {
        "trial": t.trial, "status": t.status, "output": t.output, "error": t.error,
        "latency_ms": t.latency_ms, "from_cache": t.from_cache,
        "criteria": {
            name: _trial_outcome(kinds.get(name, MetricKind.BINARY), j)
            for name, j in t.judgments.items()
        },
    }


def case_page_document(conn: Connection, ref: str, case_id: str) -> dict[str, Any] | None:
    """One case of a stored run, for its own page: the run's header and the case, read by
    key (a bounded number of queries, whatever the size of the run). None: no such case."""
    run = get_run(conn, ref)
    found = load_cases(conn, run.id, case_id)
    if not found:
        return None
    kinds = {m["criterion"]: m["kind"] for m in run.metrics}
    case = case_document(found[0], kinds)
    if run.trials > 1:
        others = load_trial_cases(conn, run.id, case_id)
        case["trials"] = [_trial_document(t, kinds) for t in others.get(case_id, [])]
    return {
        "kind": "case",
        "run": {"id": run.id, "project": run.project, "state": run.state,
                "status": run.status, "gate": run.gate},
        "criteria": list(kinds),
        "case": case,
    }


def _discordant(
    cmp_doc: dict[str, Any], conn: Connection, limit: int | None
) -> list[dict[str, Any]]:
    """Per paired metric, the cases whose outcome differs between the two runs (at most
    ``limit`` of them, and how many there are).

    BINARY: the cases only the candidate passed and those only the baseline passed (the
    discordant pairs the interval is built on). MEAN: every pair whose scores differ,
    largest difference first. The runs are paired as ``compare`` pairs them (the shared
    case ids in the candidate's order, trial 0 of each case); each case's outcome is read
    the light way (:func:`_index`), and the outputs and reasons of the cases shown only,
    by key.
    """
    candidate = get_run(conn, cmp_doc["candidate"]["run_id"])
    baseline = get_run(conn, cmp_doc["baseline"]["run_id"])
    metrics, _ = shared_metrics(candidate, baseline)
    cand, base = _index(conn, candidate.id, metrics), _index(conn, baseline.id, metrics)
    shared = pair_runs(cand.ids, base.ids).shared
    at_c = {cid: i for i, cid in enumerate(cand.ids)}
    at_b = {cid: i for i, cid in enumerate(base.ids)}
    picked: list[tuple[str, str, list[dict[str, Any]], int]] = []
    for name, kind in metrics.items():
        c_states, b_states = cand.columns[name], base.columns[name]
        rows: list[dict[str, Any]] = []
        if kind == MetricKind.BINARY:
            for cid in shared:
                co, bo = c_states[at_c[cid]], b_states[at_b[cid]]
                if {co, bo} == {"passed", "failed"}:
                    rows.append({
                        "id": cid, "candidate": co, "baseline": bo,
                        "direction": "candidate_only" if co == "passed" else "baseline_only",
                    })
        else:
            c_scores = _scores(conn, candidate.id, name)
            b_scores = _scores(conn, baseline.id, name)
            for cid in shared:
                if c_states[at_c[cid]] != "scored" or b_states[at_b[cid]] != "scored":
                    continue
                cs, bs = c_scores.get(cid), b_scores.get(cid)
                if cs is not None and bs is not None and cs != bs:
                    rows.append({
                        "id": cid, "candidate": f"{cs:g}", "baseline": f"{bs:g}",
                        "difference": cs - bs,
                        "direction": "candidate_only" if cs > bs else "baseline_only",
                    })
            rows.sort(key=lambda r: -abs(r["difference"]))
        total = len(rows)
        if limit is not None:
            rows = rows[: max(0, limit)]
        picked.append((name, kind, rows, total))
    wanted = list(dict.fromkeys(r["id"] for _, _, rows, _ in picked for r in rows))
    c_rows = {c.case_id: c for c in load_cases(conn, candidate.id, case_ids=wanted)}
    b_rows = {c.case_id: c for c in load_cases(conn, baseline.id, case_ids=wanted)}
    out = []
    for name, kind, rows, total in picked:
        for r in rows:
            c, b = c_rows[r["id"]], b_rows[r["id"]]
            r.update({
                "candidate_output": c.output, "baseline_output": b.output,
                "candidate_reason": c.judgments[name].reason,
                "baseline_reason": b.judgments[name].reason,
            })
        out.append({"metric": name, "kind": kind, "cases": rows, "total": total})
    return out


def _scores(conn: Connection, run_id: str, criterion: str) -> dict[str, float | None]:
    return {
        case_id: score
        for case_id, score in conn.execute(
            "SELECT case_id, score FROM run_judgments WHERE run_id = ? AND criterion = ?",
            (run_id, criterion),
        )
    }


def comparison_report_document(
    conn: Connection, ref: str, *, limit: int | None = None
) -> dict[str, Any]:
    """A stored comparison as ``compare --json`` printed it, with its discordant cases (at
    most ``limit`` per metric; ``total`` says how many there are)."""
    record = get_comparison(conn, ref)
    doc = dict(record.document)
    level = float(doc["confidence_level"])
    for m in doc["metrics"]:
        for d in doc["decisions"]:
            if d.get("metric") == m["metric"]:
                d["metric_kind"] = m["kind"]
    return {
        "kind": "comparison",
        "comparison": doc,
        "level_text": level_text(level),
        "discordant": _discordant(doc, conn, limit),
        "limit": limit,
    }
