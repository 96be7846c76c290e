"""The live view of a sequential run: each rule_decided is a line under the title."""

from __future__ import annotations

import io

from rich.console import Console

from oloproof.events import RuleDecided
from oloproof.render.live import LiveView

RUN_ID = "run_01M8T6NDZGNHNZHZ9WGY5NYGFF"


def test_the_frame_says_which_rules_are_decided_and_after_how_many_cases() -> None:
    view = LiveView(Console(file=io.StringIO()), ["correct"], 2000)
    view(RuleDecided(RUN_ID, rule="accuracy-floor", metric="correct", state="PASS", n=57,
                     n_scope=57, cases_total=2000, e_value=41.75, e_threshold=40.0,
                     method="beta-binomial mixture e-process"))
    out = io.StringIO()
    Console(file=out, width=160, force_terminal=False, color_system=None).print(view.render())
    assert "accuracy-floor: PASS after 57 of 2,000 cases (sequential" in out.getvalue()
