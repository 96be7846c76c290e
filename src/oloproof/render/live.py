"""The live view: redrawn on standard error while a run goes (SPEC §6).

A title ``56/120 cases · 0 cached · 0 errors``, one row per BINARY metric
with a provisional Wilson interval over the finished cases, and a caption
that says it is not a decision. Built on ``rich.live.Live``: a background
thread redraws the frame at most ``refresh_per_second`` times a second (4 by
default, never more than 10), whatever the rate of events; the events only
update counters. Used only when standard error is a terminal.

The title counts executed cases; the table counts judged ones, so with slow
judges the rows lag the title by the cases still being judged. With adaptive
concurrency, a second line of the title gives each adaptive limit as it stands,
beside its ceiling (``adaptive limits: system 6 of 32 · judge 4 of 4``), from
the ``concurrency_changed`` events.
"""

from __future__ import annotations

import threading

from rich.console import Console
from rich.live import Live
from rich.table import Table

from oloproof.enums import CaseStatus, MetricKind
from oloproof.events import (
    CaseExecuted,
    CaseJudged,
    ConcurrencyChanged,
    Event,
    RuleDecided,
    RunFinished,
    RunStarted,
)
from oloproof.evidence import CriterionEvidence
from oloproof.policy.decide import fmt_interval, pct
from oloproof.render.console import text
from oloproof.stats.intervals import wilson

CAPTION = "Provisional Wilson estimates over finished cases; not a decision."
COLUMNS = ("Metric", "Estimate", "Provisional interval", "Cases")
MAX_REFRESH_PER_SECOND = 10.0


def title(done: int, total: int, cached: int, errors: int) -> str:
    return f"{done}/{total} cases · {cached} cached · {errors} errors"


def limits_line(limits: dict[str, tuple[int, int]]) -> str:
    """``adaptive limits: system 6 of 32 · judge 4 of 4``; empty without adaptive limits."""
    if not limits:
        return ""
    parts = [f"{name} {limit} of {ceiling}" for name, (limit, ceiling) in limits.items()]
    return "adaptive limits: " + " · ".join(parts)


class LiveView:
    """A sink of run events that keeps a live frame on a terminal.

    ``transient``: erase the frame when the run ends (the final tables take its
    place on the same terminal); otherwise the last frame stays.
    ``redirect_stdout``: route ``print`` from the system under test above the
    frame instead of through it (only when standard output is that terminal).
    """

    def __init__(
        self,
        console: Console,
        binary_metrics: list[str],
        total: int,
        *,
        refresh_per_second: float = 4,
        transient: bool = True,
        redirect_stdout: bool = False,
    ) -> None:
        self.console = console
        self.metrics = binary_metrics
        self.total = total
        self.done = 0
        self.cached = 0
        self.errors = 0
        # Adaptive limits as they stand: name -> (limit, ceiling).
        self.limits: dict[str, tuple[int, int]] = {}
        # A sequential run's rules as they are decided (rule_decided), one line each.
        self.decided: list[str] = []
        # Counted by the one rule for observed/missing/excluded (oloproof.evidence).
        self.evidence = {m: CriterionEvidence(m, MetricKind.BINARY) for m in binary_metrics}
        # The counters are updated on the run's thread and read by rich's refresh thread:
        # a frame drawn between two updates read 6 passed of 5 observed (ValueError in
        # the refresh thread, whose frame then froze), or a limit added to the dict it was
        # iterating. Each event's update, and each frame's reading, hold this lock.
        self._lock = threading.Lock()
        rate = min(MAX_REFRESH_PER_SECOND, refresh_per_second)
        if rate <= 0:
            raise ValueError("refresh_per_second must be > 0")
        self._live = Live(
            get_renderable=self.render,
            console=console,
            refresh_per_second=rate,
            transient=transient,
            redirect_stdout=redirect_stdout,
            redirect_stderr=True,
        )
        self._started = False
        self._stopped = False

    @property
    def started(self) -> bool:
        return self._started

    def __call__(self, event: Event) -> None:
        if isinstance(event, CaseExecuted):
            with self._lock:
                self.done += 1
                self.cached += event.from_cache
                self.errors += event.status != CaseStatus.OK
        elif isinstance(event, CaseJudged):
            ev = self.evidence.get(event.criterion)
            if ev is not None:
                with self._lock:
                    ev.add(event.status, event.passed, event.score)
        elif isinstance(event, ConcurrencyChanged):
            with self._lock:
                self.limits[event.limit_name] = (event.limit, event.ceiling)
        elif isinstance(event, RuleDecided):
            line = (
                f"{event.rule}: {event.state} after {event.n:,} of {event.cases_total:,} cases"
                " (sequential; no more cases are started once every rule is decided)"
            )
            with self._lock:
                self.decided.append(line)
        elif isinstance(event, RunStarted):
            self.start()
        elif isinstance(event, RunFinished):
            self.stop()

    def start(self) -> None:
        if not self._started and not self._stopped:
            self._started = True
            self._live.start()

    def stop(self) -> None:
        """Draw the last frame (or erase it, if transient) and give the terminal back."""
        self._stopped = True
        if self._started:
            self._started = False
            try:
                self._live.stop()
            except OSError:
                pass  # the terminal went away (a hangup): there is nothing left to draw on

    def render(self) -> Table:
        """The current frame; metric names are literal text, never markup. Called by rich's
        refresh thread: the counters are read in one go, between two events."""
        with self._lock:
            heading = title(self.done, self.total, self.cached, self.errors)
            adaptive = limits_line(self.limits)
            decided = list(self.decided)
            counts = [(m, self.evidence[m].observed, self.evidence[m].passed,
                       self.evidence[m].missing) for m in self.metrics]
        if adaptive:
            heading += "\n" + adaptive
        for line in decided:
            heading += "\n" + line
        table = Table(
            title=text(heading),
            caption=text(CAPTION),
        )
        for col in COLUMNS:
            table.add_column(col, no_wrap=True)
        for m, n, k, missing in counts:
            iv = wilson(k, n)  # None when nothing is observed yet
            if iv is not None:
                est, interval = pct(k / n), fmt_interval(iv.lower, iv.upper)
            else:
                est, interval = "", ""
            table.add_row(
                text(m), text(est), text(interval), text(f"{n} observed · {missing} missing")
            )
        return table
