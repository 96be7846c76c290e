"""A matrix as text, drawn from the document stored with it (``run --matrix``,
``inspect mx_…``): so what is shown later is what was shown then."""

from __future__ import annotations

from typing import Any

from oloproof.enums import MetricKind
from oloproof.policy.compare import fmt_difference, fmt_difference_interval
from oloproof.policy.format import estimate_text, interval_text, level_text
from oloproof.render.doc import Blocks, Column, Line, Table, assemble, line
from oloproof.render.tables import config_option, gate_line

__all__ = ["comparisons_table", "matrix_report", "variants_table"]

_VERDICT_STYLE = {"better": "green", "worse": "red", "not separated": "yellow"}


def _metric_cell(m: dict[str, Any]) -> str:
    kind = m["kind"]
    if m.get("estimate") is None:
        head = "–"
    else:
        head = estimate_text(m["estimate"], kind)
    interval = interval_text(m.get("lower"), m.get("upper"), kind)
    approximate = kind != MetricKind.BINARY and not m.get("range")
    return f"{head} {interval}".strip() + (" approximate (t)" if approximate and interval else "")


def sequential_text(reading: dict[str, Any] | None) -> str:
    """What a sequential variant's decision read: ``decided after N of M``."""
    if not reading:
        return ""
    total = int(reading.get("cases_total") or 0)
    if reading.get("decided"):
        return f"decided after {int(reading['decided_after']):,} of {total:,}"
    return f"undecided after {int(reading.get('read') or 0):,} of {total:,}"


def variants_table(doc: dict[str, Any]) -> Table:
    """One row per variant: each metric's estimate and interval, its gate and run id (and,
    for a sequential matrix, how many cases each decision read)."""
    metrics = [m["metric"] for m in doc["metrics"]]
    sequential = any(v.get("sequential") for v in doc["variants"])
    columns = ("Variant", *metrics, *(("Sequential",) if sequential else ()), "Gate", "Run")
    table = Table(
        line(f"Variants × metrics (intervals at {level_text(float(doc['confidence_level']))})"),
        tuple(Column(c, no_wrap=True) for c in columns),
    )
    for v in doc["variants"]:
        by_metric = {m["metric"]: m for m in v["metrics"]}
        name = v["name"] + (" (baseline)" if v.get("baseline") else "")
        cells = [_metric_cell(by_metric[m]) if m in by_metric else "" for m in metrics]
        gate = f"{v['gate']} (exit {v['exit_code']})"
        if v["state"] != "DECIDED/COMPLETE":
            gate += f" {v['state']}"
        if sequential:
            cells.append(sequential_text(v.get("sequential")))
        table.add_row(line(name), *map(line, cells), line(gate), line(v["run_id"]))
    return table


def comparisons_table(doc: dict[str, Any]) -> Table:
    """Every variant against the baseline, as Holm's procedure left each comparison."""
    table = Table(
        line(f"Against the baseline {doc['baseline']} (variant − baseline), Holm over"
             f" {doc['family']['size']} comparisons"),
        tuple(Column(c, no_wrap=True) for c in (
            "Variant", "Metric", "Difference", "Interval", "Level", "Pairs", "Verdict",
        )),
    )
    for c in doc["comparisons"]:
        kind = c["kind"]
        table.add_row(
            line(c["variant"]), line(c["metric"]), line(fmt_difference(c["difference"], kind)),
            line(fmt_difference_interval(c["lower"], c["upper"], kind)),
            line(level_text(float(c["confidence_level"]))), line(str(c["pairs"])),
            line(c["verdict"], _VERDICT_STYLE.get(c["verdict"], "")),
        )
    return table


def _methods(doc: dict[str, Any]) -> Line:
    methods = sorted({c["method"] for c in doc["comparisons"]})
    level = level_text(float(doc["family"]["family_wise_level"]))
    return line(
        f"Holm's step-down procedure over all {doc['family']['size']} comparisons: the chance"
        f" of any wrong 'better' or 'worse' in this table is at most {_complement(level)}"
        f" (family-wise {level}). Each interval is at the level of the step that decided it"
        f" (or the last step). Methods: {'; '.join(methods) or 'none'}. "
        + ("Sequential: the pairs are the cases both runs read before their decisions, in"
           " the runs' seeded order; a pair missing in either run counts at its worst."
           if any(v.get("sequential") for v in doc["variants"])
           else "Only cases observed in both runs are paired; a pair missing in either run"
           " holds the interval at its worst.")
    )


def _complement(level: str) -> str:
    try:
        value = 100 - float(level.rstrip("%"))
    except ValueError:
        return "1 - level"
    return f"{value:.10g}%"


def matrix_report(doc: dict[str, Any], *, config_arg: str | None = None) -> Blocks:
    """The matrix's text: the table, the comparisons, the summary and the exit code."""
    parts: list[Line | Table] = [
        assemble(line("Matrix ", "bold"), line(doc["matrix_id"], "bold cyan"),
                 line(f"  {len(doc['variants'])} variants · baseline {doc['baseline']}")),
        variants_table(doc),
    ]
    if doc["comparisons"]:
        parts.append(comparisons_table(doc))
        parts.append(_methods(doc))
    for v in doc["variants"]:
        ran_on = v.get("ran_on")
        if ran_on:
            parts.append(line(f"{v['name']}: {ran_on['said']}"))
    if doc.get("ray_starts"):
        starts = int(doc["ray_starts"])
        parts.append(line(f"Ray was started {'once' if starts == 1 else f'{starts} times'}"
                          " for the whole matrix; each variant had workers of its own."))
    for warning in doc.get("warnings", []):
        parts.append(line(f"warning: {warning}", "yellow"))
    better = list(dict.fromkeys(
        c["variant"] for c in doc["comparisons"] if c["verdict"] == "better"))
    worse = list(dict.fromkeys(
        c["variant"] for c in doc["comparisons"] if c["verdict"] == "worse"))
    if better:
        parts.append(line(f"Better than the baseline on at least one metric: {', '.join(better)}",
                          "green"))
    elif doc["comparisons"]:
        parts.append(line("No variant is shown better than the baseline at this level."))
    if worse:
        parts.append(line(f"Worse than the baseline on at least one metric: {', '.join(worse)}",
                          "red"))
    for metric, ranked in (doc.get("ranking") or {}).items():
        if len(ranked) >= 2:
            kind = next((m["kind"] for m in doc["metrics"] if m["metric"] == metric), "")
            top, second = ranked[0], ranked[1]
            extra = config_option(config_arg)
            parts.append(line(
                f"Top on {metric}: {top['variant']} ({estimate_text(top['estimate'], kind)}),"
                f" then {second['variant']} ({estimate_text(second['estimate'], kind)});"
                f" how many more cases would separate them: oloproof plan"
                f" {doc['matrix_id']}{extra}"
            ))
    base = next((v for v in doc["variants"] if v.get("baseline")), None)
    code = int(doc["exit_code"])
    if base is not None and base["exit_code"] != code:
        # The baseline's gate is not the exit code: a variant did not finish (exit 5).
        unfinished = [v["name"] for v in doc["variants"]
                      if not v.get("baseline") and v.get("state") == "RUN_ERROR/PARTIAL"]
        why = (f"the run of {', '.join(unfinished)} did not finish" if unfinished
               else "the matrix stopped before every variant ran")
        parts.append(line(f"The baseline {base['name']} {_gate_verb(base['gate'])} (exit"
                          f" {base['exit_code']}), but {why}: the matrix is incomplete"
                          f" (exit {code})."))
    elif base is not None:
        parts.append(line(f"The matrix exits on the baseline's gate: {base['name']}"
                          f" {base['gate']} (exit {base['exit_code']})."))
    gate = "ALLOW" if code == 0 else "BLOCK"
    parts.append(gate_line(gate, code))
    return Blocks(parts)


def _gate_verb(gate: str) -> str:
    return {"ALLOW": "allows", "WARN": "allows with a warning"}.get(gate, "blocks")
