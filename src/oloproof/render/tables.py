"""The final tables of a run (SPEC §6), kept apart from the data they show.

Each table and line is built once, as a :mod:`oloproof.render.doc` description,
which imports nothing of rich: outside a terminal ``render/plain.py`` prints it
without rich; in a terminal (and wherever it is put in a rich ``Group``) rich draws
it, as the same rich ``Text`` and fitted ``Table`` as before. When the report will
be drawn by rich, ``oloproof run`` calls :func:`preload` to import rich in the
background while the first calls are in flight, off the run's critical path.
"""

from __future__ import annotations

from collections.abc import Sequence

from oloproof._json import storable
from oloproof.enums import Completeness, GateAction, MetricKind, RuleState, RunStatus
from oloproof.policy.decide import CANNOT_FAIL, Decision, MetricSummary, fmt_interval, pct
from oloproof.policy.format import estimate_text, interval_text, level_text
from oloproof.policy.judges import AnyJudgeReport, JudgeReport, ScoredJudgeReport
from oloproof.project._project import NO_RULES_NOTE
from oloproof.render.doc import Blocks, Column, Line, Table, assemble, line
from oloproof.textsafe import one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading

    from oloproof.api import RunResult

# Long enough for a run to have made its first calls, short enough to be done
# before a run of a second or more needs the tables.
_PRELOAD_DELAY_S = 0.05
_preload: tuple[threading.Thread, threading.Event] | None = None

#: A ``policy: none`` run whose gate does not allow (a subset or a shard, whose note says
#: why it blocks): the declaration without "Gate ALLOW".
NO_RULES_BLOCKED = "No release rules, by declaration (policy: none in oloproof.yaml)."


def preload(delay_s: float = _PRELOAD_DELAY_S) -> None:
    """Import what the final report needs in a background thread, after ``delay_s``.

    Purely a matter of timing: whichever thread imports rich first does the
    work (the import lock makes the other wait for it). :func:`run_report`
    joins the thread, so none outlives the report.
    """
    global _preload
    if _preload is not None:
        return
    import threading

    go = threading.Event()

    def load() -> None:
        go.wait(delay_s)
        import rich.console
        import rich.table
        import rich.text  # noqa: F401

    thread = threading.Thread(target=load, name="oloproof-preload", daemon=True)
    thread.start()
    _preload = (thread, go)


def _join_preload() -> None:
    global _preload
    if _preload is not None:
        thread, go = _preload
        go.set()
        thread.join()
        _preload = None


_STATE_STYLE: dict[str, str] = {
    RuleState.PASS: "bold green",
    RuleState.FAIL: "bold red",
    RuleState.INSUFFICIENT_EVIDENCE: "bold yellow",
    RuleState.MANUAL_REVIEW: "bold magenta",
}
_GATE_STYLE: dict[str, str] = {
    GateAction.BLOCK: "bold red", GateAction.WARN: "bold yellow", GateAction.ALLOW: "bold green"
}


def run_title(run_id: str, status: str, completeness: str) -> Line:
    """``Run run_… [STATUS/COMPLETENESS]``, red unless the run was decided."""
    style = "bold" if status == RunStatus.DECIDED else "bold red"
    return assemble(
        line("Run ", "bold"), line(run_id, "bold cyan"), line(" "),
        line(f"[{status}/{completeness}]", style),
    )


def decisions_table(decisions: Sequence[Decision]) -> Table:
    """One row per decided rule; every cell is literal text (ids and reasons may hold anything)."""
    table = Table(
        title=line("Decisions"),
        columns=(
            # In a narrow terminal the explanation wraps; names and states are never cut.
            *(Column(col, no_wrap=True, min_width=len(col))
              for col in ("Rule", "Metric", "State", "Action")),
            # Wide enough that a reason word and an interval are never broken inside.
            Column("Reason", overflow="fold", min_width=16),
            Column("Detail", overflow="fold", min_width=24),
        ),
    )
    for d in decisions:
        table.add_row(
            line(d.rule), line(d.metric), line(d.state, _STATE_STYLE.get(d.state, "")),
            line(d.action), line(d.reason), line(d.detail),
        )
    return table


def metric_estimate(s: MetricSummary) -> str:
    if s.estimate is None:
        return ""
    return pct(s.estimate) if s.kind == MetricKind.BINARY else f"{s.estimate:.4g}"


def metric_interval(s: MetricSummary) -> str:
    if s.kind == MetricKind.BINARY:
        return fmt_interval(s.lower, s.upper)
    text = interval_text(s.lower, s.upper, s.kind)  # outward, like a rate's
    if text and s.guarantee == "approximate":
        # Student t on a MEAN without a declared range (issue 33): never shown unlabelled.
        return f"{text} approximate (t)"
    return text


def metrics_table(summaries: Sequence[MetricSummary]) -> Table:
    """One row per metric: estimate, interval and the cases behind them (SPEC §6)."""
    table = Table(
        title=line("Metrics"),
        columns=tuple(Column(col, no_wrap=True)
                      for col in ("Metric", "Estimate", "Interval", "Cases")),
    )
    for s in summaries:
        table.add_row(
            line(s.metric), line(metric_estimate(s)), line(metric_interval(s)),
            line(s.cases_text()),
        )
    return table


def cache_line(cache: dict[str, int] | None) -> Line:
    c = cache or {}
    return line(
        f"Cache     executions {c.get('execution_hits', 0)} hits · "
        f"{c.get('execution_misses', 0)} misses   judgments {c.get('judgment_hits', 0)} hits · "
        f"{c.get('judgment_misses', 0)} misses"
    )


def gate_line(gate: str, exit_code: int, declaration: str | None = None) -> Line:
    """``Gate      ALLOW   exit code 0``, and what the policy declares about it
    (``FAIL does not block, by declaration``) when it does."""
    return assemble(
        line("Gate      "), line(gate, _GATE_STYLE.get(gate, "")), line(f"   exit code {exit_code}"),
        *([line(f"   ({declaration})", "yellow")] if declaration else []),
    )


def config_option(config_arg: str | None) -> str:
    """`` --config FILE`` for a command a report suggests, quoted for a shell (a path with a
    space or a quote in it is one argument); empty for the default, ./oloproof.yaml."""
    if not config_arg or config_arg == "oloproof.yaml":
        return ""
    import shlex  # a report's suggested command only (docs/design-notes.md, imports)

    return f" --config {shlex.quote(config_arg)}"


def plan_hints(
    run_id: str,
    decisions: Sequence[Decision],
    policy_arg: str | None,
    config_arg: str | None = None,
    summaries: Sequence[MetricSummary] = (),
    shard: bool = False,
) -> list[Line]:
    config = config_option(config_arg)
    extra = config
    if policy_arg:
        import shlex  # a report's suggested command only (docs/design-notes.md, imports)

        extra += f" --policy {shlex.quote(policy_arg)}"
    by_metric = {s.metric: s for s in summaries}
    hints = []
    for d in decisions:
        if d.state != RuleState.INSUFFICIENT_EVIDENCE:
            continue
        s = by_metric.get(d.metric)
        if d.basis == "corrected":
            hints.append(line(
                f"  {d.rule}: its interval narrows with more human labels: label more cases,"
                " drawn at random, and decide again"
            ))
        elif s is not None and s.observed == 0 and s.missing:
            # All missing: more cases would fail the same way; sizing would mislead.
            hints.append(line(
                f"  {d.rule}: no evidence (0 observed, {s.missing} missing): see what failed with"
            ))
            hints.append(line(f"    oloproof inspect {run_id} --failures{config}", whole=True))
        elif s is not None and s.observed == 0:
            hints.append(line(
                f"  {d.rule}: no observed case: every case was excluded from {d.metric},"
                " and more cases like them would be too"
            ))
        elif d.reason == CANNOT_FAIL:
            # Not a wide interval: a scope too small to fail the rule; sizing would mislead.
            hints.append(line(
                f"  {d.rule}: too few cases in its scope to fail it, whatever their"
                " outcomes: see them with"
            ))
            hints.append(line(f"    oloproof inspect {run_id}{config}", whole=True))
        elif d.incomplete:
            # A shard's share is its slice's: `merge` judges max_missing on the suite's.
            hints.append(line(
                f"  {d.rule}: more of this shard's cases are missing than max_missing"
                " (`oloproof merge` judges the suite's share): see what failed with"
                if shard else f"  {d.rule}: too much is missing to size it: see what failed with"
            ))
            hints.append(line(f"    oloproof inspect {run_id} --failures{config}", whole=True))
        else:
            # The command on a line of its own, never wrapped: it fits 80 columns whole.
            hints.append(line(f"  {d.rule}: size it with"))
            hints.append(line(f"    oloproof plan {run_id} --run{extra}", whole=True))
    return hints


def panel_lines(splits: dict[str, tuple[int, int]]) -> list[str]:
    """One line per judge panel: how often its judges disagreed (a flakiness signal)."""
    lines = []
    for criterion, (split, judged) in splits.items():
        share = f" ({split / judged:.1%})" if judged else ""
        lines.append(
            f"Panel {criterion}: its judges disagreed on {split} of {judged} cases{share}"
            + ("; the verdicts on those cases are not stable (their reasons start"
               " 'split panel')." if split else ".")
        )
    return lines


def judge_tables(reports: Sequence[AnyJudgeReport]) -> list[Table]:
    """The pass/fail judges' table and the scored judges' table, those that have a row."""
    binary = [r for r in reports if isinstance(r, JudgeReport)]
    scored = [r for r in reports if isinstance(r, ScoredJudgeReport)]
    return ([judges_table(binary)] if binary else []) + (
        [scored_judges_table(scored)] if scored else [])


def scored_judges_table(reports: Sequence[ScoredJudgeReport]) -> Table:
    """Each scored judge against a person's scores: the mean absolute difference and the
    quadratic-weighted kappa with their intervals, exact matches, and the two means."""
    from oloproof.stats.agreement import MEAN_ABS_DIFF_METHOD

    level = reports[0].agreement.level if reports else 0.95
    mad_method = MEAN_ABS_DIFF_METHOD.split(" (")[0]
    title = line(f"Scored judges against human labels ({round(level * 100, 1):g}% intervals:"
                 f" {mad_method} for the mean absolute difference, large-sample for kappa)")
    table = Table(title=title, columns=tuple(Column(col, no_wrap=True) for col in (
        "Judge", "Scale", "Labels", "Mean abs. difference", "Weighted kappa (quadratic)",
        "Same score", "Judge · person mean", "Judge mean",
    )))
    for r in reports:
        a = r.agreement
        low, high = a.scale
        if a.mean_abs_diff is None:
            mad = "–"
        else:
            iv = a.mean_abs_diff_interval
            mad = estimate_text(a.mean_abs_diff, MetricKind.MEAN) + (
                f" {interval_text(iv.lower, iv.upper, MetricKind.MEAN)}" if iv else "")
        if a.weighted_kappa is None:
            kappa = "–"
        elif a.weighted_kappa_interval is None:
            kappa = f"{a.weighted_kappa:.2f}"
        else:
            kiv = a.weighted_kappa_interval
            kappa = f"{a.weighted_kappa:.2f} [{kiv.lower:.2f}, {kiv.upper:.2f}]"
        labels = f"{r.labels}"
        if r.judge_missing:
            labels += f" ({r.judge_missing} without score)"
        if r.labels_stale:
            labels += f" ({r.labels_stale} on another output, not used)"
        means = ("–" if a.judge_mean is None or a.person_mean is None
                 else f"{a.judge_mean:.2f} · {a.person_mean:.2f}")
        raw = "–" if r.raw_estimate is None else f"{r.raw_estimate:.2f} of {r.raw_observed}"
        table.add_row(*map(line, (
            r.criterion, f"{low:g}–{high:g}", labels, mad, kappa,
            f"{a.exact} of {a.n}", means, raw,
        )))
    return table


def judges_table(reports: Sequence[AnyJudgeReport]) -> Table:
    """Each pass/fail judge against a person: agreement, sensitivity, specificity, kappa,
    the confusion counts, and the judge's raw rate beside the corrected one (scored judges
    have :func:`scored_judges_table`)."""
    binary = [r for r in reports if isinstance(r, JudgeReport)]

    def prop(p: object) -> str:
        interval = getattr(p, "interval", None)
        if interval is None:
            return "–"
        est = pct(getattr(p, "estimate", None))
        return f"{est} {fmt_interval(interval.lower, interval.upper)}"

    level = binary[0].agreement.level if binary else 0.95
    title = line(f"Judges against human labels ({level_text(level)} intervals: CP for"
                 " rates, large-sample for kappa, PPI for the corrected rate)")
    table = Table(title=title, columns=tuple(Column(col, no_wrap=True) for col in (
        "Judge", "Labels", "Agreement", "Sensitivity", "Specificity", "Kappa",
        "Judge/person pass·pass pass·fail fail·pass fail·fail", "Judge rate", "Corrected rate",
    )))
    for r in binary:
        a = r.agreement
        if a.kappa is None:
            kappa = "–"
        elif a.kappa_interval is None:
            kappa = f"{a.kappa:.2f}"
        else:
            kappa = f"{a.kappa:.2f} [{a.kappa_interval.lower:.2f}, {a.kappa_interval.upper:.2f}]"
        labels = f"{r.labels}"
        if r.judge_missing:
            labels += f" ({r.judge_missing} without verdict)"
        if r.labels_stale:
            labels += f" ({r.labels_stale} on another output, not used)"
        c = r.corrected
        corrected = (f"{pct(c.estimate)} {fmt_interval(c.lower, c.upper)}" if c is not None
                     else r.corrected_note)
        table.add_row(*map(line, (
            r.criterion, labels, prop(a.agreement), prop(a.sensitivity), prop(a.specificity),
            kappa, f"{a.both_pass} · {a.judge_only} · {a.person_only} · {a.both_fail}",
            f"{pct(r.raw_estimate)} of {r.raw_observed}", corrected,
        )))
    return table


def run_report(
    *,
    run_id: str,
    status: str,
    completeness: str,
    decisions: Sequence[Decision],
    summaries: Sequence[MetricSummary],
    cache: dict[str, int] | None,
    gate: str,
    exit_code: int,
    note: str | None = None,
    policy_arg: str | None = None,
    config_arg: str | None = None,
    judges: Sequence[AnyJudgeReport] = (),
    declaration: str | None = None,
    shard: bool = False,
) -> Blocks:
    """The whole end-of-run report (SPEC §6), for ``render.console`` to print.

    Every id, reason and note in it is literal text (``render.doc.line``):
    nothing stored can restyle the report, break it, or drive the terminal.
    """
    _join_preload()
    parts: list[Line | Table] = [run_title(run_id, status, completeness)]
    if note:
        parts.append(line(note, "red"))
    if decisions:
        parts.append(decisions_table(decisions))
    elif completeness == Completeness.PARTIAL:
        parts.append(line("No decisions: a partial run is not decided."))
    else:
        parts.append(line("No rules: the release policy declares none."))
    if summaries:
        parts.append(metrics_table(summaries))
    if judges:
        parts.extend(judge_tables(judges))
    parts.append(cache_line(cache))
    parts.append(gate_line(gate, exit_code, declaration))
    hints = plan_hints(run_id, decisions, policy_arg, config_arg, summaries, shard)
    if hints:
        parts.append(line("Undecided rules:"))
        parts.extend(hints)
    return Blocks(parts)


def result_report(
    result: RunResult, note: str | None, *, policy_arg: str | None, config_arg: str | None,
) -> Blocks:
    """:func:`run_report` of a run's result (``run``, ``gate``)."""
    return run_report(
        run_id=result.run_id, status=result.status, completeness=result.completeness,
        decisions=result.decisions, summaries=list(result.metrics.values()),
        cache=result.cache, gate=result.gate, exit_code=result.exit_code, note=note,
        policy_arg=policy_arg, config_arg=config_arg, judges=result.judges,
        declaration=result.declaration,
        shard=result.subset is not None and result.subset.shard is not None,
    )


def subset_notes(result: RunResult) -> list[str]:
    """The line that says a run is a subset or a shard, and so never allows (none for a run
    of the whole suite)."""
    if result.subset is not None and result.subset.shard is not None:
        return [(
            f"S{result.subset.describe()[1:]}. Its rules are decided on these cases"
            " only; a shard never allows a release (exit 5 unless a rule FAILs): join"
            " the shards into one run of the suite with `oloproof merge`."
        )]
    if result.subset is not None:
        return [(
            f"Subset: {result.subset.describe()}. Its rules are decided on these cases"
            " only; a subset never allows a release (exit 5 unless a rule FAILs)."
        )]
    return []


def run_note(result: RunResult, executor: str | None = None) -> str | None:
    """What ``run`` says above its tables: judge panels, the subset or shard it decided on,
    where it ran (``executor``: the Ray executor's description), failed calls, why it
    stopped, a sequential decision's reading, the gate's notes, and a project without
    rules. User text (errors, reasons) may hold lone surrogates: the note is printable."""
    notes = panel_lines(result.panels)
    notes.extend(subset_notes(result))
    if executor:
        notes.append(executor)
    if result.notice:
        notes.append(f"Failed calls: {result.notice}.")
    if result.stop_reason:
        notes.append(
            f"Stopped: {result.stop_reason}. Finished cases are stored;"
            " the next run takes them from the cache."
            if result.kept else f"Stopped: {result.stop_reason}."
        )
    if result.sequential_note:
        notes.insert(0, result.sequential_note)
    notes.extend(map(one_line, result.gate_notes))  # a path may hold a newline
    if result.policy_path is None and not result.decisions and result.status == RunStatus.DECIDED:
        # Only `policy: none` leaves a run without a policy file. Its gate allows by
        # declaration, unless the run is a subset or a shard (it blocks, as the note says).
        notes.append(NO_RULES_NOTE if result.gate == GateAction.ALLOW else NO_RULES_BLOCKED)
    return storable("\n".join(notes)) or None


def gate_note(result: RunResult, policy_arg: str | None) -> str | None:
    """What ``gate`` says above its tables (as :func:`run_note`, of a stored run)."""
    lines = panel_lines(result.panels)
    if result.sequential_note:
        lines.append(result.sequential_note)
    if result.stop_reason:
        lines.append(f"Stopped: {result.stop_reason}")
    elif result.subset is not None:
        lines.append(
            f"Subset: {result.subset.describe()}; decided on these cases only, it never"
            " allows a release."
        )
    elif not result.decisions and policy_arg is None and result.policy_path is None:
        # A run is stored without a policy file only when its project says `policy: none`.
        lines.append(NO_RULES_NOTE)
    lines.extend(map(one_line, result.gate_notes))
    return "\n".join(lines) or None
