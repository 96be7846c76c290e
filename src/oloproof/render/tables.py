"""The final tables of a run (SPEC §6), kept apart from the data they show.

rich is imported where a table is built, not when this module is: ``oloproof
run`` imports this module before the run and needs rich only at its end, so
:func:`preload` imports it in the background while the first calls are in
flight, off the run's critical path.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from oloproof.enums import Completeness, GateAction, MetricKind, RuleState, RunStatus
from oloproof.policy.decide import Decision, MetricSummary, fmt_interval, pct
from oloproof.policy.format import interval_text
from oloproof.policy.judges import JudgeReport
from oloproof.render.console import text
from oloproof.render.fit import Fitted, fit

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

# Long enough for a run to have made its first calls, short enough to be done
# before a run of a second or more needs the tables.
_PRELOAD_DELAY_S = 0.05
_preload: tuple[threading.Thread, threading.Event] | None = None


def preload(delay_s: float = _PRELOAD_DELAY_S) -> None:
    """Import what the final report needs in a background thread, after ``delay_s``.

    Purely a matter of timing: whichever thread imports rich first does the
    work (the import lock makes the other wait for it). :func:`run_report`
    joins the thread, so none outlives the report.
    """
    global _preload
    if _preload is not None:
        return
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


def run_title(run_id: str, status: str, completeness: str) -> Text:
    """``Run run_… [STATUS/COMPLETENESS]``, red unless the run was decided."""
    from rich.text import Text

    style = "bold" if status == RunStatus.DECIDED else "bold red"
    return Text.assemble(
        ("Run ", "bold"), text(run_id, "bold cyan"), " ", text(f"[{status}/{completeness}]", style)
    )


def decisions_table(decisions: Sequence[Decision]) -> Fitted:
    """One row per decided rule; every cell is literal text (ids and reasons may hold anything)."""
    from rich.table import Table

    table = Table(title=text("Decisions"), title_justify="left")
    # In a narrow terminal the explanation wraps; names and states are never cut.
    for col in ("Rule", "Metric", "State", "Action"):
        table.add_column(col, no_wrap=True, min_width=len(col))
    # Wide enough that a reason word and an interval are never broken inside.
    table.add_column("Reason", overflow="fold", min_width=16)
    table.add_column("Detail", overflow="fold", min_width=24)
    for d in decisions:
        table.add_row(
            text(d.rule), text(d.metric), text(d.state, _STATE_STYLE.get(d.state, "")),
            text(d.action), text(d.reason), text(d.detail),
        )
    return fit(table)


def metric_estimate(s: MetricSummary) -> str:
    if s.estimate is None:
        return ""
    return pct(s.estimate) if s.kind == MetricKind.BINARY else f"{s.estimate:.4g}"


def metric_interval(s: MetricSummary) -> str:
    if s.kind == MetricKind.BINARY:
        return fmt_interval(s.lower, s.upper)
    return interval_text(s.lower, s.upper, s.kind)  # outward, like a rate's


def metrics_table(summaries: Sequence[MetricSummary]) -> Fitted:
    """One row per metric: estimate, interval and the cases behind them (SPEC §6)."""
    from rich.table import Table

    table = Table(title=text("Metrics"), title_justify="left")
    for col in ("Metric", "Estimate", "Interval", "Cases"):
        table.add_column(col, no_wrap=True)
    for s in summaries:
        table.add_row(
            text(s.metric), text(metric_estimate(s)), text(metric_interval(s)),
            text(s.cases_text()),
        )
    return fit(table)


def cache_line(cache: dict[str, int] | None) -> Text:
    c = cache or {}
    return text(
        f"Cache     executions {c.get('execution_hits', 0)} hits · "
        f"{c.get('execution_misses', 0)} misses   judgments {c.get('judgment_hits', 0)} hits · "
        f"{c.get('judgment_misses', 0)} misses"
    )


def gate_line(gate: str, exit_code: int) -> Text:
    from rich.text import Text

    return Text.assemble(
        "Gate      ", text(gate, _GATE_STYLE.get(gate, "")), f"   exit code {exit_code}"
    )


def plan_hints(
    run_id: str,
    decisions: Sequence[Decision],
    policy_arg: str | None,
    config_arg: str | None = None,
    summaries: Sequence[MetricSummary] = (),
) -> list[Text]:
    extra = f" --policy {policy_arg}" if policy_arg else ""
    if config_arg and config_arg != "oloproof.yaml":
        extra = f" --config {config_arg}" + extra
    by_metric = {s.metric: s for s in summaries}
    hints = []
    for d in decisions:
        if d.state != RuleState.INSUFFICIENT_EVIDENCE:
            continue
        s = by_metric.get(d.metric)
        if d.basis == "corrected":
            hints.append(text(
                f"  {d.rule}: its interval narrows with more human labels: label more cases,"
                " drawn at random, and decide again"
            ))
        elif s is not None and s.observed == 0 and s.missing:
            # All missing: more cases would fail the same way; sizing would mislead.
            hints.append(text(
                f"  {d.rule}: no evidence (0 observed, {s.missing} missing): see what failed"
                f" with  oloproof inspect {run_id} --failures"
            ))
        else:
            hints.append(text(f"  {d.rule}: size it with  oloproof plan {run_id} --run{extra}"))
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


def judges_table(reports: Sequence[JudgeReport]) -> Fitted:
    """Each judge against a person: agreement, sensitivity, specificity, kappa, the
    confusion counts, and the judge's raw rate beside the corrected one."""
    _join_preload()
    from rich.table import Table

    def prop(p: object) -> str:
        interval = getattr(p, "interval", None)
        if interval is None:
            return "–"
        est = pct(getattr(p, "estimate", None))
        return f"{est} {fmt_interval(interval.lower, interval.upper)}"

    level = reports[0].agreement.level if reports else 0.95
    title = text(f"Judges against human labels ({round(level * 100, 1):g}% intervals: CP for"
                 " rates, large-sample for kappa, PPI++ for the corrected rate)")
    table = Table(title=title, title_justify="left")
    for col in ("Judge", "Labels", "Agreement", "Sensitivity", "Specificity", "Kappa",
                "Judge/person pass·pass pass·fail fail·pass fail·fail", "Judge rate",
                "Corrected rate"):
        table.add_column(col, no_wrap=True)
    for r in reports:
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
        c = r.corrected
        corrected = (f"{pct(c.estimate)} {fmt_interval(c.lower, c.upper)}" if c is not None
                     else r.corrected_note)
        table.add_row(*map(text, (
            r.criterion, labels, prop(a.agreement), prop(a.sensitivity), prop(a.specificity),
            kappa, f"{a.both_pass} · {a.judge_only} · {a.person_only} · {a.both_fail}",
            f"{pct(r.raw_estimate)} of {r.raw_observed}", corrected,
        )))
    return fit(table)


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
    judges: Sequence[JudgeReport] = (),
) -> RenderableType:
    """The whole end-of-run report (SPEC §6) as one renderable.

    Every id, reason and note in it is literal text (``render.console.text``):
    nothing stored can restyle the report, break it, or drive the terminal.
    """
    _join_preload()
    from rich.console import Group

    parts: list[RenderableType] = [run_title(run_id, status, completeness)]
    if note:
        parts.append(text(note, "red"))
    if decisions:
        parts.append(decisions_table(decisions))
    elif completeness == Completeness.PARTIAL:
        parts.append(text("No decisions: a partial run is not decided."))
    else:
        parts.append(text("No rules: the release policy declares none."))
    if summaries:
        parts.append(metrics_table(summaries))
    if judges:
        parts.append(judges_table(judges))
    parts.append(cache_line(cache))
    parts.append(gate_line(gate, exit_code))
    hints = plan_hints(run_id, decisions, policy_arg, config_arg, summaries)
    if hints:
        parts.append(text("Undecided rules:"))
        parts.extend(hints)
    return Group(*parts)
