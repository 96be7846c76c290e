"""Progress of ``oloproof.run()`` for people at a notebook (docs/python-api.md, "Progress").

The command line has its live view (render/live.py, on a terminal's standard error); the
Python API prints nothing by default. In a notebook, though, a run of minutes with no sign
of life is what people complained about, so :func:`oloproof.run` shows a progress bar
there, as tqdm and rich do: one output area, updated in place (IPython's
``display(..., display_id=True)`` and ``update_display``, which every Jupyter front end
renders without any widget library), holding a ``<progress>`` bar, the counts of the live
view's title and each BINARY metric's provisional Wilson estimate, then the run's end.

When it is shown (:func:`progress_mode`): ``progress=True`` / ``False`` passed to ``run()``
decides; else ``OLOPROOF_PROGRESS=1`` / ``0`` in the environment; else it is on only in an
IPython kernel (Jupyter, JupyterLab, VS Code and Colab notebooks: the shell is a
``ZMQInteractiveShell``) and off whenever ``CI`` is set to anything but ``0``/``false``
(a notebook executed by nbconvert or papermill in a CI job writes no bar into its output).
A script, a terminal IPython and a test suite get nothing unless they ask. Asked for
outside a kernel, the bar is a line on standard error, redrawn in place on a terminal and
printed at each tenth of the run elsewhere.

Nothing here imports IPython: a kernel has already imported it, and outside one it is not
needed.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING

from oloproof.enums import CaseStatus, MetricKind
from oloproof.events import CaseExecuted, CaseJudged, Event, RunStarted
from oloproof.evidence import CriterionEvidence
from oloproof.policy.decide import fmt_interval, pct
from oloproof.stats.intervals import wilson
from oloproof.textsafe import printable

if TYPE_CHECKING:
    from typing import IO, Any, Literal

    Mode = Literal["notebook", "stream"]

__all__ = ["Progress", "in_notebook_kernel", "progress_mode"]

_FALSE = frozenset({"", "0", "false", "no", "off"})


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() not in _FALSE


def in_notebook_kernel() -> bool:
    """Whether this process is an IPython kernel (a notebook), asked without importing
    IPython: ``get_ipython()`` is a ``ZMQInteractiveShell`` (or a subclass, as Colab's is)."""
    zmqshell = sys.modules.get("ipykernel.zmqshell")
    ipython = sys.modules.get("IPython")
    if zmqshell is None or ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - a broken IPython is no notebook
        return False
    shell_class = getattr(zmqshell, "ZMQInteractiveShell", None)
    return shell is not None and shell_class is not None and isinstance(shell, shell_class)


def progress_mode(
    explicit: bool | None, environ: dict[str, str] | None = None
) -> Mode | None:
    """Where ``run()`` shows progress: ``"notebook"``, ``"stream"`` (standard error) or
    ``None``. See the module's docstring for the order of the rules."""
    env = os.environ if environ is None else environ
    wanted = explicit if explicit is not None else _flag(env.get("OLOPROOF_PROGRESS"))
    if wanted is False:
        return None
    notebook = in_notebook_kernel()
    if wanted is None:
        return "notebook" if notebook and not _flag(env.get("CI")) else None
    return "notebook" if notebook else "stream"


class Progress:
    """A sink of run events (called on the run's thread) and the display it keeps
    (refreshed from the caller's thread, so that a notebook's output lands in the cell
    that called ``run()``)."""

    def __init__(self, mode: Mode, *, stream: IO[str] | None = None) -> None:
        self.mode = mode
        self.total = 0
        self.done = 0
        self.cached = 0
        self.errors = 0
        self.metrics: dict[str, CriterionEvidence] = {}
        self._lock = threading.Lock()
        self._stream = stream if stream is not None else sys.stderr
        self._handle: Any = None
        self._shown: str | None = None
        self._printed_tenth = -1

    def expect(self, binary_metrics: list[str]) -> None:
        """The BINARY metrics to show (as the live view does: rates, not means)."""
        with self._lock:
            self.metrics = {m: CriterionEvidence(m, MetricKind.BINARY) for m in binary_metrics}

    # -- the sink: counters only ------------------------------------------------------

    def __call__(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, RunStarted):
                self.total = event.cases
            elif isinstance(event, CaseExecuted):
                self.done += 1
                self.cached += event.from_cache
                self.errors += event.status != CaseStatus.OK
            elif isinstance(event, CaseJudged):
                ev = self.metrics.get(event.criterion)
                if ev is not None:
                    ev.add(event.status, event.passed, event.score)

    # -- what is shown ------------------------------------------------------------------

    def metric_parts(self) -> list[str]:
        parts = []
        for name, ev in self.metrics.items():
            iv = wilson(ev.passed, ev.observed)
            if iv is None:
                parts.append(f"{printable(name)} (nothing observed yet)")
            else:
                parts.append(f"{printable(name)} {pct(ev.passed / ev.observed)} "
                             f"{fmt_interval(iv.lower, iv.upper)}")
        return parts

    def text(self) -> str:
        from oloproof.render.live import title  # rich comes with it: only once shown

        with self._lock:
            head = title(self.done, self.total, self.cached, self.errors)
            parts = self.metric_parts()
        bar = _bar(self.done, self.total)
        line = f"{bar} {head}"
        if parts:
            line += " · " + " · ".join(parts)
        return line

    def html(self, end: str | None = None) -> str:
        from html import escape

        from oloproof.render.live import CAPTION, title

        with self._lock:
            done, total = self.done, self.total
            head = title(done, total, self.cached, self.errors)
            parts = self.metric_parts()
        bar = (f'<progress value="{done}" max="{max(total, 1)}" style="width: 24em;'
               f' vertical-align: middle"></progress> {escape(head)}')
        rows = [bar]
        if parts:
            rows.append(f"<small>{escape(' · '.join(parts))}<br>{escape(CAPTION)}</small>")
        if end is not None:
            rows.append(f"<b>{escape(end)}</b>")
        return '<div class="oloproof-progress">' + "<br>".join(rows) + "</div>"

    def refresh(self, end: str | None = None) -> None:
        """Show the current state (called every quarter of a second, and at the end)."""
        if self.total == 0 and end is None:
            return  # the run has not started: nothing to count yet
        if self.mode == "notebook":
            self._notebook(end)
        else:
            self._line(end)

    def _notebook(self, end: str | None) -> None:
        plain = self.text() + (f"\n{end}" if end else "")
        if plain == self._shown:
            return
        self._shown = plain
        bundle = {"text/plain": plain, "text/html": self.html(end)}
        display = sys.modules["IPython"].display
        if self._handle is None:
            self._handle = display.display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)

    def _line(self, end: str | None) -> None:
        line = self.text()
        terminal = _is_terminal(self._stream)
        if terminal:
            if line != self._shown or end:
                self._stream.write("\r" + line + ("\n" + end + "\n" if end else ""))
                self._shown = line
        else:
            tenth = (10 * self.done) // self.total if self.total else 0
            if end or tenth > self._printed_tenth:
                self._printed_tenth = tenth
                self._stream.write(line + "\n" + (end + "\n" if end else ""))
        self._stream.flush()


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = (width * done) // total if total else 0
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
