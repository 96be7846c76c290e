"""The live view: redrawn on standard error while a run goes (SPEC §6).

A title ``56/120 cases · 0 cached · 0 errors``, one row per BINARY metric
with a provisional Wilson interval over the finished cases, and a caption
that says it is not a decision. Redrawn at most ``refresh_per_second`` times
a second (4 by default, never more than 10).
"""

from __future__ import annotations

from rich.console import Console
from rich.live import Live
from rich.table import Table

from oloproof.events import CaseExecuted, CaseJudged, Event, RunFinished, RunStarted
from oloproof.policy.decide import fmt_interval, pct
from oloproof.stats.intervals import wilson

CAPTION = "Provisional Wilson estimates over finished cases; not a decision."


class LiveView:
    def __init__(
        self, console: Console, binary_metrics: list[str], total: int, refresh_per_second: float = 4
    ) -> None:
        self.console = console
        self.metrics = binary_metrics
        self.total = total
        self.done = 0
        self.cached = 0
        self.errors = 0
        self.passed = dict.fromkeys(binary_metrics, 0)
        self.observed = dict.fromkeys(binary_metrics, 0)
        self.missing = dict.fromkeys(binary_metrics, 0)
        self._live = Live(
            get_renderable=self.render,
            console=console,
            refresh_per_second=min(10.0, refresh_per_second),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._started = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, CaseExecuted):
            self.done += 1
            self.cached += event.from_cache
            self.errors += event.status != "OK"
        elif isinstance(event, CaseJudged):
            if event.criterion in self.passed:
                if event.status == "OK":
                    self.observed[event.criterion] += 1
                    self.passed[event.criterion] += bool(event.passed)
                elif event.status != "EXCLUDED":
                    self.missing[event.criterion] += 1
        elif isinstance(event, RunStarted):
            self.start()
        elif isinstance(event, RunFinished):
            self.stop()

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._live.start()

    def stop(self) -> None:
        if self._started:
            self._started = False
            self._live.stop()

    def render(self) -> Table:
        table = Table(
            title=f"{self.done}/{self.total} cases · {self.cached} cached · {self.errors} errors",
            caption=CAPTION,
        )
        for col in ("Metric", "Estimate", "Provisional interval", "Cases"):
            table.add_column(col, no_wrap=True)
        for m in self.metrics:
            n, k = self.observed[m], self.passed[m]
            if n:
                iv = wilson(k, n)
                est, interval = pct(k / n), fmt_interval(iv.lower, iv.upper)
            else:
                est, interval = "", ""
            table.add_row(m, est, interval, f"{n} observed · {self.missing[m]} missing")
        return table
