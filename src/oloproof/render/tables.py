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

from oloproof.policy.decide import Decision, MetricSummary, fmt_interval, pct
from oloproof.policy.format import interval_text

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table
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


_STATE_STYLE = {
    "PASS": "bold green",
    "FAIL": "bold red",
    "INSUFFICIENT_EVIDENCE": "bold yellow",
    "MANUAL_REVIEW": "bold magenta",
}


def run_title(run_id: str, status: str, completeness: str) -> Text:
    from rich.text import Text

    style = "bold" if status == "DECIDED" else "bold red"
    return Text.assemble(("Run ", "bold"), (run_id, "bold cyan"), " ", (f"[{status}/{completeness}]", style))


def decisions_table(decisions: Sequence[Decision]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="Decisions", title_justify="left")
    # In a narrow terminal the explanation wraps; names and states are never cut.
    for col in ("Rule", "Metric", "State", "Action"):
        table.add_column(col, no_wrap=True, min_width=len(col))
    table.add_column("Reason", overflow="fold")
    table.add_column("Detail", overflow="fold")
    for d in decisions:
        table.add_row(
            d.rule, d.metric, Text(d.state, style=_STATE_STYLE.get(d.state, "")), d.action,
            d.reason, d.detail,
        )
    return table


def metric_estimate(s: MetricSummary) -> str:
    if s.estimate is None:
        return ""
    return pct(s.estimate) if s.kind == "BINARY" else f"{s.estimate:.4g}"


def metric_interval(s: MetricSummary) -> str:
    if s.kind == "BINARY":
        return fmt_interval(s.lower, s.upper)
    return interval_text(s.lower, s.upper, s.kind)  # outward, like a rate's


def metrics_table(summaries: Sequence[MetricSummary]) -> Table:
    from rich.table import Table

    table = Table(title="Metrics", title_justify="left")
    for col in ("Metric", "Estimate", "Interval", "Cases"):
        table.add_column(col, no_wrap=True)
    for s in summaries:
        table.add_row(s.metric, metric_estimate(s), metric_interval(s), s.cases_text())
    return table


def cache_line(cache: dict[str, int] | None) -> Text:
    from rich.text import Text

    c = cache or {}
    return Text(
        f"Cache     executions {c.get('execution_hits', 0)} hits · "
        f"{c.get('execution_misses', 0)} misses   judgments {c.get('judgment_hits', 0)} hits · "
        f"{c.get('judgment_misses', 0)} misses"
    )


def gate_line(gate: str, exit_code: int) -> Text:
    from rich.text import Text

    style = {"BLOCK": "bold red", "WARN": "bold yellow", "ALLOW": "bold green"}.get(gate, "")
    return Text.assemble("Gate      ", (gate, style), f"   exit code {exit_code}")


def plan_hints(
    run_id: str,
    decisions: Sequence[Decision],
    policy_arg: str | None,
    config_arg: str | None = None,
) -> list[Text]:
    from rich.text import Text

    extra = f" --policy {policy_arg}" if policy_arg else ""
    if config_arg and config_arg != "oloproof.yaml":
        extra = f" --config {config_arg}" + extra
    return [
        Text(f"  {d.rule}: size it with  oloproof plan {run_id} --run{extra}")
        for d in decisions
        if d.state == "INSUFFICIENT_EVIDENCE"
    ]


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
) -> RenderableType:
    _join_preload()
    from rich.console import Group
    from rich.text import Text

    parts: list[RenderableType] = [run_title(run_id, status, completeness)]
    if note:
        parts.append(Text(note, style="red"))
    if decisions:
        parts.append(decisions_table(decisions))
    elif completeness == "PARTIAL":
        parts.append(Text("No decisions: a partial run is not decided."))
    else:
        parts.append(Text("No rules: the release policy declares none."))
    if summaries:
        parts.append(metrics_table(summaries))
    parts.append(cache_line(cache))
    parts.append(gate_line(gate, exit_code))
    hints = plan_hints(run_id, decisions, policy_arg, config_arg)
    if hints:
        parts.append(Text("Undecided rules:"))
        parts.extend(hints)
    return Group(*parts)
