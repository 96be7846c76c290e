"""The text of ``oloproof plan`` (SPEC §7), drawn from the document ``plan --json`` prints.

For the support_bot example (the rule's line is one line)::

    Run run_01M3C3WS0SBTFAG55M7ECM1EZ4
      observed  18 cases

    exact-label-floor: about 1614 more cases would decide it, if the observed rate holds …
    … (1632 in total)
      time      <1s – 27s
      tokens    none reported by this run's providers
      assuming  the cases to come resemble the 18 already run
                cases run one after another; concurrency divides the time and not the cost

Rules that get a size come first, each in a block of its own; rules that are decided or
cannot be sized follow, one line each. Plain text: no colour, no table, so a log or a script
can read it as it is.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt_cost", "fmt_count", "fmt_duration", "plan_text"]

_LABEL = 10  # "  time      " : labels are padded to one width


def fmt_duration(seconds: float) -> str:
    """``<1s``, ``27s``, ``3m 10s``, ``1h 2m``: seconds below a minute, then minutes, hours."""
    if not math.isfinite(seconds) or seconds < 1.0:
        return "<1s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        minutes, secs = divmod(whole, 60)
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(round(seconds / 60.0), 60)
    return f"{hours}h {minutes}m"


def fmt_count(x: float) -> str:
    return f"{round(x):,}"


def fmt_cost(usd: float) -> str:
    if usd < 0.01:
        return "less than $0.01"
    return f"about ${usd:,.2f}"


def _line(label: str, text: str) -> str:
    return f"  {label:<{_LABEL}}{text}"


def _lines(label: str, texts: list[str]) -> list[str]:
    out = []
    for i, text in enumerate(texts):
        out.append(_line(label if i == 0 else "", text))
    return out


def _priced(
    rule: dict[str, Any], who: str, per_case: dict[str, Any] | None = None
) -> list[str]:
    """The time, tokens and cost lines of a sized rule; ``per_case`` (the document's) says
    how many cases reported usage."""
    out: list[str] = []
    time = rule.get("time_s")
    if time is None:
        out.append(_line("time", f"not recorded by {who}"))
    else:
        low, high = fmt_duration(time[0]), fmt_duration(time[1])
        out.append(_line("time", low if low == high else f"{low} – {high}"))
    none = f"none reported by {who} providers"
    tokens = rule.get("tokens")
    cost = rule.get("cost_usd")
    if tokens is None:
        out.append(_line("tokens", none))
    else:
        out.append(
            _line(
                "tokens",
                f"about {fmt_count(tokens['input'] + tokens['output'])} "
                f"({fmt_count(tokens['input'])} in · {fmt_count(tokens['output'])} out)",
            )
        )
    if cost is not None:
        out.append(_line("cost", fmt_cost(cost)))
    elif tokens is not None:
        out.append(_line("cost", none))
    if (tokens is not None or cost is not None) and per_case:
        some, of = per_case.get("usage_cases"), per_case.get("cases")
        if isinstance(some, int) and isinstance(of, int) and some < of:
            out.append(_line("", f"reported by {some:,} of the {of:,} cases run; the others"
                                 " are counted as spending nothing"))
    return out


def _sized_head(rule: dict[str, Any], comparison: bool) -> str:
    what = "more paired cases" if comparison else "more cases"
    if comparison:
        holds = "if the observed paired outcomes hold"
    elif rule.get("trials"):
        holds = "if the observed mix of case pass fractions holds"
    elif (rule.get("observed") or {}).get("interval") == "betting":
        holds = "if the observed mix of scores holds"
    elif rule.get("approximate"):
        holds = "if the observed mean and spread hold"
    else:
        holds = "if the observed rate holds"
    total = f"{rule['total']} in total"
    scope = rule.get("scope")
    if scope and scope.get("group") is not None:
        # Sized in the group's cases: cases of other groups do not count towards it.
        what = f"more cases of the group {scope['group']}"
        total = f"{rule['total']} of the group in total"
    elif scope:
        what = f"more cases scored by {rule['metric']}"
        total = f"{rule['total']} scored in total"
    if scope and scope.get("shard") is not None:
        return _merge_head(rule, holds) + ("; approximate" if rule.get("approximate") else "")
    if rule.get("approximate"):
        total += "; approximate"
    return f"{rule['rule']}: about {rule['more']} {what} would decide it, {holds} ({total})"


def _merge_head(rule: dict[str, Any], holds: str) -> str:
    """A shard's rule: decided at merge, sized in cases of the merged run."""
    scope = rule["scope"]
    total, more, suite = rule["total"], rule["more"], scope["suite_cases"]
    head = (f"{rule['rule']}: decided at merge, on the {fmt_count(suite)} cases of the suite"
            f" (this shard, {scope['shard']}, ran {fmt_count(scope['shard_cases'])})")
    if scope.get("group") is not None:
        return (f"{head}: about {fmt_count(total)} cases of the group {scope['group']} in"
                f" total would decide it, {holds}")
    if more is None:
        return (f"{head}: about {fmt_count(total)} cases scored by {rule['metric']} in total"
                f" would decide it, {holds}")
    if not more:
        return (f"{head}: about {fmt_count(total)} cases would decide it, {holds}, so the"
                " merged run of the suite would if the other slices resemble this one")
    return (f"{head}: about {fmt_count(total)} cases would decide it, {holds}: the suite's"
            f" {fmt_count(suite)} would not, and about {fmt_count(more)} more cases of the"
            f" suite would ({fmt_count(total)} in total)")


def _one_line(rule: dict[str, Any]) -> str:
    line = f"{rule['rule']}: {rule['message']}"
    resolved = rule.get("if_resolved")
    if resolved:
        line += f"; {_resolved_text(resolved, rule)}"
    return line


def _state_word(state: str | None) -> str:
    return state if state else "still undecided"


def _resolved_text(resolved: dict[str, Any], rule: dict[str, Any]) -> str:
    """What re-running the missing cases would change, in one sentence (a shard's size in
    cases of the merged run, as its rule's)."""
    m = resolved["missing"]
    they = "it resembles" if m == 1 else "they resemble"
    parts = [f"re-running the {m} missing case{'s' if m != 1 else ''}"]
    all_pass, all_fail = resolved.get("if_all_pass"), resolved.get("if_all_fail")
    if all_pass is not None and all_pass == all_fail:
        # Both extremes decide it alike, and so does every outcome between them.
        parts.append(f"decides it now whatever {'it gives' if m == 1 else 'they give'}"
                     f" ({all_pass})")
    elif all_pass is not None or all_fail is not None:
        parts.append(
            f"decides it now only if {'it passes' if m == 1 else 'they all pass'}"
            f" ({_state_word(all_pass)}) or {'fails' if m == 1 else 'all fail'}"
            f" ({_state_word(all_fail)})"
            if all_pass and all_fail
            else f"with all passing: {_state_word(resolved['if_all_pass'])}; with all"
            f" failing: {_state_word(resolved['if_all_fail'])}"
        )
    scope = rule.get("scope") or {}
    if resolved.get("total") is not None and scope.get("shard") is not None:
        parts.append(_resolved_at_merge(they, resolved, rule))
    elif resolved.get("total") is not None:
        more = resolved["more"]
        parts.append(
            f"if {they} the rest, {fmt_count(more)} more would decide it"
            f" ({fmt_count(resolved['total'])} in total)"
            if more
            else f"if {they} the rest, that alone would decide it"
        )
    return parts[0] + ": " + "; ".join(parts[1:]) if len(parts) > 1 else parts[0]


def _resolved_at_merge(they: str, resolved: dict[str, Any], rule: dict[str, Any]) -> str:
    """:func:`_resolved_text`'s size for a shard's rule, which ``merge`` decides on the
    suite: ``more`` is the cases beyond the suite (None: sized in a group's or a metric's
    scored cases, whose count in the suite is not known here)."""
    scope, total, more = rule["scope"], fmt_count(resolved["total"]), resolved["more"]
    if more is None:
        what = (f"cases of the group {scope['group']}" if scope.get("group") is not None
                else f"cases scored by {rule['metric']}")
        return f"if {they} the rest, about {total} {what} in total would decide it at merge"
    if not more:
        return (f"if {they} the rest, about {total} cases would decide it, so the merged run"
                " of the suite would if the other slices resemble this one")
    return (f"if {they} the rest, about {fmt_count(more)} more cases of the suite would"
            f" decide it ({total} in total)")


def _assurance_line(rule: dict[str, Any], comparison: bool) -> list[str]:
    a = rule.get("assurance")
    if not a:
        return []
    share = f"{100.0 * a['target']:g}%"
    if a["status"] != "sized":
        return [_line("assurance", f"{share} of the time: {a['reason']}")]
    if (rule.get("scope") or {}).get("shard") is not None:
        return [
            _line("assurance", f"{fmt_count(a['total'])} cases in total decide it {share} of"
                               " the time"),
            _line("", f"assuming {a['assumption']}; {a['method']}"),
        ]
    observed = "the observed paired outcomes" if comparison else "the observed rate"
    if (rule.get("observed") or {}).get("interval") == "betting":
        observed = "the observed mix of scores"
    return [
        _line(
            "assurance",
            f"{fmt_count(rule['more'])} more decide it at {observed};"
            f" {fmt_count(a['more'])} more decide it {share} of the time"
            f" ({fmt_count(a['total'])} in total)",
        ),
        _line("", f"assuming {a['assumption']}; {a['method']}"),
    ]


def _trials_lines(rule: dict[str, Any]) -> list[str]:
    """Over repeated trials: the calls the size costs, and the other way to decide it."""
    out: list[str] = []
    if rule.get("calls") is not None:
        out.append(_line("calls", f"{fmt_count(rule['calls'])} more calls of the system"))
    option = rule.get("trials")
    if not option or (rule.get("scope") or {}).get("shard") is not None:
        # A shard's: more trials were sized over its own cases, and every shard would have
        # to run with them (merge refuses shards of different trials).
        return out
    if option["status"] == "sized":
        text = (
            f"or {option['trials']} trials per case instead of {option['current']} on the"
            f" cases already run: {fmt_count(option['more_calls'])} more calls"
        )
        if option.get("cheaper"):
            text += (
                "; more trials decide it sooner for the cost" if option["cheaper"] == "trials"
                else "; more cases decide it sooner for the cost"
            )
        out.append(_line("trials", text))
    else:
        out.append(_line("trials", f"more trials would not decide it: {option['reason']}"))
    return out


def _paired_text(doc: dict[str, Any]) -> str:
    """The pairs the rules count (``10 cases (3 more dropped: ...)``), as each rule's line
    does; the cases in both runs when the rules' metrics count different pairs."""
    shared = doc["paired_cases"]
    pairs = doc.get("pairs")
    if pairs is None:
        return f"{shared} cases in both runs" + (
            "; each rule says how many it pairs" if doc["rules"] else "")
    notes = []
    if doc.get("dropped_missing"):
        notes.append(f"{doc['dropped_missing']} dropped: a case was missing in one run")
    if doc.get("dropped_excluded"):
        notes.append(f"{doc['dropped_excluded']} excluded")
    if not notes:
        return f"{pairs} cases"
    return f"{pairs} cases ({shared} in both runs; {'; '.join(notes)})"


def plan_text(doc: dict[str, Any]) -> str:
    """The plan as text, from the plan document."""
    comparison = doc["plan_for"] == "comparison"
    who = "these runs'" if comparison else "this run's"
    rules: list[dict[str, Any]] = doc["rules"]
    refused = [r for r in rules if r["plan"] == "refused"]
    sized = [r for r in rules if r["plan"] == "sized"]
    others = [r for r in rules if r["plan"] not in ("sized", "refused")]
    blocks: list[list[str]] = []
    if sized or others or not refused:
        if comparison:
            head = [
                f"Comparison {doc['comparison_id']}",
                _line("candidate", doc["candidate_run"]),
                _line("baseline", doc["baseline_run"]),
                _line("paired", _paired_text(doc)),
            ]
        else:
            missing = doc.get("missing_cases") or 0
            observed = f"{doc['observed_cases']} cases" + (
                f" · {missing} missing (the call failed)" if missing else "")
            head = [f"Run {doc['run_id']}", _line("observed", observed)]
        blocks.append(head)
    for rule in sized:
        first = _sized_head(rule, comparison)
        extra = _assurance_line(rule, comparison)
        extra += _trials_lines(rule)
        if rule.get("if_resolved"):
            extra.append(_line("missing", _resolved_text(rule["if_resolved"], rule)))
        # A shard's rule is priced for the cases beyond the suite only, when there are any.
        at_merge = (rule.get("scope") or {}).get("shard") is not None and not rule["more"]
        priced = [] if at_merge else _priced(rule, who, doc.get("per_case"))
        blocks.append([first, *priced, *extra, *_lines("assuming", rule["assuming"])])
    if others:
        blocks.append([_one_line(r) for r in others])
    if not rules:
        why = doc.get("policy_note") or "the policy declares none"
        blocks.append([f"No rules: {why}; nothing to plan."])
    if refused:
        # The form the seed's product used to refuse a MEAN rule; a rule whose evidence is
        # all missing says that instead (its message), and names the run.
        where = (
            f"Comparison {doc['comparison_id']}" if comparison else f"Run {doc['run_id']}"
        )
        run_ref = doc.get("run_id") or doc.get("candidate_run") or "RUN"
        blocks.append(
            [
                f"{where}: no sample size can be computed for a rule that did not decide.",
                *[
                    f"  {r['rule']}: {r['message'].replace(' RUN ', f' {run_ref} ')}"
                    if r.get("message")
                    else f"  {r['rule']}: sizing a run rule is admitted for binary rates only,"
                    f" and {r['metric']} is a MEAN metric: {r['reason']}"
                    for r in refused
                ],
            ]
        )
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"
