"""Reading stored runs: the one path by which run, gate, inspect, compare and plan see evidence.

Everything here only reads (a connection from ``store.db.open_store_readonly``
is enough). What it guarantees:

* a row that cannot be understood (a damaged JSON column, an unknown status)
  raises :class:`~oloproof.store.db.StoreUnreadable` naming the run and the
  column, never a bare ``ValueError`` (the CLI turns it into exit 5);
* text is returned as stored (invalid UTF-8 decoded with U+FFFD); making it
  printable or JSON-safe is the caller's job, through ``oloproof.textsafe``;
* a ``RUNNING`` row whose process is gone reads back as ``RUN_ERROR/PARTIAL``
  with exit code 5 (``store.liveness``): what it stored is all there is.
"""

from __future__ import annotations

from oloproof._json import loads_bounded
from oloproof._records import dataclass, field
from oloproof.enums import (
    JUDGMENT_MISSING,
    Completeness,
    ExitCode,
    GateAction,
    MetricKind,
    RunStatus,
)
from oloproof.errors import UsageError
from oloproof.evidence import (
    PANEL_AGREED,
    PANEL_SPLIT,
    CriterionEvidence,
    Outcome,
    TrialOutcome,
    classify_outcome,
)
from oloproof.store.db import StoreUnreadable, has_table, run_alive
from oloproof.store.dbapi import DATABASE_ERRORS
from oloproof.textsafe import TextHead

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from oloproof.store.dbapi import Connection

__all__ = [
    "CaseRow",
    "ConcurrencyChange",
    "CriterionEvidence",
    "JudgmentRow",
    "RunRecord",
    "TrialRow",
    "get_run",
    "list_runs",
    "load_case_metadata",
    "load_cases",
    "load_concurrency",
    "load_decisions",
    "load_evidence",
    "load_run_labels",
    "load_scores",
    "load_trial_cases",
    "load_trial_outcomes",
    "load_verdicts",
    "resolve_run_id",
    "run_sources",
]

ENDED_WITHOUT_FINISHING = "the process running it ended without finishing"


@dataclass
class RunRecord:
    """One stored run as the ``runs`` table holds it, read back.

    ``status``/``completeness`` are what the run recorded, except that a
    ``RUNNING`` run whose process is gone is reported as ``RUN_ERROR``/``PARTIAL``
    (exit code 5, a stop reason saying so). ``policy`` is the release policy the
    run was decided under, as stored (``None``: the default policy).
    """

    id: str
    project: str
    created_at: str
    finished_at: str | None
    status: RunStatus
    completeness: Completeness
    exit_code: int | None
    gate: GateAction | None
    suite_digest: str
    dataset: str
    cases_total: int
    system_identity: str
    system: dict[str, Any]
    metrics: list[dict[str, Any]]
    policy: dict[str, Any] | None
    policy_path: str | None
    stop_reason: str | None
    pid: int | None
    cache: dict[str, int] | None
    owner: str | None = None
    #: How the run chose part of its suite (completeness SUBSET); ``None``: all of it.
    subset: dict[str, Any] | None = None
    #: Calls of the system per case (``trials:``); 1 for every run of an older store.
    trials: int = 1
    #: How a sequential run ordered and tested its cases (policy/sequential.py
    #: ``SequentialSpec`` plus ``order``, its case ids in order); ``None``: not sequential.
    sequential: dict[str, Any] | None = None
    #: The cases it stored (a sequential run stops before the suite's end, a stopped or
    #: running one is part way), read by :func:`list_runs` only; ``None`` where not read.
    cases_stored: int | None = None
    #: Where its policy and code came from, as stored (JSON, read by :func:`run_sources`),
    #: read by :func:`get_run` only; ``None`` where not read or not stored.
    sources_json: str | None = None

    @property
    def state(self) -> str:
        """``STATUS/COMPLETENESS``, as ``runs`` shows it (``DECIDED/COMPLETE``)."""
        return f"{self.status}/{self.completeness}"


_RUN_COLUMNS = (
    "id, project, created_at, finished_at, status, completeness, exit_code, gate,"
    " suite_digest, dataset, cases_total, system_identity, system_json, metrics_json,"
    " policy_json, policy_path, stop_reason, pid, cache_json"
)


def project_scope(conn: Connection, column: str = "project") -> tuple[str, tuple[str, ...]]:
    """The condition that keeps a query to the project's own rows, and its parameter: none
    for a SQLite store (one project's), ``project = ?`` for a team store (many projects')."""
    project = getattr(conn, "project", None)
    if project is None:
        return "1 = 1", ()
    return f"{column} = ?", (project,)


def _select_runs(conn: Connection, sources: bool = False) -> str:
    """``SELECT`` of every run column and its owner token (``NULL`` where none is stored);
    with ``sources``, where its policy and code came from (one run's read: :func:`get_run`)."""
    # A store read as it is (read-only, never migrated) may predate run_owners and
    # run_subsets.
    owner = (
        "(SELECT owner FROM run_owners o WHERE o.run_id = runs.id)"
        if has_table(conn, "run_owners") else "NULL"
    )
    subset = (
        "(SELECT subset_json FROM run_subsets s WHERE s.run_id = runs.id)"
        if has_table(conn, "run_subsets") else "NULL"
    )
    trials = (
        "(SELECT trials FROM run_trials t WHERE t.run_id = runs.id)"
        if has_table(conn, "run_trials") else "NULL"
    )
    sequential = (
        "(SELECT sequential_json FROM run_sequential q WHERE q.run_id = runs.id)"
        if has_table(conn, "run_sequential") else "NULL"
    )
    kept = (
        "(SELECT sources_json FROM run_sources k WHERE k.run_id = runs.id)"
        if sources and has_table(conn, "run_sources") else "NULL"
    )
    return f"SELECT {_RUN_COLUMNS}, {owner}, {subset}, {trials}, {sequential}, {kept} FROM runs"


def stored_json(run_id: str, column: str, text: str | None) -> Any:
    """A JSON column of run ``run_id`` read back (``None`` for NULL); a value that cannot
    be read, or nests past the one depth limit, is :class:`StoreUnreadable` (exit 5)."""
    return _json(run_id, column, text)


def _json(run_id: str, column: str, text: str | None) -> Any:
    if text is None:
        return None
    try:
        # Bounded by the one depth limit: what cannot be printed is not read either.
        return loads_bounded(text)
    except ValueError as exc:
        raise StoreUnreadable(
            f"run {run_id}: its stored {column} cannot be read ({exc}); the store is damaged"
        ) from exc


def _enum(run_id: str, column: str, kind: type[Any], value: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise StoreUnreadable(
            f"run {run_id}: its stored {column} {value!r} is not one Oloproof writes;"
            " the store is damaged"
        ) from None


def _record(conn: Connection, row: tuple[Any, ...]) -> RunRecord:
    run_id = str(row[0])
    rec = RunRecord(
        id=run_id,
        project=row[1],
        created_at=row[2],
        finished_at=row[3],
        status=_enum(run_id, "status", RunStatus, row[4]),
        completeness=_enum(run_id, "completeness", Completeness, row[5]),
        exit_code=row[6],
        gate=None if row[7] is None else _enum(run_id, "gate", GateAction, row[7]),
        suite_digest=row[8],
        dataset=row[9],
        cases_total=row[10],
        system_identity=row[11],
        system=_json(run_id, "system", row[12]),
        metrics=_json(run_id, "metrics", row[13]),
        policy=_json(run_id, "policy", row[14]),
        policy_path=row[15],
        stop_reason=row[16],
        pid=row[17],
        cache=_json(run_id, "cache totals", row[18]),
        owner=row[19],
        subset=_json(run_id, "subset", row[20]),
        trials=int(row[21] or 1),
        sequential=_json(run_id, "sequential order", row[22]),
        sources_json=row[23],
    )
    if not isinstance(rec.system, dict) or not isinstance(rec.metrics, list):
        raise StoreUnreadable(f"run {run_id}: its stored system or metrics are damaged")
    if rec.status == RunStatus.RUNNING and not run_alive(
        conn, rec.pid, rec.owner, rec.created_at
    ):
        # The process that ran it died without recording an end (killed, power lost):
        # what it stored is all there is.
        rec.status, rec.completeness = RunStatus.RUN_ERROR, Completeness.PARTIAL
        rec.exit_code, rec.gate = int(ExitCode.INCOMPLETE), GateAction.BLOCK
        rec.stop_reason = rec.stop_reason or ENDED_WITHOUT_FINISHING
    return rec


def list_runs(conn: Connection, limit: int | None = None) -> list[RunRecord]:
    """Stored runs of the project, newest first (at most ``limit``)."""
    if not has_table(conn, "runs"):
        return []  # a store a run is creating this very moment: no run yet
    where, params = project_scope(conn)
    sql = f"{_select_runs(conn)} WHERE {where} ORDER BY created_at DESC, id DESC"
    if limit is not None:
        # Within the databases' integers: a larger limit is simply "all of them".
        sql += f" LIMIT {max(0, min(int(limit), 2**63 - 1))}"
    runs = [_record(conn, r) for r in conn.execute(sql, params).fetchall()]
    _count_stored(conn, runs)
    return runs


def _count_stored(conn: Connection, runs: list[RunRecord]) -> None:
    """Set each run's ``cases_stored``. A run decided on all its cases (COMPLETE, or every
    case of its SUBSET) stored ``cases_total``; the others (sequential, stopped, running)
    are counted, by key, so that a list of large finished runs reads no case."""
    counted = []
    for r in runs:
        whole = r.status == RunStatus.DECIDED and r.completeness in (
            Completeness.COMPLETE, Completeness.SUBSET)
        if whole:
            r.cases_stored = r.cases_total
        else:
            r.cases_stored = 0
            counted.append(r)
    by_id = {r.id: r for r in counted}
    ids = list(by_id)
    try:
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            rows = conn.execute(
                "SELECT run_id, COUNT(*) FROM run_cases WHERE run_id IN"
                f" ({', '.join('?' * len(chunk))}) GROUP BY run_id", tuple(chunk),
            ).fetchall()
            for run_id, n in rows:
                by_id[str(run_id)].cases_stored = int(n)
    except DATABASE_ERRORS:
        # The runs' rows were read; their cases cannot be counted (a damaged page of
        # run_cases): the list still lists them, with the cases they were given, and the
        # run's own commands say what is wrong with its cases.
        for r in counted:
            r.cases_stored = None


def resolve_run_id(conn: Connection, ref: str) -> str:
    """The full id of the run ``ref`` names: ``latest``, a run id, or a unique prefix of one,
    among the project's runs.

    Raises :class:`UsageError` (exit 2) when it names no run, or more than one.
    """
    if not has_table(conn, "runs"):
        # A store a run is creating this very moment (the file exists, its tables not yet).
        raise UsageError("no runs are stored in this project yet (run `oloproof run` first)")
    where, scope = project_scope(conn)
    if ref == "latest":
        row = conn.execute(
            f"SELECT id FROM runs WHERE {where} ORDER BY created_at DESC, id DESC LIMIT 1", scope
        ).fetchone()
        if row is None:
            raise UsageError("no runs are stored in this project yet (run `oloproof run` first)")
        return str(row[0])
    if not ref.startswith("run_"):
        raise UsageError(f"'{ref}' is not a run id (run ids look like run_01J…; or use 'latest')")
    row = conn.execute(f"SELECT id FROM runs WHERE id = ? AND {where}", (ref, *scope)).fetchone()
    if row is None:
        # substr, not LIKE: '_' and '%' in a prefix are characters, not wildcards.
        rows = conn.execute(
            f"SELECT id FROM runs WHERE substr(id, 1, ?) = ? AND {where} LIMIT 2",
            (len(ref), ref, *scope),
        ).fetchall()
        if len(rows) == 1:
            return str(rows[0][0])
        if rows:  # two runs started within the same second share their first 12 characters
            raise UsageError(
                f"'{ref}' is the start of more than one run's id in this project's store;"
                " give more of it (`oloproof runs` lists them)"
            )
        raise UsageError(f"no run '{ref}' in this project's store (`oloproof runs` lists them)")
    return str(row[0])


def get_run(conn: Connection, ref: str | RunRecord) -> RunRecord:
    """The stored run ``ref`` names (see :func:`resolve_run_id`); a record already read
    (by the same command, on the same connection) is returned as it is.

    ``latest`` and a full run id are read in one query (a round trip on a team store);
    a prefix is resolved first."""
    if isinstance(ref, RunRecord):
        return ref
    if has_table(conn, "runs") and (ref == "latest" or ref.startswith("run_")):
        where, scope = project_scope(conn)
        if ref == "latest":
            row = conn.execute(
                f"{_select_runs(conn, sources=True)} WHERE {where} ORDER BY created_at DESC, id DESC LIMIT 1",
                scope,
            ).fetchone()
        else:
            row = conn.execute(
                f"{_select_runs(conn, sources=True)} WHERE id = ? AND {where}", (ref, *scope)
            ).fetchone()
        if row is not None:
            return _record(conn, row)
    run_id = resolve_run_id(conn, ref)  # says why nothing was found, or finds a prefix
    row = conn.execute(f"{_select_runs(conn, sources=True)} WHERE id = ?", (run_id,)).fetchone()
    return _record(conn, row)


@dataclass
class JudgmentRow:
    """One stored judgment of one case on one criterion."""

    criterion: str
    status: str  # a JudgmentStatus, or MISSING (no output to judge)
    passed: bool | None
    score: float | None
    reason: str | None
    from_cache: bool
    latency_ms: float | None
    attempts: int
    usage: dict[str, Any] | None


@dataclass
class CaseRow:
    """One stored case of a run: what went in, what came out, and its judgments by criterion."""

    case_id: str
    idx: int
    input: Any
    expected: Any
    metadata: Any
    status: str  # a CaseStatus
    output: Any
    error: str | None
    attempts: int
    latency_ms: float | None
    usage: dict[str, Any] | None
    from_cache: bool
    judgments: dict[str, JudgmentRow] = field(default_factory=dict)


def load_case_metadata(conn: Connection, run_id: str) -> list[Any]:
    """Each stored case's metadata (None where a case has none), in suite order."""
    return [
        _json(run_id, f"metadata of case {case_id!r}", text)
        for case_id, text in conn.execute(
            "SELECT case_id, metadata_json FROM run_cases WHERE run_id = ? ORDER BY idx",
            (run_id,),
        ).fetchall()
    ]


# Case ids per query when a few cases are read by id (SQLite's default limit on
# parameters is 999 on older builds).
_IDS_PER_QUERY = 500


def _id_chunks(case_ids: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``(where, params)`` pieces selecting ``case_ids`` (deduplicated) by primary key."""
    ids = list(dict.fromkeys(case_ids))
    return [
        (f" AND case_id IN ({', '.join('?' * len(chunk))})", chunk)
        for chunk in (ids[i:i + _IDS_PER_QUERY] for i in range(0, len(ids), _IDS_PER_QUERY))
    ]


def load_cases(
    conn: Connection, run_id: str, case_id: str | None = None, *,
    case_ids: Sequence[str] | None = None, head: int | None = None,
) -> list[CaseRow]:
    """The stored cases of a run in suite order, each with its judgments (or just
    ``case_id``, or just those of ``case_ids``: read by key, whatever the run's size).

    ``head``: read at most that many characters of each input, expected value, metadata,
    output, error and reason (a report, which writes only the start of each); a longer one
    is a :class:`~oloproof.textsafe.TextHead` of its stored text, not parsed, and the rest
    never leaves the store."""
    if case_ids is not None:
        found = [
            row
            for where, chunk in _id_chunks(case_ids)
            for row in _load_cases(conn, run_id, where, [run_id, *chunk], head)
        ]
        return sorted(found, key=lambda c: c.idx)
    where, params = "", [run_id]
    if case_id is not None:
        where = " AND case_id = ?"
        params.append(case_id)
    return _load_cases(conn, run_id, where, params, head)


def _column(name: str, head: int | None) -> str:
    """``name`` whole, or (``head``) its length and at most its first ``head`` characters:
    SQLite and PostgreSQL count characters, not bytes, in both."""
    if head is None:
        return f"{name}, NULL"
    return (f"CASE WHEN length({name}) > {int(head)} THEN substr({name}, 1, {int(head)})"
            f" ELSE {name} END, length({name})")


def _value(run_id: str, what: str, text: str | None, chars: int | None) -> Any:
    if text is not None and chars is not None and chars > len(text):
        return TextHead(text, int(chars))
    return _json(run_id, what, text)


def _text(text: str | None, chars: int | None) -> str | None:
    if text is not None and chars is not None and chars > len(text):
        return TextHead(text, int(chars), json=False)
    return text


def _load_cases(
    conn: Connection, run_id: str, where: str, params: list[str], head: int | None = None,
) -> list[CaseRow]:
    where = "run_id = ?" + where
    cases: dict[str, CaseRow] = {}
    values = ", ".join(_column(c, head) for c in (
        "input_json", "expected_json", "metadata_json", "output_json", "error"))
    for r in conn.execute(
        f"SELECT case_id, idx, status, attempts, latency_ms, usage_json, from_cache, {values}"
        f" FROM run_cases WHERE {where} ORDER BY idx",
        params,
    ).fetchall():
        where_case = f"case {r[0]!r}"
        cases[r[0]] = CaseRow(
            r[0], r[1], _value(run_id, f"input of {where_case}", r[7], r[8]),
            _value(run_id, f"expected of {where_case}", r[9], r[10]),
            _value(run_id, f"metadata of {where_case}", r[11], r[12]), r[2],
            _value(run_id, f"output of {where_case}", r[13], r[14]), _text(r[15], r[16]),
            r[3], r[4], _json(run_id, f"usage of {where_case}", r[5]), bool(r[6]),
        )
    for j in conn.execute(
        "SELECT case_id, criterion, status, passed, score, from_cache, latency_ms,"
        f" attempts, usage_json, {_column('reason', head)} FROM run_judgments WHERE {where}",
        params,
    ).fetchall():
        row = cases.get(j[0])
        if row is not None:
            row.judgments[j[1]] = JudgmentRow(
                j[1], j[2], None if j[3] is None else bool(j[3]), j[4], _text(j[9], j[10]),
                bool(j[5]), j[6], j[7],
                _json(run_id, f"usage of a judgment of case {j[0]!r}", j[8]),
            )
    return list(cases.values())


def load_evidence(conn: Connection, run: RunRecord) -> dict[str, CriterionEvidence]:
    """Per criterion, the counts (BINARY) or scores (MEAN) of a stored run.

    Each stored judgment is sorted by ``oloproof.evidence.classify_outcome``
    (the one rule for observed, missing, excluded). A case whose execution
    failed is stored as missing for every criterion. A run that stopped part way
    (``PARTIAL``) may have stored a case before a criterion's judgment finished (cancelled
    by the stop): that case is missing for it, not left out, so that what the stop lost is
    counted; a case with no stored row at all (never called) adds nothing.
    """
    evidence: dict[str, CriterionEvidence] = {}
    for m in run.metrics:
        try:
            rng = m.get("range")
            evidence[m["criterion"]] = CriterionEvidence(
                m["criterion"], MetricKind(m["kind"]),
                (float(rng[0]), float(rng[1])) if rng else None,
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise StoreUnreadable(
                f"run {run.id}: its stored metrics are damaged ({exc!r})"
            ) from exc
    if run.trials > 1:
        for criterion, by_case in load_trial_outcomes(conn, run).items():
            ev = evidence.get(criterion)
            if ev is None:
                continue
            ev.trials = run.trials
            ev.case_trials = {}
            for case_id, outcomes in by_case.items():
                ev.add_case(case_id, outcomes)
        return evidence
    judged: dict[str, set[str]] = {c: set() for c in evidence}
    for case_id, criterion, status, passed, score in conn.execute(
        "SELECT case_id, criterion, status, passed, score FROM run_judgments WHERE run_id = ?",
        (run.id,),
    ).fetchall():
        ev = evidence.get(criterion)
        if ev is not None:
            # The case id places a MEAN's score in the canonical order (evidence.py).
            ev.add(status, None if passed is None else bool(passed), score, case_id)
            judged[criterion].add(case_id)
    if run.completeness == Completeness.PARTIAL:
        for (case_id,) in conn.execute(
            "SELECT case_id FROM run_cases WHERE run_id = ?", (run.id,)
        ).fetchall():
            for criterion, ev in evidence.items():
                if case_id not in judged[criterion]:
                    ev.add(JUDGMENT_MISSING, None, None, case_id)
    return evidence


def load_trial_outcomes(
    conn: Connection, run: RunRecord
) -> dict[str, dict[str, list[TrialOutcome]]]:
    """Per criterion, per case (in suite order), its judgments in trial order.

    A case some of whose trials left no judgment (a run that stopped) has the absent ones
    as ``MISSING``, so a gap never reads as a pass; so has a stored case of a run that
    stopped part way with no judgment at all on a criterion, as for a run of one trial.
    """
    order = {
        r[0]: r[1]
        for r in conn.execute("SELECT case_id, idx FROM run_cases WHERE run_id = ?", (run.id,))
    }
    rows = conn.execute(
        "SELECT case_id, criterion, 0, status, passed, score FROM run_judgments"
        " WHERE run_id = ?", (run.id,),
    ).fetchall()
    if has_table(conn, "trial_judgments"):
        rows += conn.execute(
            "SELECT case_id, criterion, trial, status, passed, score FROM trial_judgments"
            " WHERE run_id = ?", (run.id,),
        ).fetchall()
    found: dict[str, dict[str, dict[int, TrialOutcome]]] = {}
    for case_id, criterion, trial, status, passed, score in rows:
        found.setdefault(criterion, {}).setdefault(case_id, {})[int(trial)] = (
            status, None if passed is None else bool(passed), score,
        )
    missing: TrialOutcome = (JUDGMENT_MISSING, None, None)
    if run.completeness == Completeness.PARTIAL:
        for m in run.metrics:
            by_case = found.setdefault(str(m.get("criterion")), {})
            for case_id in order:
                by_case.setdefault(case_id, {})
    out: dict[str, dict[str, list[TrialOutcome]]] = {}
    for criterion, by_case in found.items():
        ids = sorted(by_case, key=lambda c: (order.get(c, len(order)), c))
        out[criterion] = {
            c: [by_case[c].get(t, missing) for t in range(run.trials)] for c in ids
        }
    return out


@dataclass
class TrialRow:
    """One stored trial (1 .. k - 1) of a case: its call and its judgments by criterion."""

    case_id: str
    trial: int
    status: str
    output: Any
    error: str | None
    attempts: int
    latency_ms: float | None
    usage: dict[str, Any] | None
    from_cache: bool
    judgments: dict[str, JudgmentRow] = field(default_factory=dict)


def load_trial_cases(
    conn: Connection, run_id: str, case_id: str | None = None, *,
    case_ids: Sequence[str] | None = None,
) -> dict[str, list[TrialRow]]:
    """Per case, its trials 1 .. k - 1 in order (trial 0 is the case's own row,
    :func:`load_cases`). Empty for a run of one trial, or a store older than trials.
    ``case_id`` or ``case_ids``: only those cases, read by key."""
    if not has_table(conn, "trial_cases"):
        return {}
    if case_ids is not None:
        out: dict[str, list[TrialRow]] = {}
        for where, chunk in _id_chunks(case_ids):
            out.update(_load_trial_cases(conn, run_id, where, [run_id, *chunk]))
        return out
    where, params = "", [run_id]
    if case_id is not None:
        where = " AND case_id = ?"
        params.append(case_id)
    return _load_trial_cases(conn, run_id, where, params)


def _load_trial_cases(
    conn: Connection, run_id: str, where: str, params: list[str]
) -> dict[str, list[TrialRow]]:
    where = "run_id = ?" + where
    trials: dict[tuple[str, int], TrialRow] = {}
    for r in conn.execute(
        "SELECT case_id, trial, status, output_json, error, attempts, latency_ms, usage_json,"
        f" from_cache FROM trial_cases WHERE {where} ORDER BY idx, trial",
        params,
    ).fetchall():
        at = f"trial {r[1]} of case {r[0]!r}"
        trials[(r[0], r[1])] = TrialRow(
            r[0], r[1], r[2], _json(run_id, f"output of {at}", r[3]), r[4], r[5], r[6],
            _json(run_id, f"usage of {at}", r[7]), bool(r[8]),
        )
    for j in conn.execute(
        "SELECT case_id, trial, criterion, status, passed, score, reason, from_cache,"
        f" latency_ms, attempts, usage_json FROM trial_judgments WHERE {where}",
        params,
    ).fetchall():
        row = trials.get((j[0], j[1]))
        if row is not None:
            row.judgments[j[2]] = JudgmentRow(
                j[2], j[3], None if j[4] is None else bool(j[4]), j[5], j[6], bool(j[7]),
                j[8], j[9], _json(run_id, f"usage of a judgment of case {j[0]!r}", j[10]),
            )
    out: dict[str, list[TrialRow]] = {}
    for (cid, _trial), row in trials.items():
        out.setdefault(cid, []).append(row)
    return out


def load_decisions(conn: Connection, run_id: str) -> list[dict[str, Any]]:
    """The decisions a run recorded when it was decided, in rule order (as stored)."""
    return [
        _json(run_id, "decision", r[0])
        for r in conn.execute(
            "SELECT decision_json FROM decisions WHERE run_id = ? ORDER BY idx", (run_id,)
        ).fetchall()
    ]


def load_verdicts(
    conn: Connection, run: RunRecord, criterion: str
) -> dict[str, bool | None]:
    """Case id -> the stored verdict on ``criterion``: True/False when observed, None when
    missing (sorted by ``classify_outcome``, as every count is)."""
    out: dict[str, bool | None] = {}
    for case_id, status, passed, score in conn.execute(
        "SELECT case_id, status, passed, score FROM run_judgments"
        " WHERE run_id = ? AND criterion = ?",
        (run.id, criterion),
    ).fetchall():
        value = None if passed is None else bool(passed)
        observed = classify_outcome(MetricKind.BINARY, status, value, score) is Outcome.OBSERVED
        out[case_id] = value if observed else None
    return out


def load_scores(
    conn: Connection, run: RunRecord, criterion: str
) -> dict[str, float | None]:
    """Case id -> the stored score on a MEAN ``criterion`` (a scored judge's): the score
    when observed, None when missing (sorted by ``classify_outcome``, as every count is)."""
    out: dict[str, float | None] = {}
    for case_id, status, passed, score in conn.execute(
        "SELECT case_id, status, passed, score FROM run_judgments"
        " WHERE run_id = ? AND criterion = ?",
        (run.id, criterion),
    ).fetchall():
        value = None if score is None else float(score)
        observed = classify_outcome(MetricKind.MEAN, status, None, value) is Outcome.OBSERVED
        out[case_id] = value if observed else None
    return out


def panel_splits(conn: Connection, run_id: str) -> dict[str, tuple[int, int]]:
    """Per panel criterion, ``(split, judged)``: the cases its judges disagreed on, out of
    the cases the panel judged (read from how a panel's reasons start)."""
    out: dict[str, tuple[int, int]] = {}
    for criterion, split, judged in conn.execute(
        "SELECT criterion, SUM(CASE WHEN substr(reason, 1, ?) = ? THEN 1 ELSE 0 END),"
        " COUNT(*) FROM run_judgments"
        " WHERE run_id = ? AND (substr(reason, 1, ?) = ? OR substr(reason, 1, ?) = ?)"
        " GROUP BY criterion ORDER BY criterion",
        (len(PANEL_SPLIT), PANEL_SPLIT, run_id, len(PANEL_SPLIT), PANEL_SPLIT,
         len(PANEL_AGREED), PANEL_AGREED),
    ).fetchall():
        out[criterion] = (int(split or 0), int(judged))
    return out


def panels_json(splits: dict[str, tuple[int, int]]) -> dict[str, dict[str, int]]:
    """:func:`panel_splits` as JSON: ``{criterion: {"split": …, "judged": …}}``."""
    return {c: {"split": split, "judged": judged} for c, (split, judged) in splits.items()}


def load_run_labels(
    conn: Connection, run_id: str
) -> tuple[str, str, list[dict[str, Any]]] | None:
    """``(path, digest, labels)`` stored with a run, or None (no labels, or a store older
    than labels)."""
    if not has_table(conn, "run_labels"):
        return None
    row = conn.execute(
        "SELECT path, digest, labels_json FROM run_labels WHERE run_id = ?", (run_id,)
    ).fetchone()
    if row is None:
        return None
    labels = _json(run_id, "labels", row[2])
    if not isinstance(labels, list):
        raise StoreUnreadable(f"run {run_id}: its stored labels are damaged")
    return str(row[0]), str(row[1]), labels


def run_sources(run: RunRecord) -> dict[str, Any] | None:
    """Where ``run``'s policy and code came from (store/schema.py ``run_sources``), as
    :func:`get_run` read them, or None: a run stored by a version that did not keep them,
    a store older than them, or a value that is not a mapping (it only adds notes)."""
    sources = _json(run.id, "sources", run.sources_json)
    return sources if isinstance(sources, dict) else None


@dataclass(frozen=True)
class ConcurrencyChange:
    """One move of an adaptive limit, as the run's ``concurrency_changed`` event said."""

    at: str
    limit_name: str  # system | judge
    previous: int | None  # None for the starting limit
    limit: int
    ceiling: int
    reason: str  # start | rate_limited | clean_window

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at, "limit_name": self.limit_name, "previous": self.previous,
            "limit": self.limit, "ceiling": self.ceiling, "reason": self.reason,
        }


def load_concurrency(conn: Connection, run_id: str) -> list[ConcurrencyChange]:
    """Every move of a run's adaptive limits, in order; empty for a run without
    ``concurrency.adaptive`` (or a store made before the table existed, read as it is)."""
    if not has_table(conn, "run_concurrency"):
        return []
    return [
        ConcurrencyChange(str(r[0]), str(r[1]), r[2], int(r[3]), int(r[4]), str(r[5]))
        for r in conn.execute(
            "SELECT at, limit_name, previous, limit_value, ceiling, reason FROM run_concurrency"
            " WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    ]
