"""Building a run: load and check every file, build the system and the evaluators.

Everything that can be wrong with a project is found here, before the run's
row is stored or anything is called: a bad file, a missing key, a module that
fails to import (even with ``sys.exit()``), a ``code_paths`` entry that does
not exist. Each is a :class:`~oloproof.errors.ConfigError` (exit 2).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from oloproof._records import dataclass
from oloproof.engine.pipeline import EngineCase
from oloproof.errors import ConfigError, UsageError
from oloproof.project._project import Project
from oloproof.transport.retry import RetryPolicy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.evaluators.base import Evaluator, InlineEvaluator
    from oloproof.evaluators.judge import PanelJudge, RubricJudge
    from oloproof.policy.sequential import Baseline, SequentialSpec
    from oloproof.project.config import ReleasePolicy
    from oloproof.project.labels import Labels
    from oloproof.project.suite import Suite
    from oloproof.systems.base import SystemRunner


@dataclass
class Prepared:
    """Everything checked and built before the first call."""

    project: Project
    policy: ReleasePolicy
    policy_path: str | None
    system: SystemRunner
    inline: list[InlineEvaluator]
    judges: list[RubricJudge | PanelJudge]
    cases: list[EngineCase]
    suite_digest: str
    metrics: list[dict[str, Any]]
    retry: RetryPolicy
    labels: Labels | None = None
    #: The part of the suite chosen to run (``api.Subset.to_json()``); ``None``: all of it.
    subset: dict[str, Any] | None = None
    #: Calls of the system per case (``trials:`` in oloproof.yaml, or ``--trials``).
    trials: int = 1
    #: Keeps the validated configuration once the store exists (project/_snapshot.py);
    #: None when it came from its snapshot.
    keep: Callable[[], None] | None = None
    #: The matrix variant this run is (``run --matrix``), or None.
    variant: str | None = None
    #: Stored with the system's description: ``{"id": "mx_…", "variant", "index",
    #: "baseline"}`` for a run of a matrix (api/_matrix.py).
    matrix: dict[str, Any] | None = None
    #: A sequential run's seed, margin and size (runner/sequential.py); None: fixed-n.
    sequential: SequentialSpec | None = None
    #: The stored run a sequential run decides its comparison rules against (``run
    #: --sequential --baseline RUN``), and the file those rules came from; None: none.
    baseline: Baseline | None = None
    compare_policy_path: str | None = None
    #: A shard's whole suite (``cases`` is its slice): what the run ``oloproof merge``
    #: makes of the shards holds, whose keys a team store is checked for (runner/orchestrate.py).
    suite: list[EngineCase] | None = None
    #: What of the system's code a patch in this process replaced (``helpers.lookup``:
    #: systems/loading.py, patched_code): the run neither reads nor stores the system's
    #: cached outputs, and its description says so. Empty: the code is its files'.
    patched: list[str] | None = None
    #: The same of the custom evaluators' code: the run neither reads nor stores cached
    #: verdicts. Either list makes the run's gate block (it never allows).
    patched_checks: list[str] | None = None
    #: Whether the policy was given for this run (``--policy``, ``policy=``), rather than
    #: the one the project names (stored with the run: runner/sources.py).
    policy_given: bool = False


def load_configuration(
    config_path: str | os.PathLike[str], policy_arg: str | None
) -> tuple[Project, ReleasePolicy, str | None, Callable[[], None] | None]:
    """oloproof.yaml and the release policy, validated; from their snapshot when no file
    they were validated from changed since (project/_snapshot.py), which imports neither
    pydantic nor PyYAML. The last item keeps a fresh validation as the next snapshot
    (called once the run's store exists); None when the snapshot was used."""
    from oloproof.project._snapshot import load_config, save_config

    kept = load_config(config_path, policy_arg)
    if kept is not None:
        project, resolved = kept
        return project, resolved.policy, resolved.path, None
    from oloproof.project.loader import load_project, resolve_release_policy

    project = load_project(config_path)
    resolved = resolve_release_policy(project, policy_arg)
    return (project, resolved.policy, resolved.path,
            lambda: save_config(config_path, policy_arg, project, resolved))


def build_evaluators(
    project: Project,
) -> tuple[list[InlineEvaluator], list[RubricJudge | PanelJudge]]:
    from oloproof.evaluators.deterministic import INLINE

    limits = project.config.limits
    inline: list[InlineEvaluator] = []
    judges: list[RubricJudge | PanelJudge] = []
    file = os.path.basename(project.config_path)
    for i, ev in enumerate(project.config.evaluators):
        if ev.type in INLINE:
            make: Callable[[Any], InlineEvaluator] = INLINE[ev.type]
            built = make(ev)
            if ev.type == "regex":
                _guard_regex(built, limits.evaluator_timeout_s)
            elif ev.type == "json_schema":
                _guard_schema(built, limits.evaluator_timeout_s)
            inline.append(built)
        elif ev.type == "custom":
            # Imported here: it brings inspect, which a project without one never needs.
            from oloproof.evaluators.custom import Custom

            inline.append(
                Custom(
                    ev, project.root, file=file, field=f"evaluators[{i}].function",
                    default_timeout_s=limits.evaluator_timeout_s,
                )
            )
        elif ev.type == "rubric_judge":
            # Imported here: the judge module brings httpx, which a project without a
            # judge never needs (start-up, issue 16).
            from oloproof.evaluators.judge import PanelJudge, RubricJudge

            judge_class = PanelJudge if ev.panel else RubricJudge
            judges.append(
                judge_class(
                    ev, project, field=f"evaluators[{i}]",
                    max_response_bytes=limits.max_response_bytes,
                    max_json_depth=limits.max_json_depth,
                )
            )
        else:  # pragma: no cover - the config model admits no other type
            raise ConfigError(f"unknown evaluator type {ev.type!r}", file=file)
    processes = project.config.concurrency.evaluator_processes
    if processes:
        _use_processes(inline, processes, project.root)
    return inline, judges


def _use_processes(inline: list[InlineEvaluator], size: int, root: str) -> None:
    """Sync custom evaluators run in a pool of ``size`` worker processes
    (``concurrency.evaluator_processes``): one pool for all of them, started on the first
    call and closed with the run (orchestrate.py ``_close_guards``)."""
    from oloproof.evaluators.custom import Custom
    from oloproof.transport.processes import ProcessPool

    custom = [e for e in inline if isinstance(e, Custom) and not e.is_async]
    if not custom:
        return
    pool = ProcessPool(
        size, ("oloproof.evaluators.custom", "process_handler",
               ([e.process_spec(root) for e in custom],)),
        name="oloproof-evaluator-process",
    )
    for index, evaluator in enumerate(custom):
        evaluator.use_processes(pool, index)


def _guard_regex(evaluator: InlineEvaluator, timeout_s: float) -> None:
    """Match in a child process under ``timeout_s``, from a worker thread.

    ``re`` holds the GIL for a whole match, so a catastrophic pattern cannot be
    bounded in a thread (transport/regex_guard.py). The evaluator keeps its own
    logic; only its compiled pattern is swapped for the guarded one.
    """
    # A project with a regex only:
    from oloproof.transport.regex_guard import START_S, GuardedPattern

    compiled = getattr(evaluator, "pattern", None)
    if isinstance(compiled, re.Pattern):
        evaluator.pattern = GuardedPattern(  # type: ignore[attr-defined]
            compiled.pattern, compiled.flags, timeout_s
        )
        evaluator.timeout_s = timeout_s  # type: ignore[attr-defined]
        # The limit counts from when the child is ready: the thread may wait for its start.
        evaluator.thread_timeout_s = timeout_s + START_S  # type: ignore[attr-defined]


def _guard_schema(evaluator: InlineEvaluator, timeout_s: float) -> None:
    """Validate under ``timeout_s``, from a worker thread: a schema of any size checked
    against an output of any size must not hold the run (limits.evaluator_timeout_s).

    A schema with regular expressions (``pattern``, ``patternProperties``) validates in a
    child process, killed at the limit, as the regex evaluator matches: jsonschema
    matches them with ``re``, which holds the GIL for a whole match (a ``^(a+)+$``
    froze every thread of the run). The limit counts from when the child is ready:
    the thread waiting on it may also wait for the child to start.
    """
    evaluator.timeout_s = timeout_s  # type: ignore[attr-defined]
    from oloproof.transport.regex_guard import START_S, GuardedSchema, has_patterns

    schema = evaluator.config.schema_  # type: ignore[attr-defined]
    if has_patterns(schema):
        evaluator.guard = GuardedSchema(schema, timeout_s)  # type: ignore[attr-defined]
        evaluator.thread_timeout_s = timeout_s + START_S  # type: ignore[attr-defined]


def model_config(project: Project, variant: str | None = None) -> dict[str, Any]:
    """``system.model`` as a plain mapping, with matrix variant ``variant``'s overrides."""
    cfg = project.config.system
    assert cfg.model is not None
    merged = dict(cfg.model.dump())
    if variant is not None:
        merged.update(matrix_variant(project, variant).overrides())
    return merged


def matrix_variant(project: Project, name: str) -> Any:
    """The matrix variant called ``name``, or a usage error listing the variants."""
    from oloproof.errors import UsageError

    matrix = project.config.matrix
    if matrix is None:
        raise UsageError(
            f"{project.display} declares no matrix: there is no variant '{name}'"
            " (docs/prompts-and-models.md)"
        )
    for variant in matrix.variants:
        if variant.name == name:
            return variant
    raise UsageError(
        f"no variant '{name}' in the matrix of {project.display}"
        f" (variants: {', '.join(matrix.names())})"
    )


def build_system(project: Project, variant: str | None = None) -> SystemRunner:
    cfg = project.config.system
    conc = project.config.concurrency.system
    limits = project.config.limits
    if cfg.model is not None:
        from oloproof.systems.model import ModelSystem  # a project without one never needs it

        index = None if variant is None else project.config.matrix.names().index(variant)  # type: ignore[union-attr]
        return ModelSystem(
            name=cfg.name, config=model_config(project, variant), root=project.root,
            version=cfg.version, variant=variant, concurrency=conc,
            file=os.path.basename(project.config_path),
            field="system.model" if index is None else f"matrix.variants[{index}]",
            max_response_bytes=limits.max_response_bytes, max_json_depth=limits.max_json_depth,
        )
    if variant is not None:
        matrix_variant(project, variant)  # the usage error: no matrix without a model
    if cfg.http is not None:
        from oloproof.systems.http import HttpSystem

        return HttpSystem.from_config(
            cfg, concurrency=conc, file=os.path.basename(project.config_path),
            max_response_bytes=limits.max_response_bytes, max_json_depth=limits.max_json_depth,
        )
    from oloproof.systems.callable import CallableSystem

    return CallableSystem(
        cfg, project.root, concurrency=conc, file=os.path.basename(project.config_path),
        rate_limits=project.config.concurrency.adaptive.system,
    )


def describe_system(project: Project, system: SystemRunner) -> dict[str, Any]:
    """What ``runs`` and ``inspect`` show of a system: kind, name, version, target."""
    cfg = project.config.system
    describe = getattr(system, "describe", None)
    if cfg.model is not None and callable(describe):
        return dict(describe())
    if cfg.http is not None:
        return {"kind": "http", "name": cfg.name, "version": cfg.http.version,
                "url": cfg.http.url, "method": cfg.http.method}
    return {"kind": "callable", "name": cfg.name, "version": getattr(system, "version", None),
            "callable": cfg.callable}


def prepare(
    config_path: str | os.PathLike[str], policy_arg: str | None, group_by: Sequence[str] = (),
    trials: int | None = None, executor: str | None = None, ray_address: str | None = None,
    variant: str | None = None,
) -> Prepared:
    """Load, check and build a run; raises ConfigError before anything is stored.

    ``group_by``: metadata keys to break every metric down by, beside each evaluator's
    own ``group_by`` (stored with the run's metrics: analysis/groups.py). ``executor``
    (``local`` or ``ray``) overrides ``executor:`` in oloproof.yaml; ``ray_address`` names
    a Ray cluster (else ``RAY_ADDRESS``, else a local instance)."""
    project, policy, policy_path, keep = load_configuration(config_path, policy_arg)
    if ray_address is not None and (executor or project.config.executor) != "ray":
        # Ignored, the run went on locally with no word that the cluster was not used.
        raise UsageError(
            "--ray-address (ray_address=) names the Ray cluster of a run on Ray, but this"
            f" run's executor is {executor or project.config.executor}: add --executor ray"
            " (executor='ray'), or write executor: ray in oloproof.yaml"
        )
    suite = project.load_suite()
    try:
        system = build_system(project, variant)
        inline, judges = build_evaluators(project)
        if (executor or project.config.executor) == "ray":
            from oloproof.runner.ray_executor import use_ray  # Ray only when chosen

            system, inline = use_ray(project, system, inline, policy_arg=policy_arg,
                                     address=ray_address, from_flag=executor == "ray",
                                     variant=variant)
    except ConfigError as exc:
        raise _located(exc, project.config_path, project.display,
                       (os.path.basename(project.config_path), project.display)) from exc.__cause__
    if judges or project.config.system.http is not None or project.config.system.model is not None:
        from oloproof.transport.http import check_proxy_environment

        check_proxy_environment()  # every HTTP client of the run would refuse it
    evaluators: list[Evaluator] = [*inline, *judges]
    metrics: list[dict[str, Any]] = [
        {
            "criterion": e.criterion,
            "kind": e.metric_kind,
            "range": list(e.value_range) if e.value_range else None,
            "identity": e.identity,
            **({"judge": True} if getattr(e, "is_judge", False) else {}),
        }
        for e in evaluators
    ]
    # Keep the declared order of criteria.
    order = list(project.config.metrics())
    metrics.sort(key=lambda m: order.index(m["criterion"]))
    declared = {ev.criterion: list(ev.group_by) for ev in project.config.evaluators}
    for m in metrics:
        keys = list(dict.fromkeys([*declared.get(m["criterion"], []), *group_by]))
        if keys:  # only when grouped: an ungrouped run stores what it always stored
            m["group_by"] = keys
    try:
        _check_group_rules(
            policy, policy_path, {m["criterion"]: m.get("group_by", []) for m in metrics}
        )
        check_trials(policy, policy_path, project.config.trials if trials is None else trials)
    except ConfigError as exc:
        if policy_path is None:
            raise
        # policy_path is the policy as the user can open it (--policy as given, or
        # relative to where the command runs): its line is looked up there.
        raise _located(exc, policy_path, policy_path, (policy_path,)) from None
    cases = [
        EngineCase(c.id, c.input, c.expected, c.metadata, i) for i, c in enumerate(suite.cases)
    ]
    retry = RetryPolicy(max_retry_wait_s=float(project.config.retry.max_retry_wait_s))
    labels = project.load_labels()
    chosen = project.config.trials if trials is None else trials
    check_can_fail(project, policy, policy_path, suite, metrics, chosen, group_by)
    return Prepared(
        project, policy, policy_path, system, inline, judges, cases, suite.digest, metrics, retry,
        labels, trials=chosen, keep=keep, variant=variant, policy_given=policy_arg is not None,
    )


def identity_warning(prepared: Prepared) -> str | None:
    """One sentence when the system's module uses project files outside its identity
    (systems/loading.py, imports_outside_identity): editing only those keeps the cache;
    and one more for each custom evaluator whose module does (its cached verdicts)."""
    sentences = []
    files = list(getattr(prepared.system, "outside_identity", None) or [])
    if files:
        own = getattr(prepared.system, "module_file", None) or "the system's module"
        shown, listed, them = _files_shown(files)
        sentences.append(
            f"{own} uses project code that is not part of the system's identity ({shown}):"
            f" an edit to {them} alone keeps this system's cached"
            f" results. List {them} in system.code_paths in"
            f" {prepared.project.display} (code_paths: [{listed}]), or run without the cache"
            " after such an edit (--no-cache; use_cache=False)"
        )
    for evaluator in prepared.inline:
        files = list(getattr(evaluator, "outside_identity", None) or [])
        if not files:
            continue
        own = getattr(evaluator, "module_file", None) or "the evaluator's module"
        shown, listed, them = _files_shown(files)
        sentences.append(
            f"{own} (evaluator {evaluator.criterion}) uses project code that is not part of"
            f" its identity ({shown}): an edit to {them} alone keeps its cached verdicts."
            f" List {them} in the evaluator's code_paths in {prepared.project.display}"
            f" (code_paths: [{listed}]), or run without the cache after such an edit"
            " (--no-cache; use_cache=False)"
        )
    return "; ".join(sentences) or None


def _files_shown(files: list[str]) -> tuple[str, str, str]:
    """The files as a warning names them (at most five), as code_paths would list them,
    and the pronoun for them."""
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return shown, ", ".join(files[:5]), "it" if len(files) == 1 else "them"


def _located(
    exc: ConfigError, path: str, display: str, names: tuple[str, ...]
) -> ConfigError:
    """An error found after validation (a callable that cannot be imported, a rule on
    groups the metric does not have), given the line of its field in ``path`` and the file
    named as ``display``, when it is about that file."""
    if exc.file is not None and exc.file not in names:
        return exc
    from oloproof.project._yaml import with_line  # only on the way to an error

    return with_line(exc, path, display)


def check_can_fail(
    project: Project, policy: ReleasePolicy, policy_path: str | None, suite: Suite,
    metrics: Sequence[dict[str, Any]], trials: int, group_by: Sequence[str] = (),
) -> None:
    """ALLOW is earned (policy/can_fail.py): before anything is stored or called, refuse
    an evaluator that no case can feed, a policy that cannot block, and a rule that could
    not fail on this suite."""
    from oloproof.policy.can_fail import (
        CaseFacts,
        PolicySource,
        check_evaluators,
        check_release_policy,
    )

    check_evaluators(project, [c.expected for c in suite.cases])
    check_group_keys(project, [c.metadata for c in suite.cases], group_by)
    source = PolicySource.file(policy_path) if policy_path is not None else PolicySource(None)
    facts = CaseFacts([c.metadata for c in suite.cases], trials, where=project.dataset_display)
    check_release_policy(policy, source, metrics, facts, declared_none=policy_path is None,
                         group_by=group_by)


def check_group_keys(
    project: Project, metadata: Sequence[object], group_by: Sequence[str] = ()
) -> None:
    """Refuse a ``group_by`` key (an evaluator's, or ``--group-by``) that no case's metadata
    has: every case would fall in one group ``KEY=null``, a typo (``langue`` for ``lang``)
    passing for a breakdown. As an evaluator whose field no case's expected holds is."""
    have = {str(k) for m in metadata if isinstance(m, dict) for k in m}
    dataset = project.dataset_display
    wanted: list[tuple[str, str | None]] = [
        (key, f"evaluators[{index}].group_by[{k}]")
        for index, ev in enumerate(project.config.evaluators)
        for k, key in enumerate(ev.group_by)
    ]
    wanted += [(key, None) for key in group_by]
    for key, field in wanted:
        if key in have:
            continue
        from oloproof.project._words import closest  # only for a refusal

        hint = closest(key, have)
        where = "" if field is not None else f"--group-by {key}: "
        exc = ConfigError(
            f"{where}no case of {dataset} has the metadata key '{key}': every case would be"
            f" in the one group {key}=null"
            + (f"; did you mean '{hint}'?" if hint else ""),
            file=project.display if field is not None else None, field=field,
            accepted=(f"a key of the cases' metadata: {', '.join(sorted(have))}" if have
                      else f"cases with \"metadata\": {{...}} in {dataset}"),
        )
        if field is None:
            raise exc
        raise _located(exc, project.config_path, project.display,
                       (os.path.basename(project.config_path), project.display))


def _check_group_rules(
    policy: ReleasePolicy, policy_path: str | None, keys: dict[str, list[str]]
) -> None:
    """A rule on groups needs its metric grouped by that key, before anything runs."""
    for index, rule in enumerate(policy.rules):
        wanted = list(rule.group) if rule.group else ([] if not rule.each_group else [None])
        for key in wanted:
            have = keys.get(rule.metric, [])
            if (key is None and not have) or (key is not None and key not in have):
                field = "group" if key is not None else "each_group"
                raise ConfigError(
                    f"rule {rule.id} targets groups of metric {rule.metric}, which is not"
                    f" grouped{f' by {key}' if key else ''}: add group_by:"
                    f" [{key or 'KEY'}] to its evaluator in oloproof.yaml, or run with"
                    f" --group-by {key or 'KEY'}",
                    file=policy_path,
                    field=f"rules[{index}].{field}",
                    accepted=", ".join(have) if have else None,
                )


def policy_json(policy: ReleasePolicy) -> dict[str, Any]:
    data = dict(policy.dump(mode="json"))
    for rule in data.get("rules", []):
        if rule.get("aggregate") is None:
            # A rule without aggregate is stored as every earlier version stored it.
            rule.pop("aggregate", None)
    return data


def check_trials(policy: ReleasePolicy, policy_path: str | None, trials: int) -> None:
    """A rule on the flaky share needs repeated trials: refused before anything runs."""
    for index, rule in enumerate(policy.rules):
        if rule.aggregate == "flaky_share" and trials < 2:
            raise ConfigError(
                f"rule {rule.id} bounds the flaky share of {rule.metric}, and the run makes"
                " one trial per case: a case can only be flaky over repeated trials (set"
                " trials: 2 or more in oloproof.yaml, or pass --trials)",
                file=policy_path,
                field=f"rules[{index}].aggregate", accepted="mean, pass_at_k, pass_all_k",
            )


def expand_trials(cases: Sequence[EngineCase], trials: int) -> list[EngineCase]:
    """Every case ``trials`` times, its trials one after another (a case finishes soon
    after it starts, so a stopped run keeps whole cases)."""
    if trials == 1:
        return list(cases)
    return [
        EngineCase(c.id, c.input, c.expected, c.metadata, c.index, t)
        for c in cases for t in range(trials)
    ]
