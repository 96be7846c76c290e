"""Joining the K shards of a suite into one run: ``oloproof merge PATH...``.

``oloproof run --shard I/K`` runs the I-th of K fixed slices of a suite (api/_subset.py
``shard_of``) and stores it as a SUBSET run marked with its slice, each case at its place
in the whole suite. Merging:

1. finds the finished shard runs in each source (a project directory, a store file, a
   PostgreSQL URL; with no source, the project's own store), and picks, for each slice,
   the newest run of the set that most sources hold shards of (then the newest): the same
   suite digest, system identity, evaluators (identity, kind, range, groups), number of
   shards, policy, trials and labels;
2. refuses, one line each, whatever would make the result something a single run could
   not have been: shards of different suites, systems, evaluators, policies, trials,
   labels or K, a slice found twice (in two sources, as two different runs) or missing;
3. copies those shard runs into the project's store with their cache entries
   (store/transfer.py ``copy_run``, what ``store push`` uses), so that the next run of the
   suite anywhere this store serves calls nothing that a shard already called;
4. stores one run of the whole suite: the row a single run would store, and the shards'
   case and judgment rows (each case at its place), decided by the same function as a
   run (``decide_and_gate``), exactly as a single run of the suite is decided.

The merged run is COMPLETE; ``run_merges`` (an optional table) names the shard runs it
was made of. Merging the same shard runs again makes no new run: the one made before is
returned.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof._json import compact_json
from oloproof._records import dataclass, field
from oloproof.analysis.stored import (
    labels_edited,
    policy_edited,
    stored_labels,
    stored_policy,
    suite_changed,
)
from oloproof.enums import Completeness, ExitCode, GateAction, RunStatus
from oloproof.errors import OloproofError, UsageError
from oloproof.evidence import group_name
from oloproof.ids import new_run_id
from oloproof.runner.orchestrate import decide_and_gate
from oloproof.store.db import (
    begin_write,
    has_table,
    open_store,
    open_store_readonly,
    set_busy_timeout,
)
from oloproof.store.dbapi import ERRORS, is_damaged
from oloproof.store.location import PostgresLocation, StoreLocation, locate, store_path
from oloproof.store.reader import RunRecord, get_run, project_scope, run_sources
from oloproof.store.writer import StoreWriter
from oloproof.transport.threads import describe_exception

if TYPE_CHECKING:
    from oloproof.store.dbapi import Connection

__all__ = ["MergeNotStored", "MergeRefused", "Merged", "merge_shards"]

# The rows of a run that the merged run takes from its shards (trial 0 and the others).
_CASE_COLUMNS = {
    "run_cases": (
        "case_id, idx, input_json, expected_json, metadata_json, status, output_json, error,"
        " attempts, latency_ms, usage_json, from_cache, exec_key, finished_at"
    ),
    "run_judgments": (
        "case_id, criterion, status, passed, score, reason, from_cache, judge_key, latency_ms,"
        " attempts, usage_json"
    ),
    "trial_cases": (
        "case_id, trial, idx, status, output_json, error, attempts, latency_ms, usage_json,"
        " from_cache, exec_key, finished_at"
    ),
    "trial_judgments": (
        "case_id, trial, criterion, status, passed, score, reason, from_cache, judge_key,"
        " latency_ms, attempts, usage_json"
    ),
}


class MergeRefused(UsageError):
    """The shards cannot make one run of the suite (exit 2): each reason on a line."""


class MergeInterrupted(OloproofError):
    """A Ctrl-C once the merged run was stored, before it was decided: it is stored as
    stopped (RUN_ERROR/PARTIAL), so exit 5, as a run that a signal stopped."""

    exit_code = int(ExitCode.INCOMPLETE)


class MergeNotStored(OloproofError):
    """The store refused the merged run on its way (a full disk, a lock held past the
    timeout): it is stored as stopped, nothing was decided; exit 5, as a store fault."""

    exit_code = int(ExitCode.INCOMPLETE)


@dataclass
class _Shard:
    """A finished shard run found in a source."""

    source: str  # the source as the user named it
    record: RunRecord
    index: int
    count: int
    suite_cases: int
    labels: str | None  # the digest of the labels stored with it
    family: tuple[str, ...] = field(default_factory=tuple)

    @property
    def slice(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass
class Merged:
    """What :func:`merge_shards` did: the merged run's id, the shard runs it was made of
    (by slice), how many of them were copied into the project's store, and whether the
    run already existed (the same shards merged before)."""

    run_id: str
    shards: list[tuple[str, str, str]]  # (slice, run id, source)
    copied: int
    existed: bool


def merge_shards(config: Path | str, sources: list[str]) -> Merged:
    """Merge the shard runs found in ``sources`` (the project's own store when empty) into
    one run of the suite in the store of the project whose oloproof.yaml is ``config``."""
    from oloproof.store.transfer import COPIED, copy_run

    config = Path(config)
    local = locate(config)
    found = _sources(config, local, sources)
    conns: dict[str, Connection] = {}
    copied = 0
    try:
        shards: list[_Shard] = []
        for name, location in found:
            conn = conns[name] = open_store_readonly(location)
            shards += _shard_runs(conn, name)
        chosen = _choose(shards, [name for name, _ in found])
        _refuse_edited_files(config, conns, chosen)
        if isinstance(local, PostgresLocation):
            _check_team_keys(local, conns, chosen)
        dst = open_store(local)
        try:
            for shard in chosen:
                _, what = copy_run(conns[shard.source], dst, shard.record.id)
                copied += what == COPIED
            made = [(s.slice, s.record.id, s.source) for s in chosen]
            with _merging(dst, local):
                existing = _merged_before(dst, [s.record.id for s in chosen])
                if existing is not None:
                    return Merged(existing, made, copied, True)
                return Merged(_store_merged(dst, chosen), made, copied, False)
        finally:
            dst.close()
    except KeyboardInterrupt:
        # Before the merged run was stored (while another writer held the store's lock,
        # say): nothing of it is, and the command says so (exit 130, cli/main.py).
        kept = (f"; the {copied} shard run(s) copied into this project's store stay there,"
                " whole" if copied else "")
        raise KeyboardInterrupt(f"nothing was merged{kept}") from None
    finally:
        for conn in conns.values():
            conn.close()


@contextlib.contextmanager
def _merging(conn: Connection, location: StoreLocation) -> Iterator[None]:
    """Hold the store's merge lock: the look for an earlier merge of the same shards and
    the new merged run are one step, so merges that start together (a CI job retried, two
    people) make one merged run, not one each. A team store's advisory lock; beside a
    SQLite store, a lock file (``merge.lock``, POSIX)."""
    if isinstance(location, PostgresLocation):
        from oloproof.store.pgshared import LOCK_NAMESPACE, MERGE_LOCK

        conn.execute("SELECT pg_advisory_lock(?::int, ?::int)", (LOCK_NAMESPACE, MERGE_LOCK))
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                conn.execute("SELECT pg_advisory_unlock(?::int, ?::int)",
                             (LOCK_NAMESPACE, MERGE_LOCK))
        return
    import os

    with open(os.path.join(os.path.dirname(str(location)), "merge.lock"), "a") as fh:
        with contextlib.suppress(ImportError, OSError):
            import fcntl  # POSIX; elsewhere merges that start together may both merge

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield


# -- finding the shards -------------------------------------------------------------------


def _sources(config: Path, local: StoreLocation, given: list[str]) -> list[tuple[str, StoreLocation]]:
    """Each source the user named, as a store location (the project's own with none)."""
    if not given:
        return [(str(local), local)]
    out: list[tuple[str, StoreLocation]] = []
    for text in given:
        if text.startswith(("postgresql://", "postgres://")):
            from oloproof.storeurl import store_setting

            url = store_setting(text, "merge")
            assert url is not None  # a postgresql:// URL, checked
            project = local.project if isinstance(local, PostgresLocation) else _project(config)
            remote = PostgresLocation(url, project)
            out.append((remote.display, remote))
            continue
        path = Path(text)
        from oloproof._fs import not_a_file

        problem = not_a_file(path, "no such file or directory")
        if problem is not None and problem != "is a directory, not a file":
            # Nothing there, a link to nothing, a pipe or a device, or a folder on the way
            # that may not be searched (pathlib's is_dir() raised PermissionError: exit 70).
            raise UsageError(
                f"{text}: {problem} (accepted: a project directory, a store file such as"
                " .oloproof/store.sqlite, or a postgresql:// URL)"
            )
        if path.is_dir():
            try:
                os.listdir(path)
            except OSError as exc:  # a folder that may not be read or searched
                raise UsageError(f"{text}: cannot be read ({exc.strerror or exc})") from None
            if (path / "oloproof.yaml").is_file():
                out.append((text, locate(path / "oloproof.yaml")))
            elif (path / ".oloproof" / "store.sqlite").is_file():
                out.append((text, store_path(path)))
            elif (path / "store.sqlite").is_file():
                out.append((text, str(path / "store.sqlite")))
            else:
                raise UsageError(
                    f"{text}: a directory with neither an oloproof.yaml nor a store"
                    " (accepted: a project directory, a store file such as"
                    " .oloproof/store.sqlite, or a postgresql:// URL)"
                )
        else:
            if not _looks_like_sqlite(path):
                raise UsageError(
                    f"{text}: not a store (an SQLite file begins with 'SQLite format 3';"
                    " accepted: a project directory, a store file such as"
                    " .oloproof/store.sqlite, or a postgresql:// URL)"
                )
            out.append((text, str(path)))
    _refuse_twice(out)
    return out


def _refuse_twice(found: list[tuple[str, StoreLocation]]) -> None:
    """Refuse (exit 2) a store named twice: the same path (``merge job-1 job-1``), or two
    names of one store (``job-1`` and ``job-1/.oloproof/store.sqlite``, one team store from
    two project directories). Its shards are not two sources' (and the first connection
    to it was dropped unclosed when the second took its name)."""
    seen: dict[object, int] = {}
    for index, (name, location) in enumerate(found):
        key: object = location
        if not isinstance(location, PostgresLocation):
            try:
                st = os.stat(location)
                key = (st.st_dev, st.st_ino)
            except OSError:
                key = os.path.realpath(location)
        at = seen.setdefault(key, index)
        if at != index:
            first = found[at][0]
            same = (f"{name} is named twice" if first == name
                    else f"{first} and {name} are the same store")
            raise UsageError(
                f"{same}: name each store of shards once (accepted: project directories,"
                " store files or postgresql:// URLs, each once)"
            )


def _looks_like_sqlite(path: Path) -> bool:
    """Whether ``path`` begins as an SQLite database does (a file named by mistake, such as
    app.py, is bad input; a store whose header is right and whose pages are damaged is
    read, and refused as damaged, exit 5)."""
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return True  # unreadable: opening it says why (exit 5)


def _project(config: Path) -> str:
    """The project key a bare PostgreSQL URL is read under: this project's name."""
    from oloproof.store.location import project_key

    return project_key(config)


def _shard_runs(conn: Connection, source: str) -> list[_Shard]:
    """Every finished shard run of the source's project, newest first."""
    if not has_table(conn, "run_subsets"):
        return []
    where, scope = project_scope(conn, "r.project")
    rows = conn.execute(
        "SELECT r.id, s.subset_json FROM runs r JOIN run_subsets s ON s.run_id = r.id"
        f" WHERE {where} AND r.status = ? ORDER BY r.created_at DESC, r.id DESC",
        (*scope, str(RunStatus.DECIDED)),
    ).fetchall()
    labels = has_table(conn, "run_labels")
    out = []
    for run_id, subset_json in rows:
        try:
            subset = json.loads(subset_json)
            index, count = (int(v) for v in subset["shard"])
            suite_cases = int(subset["suite_cases"])
        except (ValueError, TypeError, KeyError):
            continue  # a subset that is not a shard
        record = get_run(conn, str(run_id))
        if record.completeness != Completeness.SUBSET:
            continue
        digest = None
        if labels:
            row = conn.execute("SELECT digest FROM run_labels WHERE run_id = ?",
                               (record.id,)).fetchone()
            digest = None if row is None else str(row[0])
        shard = _Shard(source, record, index, count, suite_cases, digest)
        shard.family = _family(shard)
        out.append(shard)
    return out


def _evaluators(record: RunRecord) -> str:
    """The run's metrics as a single run would store them: criteria, kinds, ranges,
    evaluator identities and groups."""
    return compact_json(record.metrics)


def _family(shard: _Shard) -> tuple[str, ...]:
    """What every shard of one suite's run must share."""
    r = shard.record
    return (
        r.suite_digest, str(shard.count), str(shard.suite_cases), r.system_identity,
        _evaluators(r), compact_json(r.policy), str(r.trials), str(shard.labels),
    )


def _choose(shards: list[_Shard], sources: list[str]) -> list[_Shard]:
    """The shard runs to merge, one per slice, or :class:`MergeRefused` with every reason."""
    if not shards:
        where = " and ".join(sources)
        raise MergeRefused(
            f"no finished shard run in {where} (`oloproof run --shard I/K` stores one; a"
            " stopped shard, RUN_ERROR/PARTIAL, is not merged: run it again)"
        )
    # The run the shards are of: the one most sources hold shards of (then the newest), so
    # that the source that differs is the one named.
    held: dict[tuple[str, ...], set[str]] = {}
    for shard in shards:
        held.setdefault(shard.family, set()).add(shard.source)
    newest = max(shards, key=lambda s: (len(held[s.family]), s.record.created_at, s.record.id))
    family = newest.family
    problems: list[str] = []
    for source in sources:
        own = [s for s in shards if s.source == source]
        if not own:
            problems.append(f"{source}: holds no finished shard run")
        elif not any(s.family == family for s in own):
            problems.append(_difference(own[0], newest))
    # One run per slice: the newest of each source; the same slice from two sources is
    # an overlap (unless it is the same run, copied).
    by_slice: dict[int, _Shard] = {}
    for shard in sorted((s for s in shards if s.family == family),
                        key=lambda s: (s.record.created_at, s.record.id), reverse=True):
        kept = by_slice.get(shard.index)
        if kept is None:
            by_slice[shard.index] = shard
        elif kept.source != shard.source and kept.record.id != shard.record.id:
            problems.append(
                f"overlapping slices: shard {shard.slice} is in {kept.source}"
                f" ({kept.record.id}) and in {shard.source} ({shard.record.id}); name only"
                " one of them"
            )
    for shard in by_slice.values():
        patched = shard.record.system.get("patched")
        if isinstance(patched, list) and patched:  # a test's fake ran (systems/loading.py patched_code): not evidence
            problems.append(
                f"{shard.source}: shard {shard.slice} ({shard.record.id}) ran patched code"
                f" ({', '.join(map(str, patched[:5]))}): run it again, `oloproof run --shard"
                f" {shard.slice}`"
            )
    missing = [f"{i}/{newest.count}" for i in range(1, newest.count + 1) if i not in by_slice]
    # A source whose shards are of another run was named above; the slices it would have
    # brought are not missing for want of a run.
    mismatched = any(p.startswith(("different ", "a different ")) for p in problems)
    if missing and not mismatched:
        problems.append(
            f"missing slices: {', '.join(missing)} of {newest.suite_cases} cases cut into"
            f" {newest.count} (no finished run of {'it' if len(missing) == 1 else 'them'} in"
            f" {' or '.join(sources)}: run `oloproof run --shard {missing[0]}`)"
        )
    if problems:
        raise MergeRefused("the shards cannot be merged into one run:\n  "
                           + "\n  ".join(dict.fromkeys(problems)))
    return [by_slice[i] for i in sorted(by_slice)]


def _difference(other: _Shard, ref: _Shard) -> str:
    """One line: what makes ``other`` (from another source) not a shard of ``ref``'s run."""
    a, b = other.record, ref.record
    head = f"{other.source}: shard {other.slice} ({a.id})"
    base = f"shard {ref.slice} of {ref.source} ({b.id})"
    if a.suite_digest != b.suite_digest:
        return (f"different suite digests: {head} ran {a.dataset} {a.suite_digest[:19]}…,"
                f" {base} ran {b.dataset} {b.suite_digest[:19]}…")
    if other.count != ref.count:
        return f"different numbers of shards: {head} is of {other.count}, {base} of {ref.count}"
    if a.system_identity != b.system_identity:
        return (f"different system identities: {head} ran {_system(a)}"
                f" ({a.system_identity[:12]}), {base} ran {_system(b)} ({b.system_identity[:12]})")
    if _evaluators(a) != _evaluators(b):
        return f"different evaluator identities: {head} and {base}: {_metrics_differ(a, b)}"
    if compact_json(a.policy) != compact_json(b.policy):
        return (f"a different policy: {head} was decided under {a.policy_path or 'its policy'},"
                f" {base} under {b.policy_path or 'its policy'}, and they differ")
    if a.trials != b.trials:
        return f"different trials: {head} made {a.trials} per case, {base} made {b.trials}"
    return f"different human labels: {head} and {base} were measured against different labels"


def _system(r: RunRecord) -> str:
    return " ".join(str(r.system.get(k)) for k in ("name", "version") if r.system.get(k))


def _metrics_differ(a: RunRecord, b: RunRecord) -> str:
    mine = {str(m.get("criterion")): m for m in a.metrics}
    theirs = {str(m.get("criterion")): m for m in b.metrics}
    if set(mine) != set(theirs):
        return f"criteria {sorted(mine)} against {sorted(theirs)}"
    changed = [c for c in mine if mine[c] != theirs[c]]
    return f"criterion {', '.join(changed)} judged by another evaluator"


def _refuse_edited_files(config: Path, conns: dict[str, Connection],
                         shards: list[_Shard]) -> None:
    """Refuse (:class:`MergeRefused`) shards decided under a policy file (or measured against
    a human labels file, or run on a suite file) that this project now holds otherwise. The merged run is decided
    under the policy and labels stored with its shards, and it is a new run: `gate`
    compares the files with the run's start, the merge's, and said nothing. Shards run under `min: 0.5`, release.yaml then made
    `min: 0.99`: `merge` exited 0 on 90% right, where `run` exits 1; labels corrected
    after the shards ran, likewise. A file is read only when it was written after the
    first shard started (as `gate` does)."""
    earliest = min(shards, key=lambda s: (s.record.created_at, s.record.id))
    first = earliest.record
    root = str(config.parent)
    rules = (first.policy or {}).get("rules") or []
    release = stored_policy(first)
    problems = []
    if policy_edited(first, release, rules, root) and first.policy_path is not None:
        path = first.policy_path
        problems.append(
            f"a different policy: the shards were decided under {path} as it was when they"
            f" ran, and {_shown(root, path)} now says otherwise, so the merged run would be"
            " decided under a policy this project no longer holds; run the shards again"
            f" under it (`oloproof run --shard I/K`), or put {path} back as it was")
    labels = stored_labels(conns[earliest.source], first)
    if labels is not None and labels_edited(first, release, labels, rules, root):
        problems.append(
            f"different human labels: the shards' judges were measured against {labels.path}"
            f" as it was when they ran, and {_shown(root, labels.path)} now holds other"
            " labels, so the merged run would be decided on labels this project no longer"
            " holds; run the shards again (`oloproof run --shard I/K`: their calls come"
            f" from the cache), or put {labels.path} back as it was")
    changed = suite_changed(first, root, str(config))
    if changed is not None:
        shown, _started, digest, moved = changed
        now = (f"{'no longer loads' if moved is None else 'does not load'} as a suite"
               if digest is None else f"now holds other cases ({digest[:19]}…)")
        if moved is not None:
            now = f"{moved} now names {shown} as the suite, which {now.replace('now ', '')}"
        else:
            now = f"{shown} {now}"
        problems.append(
            f"a different suite: the shards ran {first.dataset} as it was when they ran"
            f" ({first.suite_digest[:19]}…), and {now}, so the merged run would be"
            " a run of cases this project no longer holds; run the shards again (`oloproof"
            " run --shard I/K`: the cases they ran come from the cache), or put"
            f" {first.dataset if moved is None else moved} back as it was")
    if problems:
        raise MergeRefused("the shards cannot be merged into one run:\n  "
                           + "\n  ".join(problems))


def _shown(root: str, path: str) -> str:
    return path if root == "." or os.path.isabs(path) else os.path.join(root, path)


def _check_team_keys(location: PostgresLocation, conns: dict[str, Connection],
                     shards: list[_Shard]) -> None:
    """Refuse (exit 2, nothing copied or stored) a merge into a team store whose merged run
    would hold two keys the team store cannot hold apart: case ids, or the rule ids of an
    ``each_group`` rule's groups, that differ only where one holds a NUL and the other
    U+FFFD, in two shards that were each run (and checked) on a store of their own. Each
    shard was copied, then the merged run's cases or decisions could not be stored."""
    from oloproof.store.pgshared import check_keys  # a team store's only

    first = shards[0].record
    group_by = {str(m["criterion"]): list(m.get("group_by") or []) for m in first.metrics}
    rules = [r for r in (first.policy or {}).get("rules") or [] if isinstance(r, dict)]
    keys = {str(k) for r in rules if r.get("each_group")
            for k in group_by.get(str(r.get("metric")), [])}
    case_ids: list[str] = []
    values: dict[str, dict[str, object]] = {key: {} for key in keys}
    for shard in shards:
        for case_id, metadata_json in conns[shard.source].execute(
            "SELECT case_id, metadata_json FROM run_cases WHERE run_id = ?", (shard.record.id,)
        ).fetchall():
            case_ids.append(str(case_id))
            if keys:
                metadata = json.loads(metadata_json) if metadata_json else None
                for key in keys:
                    value = metadata.get(key) if isinstance(metadata, dict) else None
                    values[key].setdefault(compact_json(value), value)
    rule_ids: list[str] = []
    for rule in rules:
        rule_ids.append(str(rule.get("id")))
        if rule.get("each_group"):
            metric = str(rule.get("metric"))
            for key in group_by.get(metric, []):
                rule_ids += [str(rule.get("id")) + group_name(metric, key, v)[len(metric):]
                             for v in values[key].values()]
    check_keys(location, project=location.project, case_ids=case_ids,
               criteria=list(group_by), rule_ids=rule_ids,
               refused="nothing was merged (the merged run would hold both)",
               instead="merge them into a project on the SQLite store")


# -- storing the merged run ---------------------------------------------------------------


#: The start of the stop reason of a merged run whose shards hold no result of a source
#: (:func:`_no_result_of`): read from the shards' rows alone, it is what merging them
#: again would store again.
_INCOMPLETE = "incomplete: "


def _merged_before(conn: Connection, shard_ids: list[str]) -> str | None:
    """A run already merged from exactly these shard runs: decided, or stopped for what
    the shards themselves hold (no result of the system or of a judge), which a merge of
    the same shards would store again (each attempt made a new RUN_ERROR run, and `runs`
    filled with them). A merge that failed on its way (the store, a signal) is tried
    again."""
    if not has_table(conn, "run_merges"):
        return None
    wanted = compact_json(sorted(shard_ids))
    for run_id, merged_json in conn.execute(
        "SELECT run_id, shards_json FROM run_merges ORDER BY run_id"
    ).fetchall():
        if merged_json == wanted:
            record = get_run(conn, str(run_id))
            if record.status == RunStatus.DECIDED or (
                record.status == RunStatus.RUN_ERROR
                and (record.stop_reason or "").startswith(_INCOMPLETE)
            ):
                return record.id
    return None


def _store_merged(conn: Connection, shards: list[_Shard]) -> str:
    first = shards[0].record
    ids = [s.record.id for s in shards]
    marks = ", ".join("?" * len(ids))
    held = conn.execute(f"SELECT count(*) FROM run_cases WHERE run_id IN ({marks})",
                        tuple(ids)).fetchone()[0]
    if held != shards[0].suite_cases:
        raise MergeRefused(
            f"the shards hold {held} cases between them, and their suite has"
            f" {shards[0].suite_cases}: a shard run is damaged; nothing was merged"
        )
    # Where the shards' policy and code came from, as the first of them to start stored it,
    # with when that was: an edit since any shard started is said of the merged run.
    earliest = min((s.record for s in shards), key=lambda r: r.created_at)
    sources = run_sources(get_run(conn, earliest.id))
    run_id = new_run_id()
    writer = StoreWriter(conn, run_id)
    # The row too is written in the transaction, whose lock is waited for in slices: a
    # Ctrl-C while another writer held the lock waited out the busy timeout (30 s) in
    # one C call, and its row was already stored, alone. Now nothing is stored.
    begin_write(conn)
    committed = False
    try:
        writer.create_run(
            project=getattr(conn, "project", None) or first.project,
            suite_digest=first.suite_digest, dataset=first.dataset,
            cases_total=shards[0].suite_cases, system_identity=first.system_identity,
            system=first.system, metrics=first.metrics, policy=first.policy,
            policy_path=first.policy_path, subset=None, trials=first.trials,
        )
        if sources is not None:  # in the transaction: a refused write leaves no RUNNING row
            writer.store_sources({**sources, "since": sources.get("since", earliest.created_at)})
        for table, columns in _CASE_COLUMNS.items():
            if not has_table(conn, table):
                continue
            for shard_id in ids:
                conn.execute(
                    f"INSERT INTO {table} (run_id, {columns}) SELECT ?, {columns} FROM {table}"
                    " WHERE run_id = ?", (run_id, shard_id),
                )
        if has_table(conn, "run_labels"):
            conn.execute(
                "INSERT INTO run_labels (run_id, path, digest, labels_json) SELECT ?, path,"
                " digest, labels_json FROM run_labels WHERE run_id = ?", (run_id, ids[0]),
            )
        conn.execute("INSERT INTO run_merges (run_id, shards_json) VALUES (?, ?)",
                     (run_id, compact_json(sorted(ids))))
        conn.execute("COMMIT")
        committed = True
        failed = _no_result_of(conn, run_id)
        if failed is not None:
            # SPEC §5, as a run of the whole suite has it (runner/orchestrate.py): no result
            # of a source is no evidence, whatever the policy. A shard is not stopped for it
            # (its slice may hold only the cases the system fails on); the merged run is.
            writer.finish_run(
                status=RunStatus.RUN_ERROR, completeness=Completeness.PARTIAL,
                exit_code=ExitCode.INCOMPLETE, gate=GateAction.BLOCK,
                cache=_cache_sum(shards), decisions=[], stop_reason=f"{_INCOMPLETE}{failed}",
            )
            return run_id
        record = get_run(conn, run_id)
        decisions, _summaries, gate_label, code = decide_and_gate(
            conn, run_id, stored_policy(record), incomplete=False
        )
        # The end is stored under the same guard: a DECIDED end that the store refused
        # (a full disk, a lock held past the timeout) left the merged run RUNNING.
        writer.finish_run(
            status=RunStatus.DECIDED, completeness=Completeness.COMPLETE, exit_code=code,
            gate=gate_label, cache=_cache_sum(shards),
            decisions=[d.to_json() for d in decisions],
        )
    except BaseException as exc:
        if is_damaged(exc):
            raise  # nothing more is written into a damaged store (StoreUnreadable, exit 5)
        with contextlib.suppress(Exception):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        if not committed:  # the row went with the rest: nothing was stored
            if isinstance(exc, ERRORS):
                raise MergeNotStored(
                    f"the merged run could not be stored ({exc}): nothing of it was stored,"
                    " nothing was decided. Run `oloproof merge` again once the store takes"
                    " writes"
                ) from exc
            raise
        interrupted = isinstance(exc, KeyboardInterrupt)
        if interrupted:
            # Asked to stop: the end is recorded if the lock is free within half a second
            # (as a second signal's is, runner/orchestrate.py), not after the busy timeout.
            with contextlib.suppress(Exception):
                set_busy_timeout(conn, 0.5)
        # Never a RUNNING row left behind (orchestrate.py's rule): the attempt is stored
        # as a stopped run, which nothing decides on and no later merge returns.
        stopped = False
        with contextlib.suppress(Exception):
            writer.finish_run(
                status=RunStatus.RUN_ERROR, completeness=Completeness.PARTIAL,
                exit_code=ExitCode.INCOMPLETE, gate=GateAction.BLOCK, cache=_cache_sum(shards),
                decisions=[], stop_reason=(
                    "interrupted (Ctrl-C) before the merged run was decided" if interrupted
                    else f"the merge failed: {describe_exception(exc)}"),
            )
            stopped = True
        if interrupted:
            raise MergeInterrupted(
                f"interrupted (Ctrl-C) before the merged run {run_id} was decided:"
                + (" it is stored as stopped, RUN_ERROR/PARTIAL;" if stopped else
                   " its row reads as stopped once this process ends;")
                + " nothing was decided. Run `oloproof merge` again to merge the shards anew"
            ) from None
        if isinstance(exc, ERRORS):
            raise MergeNotStored(
                f"the merged run {run_id} could not be stored ({exc}):"
                + (" it is stored as stopped, RUN_ERROR/PARTIAL," if stopped else
                   " its row reads as stopped once this process ends;")
                + " nothing was decided. Run `oloproof merge` again once the store takes"
                " writes (the shards were copied, and are merged anew)"
            ) from exc
        raise
    return run_id


def _no_result_of(conn: Connection, run_id: str) -> str | None:
    """One line naming the system, or each evaluator or judge, that failed on every case of
    the merged run (no output, or an error wherever it judged): what a run of the whole
    suite is stopped for (``EngineTotals.failed_source``), here over the shards together."""
    lines = []
    total = ok = 0
    for table in ("run_cases", "trial_cases"):
        if not has_table(conn, table):
            continue
        row = conn.execute(
            f"SELECT count(*), sum(CASE WHEN status = 'OK' THEN 1 ELSE 0 END) FROM {table}"
            " WHERE run_id = ?", (run_id,),
        ).fetchone()
        total, ok = total + int(row[0] or 0), ok + int(row[1] or 0)
    if total and not ok:
        lines.append(f"the system failed on every case of the merged shards ({total}), so"
                     " the run holds no result of it")
    for criterion, judged in conn.execute(
        "SELECT criterion, count(*) FROM run_judgments WHERE run_id = ? AND status <> 'MISSING'"
        " GROUP BY criterion HAVING sum(CASE WHEN status = 'ERROR' THEN 0 ELSE 1 END) = 0"
        " ORDER BY criterion", (run_id,),
    ).fetchall():
        lines.append(f"{criterion} failed on every case it judged in the merged shards"
                     f" ({judged}), so the run holds no result of it")
    return "; ".join(lines) or None


def _cache_sum(shards: list[_Shard]) -> dict[str, int]:
    """The shards' cache counts, added: what one run making all their calls would count."""
    total: dict[str, int] = {}
    for shard in shards:
        for key, value in (shard.record.cache or {}).items():
            total[key] = total.get(key, 0) + int(value)
    return total
