"""Deciding a stored run: the one copy used by ``gate``, ``inspect``, ``plan`` and ``run``.

A run stores the policy it was decided under and the evidence (one row per case and
criterion). Both are read back here. When either cannot be read (a damaged store, or a
policy written by a version this one cannot read), :class:`StoredEvidenceError` says so in
one line, and the command exits 5 (evidence unreadable), never with a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from stat import S_ISREG

from oloproof._records import replace
from oloproof.enums import ExitCode, MetricKind
from oloproof.errors import ConfigError, OloproofError
from oloproof.evidence import LabelledScores, LabelledVerdicts
from oloproof.policy.decide import (
    Decision,
    MetricSummary,
    decide_run,
    gate_notes,
    patched_notes,
)
from oloproof.policy.judges import AnyJudgeReport, judge_report
from oloproof.project._project import DEFAULT_POLICY_FILE
from oloproof.store.dbapi import DATABASE_ERRORS
from oloproof.store.reader import (
    CriterionEvidence,
    RunRecord,
    get_run,
    load_cases,
    load_evidence,
    load_run_labels,
    load_scores,
    load_verdicts,
    run_sources,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.project.labels import Labels
    from oloproof.project.policies import ReleasePolicy
    from oloproof.store.dbapi import Connection

__all__ = [
    "STORED",
    "StoredEvidenceError",
    "code_edited",
    "decide_stored",
    "grouped_stored_evidence",
    "judge_reports",
    "labelled_verdicts",
    "labels_edited",
    "labels_moved",
    "policy_edited",
    "policy_moved",
    "rule_labels",
    "sequential_reading",
    "sequential_report",
    "stored_evidence",
    "stored_gate_notes",
    "stored_labels",
    "stored_policy",
    "suite_changed",
    "suite_edited",
]

# What reading stored evidence may raise when the store holds what it should not.
_UNREADABLE: tuple[type[Exception], ...] = (*DATABASE_ERRORS, KeyError, TypeError, ValueError)
_UNGROUPABLE: tuple[type[Exception], ...] = (*DATABASE_ERRORS, TypeError, ValueError)


class StoredEvidenceError(OloproofError):
    """What a run stored cannot be read: the evidence is unreadable (exit 5)."""

    exit_code = int(ExitCode.INCOMPLETE)


def stored_policy(run: RunRecord, root: str | None = None) -> ReleasePolicy:
    """The release policy ``run`` was decided under, as stored with it (the default policy
    when none was stored). With ``root`` (the project directory), the validated form the
    run kept of it is used when there is one (project/_snapshot.py): no pydantic then."""
    if run.policy is None:
        from oloproof.project.loader import default_release_policy

        return default_release_policy()
    stored = _as_mapping(run.policy, run.id)
    if root is not None:
        from oloproof.project._snapshot import load_stored_policy

        kept = load_stored_policy(root, stored)
        if kept is not None:
            return kept
    from pydantic import ValidationError

    from oloproof.project.policies import ReleasePolicy

    try:
        return ReleasePolicy.validate(stored)
    except ValidationError as exc:
        raise StoredEvidenceError(
            f"the policy stored with {run.id} cannot be read ({exc.error_count()} problem(s),"
            f" first: {_first(exc)}); pass a policy with --policy to decide it under that"
        ) from None


def stored_evidence(conn: Connection, run: RunRecord) -> dict[str, CriterionEvidence]:
    """Per criterion, what ``run`` observed, or :class:`StoredEvidenceError`."""
    try:
        return load_evidence(conn, run)
    except _UNREADABLE as exc:
        raise StoredEvidenceError(
            f"the evidence stored for {run.id} cannot be read ({type(exc).__name__}: {exc})"
        ) from None


#: ``labels=STORED``: the labels stored with the run (the default).
STORED: Any = object()


def stored_labels(conn: Connection, run: RunRecord) -> Labels | None:
    """The human labels stored with ``run``, or None."""
    try:
        found = load_run_labels(conn, run.id)
        if found is None:
            return None
        from oloproof.project.labels import labels_from_json  # a run with labels only

        path, _digest, items = found
        return labels_from_json(items, path)
    except _UNREADABLE as exc:
        raise StoredEvidenceError(
            f"the labels stored with {run.id} cannot be read ({type(exc).__name__}: {exc})"
        ) from None


def _seen_of(conn: Connection, run: RunRecord, ids: set[str]) -> dict[str, str]:
    """Case id -> the digest of what a person labelling it would see in ``run`` (its
    input, expected value and output), for ``ids``."""
    if not ids:
        return {}
    from oloproof.project.labels import seen_digest  # a run with labels only

    return {case.case_id: seen_digest(case.input, case.expected, case.output)
            for case in load_cases(conn, run.id, case_ids=sorted(ids))}


def labelled_verdicts(
    conn: Connection, run: RunRecord, labels: Labels | None
) -> dict[str, LabelledVerdicts | LabelledScores]:
    """Per judge criterion with labels, the run's verdicts (or a scored judge's scores)
    beside them. A label about another output than the run's (``seen``) is not used."""
    if labels is None:
        return {}
    binary = {m.get("criterion") for m in run.metrics if m.get("kind") == MetricKind.BINARY}
    scored: dict[str, list[float]] = {
        str(m.get("criterion")): list(m["range"]) for m in run.metrics
        if m.get("kind") == MetricKind.MEAN and m.get("judge") and m.get("range")
    }
    out: dict[str, LabelledVerdicts | LabelledScores] = {}
    for criterion in dict.fromkeys(lab.criterion for lab in labels.labels):
        if criterion in scored:
            scores = load_scores(conn, run, criterion)
            mine = labels.for_run(criterion, scores, _seen_of(
                conn, run, labels.seen_ids(criterion) & scores.keys()))
            low, high = scored[criterion]
            out[criterion] = LabelledScores(
                criterion, (float(low), float(high)), scores,
                {i: float(lab.score) for i, lab in mine.applied.items() if lab.score is not None},
                mine.elsewhere, mine.drawn_uniformly, mine.stale,
            )
            continue
        if criterion not in binary:
            continue
        verdicts = load_verdicts(conn, run, criterion)
        mine = labels.for_run(criterion, verdicts, _seen_of(
            conn, run, labels.seen_ids(criterion) & verdicts.keys()))
        out[criterion] = LabelledVerdicts(
            criterion, verdicts,
            {i: lab.passed for i, lab in mine.applied.items() if lab.passed is not None},
            mine.elsewhere, mine.drawn_uniformly, mine.stale,
        )
    return out


def judge_reports(
    conn: Connection, run_id: str | RunRecord, level: float, labels: Any = STORED
) -> list[AnyJudgeReport]:
    """Agreement and corrected estimates of a stored run's judges at ``level``."""
    record = get_run(conn, run_id)
    chosen = stored_labels(conn, record) if labels is STORED else labels
    return [judge_report(lv, level) for lv in labelled_verdicts(conn, record, chosen).values()]


def decide_stored(
    conn: Connection, run_id: str | RunRecord, policy: ReleasePolicy, labels: Any = STORED, *,
    group_by: Sequence[str] = (),
) -> tuple[list[Decision], dict[str, MetricSummary]]:
    """Decide a stored run under ``policy`` from what its store holds: metrics grouped as
    the run stored them plus by ``group_by`` (analysis/groups.py), judges measured against
    ``labels`` (those stored with the run unless others are given)."""
    record = get_run(conn, run_id)
    chosen = stored_labels(conn, record) if labels is STORED else labels
    if record.sequential is not None:
        # Its order replayed over what it stored (analysis/sequential.py); group_by adds
        # no rule, and the metrics are read over the prefix the decision read.
        from oloproof.analysis.sequential import decide_sequential

        try:
            decisions, summaries, _reading = decide_sequential(
                conn, record, policy, labelled_verdicts(conn, record, chosen)
            )
        except _UNREADABLE as exc:
            raise StoredEvidenceError(
                f"the evidence stored for {record.id} cannot be read"
                f" ({type(exc).__name__}: {exc})"
            ) from None
        return decisions, summaries
    evidence, policy = grouped_stored_evidence(conn, record, policy, group_by)
    return decide_run(evidence, policy, rule_labels(conn, record, chosen, policy, group_by))


def rule_labels(
    conn: Connection, record: RunRecord, labels: Labels | None, policy: ReleasePolicy,
    group_by: Sequence[str] = (),
) -> dict[str, LabelledVerdicts | LabelledScores]:
    """:func:`labelled_verdicts`, and for the rules of ``policy`` (its groups expanded:
    :func:`grouped_stored_evidence`) on a judge's group, that group's verdicts and labels."""
    labelled = labelled_verdicts(conn, record, labels)
    criteria = {m.get("criterion") for m in record.metrics}
    if labelled and any(r.metric not in criteria for r in policy.rules):
        labelled |= _grouped_labels(conn, record, labelled, group_by)
    return labelled


def _grouped_labels(
    conn: Connection, record: RunRecord,
    labelled: Mapping[str, LabelledVerdicts | LabelledScores], group_by: Sequence[str],
) -> dict[str, LabelledVerdicts | LabelledScores]:
    """Per group metric of a labelled judge (``helpful[lang=fr]``), its verdicts and labels
    on that group's cases only: a rule on a group measures the judge there, and corrects
    that group's rate (not the whole run's). Earlier versions found no labels under the
    group's name, and a group rule with ``judge_validation`` said "no human labels on this
    run" whatever the labels, for ever."""
    from oloproof.analysis.groups import group_cases, group_keys

    try:
        found = group_cases(conn, record, group_keys(record, group_by), labelled)
    except _UNGROUPABLE as exc:
        raise StoredEvidenceError(
            f"the metadata stored for {record.id} cannot be grouped ({type(exc).__name__}: {exc})"
        ) from None
    out: dict[str, LabelledVerdicts | LabelledScores] = {}
    for name, (criterion, ids) in found.items():
        lv = labelled[criterion]
        if isinstance(lv, LabelledScores):
            out[name] = replace(
                lv, criterion=name, scores={i: v for i, v in lv.scores.items() if i in ids},
                labels={i: v for i, v in lv.labels.items() if i in ids})
        else:
            out[name] = replace(
                lv, criterion=name, verdicts={i: v for i, v in lv.verdicts.items() if i in ids},
                labels={i: v for i, v in lv.labels.items() if i in ids})
    return out


def _written_since(
    record: RunRecord, shown: str, root: str | None
) -> tuple[str, datetime] | None:
    """The file ``shown`` (a path as the run showed it: from the project directory
    ``root`` first, else from the directory the command runs in) and when the run
    started, when that file was written after it started; None otherwise (older, moved,
    removed, or not readable): one ``stat``, nothing read."""
    candidates = [shown] if root is None or os.path.isabs(shown) else [
        os.path.join(root, shown), shown]
    path = next((c for c in candidates if os.path.isfile(c)), None)
    if path is None:
        return None
    try:
        started = datetime.fromisoformat(record.created_at)
        if os.stat(path).st_mtime <= started.timestamp():
            return None
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return path, started


def _read_since(
    record: RunRecord, kind: str, shown: str, root: str | None
) -> tuple[str, datetime] | None:
    """:func:`_written_since` of the ``kind`` file (``policy``, ``labels``) the run read:
    where the run stored it was (runner/sources.py), so that a file it named from another
    directory than the command's (``--config p/oloproof.yaml --policy p/lenient.yaml``)
    is found; by the path it showed (``shown``) for a run stored without that."""
    origin = (run_sources(record) or {}).get(kind)
    kept = origin.get("file") if isinstance(origin, Mapping) else None
    if isinstance(kept, str) and (root is not None or os.path.isabs(kept)):
        return _written_since(record, os.path.join(root or "", kept), None)
    return _written_since(record, shown, root)


def policy_edited(
    record: RunRecord, release: ReleasePolicy, decisions: Sequence[object],
    root: str | None = None,
) -> list[str]:
    """A note when a run decided under its stored policy has rules and the file that
    policy was read from now says something else: a stricter release.yaml must not pass
    for what ``gate latest`` applied (``gate``, ``report`` and ``view`` say it alike). The
    file is the one the run stored it read (runner/sources.py); for a run stored without
    that, the path the run showed, taken from the project directory ``root`` (a run made
    there) or else from the directory the command runs in. It is validated only
    when it was written after the run started (one ``stat`` otherwise: no pydantic on the
    usual path), and the note given only when what it holds differs from the stored
    policy (a checkout that rewrote the same file says nothing)."""
    if not decisions or record.policy_path is None:
        return []
    written = _read_since(record, "policy", record.policy_path, root)
    if written is None:
        return []
    path, started = written
    path = record.policy_path if path == record.policy_path else os.path.relpath(path)
    from oloproof.project.labels import scales_of_run
    from oloproof.project.loader import load_release_policy

    metrics = {m["criterion"]: m["kind"] for m in record.metrics}
    try:
        if load_release_policy(path, metrics, judges=scales_of_run(record.metrics)) == release:
            return []
    except ConfigError:
        pass  # it no longer validates for this run: it differs all the same
    when = started.strftime("%Y-%m-%d %H:%M:%S UTC")
    note = (
        f"{path} has changed since this run started ({when}): these decisions are under"
        f" the policy stored with the run; `oloproof gate {record.id} --policy {path}`"
        " decides under the file as it is now."
    )
    return [note]


def suite_changed(
    record: RunRecord, root: str | None, config: str | None = None
) -> tuple[str, datetime, str | None, str | None] | None:
    """When the project's suite now holds other cases than ``record`` ran: the suite file
    as the command shows it, when the run started, the file's digest now (None: it no
    longer loads as a suite), and the oloproof.yaml (``config``) that now names another
    file than the run's ``dataset:`` (None: the run's file, edited). None otherwise: each
    file older than the run's start (one ``stat`` each, nothing read), the suite moved or
    removed, no project directory ``root``, or the same cases (a checkout that rewrote
    the same bytes, a reformatted line: the digest is of the cases, project/suite.py)."""
    if root is None or not record.dataset:
        return None
    try:
        created = datetime.fromisoformat(record.created_at)
        started = created.timestamp()
    except (ValueError, TypeError, AttributeError):
        return None
    dataset = record.dataset
    named = None if config is None else _dataset_written_since(config, started)
    if named is not None and os.path.normpath(named) != os.path.normpath(dataset):
        dataset = named  # another file: read whatever its age
    elif not _written_after(os.path.join(root, dataset), started):
        return None
    path = os.path.join(root, dataset)
    shown = dataset if os.path.isabs(dataset) else os.path.relpath(path)
    from oloproof.project.suite import load_suite  # only for a file written since

    try:
        digest: str | None = load_suite(path, shown).digest
    except ConfigError:
        digest = None  # it no longer loads: it differs all the same
    if digest == record.suite_digest:
        return None
    moved = None if dataset == record.dataset else (
        config if config is None or os.path.isabs(config) else os.path.relpath(config))
    return shown, created, digest, moved


def _written_after(path: str, started: float) -> bool:
    """Whether the file ``path`` was written after ``started`` (one ``stat``)."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return False
    return S_ISREG(status.st_mode) and status.st_mtime > started


def _config_written_since(config: str, started: float) -> dict[str, Any] | None:
    """oloproof.yaml (``config``) as a mapping, when it was written after ``started``; None
    when older (one ``stat``) or when it cannot be read as a mapping."""
    if not _written_after(config, started):
        return None
    try:
        with open(config, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    import yaml  # only for an oloproof.yaml written since the run

    try:
        doc = yaml.safe_load(data)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None  # `run` says what is wrong with it
    return doc if isinstance(doc, dict) else None


def _dataset_written_since(config: str, started: float) -> str | None:
    """The ``dataset:`` oloproof.yaml (``config``) names, when it was written after
    ``started``; None when older (one ``stat``) or when it cannot be read as a mapping."""
    doc = _config_written_since(config, started)
    dataset = None if doc is None else doc.get("dataset")
    return dataset if isinstance(dataset, str) and dataset else None


def policy_moved(
    record: RunRecord, release: ReleasePolicy, decisions: Sequence[object],
    root: str | None = None, config: str | None = None,
) -> list[str]:
    """A note when the policy the project names now is another file than the one ``record``
    was decided under, and holds other rules (or does not load): a run made with
    ``--policy lenient.yaml``, or an oloproof.yaml whose ``policy:`` names a stricter file
    since the run, must not see ``gate latest`` allow on the run's rules without a word.
    Where the run's policy came from is what it stored (runner/sources.py);
    a run stored without it (an older version) gets no such note. The file the project
    names is the one the run stored, unless oloproof.yaml (``config``) was written since
    (one ``stat`` otherwise): then its ``policy:`` is read. Only a file other than the
    run's is read, and a copy of the same rules says nothing; ``policy: none`` now asks
    for no rules, which the run's do not loosen (no note). The exit code stays the run's."""
    sources = run_sources(record)
    origin = (sources or {}).get("policy")
    # A run of a project that said `policy: none` has no decisions, and allows by that
    # declaration: a policy the project names since is said all the same.
    declared_none = record.policy_path is None
    if not (decisions or declared_none) or root is None or not isinstance(origin, Mapping):
        return []
    ran = origin.get("file")
    created = _since(record, sources)
    if created is None or not (isinstance(ran, str) or declared_none):
        return []
    doc = None if config is None else _config_written_since(config, created.timestamp())
    named = doc is not None and doc.get("policy") is not None
    if doc is not None:
        from oloproof.project.config import NO_POLICY  # an oloproof.yaml written since only

        declared = doc.get("policy", DEFAULT_POLICY_FILE)
        if not isinstance(declared, str) or not declared.strip():
            return []  # `run` says what is wrong with it
        if declared.strip().lower() == NO_POLICY:
            return []
        now = os.path.join(root, declared)
    elif origin.get("given") and isinstance(origin.get("project"), str):
        now = os.path.join(root, origin["project"])
    else:
        return []
    if isinstance(ran, str) and os.path.realpath(now) == os.path.realpath(
            os.path.join(root, ran)):  # kept from the project directory (runner/sources.py)
        return []  # the run's own file: policy_edited
    shown = os.path.relpath(now)
    if not os.path.isfile(now) and not named:
        return []  # the project names no file of its own: nothing to compare
    from oloproof.project.labels import scales_of_run
    from oloproof.project.loader import load_release_policy

    metrics = {m["criterion"]: m["kind"] for m in record.metrics}
    what = "holds other rules"
    try:
        if load_release_policy(now, metrics, judges=scales_of_run(record.metrics),
                               display=shown) == release:
            return []
    except ConfigError:
        what = "does not load as a release policy for this run"
    held = ("its gate is by its declaration of no release rules" if declared_none
            else "these decisions are under the policy stored with the run")
    tail = f"{held}; `oloproof gate {record.id} --policy {shown}` decides under"
    if origin.get("given"):
        return [(f"this run was decided under --policy {origin.get('path')}, not under the"
                 f" project's release policy ({shown}), which {what}: {tail} the project's.")]
    assert config is not None  # doc was read from it
    when = created.strftime("%Y-%m-%d %H:%M:%S UTC")
    cfg = config if os.path.isabs(config) else os.path.relpath(config)
    return [(f"{cfg} names {shown} as the release policy since this run under"
             f" {record.policy_path or 'policy: none'} started ({when}), and {shown} {what}:"
             f" {tail} it.")]


def stored_gate_notes(
    record: RunRecord, release: ReleasePolicy, labels: Labels | None,
    decisions: Sequence[Decision], root: str | None, config: str | None,
) -> list[str]:
    """Every note to show beside a stored run's gate under its own policy and labels: its
    incomplete evidence (or its shard's), patched code, and the policy, labels, suite and
    code changed or named elsewhere since it ran (what ``gate``, the report and ``inspect``
    say alike)."""
    shard = (record.subset or {}).get("shard") if isinstance(record.subset, dict) else None
    return [
        *gate_notes(decisions, release, record.id,
                    shard=(int(shard[0]), int(shard[1]))
                    if isinstance(shard, list) and len(shard) == 2 else None),
        *patched_notes(record.system.get("patched") if isinstance(record.system, dict)
                       else None),
        *policy_edited(record, release, decisions, root),
        *policy_moved(record, release, decisions, root, config),
        *labels_edited(record, release, labels, decisions, root),
        *labels_moved(record, release, labels, decisions, root, config),
        *suite_edited(record, decisions, root, config),
        *code_edited(record, decisions, root),
    ]


def code_edited(
    record: RunRecord, decisions: Sequence[object], root: str | None = None,
) -> list[str]:
    """A note when project code the run called (the system's, a custom evaluator's: the
    files it stored with their digests, runner/sources.py) has changed since: a person
    who edits the system and does not run it again must not see ``gate latest`` exit on
    what the old code gave, without a word. Nothing is imported: each file is ``stat``-ed
    (nothing more when it is older than the run), and one written since is hashed and
    compared. A run stored without its files (an older version) gets no such note."""
    sources = run_sources(record)
    code = (sources or {}).get("code")
    files = code.get("files") if isinstance(code, Mapping) else None
    if not decisions or root is None or not isinstance(files, Mapping) or not files:
        return []
    created = _since(record, sources)
    if created is None:
        return []
    changed: list[str] = []
    started = created.timestamp()
    for name, was in files.items():
        path = os.path.join(root, str(name))
        try:
            status = os.stat(path)  # one call per file on the usual path
        except FileNotFoundError:
            changed.append(f"{os.path.relpath(path)} (removed)")
            continue
        except (OSError, ValueError):
            continue
        if S_ISREG(status.st_mode) and status.st_mtime > started and _file_digest(path) != was:
            changed.append(os.path.relpath(path))
    if not changed:
        return []
    outside = code.get("outside") if isinstance(code, Mapping) else None
    cached = [os.path.relpath(os.path.join(root, str(p))) for p in outside or ()]
    cached = [p for p in cached if p in changed]
    when = created.strftime("%Y-%m-%d %H:%M:%S UTC")
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    note = (
        f"The code the run called has changed since it started ({when}): {shown}; these"
        " decisions are on what the code gave then, and"
        f" `oloproof run{' --no-cache' if cached else ''}` decides on the code as it is now"
    )
    if cached:
        note += (f" ({', '.join(cached[:5])} {'is' if len(cached) == 1 else 'are'} outside"
                 " the identity of the code that uses it: a run with the cache reads again"
                 " what the code gave before)")
    return [note + "."]


def _since(record: RunRecord, sources: Mapping[str, Any] | None) -> datetime | None:
    """When the run whose ``sources`` these are started: a merged run's are its first
    shard's (runner/merge.py ``since``), an edit between the shards and the merge being as
    much after them; otherwise ``record``'s start. None when it cannot be read."""
    since = (sources or {}).get("since")
    try:
        return datetime.fromisoformat(since if isinstance(since, str) else record.created_at)
    except (ValueError, TypeError, AttributeError):
        return None


def _file_digest(path: str) -> str | None:
    """``sha256:`` and the hex digest of the bytes of ``path`` (as the run stored them:
    _json.digest_bytes), or None when it cannot be read."""
    from hashlib import sha256  # only for a file written since the run

    digest = sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return "sha256:" + digest.hexdigest()


def suite_edited(
    record: RunRecord, decisions: Sequence[object], root: str | None = None,
    config: str | None = None,
) -> list[str]:
    """A note when a decided run's project now holds other cases (:func:`suite_changed`):
    a person who edits the cases (or names another file in oloproof.yaml) and does not run
    them must not see ``gate latest`` exit on the cases as they were, without a word. The
    exit code stays the run's (it is decided on the evidence it stored; only a run can
    decide on the cases as they are)."""
    if not decisions:
        return []
    changed = suite_changed(record, root, config)
    if changed is None:
        return []
    shown, started, digest, moved = changed
    when = started.strftime("%Y-%m-%d %H:%M:%S UTC")
    now = (f"{'no longer loads' if moved is None else 'does not load'} as a suite"
           if digest is None else f"now holds other cases ({digest[:19]}…)")
    head = (f"{shown} has changed since this run started ({when})" if moved is None
            else f"{moved} names {shown} as the suite since this run of {record.dataset}"
                 f" started ({when})")
    note = (
        f"{head}: these decisions are on the cases the run stored"
        f" ({record.suite_digest[:19]}…), and {'the file' if moved is None else shown} {now};"
        " `oloproof run` decides on the file as it is now (cases it ran before come from"
        " the cache)."
    )
    return [note]


def _uses_labels(release: ReleasePolicy) -> bool:
    return any(getattr(r, "judge_validation", None) is not None
               or getattr(r, "estimate", None) == "corrected" for r in release.rules)


def labels_edited(
    record: RunRecord, release: ReleasePolicy, labels: Labels | None,
    decisions: Sequence[object], root: str | None = None,
) -> list[str]:
    """A note when a run decided with the human labels stored with it has rules that use
    them, and the labels file they were read from now holds other labels: a person who
    corrected a label after the run (the judge wrong where it had seemed right) must not
    see ``gate latest`` allow on the labels as they were, without a word. The file is found
    and compared as :func:`policy_edited` does for the policy (a ``stat`` first; read only
    when written after the run started; the note only when its digest differs, or it no
    longer reads for this run)."""
    if not decisions or labels is None or not _uses_labels(release):
        return []
    written = _read_since(record, "labels", labels.path, root)
    if written is None:
        return []
    path, started = written
    shown = labels.path if path == labels.path else os.path.relpath(path)
    from oloproof.project.labels import load_labels, scales_of_run

    try:
        if load_labels(path, shown, scales_of_run(record.metrics)).digest == labels.digest:
            return []
    except ConfigError:
        pass  # it no longer reads for this run: it differs all the same
    when = started.strftime("%Y-%m-%d %H:%M:%S UTC")
    note = (
        f"{shown} has changed since this run started ({when}): the judges are measured"
        f" against the labels stored with the run; `oloproof gate {record.id} --labels"
        f" {shown}` measures them against the file as it is now."
    )
    return [note]


def labels_moved(
    record: RunRecord, release: ReleasePolicy, labels: Labels | None,
    decisions: Sequence[object], root: str | None = None, config: str | None = None,
) -> list[str]:
    """A note when oloproof.yaml (``config``), written since the run, names another human
    labels file than the run's, holding other labels (or none that load): a person who
    points ``human_labels:`` at a corrected copy must not see ``gate latest`` allow on the
    labels as they were (the run's own file, unchanged, is older than the run:
    :func:`labels_edited` says nothing). Read as :func:`policy_moved` reads a policy."""
    if (not decisions or labels is None or root is None or config is None
            or not _uses_labels(release)):
        return []
    sources = run_sources(record)
    created = _since(record, sources)
    doc = None if created is None else _config_written_since(config, created.timestamp())
    named = None if doc is None else doc.get("human_labels")
    if created is None or not isinstance(named, str) or not named.strip():
        return []
    now = os.path.join(root, named)
    origin = (sources or {}).get("labels")
    kept = origin.get("file") if isinstance(origin, Mapping) else None
    ran = os.path.join(root, kept if isinstance(kept, str) else labels.path)
    if os.path.realpath(now) == os.path.realpath(ran):
        return []  # the run's own file: labels_edited
    shown = os.path.relpath(now)
    from oloproof.project.labels import load_labels, scales_of_run

    what = "holds other labels"
    try:
        if load_labels(now, shown, scales_of_run(record.metrics)).digest == labels.digest:
            return []
    except ConfigError:
        what = "does not load as labels for this run"
    when = created.strftime("%Y-%m-%d %H:%M:%S UTC")
    cfg = config if os.path.isabs(config) else os.path.relpath(config)
    return [(f"{cfg} names {shown} as the human labels since this run with {labels.path}"
             f" started ({when}), and {shown} {what}: the judges are measured against the"
             f" labels stored with the run; `oloproof gate {record.id} --labels {shown}`"
             " measures them against it.")]


def sequential_reading(
    conn: Connection, run_id: str | RunRecord, policy: ReleasePolicy
) -> tuple[dict[str, Any], str] | None:
    """A sequential run's reading (analysis/sequential.py) as JSON and as one sentence;
    None for any other run."""
    record = get_run(conn, run_id)
    if record.sequential is None:
        return None
    from oloproof.analysis.sequential import read_sequential

    try:
        reading = read_sequential(conn, record, policy)
    except _UNREADABLE as exc:
        raise StoredEvidenceError(
            f"the evidence stored for {record.id} cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    return reading.to_json(), reading.describe()


def sequential_report(
    conn: Connection, record: RunRecord, policy: ReleasePolicy
) -> dict[str, Any] | None:
    """What the HTML report says of a sequential run's reading (analysis/sequential.py
    ``SequentialReading.report``); None for any other run."""
    if record.sequential is None:
        return None
    from oloproof.analysis.sequential import read_sequential

    try:
        return read_sequential(conn, record, policy).report()
    except _UNREADABLE as exc:
        raise StoredEvidenceError(
            f"the evidence stored for {record.id} cannot be read ({type(exc).__name__}: {exc})"
        ) from None


def grouped_stored_evidence(
    conn: Connection, record: RunRecord, policy: ReleasePolicy,
    group_by: Sequence[str] = (),
) -> tuple[dict[str, CriterionEvidence], ReleasePolicy]:
    """The run's evidence with its groups, and ``policy`` with its group rules expanded."""
    evidence = stored_evidence(conn, record)
    for rule in policy.rules:
        if rule.metric not in evidence:
            raise StoredEvidenceError(
                f"rule {rule.id} is on metric {rule.metric}, which run {record.id} does not"
                f" hold (it holds: {', '.join(evidence) or 'none'})"
            )
    grouped = group_by or any(m.get("group_by") for m in record.metrics) or any(
        getattr(r, "group", None) is not None or getattr(r, "each_group", False)
        for r in policy.rules
    )
    if not grouped:  # what with_groups would return, without importing it
        return dict(evidence), policy
    from oloproof.analysis.groups import with_groups

    try:
        return with_groups(conn, record, policy, evidence, group_by)
    except _UNGROUPABLE as exc:
        raise StoredEvidenceError(
            f"the metadata stored for {record.id} cannot be grouped ({type(exc).__name__}: {exc})"
        ) from None


def _as_mapping(value: Any, run_id: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise StoredEvidenceError(
            f"the policy stored with {run_id} cannot be read (it is not a mapping)"
        )
    return value


def _first(exc: Any) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ())) or "policy"
    return f"{where}: {error.get('msg', '')}"
