"""A comparison as text, drawn from the same JSON document ``compare --json`` prints.

``oloproof compare`` and ``oloproof inspect CMP_ID`` both render through
:func:`comparison_report`, from the document stored with the comparison, so what is shown
later is what was shown then.
"""

from __future__ import annotations

from typing import Any

from oloproof.enums import MetricKind
from oloproof.policy.compare import fmt_difference, fmt_difference_interval
from oloproof.policy.decide import CANNOT_FAIL, Decision
from oloproof.policy.format import estimate_text, level_text
from oloproof.render.doc import Blocks, Column, Line, Table, assemble, line, system_label
from oloproof.render.tables import config_option, decisions_table, gate_line

_SHOWN_IDS = 5


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:_SHOWN_IDS])
    return shown + (f", … ({len(ids) - _SHOWN_IDS} more)" if len(ids) > _SHOWN_IDS else "")


def _value(x: float | None, kind: str) -> str:
    if x is None:
        return ""
    return estimate_text(x, kind)


def _run_line(label: str, run: dict[str, Any]) -> Line:
    system = run.get("system") or {}
    name = system_label(system)
    return line(
        f"  {label:<10} {run['run_id']}  {name}  "
        f"({run['cases_stored']} cases, {run['state']})"
    )


def paired_table(metrics: list[dict[str, Any]]) -> Table:
    table = Table(line("Paired metrics (candidate − baseline)"), tuple(
        Column(col, no_wrap=True) for col in (
            "Metric", "Candidate", "Baseline", "Difference", "Interval", "Pairs", "Both pass",
            "Both fail", "Candidate only", "Baseline only", "Dropped",
        )))
    for m in metrics:
        kind = m["kind"]
        binary = kind == MetricKind.BINARY
        table.add_row(*map(line, (
            m["metric"],
            _value(m["candidate"], kind),
            _value(m["baseline"], kind),
            fmt_difference(m["difference"], kind),
            fmt_difference_interval(m["lower"], m["upper"], kind),
            str(m["pairs"]),
            str(m["both_pass"]) if binary else "",
            str(m["both_fail"]) if binary else "",
            str(m["candidate_only"]) if binary else "",
            str(m["baseline_only"]) if binary else "",
            f"{m['dropped_missing']} missing · {m['dropped_excluded']} excluded",
        )))
    return table


def methods_note(metrics: list[dict[str, Any]], level: float) -> Line:
    kinds = {m["kind"] for m in metrics}
    parts = []
    if MetricKind.BINARY in kinds:
        parts.append(
            f"rates: Newcombe's hybrid score interval for paired proportions at {level_text(level)}"
        )
    means = {str(m.get("method", "")).startswith("paired Student t")
             for m in metrics if m["kind"] == MetricKind.MEAN}
    if False in means:
        parts.append("means with a declared range: betting interval on the paired differences"
                     f" at {level_text(level)}")
    if True in means:
        parts.append(f"means without a range: paired Student t interval at {level_text(level)}"
                     " (approximate)")
    note = "Intervals on candidate − baseline; " + "; ".join(parts) + "." if parts else ""
    note += (
        " Only cases observed in both runs are paired; a case missing or excluded in either"
        " run is dropped, and a rule passes only if it would with the missing ones at their"
        " worst."
    )
    return line(note.strip())


def comparison_report(doc: dict[str, Any], *, config_arg: str | None = None) -> Blocks:
    """The comparison's text: header, decisions, paired metrics, gate, plan hints."""
    pairing = doc["pairing"]
    parts: list[Line | Table] = [
        assemble(line("Comparison ", "bold"), line(doc["comparison_id"], "bold cyan")),
        _run_line("candidate", doc["candidate"]),
        _run_line("baseline", doc["baseline"]),
        line(
            f"  {'paired':<10} {pairing['shared']} case ids in both runs · "
            f"{len(pairing['only_candidate'])} only in the candidate · "
            f"{len(pairing['only_baseline'])} only in the baseline"
        ),
    ]
    if pairing["only_candidate"]:
        parts.append(line(f"  {'':<10} only in the candidate: {_ids(pairing['only_candidate'])}"))
    if pairing["only_baseline"]:
        parts.append(line(f"  {'':<10} only in the baseline: {_ids(pairing['only_baseline'])}"))
    for warning in doc.get("warnings", []):
        parts.append(line(f"  {'warning':<10} {warning}", "yellow"))
    decisions = [Decision(**d) for d in doc["decisions"]]
    if decisions:
        parts.append(decisions_table(decisions))
    elif doc.get("incomplete"):
        parts.append(
            line("No decisions: a partial run is not decided, nor is a comparison with one.")
        )
    else:
        why = doc.get("policy_note") or "the comparison policy declares none"
        parts.append(line(f"No rules: {why}."))
    if doc["metrics"]:
        parts.append(paired_table(doc["metrics"]))
        parts.append(methods_note(doc["metrics"], float(doc["confidence_level"])))
    else:
        parts.append(line("No metric is shared by the two runs: nothing to compare."))
    for note in doc.get("gate_notes") or ():
        parts.append(line(note, "red"))
    parts.append(gate_line(doc["gate"], int(doc["exit_code"]), doc.get("declaration")))
    undecided = [d for d in decisions if d.state == "INSUFFICIENT_EVIDENCE"]
    if undecided:
        extra = config_option(config_arg)
        parts.append(line("Undecided rules:"))
        for d in undecided:
            if d.reason == CANNOT_FAIL:
                parts.append(line(f"  {d.rule}: too few pairs to fail it, whatever their"
                                  " outcomes: compare runs that share more cases"))
                continue
            parts.append(line(f"  {d.rule}: size it with"))
            parts.append(line(f"    oloproof plan {doc['comparison_id']}{extra}", whole=True))
    return Blocks(parts)
