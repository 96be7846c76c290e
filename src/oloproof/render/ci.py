"""What a CI system reads: JUnit XML, a GitHub step summary, GitHub annotations.

Pure functions from a decided (or stopped) run to text; :mod:`oloproof.cli._ci`
writes them where they go. Every piece of user or model text (rule ids, details,
stop reasons) is escaped for the format it lands in: XML by ElementTree, Markdown
by :func:`_md`, workflow commands by :func:`_command_data`.

JUnit mapping (one ``<testsuite>`` per run, one ``<testcase>`` per rule; a matrix has one
suite per variant and one of its comparisons: :func:`junit_xml_matrix`):

- ``PASS``: a passing test case;
- ``FAIL``: ``<failure type="FAIL">``;
- ``INSUFFICIENT_EVIDENCE`` / ``MANUAL_REVIEW``: ``<skipped>`` with the detail, or
  ``<failure>`` with ``--junit-undecided failure``; by default a rule whose release
  action is ``BLOCK`` is a failure, so a JUnit view never shows green while the gate
  blocks, and a rule that only warns is skipped;
- a run that did not finish (``RUN_ERROR``/``PARTIAL``): every rule of its policy is an
  ``<error>`` carrying the stop reason, since nothing was decided;
- a rule that blocks on incomplete evidence (more missing than ``max_missing``, whatever its
  state): ``<failure type="INCOMPLETE">``;
- the gate's notes (:attr:`CiRun.notes`: a subset or shard, incomplete evidence, patched
  code, a suite, policy, labels or code changed since the run): one more test case, ``gate``,
  whose ``<system-out>`` holds them; a ``<failure type="BLOCK">`` when the gate blocks and no
  rule does (a subset, patched code: nothing else in the report would be red), ``<skipped>``
  otherwise. Annotations give each note a line (``::error`` when it is what blocks, as
  above; ``::warning`` otherwise), the step summary a list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from oloproof._records import dataclass, field
from oloproof.enums import GateAction, RuleState
from oloproof.policy.decide import Decision, MetricSummary
from oloproof.render.tables import metric_estimate, metric_interval
from oloproof.textsafe import printable

__all__ = [
    "CiRun",
    "UndecidedAs",
    "github_annotations",
    "github_summary",
    "junit_xml",
    "junit_xml_matrix",
]

UndecidedAs = Literal["auto", "skipped", "failure"]

_UNDECIDED = (RuleState.INSUFFICIENT_EVIDENCE, RuleState.MANUAL_REVIEW)


@dataclass
class CiRun:
    """What the CI outputs need of a run: its identity, outcome, decisions and metrics."""

    run_id: str
    project: str
    status: str
    completeness: str
    gate: str
    exit_code: int
    decisions: Sequence[Decision]
    summaries: Sequence[MetricSummary]
    rule_ids: Sequence[str] = field(default_factory=list)  # the policy's, for a stopped run
    stop_reason: str | None = None
    duration_s: float | None = None
    #: What the gate says beside its verdict (``oloproof gate`` prints them above the
    #: tables): the subset or shard, the gate's notes, the policy's declaration.
    notes: Sequence[str] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        return self.status == "DECIDED"  # a SUBSET run is decided too (on its cases)

    @property
    def blocked_by_notes(self) -> bool:
        """Whether the gate blocks though no rule does: a decided subset, shard or run of
        patched code never allows, and only its notes say why."""
        return (self.decided and self.gate == str(GateAction.BLOCK)
                and not any(d.action == GateAction.BLOCK for d in self.decisions))


def _text(value: object) -> str:
    # XML 1.0 cannot hold most control characters at all; printable() escapes them. Nor
    # U+FFFE and U+FFFF, which printable() leaves (a system's error holding one made the
    # whole report "not well-formed" to every JUnit reader): written as escapes too.
    text = printable("" if value is None else str(value))
    if "\ufffe" in text or "\uffff" in text:
        text = text.replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")
    return text


def _suite(
    run: CiRun, undecided: UndecidedAs, name: str, classname: str
) -> tuple[Any, dict[str, int]]:
    """One run's ``<testsuite>`` (one test case per rule) and its counts."""
    import xml.etree.ElementTree as ET  # only when a JUnit report is asked for

    suite = ET.Element("testsuite", name=_text(name))
    props = ET.SubElement(suite, "properties")
    for prop, value in (
        ("run_id", run.run_id), ("status", run.status), ("completeness", run.completeness),
        ("gate", run.gate), ("exit_code", run.exit_code),
    ):
        ET.SubElement(props, "property", name=prop, value=_text(value))
    classname = _text(classname)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if not run.decided:
        reason = run.stop_reason or "the run did not finish"
        for rule in run.rule_ids or ["run"]:
            case = ET.SubElement(suite, "testcase", name=_text(rule), classname=classname)
            error = ET.SubElement(
                case, "error", type=run.status, message=_text(f"not decided: {reason}")
            )
            error.text = _text(f"run {run.run_id} is {run.status}/{run.completeness}: {reason}")
            counts["tests"] += 1
            counts["errors"] += 1
    for d in run.decisions if run.decided else ():
        case = ET.SubElement(suite, "testcase", name=_text(d.rule), classname=classname)
        counts["tests"] += 1
        message = _text(f"{d.state}: {d.detail}")
        if d.state == RuleState.FAIL:
            ET.SubElement(case, "failure", type=str(d.state), message=message).text = message
            counts["failures"] += 1
        elif d.incomplete and d.action == GateAction.BLOCK:
            # A PASS over max_missing blocks (exit 5): a passing test case would be green.
            ET.SubElement(case, "failure", type="INCOMPLETE", message=message).text = message
            counts["failures"] += 1
        elif d.state in _UNDECIDED:
            as_failure = undecided == "failure" or (
                undecided == "auto" and d.action == GateAction.BLOCK
            )
            if as_failure:
                ET.SubElement(case, "failure", type=str(d.state), message=message).text = message
                counts["failures"] += 1
            else:
                ET.SubElement(case, "skipped", message=message)
                counts["skipped"] += 1
        ET.SubElement(case, "system-out").text = _text(
            f"metric {d.metric}; {d.state} ({d.reason}); action {d.action}; {d.detail}"
        )
    if run.notes or run.blocked_by_notes:
        _gate_case(suite, run, classname, counts)
    _count(suite, counts, run.duration_s)
    return suite, counts


def _gate_case(suite: Any, run: CiRun, classname: str, counts: dict[str, int]) -> None:
    """The ``gate`` test case: the gate's notes, a failure when they are why it blocks."""
    import xml.etree.ElementTree as ET

    # Its own class: a rule may be named "gate" too, and (class, name) names a test case.
    case = ET.SubElement(suite, "testcase", name="gate", classname=f"{classname}.gate")
    counts["tests"] += 1
    first = run.notes[0] if run.notes else "no rule blocks"
    message = _text(f"{run.gate} (exit code {run.exit_code}): {first}"
                    + (f" (and {len(run.notes) - 1} more notes)" if len(run.notes) > 1 else ""))
    if run.blocked_by_notes:
        ET.SubElement(case, "failure", type="BLOCK", message=message).text = message
        counts["failures"] += 1
    else:
        ET.SubElement(case, "skipped", message=message)
        counts["skipped"] += 1
    ET.SubElement(case, "system-out").text = _text(
        "\n".join([f"gate {run.gate}, exit code {run.exit_code}", *run.notes])
    )


def _count(element: Any, counts: dict[str, int], duration_s: float | None,
           keys: Sequence[str] = ("tests", "failures", "errors", "skipped")) -> None:
    for key in keys:
        element.set(key, str(counts[key]))
    if duration_s is not None:
        element.set("time", f"{duration_s:.3f}")


def _document(suites: Sequence[Any], counts: dict[str, int], duration_s: float | None) -> str:
    import xml.etree.ElementTree as ET

    # The totals again on <testsuites>, but not "skipped": the JUnit schema (the Jenkins
    # junit-10.xsd that pytest validates its own reports against) allows it on
    # <testsuite> only, and strict readers refuse the whole file for it.
    root = ET.Element("testsuites", name="oloproof")
    _count(root, counts, duration_s, ("tests", "failures", "errors"))
    for suite in suites:
        root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def junit_xml(run: CiRun, *, undecided: UndecidedAs = "auto") -> str:
    """The run as a JUnit XML document (one test suite, one test case per rule)."""
    suite, counts = _suite(run, undecided, f"oloproof {run.project}", f"oloproof.{run.project}")
    return _document([suite], counts, run.duration_s)


def junit_xml_matrix(
    variants: Sequence[tuple[str, CiRun]], comparisons: Sequence[Mapping[str, Any]], *,
    matrix_id: str, project: str, baseline: str, undecided: UndecidedAs = "auto",
    duration_s: float | None = None,
) -> str:
    """A matrix as a JUnit XML document: one test suite per variant (its run, as
    :func:`junit_xml` has it, named ``oloproof PROJECT [VARIANT]``), and one suite of the
    comparisons with the baseline, one test case per variant and metric: ``better`` passes,
    ``not separated`` is skipped, ``worse`` is a failure of type ``WORSE``. The comparisons
    never change the exit code (the baseline's gate); a variant that is worse is a finding a
    CI view should show in red, not green."""
    import xml.etree.ElementTree as ET

    from oloproof.policy.compare import fmt_difference, fmt_difference_interval
    from oloproof.policy.format import level_text

    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    suites = []
    for name, run in variants:
        suite, counts = _suite(run, undecided, f"oloproof {project} [{name}]",
                               f"oloproof.{project}.{name}")
        suites.append(suite)
        for key in total:
            total[key] += counts[key]
    suite = ET.Element("testsuite", name=_text(f"oloproof {project} matrix comparisons"))
    props = ET.SubElement(suite, "properties")
    for prop, value in (("matrix_id", matrix_id), ("baseline", baseline)):
        ET.SubElement(props, "property", name=prop, value=_text(value))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    classname = _text(f"oloproof.{project}.matrix")
    for c in comparisons:
        case = ET.SubElement(
            suite, "testcase", classname=classname,
            name=_text(f"{c['variant']} vs {baseline}: {c['metric']}"),
        )
        counts["tests"] += 1
        kind = str(c["kind"])
        step = c.get("holm_step")
        detail = _text(
            f"{c['verdict']}: {fmt_difference(c.get('difference'), kind)}"
            f" {fmt_difference_interval(c.get('lower'), c.get('upper'), kind)} at"
            f" {level_text(float(c['confidence_level']))} over {c['pairs']} pairs"
            f" ({c['method']}; {f'decided at Holm step {step}' if step else 'undecided'};"
            f" {c.get('better_is', 'higher')} is better)"
        )
        if c["verdict"] == "worse":
            ET.SubElement(case, "failure", type="WORSE", message=detail).text = detail
            counts["failures"] += 1
        elif c["verdict"] != "better":
            ET.SubElement(case, "skipped", message=detail)
            counts["skipped"] += 1
        ET.SubElement(case, "system-out").text = detail
    _count(suite, counts, None)
    suites.append(suite)
    for key in total:
        total[key] += counts[key]
    return _document(suites, total, duration_s)


def _md(value: object) -> str:
    """Text for one Markdown table cell: no HTML, no table or code breaks, one line."""
    text = _text(value).replace("\n", " ")
    for old, new in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"),
                     ("`", "\\`"), ("*", "\\*"), ("_", "\\_"), ("[", "\\["), ("]", "\\]")):
        text = text.replace(old, new)
    return text


def _code(value: object) -> str:
    """Text for a Markdown code span: escapes are literal there, so only backticks go."""
    return _text(value).replace("`", "'").replace("\n", " ")


def github_summary(run: CiRun, variant: str | None = None) -> str:
    """A Markdown section for ``$GITHUB_STEP_SUMMARY``: the gate, the decisions, the metrics
    (of the matrix ``variant`` the run is, if any)."""
    icon = {"ALLOW": "✅", "WARN": "⚠️"}.get(run.gate, "❌")
    of = "" if variant is None else f" [{_md(variant)}]"
    lines = [
        f"### {icon} Oloproof gate{of}: {run.gate} (exit code {run.exit_code})",
        "",
        (f"Run `{_code(run.run_id)}` of project **{_md(run.project)}**:"
        f" {run.status}/{run.completeness}."),
        "",
    ]
    if not run.decided:
        lines += [f"Not decided: {_md(run.stop_reason or 'the run did not finish')}.", ""]
    if run.notes:
        lines += [f"- {'❌' if run.blocked_by_notes else '⚠️'} {_md(note)}" for note in run.notes]
        lines.append("")
    if run.decided and run.decisions:
        lines += ["| Rule | Metric | State | Action | Detail |", "|---|---|---|---|---|"]
        lines += [
            f"| {_md(d.rule)} | {_md(d.metric)} | {d.state} | {d.action} | {_md(d.detail)} |"
            for d in run.decisions
        ]
        lines.append("")
    elif run.decided:
        lines += ["No rules.", ""]
    if run.summaries:
        lines += ["| Metric | Estimate | Interval | Cases |", "|---|---:|---|---|"]
        for s in run.summaries:
            lines.append(
                f"| {_md(s.metric)} | {metric_estimate(s)} | {_md(metric_interval(s))}"
                f" | {_md(s.cases_text())} |"
            )
        lines.append("")
    undecided = [d for d in run.decisions if d.state == RuleState.INSUFFICIENT_EVIDENCE]
    if run.decided and undecided:
        lines.append(
            f"Undecided: size them with `oloproof plan {_code(run.run_id)} --run`."
        )
        lines.append("")
    return "\n".join(lines) + "\n"


def _command_data(text: str) -> str:
    # GitHub's workflow command escaping for the message part.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _command_property(text: str) -> str:
    return _command_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(run: CiRun, variant: str | None = None) -> list[str]:
    """``::error`` lines for rules that block, ``::warning`` for rules that warn, and one
    line per note of the gate (``::error`` when the notes are why it blocks); each title
    names the matrix ``variant`` the run is, if any (``Oloproof [VARIANT] rule …``)."""
    lines = []
    head = "Oloproof" if variant is None else f"Oloproof [{variant}]"
    level = "error" if run.blocked_by_notes else "warning"
    notes = [f"::{level} title={_command_property(_text(f'{head} gate {run.gate}'))}::"
             f"{_command_data(_text(note))}" for note in run.notes]
    if run.blocked_by_notes and not notes:
        notes.append(f"::error title={_command_property(_text(f'{head} gate {run.gate}'))}::"
                     f"exit code {run.exit_code}, though no rule blocks")
    if not run.decided:
        reason = run.stop_reason or "the run did not finish"
        title = _command_property(_text(f"{head} run {run.run_id}"))
        lines.append(f"::error title={title}::{_command_data(_text(f'not decided: {reason}'))}")
        return lines + notes
    lines += notes
    for d in run.decisions:
        if d.action == GateAction.BLOCK:
            level = "error"
        elif d.action == GateAction.WARN:
            level = "warning"
        else:
            continue
        title = _command_property(_text(f"{head} rule {d.rule}"))
        lines.append(f"::{level} title={title}::{_command_data(_text(f'{d.state}: {d.detail}'))}")
    return lines
