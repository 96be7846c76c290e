"""HTML pages of stored runs and comparisons: the report file and the viewer share these.

One Jinja2 environment, one set of templates (``templates/``), with autoescaping on for
every template: whatever a user or a model put in a case (an input, an output, a judge's
reason, an error) is written as text, never as markup, and made printable first (control
and invisible characters as visible escapes, as in a terminal: ``_shown``). The CSS and the
script are inlined into each page, so a report file makes no request at all and reads
offline.

Imported only by ``oloproof report`` and ``oloproof view``: Jinja2 is never loaded by
``oloproof --help`` or ``oloproof run``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from oloproof._records import dataclass
from oloproof.enums import MetricKind
from oloproof.policy.compare import fmt_difference, fmt_difference_interval
from oloproof.policy.format import estimate_text, interval_text, level_text
from oloproof.render.doc import system_label
from oloproof.render.html.plots import comparison_plot, rule_plot
from oloproof.textsafe import TextHead, json_safe, one_line, printable

__all__ = [
    "READ_CHARS",
    "VALUE_CHARS",
    "Clipped",
    "case_url",
    "chip",
    "clip",
    "page_url",
    "pretty_json",
    "render_case_page",
    "render_comparison",
    "render_index",
    "render_matrix",
    "render_run",
    "script_json",
    "shown_path",
    "warm_templates",
]

TEMPLATES = Path(__file__).parent / "templates"

_SCRIPT_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                   0x2028: "\\u2028", 0x2029: "\\u2029"}


def script_json(value: Any) -> Markup:
    """``value`` as JSON that is safe inside ``<script>``: ``<``, ``>`` and ``&`` are written
    as ``\\u003c`` and so on, so no string in it can close the script element."""
    text = json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False)
    return Markup(text.translate(_SCRIPT_ESCAPES))


def pretty_json(value: Any) -> str:
    """A stored value for people: indented JSON (text, escaped by the template)."""
    if value is None:
        return "null"
    if isinstance(value, TextHead):
        return value  # the start of its stored JSON, read no further (READ_CHARS)
    return json.dumps(json_safe(value), ensure_ascii=False, indent=2, sort_keys=True)


#: The most of one value (an input, an output, a reason, an error) a page writes, in
#: characters; the page says where it cut and how to see the rest. A report file carries up
#: to 1,000 cases: 20 outputs of 5 MB made a file of 200 MB (each written twice, on its
#: page and in the search text), 1,000 of them would have made 10 GB. The viewer shows one
#: case per page, and more of it.
VALUE_CHARS = {"report": 10_000, "viewer": 1_000_000}
#: The most of one stored value a report reads (``load_cases``' ``head``): a longer one is
#: written from the start of its stored JSON, not indented, and the rest is never read (200
#: outputs of 5 MB took 1.9 GB of memory to write a report of 10,000 characters of each).
READ_CHARS = 100_000
#: What the search box of a report file's case table matches of each value of a case.
SEARCH_CHARS = 2_000


@dataclass(frozen=True)
class Clipped:
    """A value's text as a page writes it: at most ``VALUE_CHARS`` characters of it."""

    text: str
    chars: int  # of the whole text
    #: Cut from the value's stored text (:class:`~oloproof.textsafe.TextHead`), too long to
    #: be read whole: ``chars`` counts the stored JSON's characters, not indented.
    stored: bool = False

    @property
    def cut(self) -> bool:
        return len(self.text) < self.chars


def clip(text: str | None, mode: str) -> Clipped:
    """``text`` (None: empty) as a page of ``mode`` (``report``, ``viewer``) writes it."""
    whole = text or ""
    shown = whole[:VALUE_CHARS.get(mode, VALUE_CHARS["report"])]
    if isinstance(whole, TextHead):
        return Clipped(str(shown), whole.chars, stored=whole.json)
    return Clipped(shown, len(whole))


def _shown(value: Any) -> Any:
    """What every ``{{ ... }}`` of a page writes, before it is HTML-escaped: text made
    printable (:func:`oloproof.textsafe.printable`), so that a NUL or another control
    character, a bidirectional override or an invisible character from a case or a model
    is shown as a visible escape (``\\x00``, ``\\u200b``), never written raw. Markup (the
    pages' own script and style, and JSON, whose escapes are already visible) is left as
    it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value)
    return value


def _usage_text(usage: dict[str, Any] | None) -> str:
    if not usage:
        return ""
    text = f"{usage.get('input_tokens') or 0} in · {usage.get('output_tokens') or 0} out tokens"
    cost = float(usage.get("cost_usd") or 0.0)
    return text + (f" · ${cost:.6f}".rstrip("0").rstrip(".") if cost else "")


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} ms"


def _search_text(case: dict[str, Any]) -> str:
    """What the case search matches: id, input, expected, output, error and reasons (the
    first :data:`SEARCH_CHARS` characters of each)."""
    parts = [pretty_json(case["input"]), pretty_json(case["expected"]),
             pretty_json(case["output"]), case.get("error") or ""]
    parts += [j.get("reason") or "" for j in case["judgments"]]
    return " ".join([case["id"], *(p[:SEARCH_CHARS] for p in parts)]).lower()


def case_url(run_id: str, case_id: str) -> str:
    """The viewer's address of one case: the id travels in the query string, which a
    browser never rewrites (a path segment of ``.`` or ``..``, even written ``%2E``, is
    resolved away), percent-encoded whole (``/``, ``%``, ``?``, ``#``, ``+``, any letter)."""
    return f"/runs/{quote(run_id, safe='')}/case?id={quote(case_id, safe='')}"


def page_url(run_id: str, paging: dict[str, Any], page: int) -> str:
    """The viewer's address of page ``page`` of a run's case table, with its filters."""
    params = [("page", str(page))]
    for key, name in (("criterion", "criterion"), ("outcome", "outcome"), ("query", "q")):
        if paging.get(key):
            params.append((name, str(paging[key])))
    return f"/runs/{quote(run_id, safe='')}?{urlencode(params)}#cases"


def shown_path(path: str | None, root: str | None) -> str:
    """A stored file path as a page shows it: relative to the project when it lies inside
    it, else its name alone (a temporary directory's path says nothing to a reader)."""
    if not path:
        return ""
    p = Path(path)
    if not p.is_absolute():
        return path
    if root is not None:
        try:
            return str(p.resolve().relative_to(Path(root).resolve()))
        except (OSError, ValueError):
            pass
    return p.name


def chip(status: str, gate: str | None) -> str:
    """The colour of a run's state chip: its gate once decided (a blocked run is never
    green, whatever its status says), else its status."""
    if status == "RUNNING" or not gate:
        return str(status)
    return str(gate)


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=_shown,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        pretty=pretty_json,
        script_json=script_json,
        usage=_usage_text,
        ms=_ms,
        estimate=estimate_text,
        interval=interval_text,
        difference=fmt_difference,
        difference_interval=fmt_difference_interval,
        level=level_text,
        search_text=_search_text,
        one_line=one_line,
        seg=lambda s: quote(str(s), safe=""),
        shell=lambda s: shlex.quote(str(s)),
        verdict=lambda v: "" if v is None else ("passed" if v else "failed"),
    )
    script = (TEMPLATES / "script.js").read_text(encoding="utf-8")
    env.globals.update(
        rule_plot=rule_plot, comparison_plot=comparison_plot, BINARY=MetricKind.BINARY,
        case_url=case_url, page_url=page_url, chip=chip, clip=clip, system_label=system_label,
        css=(TEMPLATES / "style.css").read_text(encoding="utf-8"),
        script=script,
        # The page's one script is allowed by its hash (Content-Security-Policy): a script
        # that escaping had somehow let through, inline or an event handler, would not run.
        script_hash="sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode(),
    )
    return env


def warm_templates() -> None:
    """Compile every page's template now (the viewer does at start, not on a request)."""
    for name in ("run.html", "comparison.html", "case_page.html", "index.html", "matrix.html"):
        environment().get_template(name)


def _render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def render_run(
    doc: dict[str, Any], *, mode: str = "report", project_root: str | None = None,
) -> str:
    """A run's page: the whole report file (``mode="report"``) or the viewer's run page."""
    return _render("run.html", doc=doc, mode=mode,
                   policy_shown=shown_path(doc["run"].get("policy_path"), project_root))


def render_comparison(
    doc: dict[str, Any], *, mode: str = "report", project_root: str | None = None,
) -> str:
    return _render("comparison.html", doc=doc, mode=mode,
                   policy_shown=shown_path(doc["comparison"].get("policy_path"), project_root))


def render_matrix(doc: dict[str, Any], *, mode: str = "report") -> str:
    """A matrix's page (the document stored with it: store/matrices.py): the report file
    (``mode="report"``) or the viewer's matrix page."""
    return _render("matrix.html", doc=doc, mode=mode)


def render_case_page(doc: dict[str, Any]) -> str:
    """The viewer's page for one case of a run (:func:`~oloproof.analysis.report.case_page_document`)."""
    return _render("case_page.html", doc=doc, case=doc["case"], mode="viewer")


def render_index(
    project: str, runs: list[dict[str, Any]], comparisons: list[dict[str, Any]],
    matrices: list[dict[str, Any]] | None = None,
) -> str:
    """The viewer's first page: the runs, comparisons and matrices of the project's store."""
    return _render("index.html", project=project, runs=runs, comparisons=comparisons,
                   matrices=matrices or [], mode="viewer")
