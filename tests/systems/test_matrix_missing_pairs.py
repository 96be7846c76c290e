"""A matrix comparison holds the pairs a variant (or the baseline) left missing at their
worst, as `compare` does: a variant that fails to answer the cases it would fail is never
"better" for it.

A scripted provider over real HTTP answers each case by the model asked: on 80 cases the
baseline and the candidate agree on 50; on 15 the candidate is right where the baseline is
wrong; on the last 15, which the baseline gets right, the candidate answers nothing
(``finish_reason: content_filter``, an error of the case: missing, 15 of 80 under the
default ``max_missing`` of 20%). On its 65 observed pairs the candidate is right 65 times
to the baseline's 50: +23 points, Newcombe's interval wholly above 0, and the matrix said
"better". With the 15 missing pairs at their worst (the candidate wrong where the baseline
was right) the table is 50/15/15/0: no difference at all.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.chat import ScriptedChat, openai_reply, user_text

import oloproof
from oloproof.stats.paired import paired_proportion_difference

N = 80


def _kind(i: int) -> str:
    r = i % 16
    return "both" if r < 10 else "cand_only" if r < 13 else "base_only"


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    match = re.search(r"case (\d+): my (\w+) question", user_text(body))
    assert match is not None
    i, label = int(match.group(1)), match.group(2)
    kind = _kind(i)
    if body["model"] == "base":
        return openai_reply(label if kind != "cand_only" else "wrong")
    if kind == "base_only":
        return openai_reply(None, "content_filter")
    return openai_reply(label)


def _project(root: Path, base_url: str) -> Path:
    labels = ("refund", "shipping", "account", "billing")
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "p.md").write_text("{{ question }}\n")
    (root / "data").mkdir()
    (root / "data" / "s.jsonl").write_text("".join(
        f'{{"id": "c{i:02d}", "input": {{"question": "case {i}: my {labels[i % 4]} question"}},'
        f' "expected": {{"label": "{labels[i % 4]}"}}}}\n' for i in range(N)))
    (root / "oloproof.yaml").write_text(textwrap.dedent(f"""\
        version: 1
        project: missing-pairs
        dataset: data/s.jsonl
        system:
          name: triage
          model:
            provider: openai_compatible
            model: base
            base_url: {base_url}
            prompt_file: prompts/p.md
            max_tokens: 16
        concurrency:
          system: 2
        evaluators:
          - type: exact_match
            criterion: correct
            field: null
            expected_field: label
        matrix:
          variants:
            - name: base
            - name: cand
              model: cand
    """))
    (root / "release.yaml").write_text(
        "version: 1\nrules:\n  - id: floor\n    metric: correct\n    min: 0.5\n")
    return root


def test_a_variant_that_fails_to_answer_is_not_better_for_it(tmp_path: Path) -> None:
    with ScriptedChat(_answer) as chat:
        result = oloproof.run(_project(tmp_path, chat.base_url), matrix=True)
    assert isinstance(result, oloproof.MatrixResult)
    cand = result.variant("cand").result
    assert cand.metrics["correct"].missing == 15
    [comparison] = result.comparisons
    assert (comparison.pairs, comparison.dropped) == (65, 15)
    # On the observed pairs alone the difference is decided: it was "better".
    observed = paired_proportion_difference(50, 15, 0, 0, comparison.level)
    assert observed.interval is not None and observed.interval.lower > 0
    # With the missing pairs at their worst (the candidate failing, the baseline passing)
    # the table is 50/15/15/0: a difference of 0, inside any interval.
    assert comparison.verdict == "not separated", comparison
    assert comparison.lower is not None and comparison.upper is not None
    assert comparison.lower < 0 < comparison.upper
    assert "missing" in comparison.method
    assert result.better_than_baseline() == []
    # The observed difference is still shown as observed (65 vs 50 of 65).
    assert comparison.estimate == pytest.approx(15 / 65)
