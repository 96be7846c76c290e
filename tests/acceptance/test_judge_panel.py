"""Judge panels: several judges on one criterion, majority or unanimity, and how often
they disagreed, through the real CLI against two fake providers over real HTTP; the
combining rule against every combination of verdicts."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer

from oloproof.evaluators.judge import PanelJudge
from oloproof.project.config import RubricJudgeEvaluator

ENV = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}


@pytest.fixture
def servers() -> Iterator[tuple[FakeServer, FakeServer]]:
    with FakeServer() as plain, FakeServer() as picky:
        # The picky judge passes only answers that mention the word "Billing".
        picky.configure(pass_keyword="Billing")
        yield plain, picky


def _panel_project(tmp_path: Path, plain: FakeServer, picky: FakeServer, rule: str) -> Path:
    project = tmp_path / "panel"
    assert run_cli("init", str(project), "--example", "judge", cwd=tmp_path).code == 0
    config = project / "oloproof.yaml"
    text = config.read_text().replace("http://127.0.0.1:8787", plain.anthropic_base_url)
    text = text.replace("    timeout_s: 30\n", f"""    timeout_s: 30
    panel_rule: {rule}
    panel:
      - {{}}
      - model: fake-judge-2
      - model: picky-judge
        base_url: {picky.anthropic_base_url}
""", 1)  # the first judge (helpful) only
    config.write_text(text)
    return project


@pytest.mark.parametrize("rule", ["majority", "unanimous"])
def test_a_panel_combines_its_judges_and_reports_their_disagreement(
    tmp_path: Path, servers: tuple[FakeServer, FakeServer], rule: str
) -> None:
    plain, picky = servers
    project = _panel_project(tmp_path, plain, picky, rule)
    result = run_cli("run", cwd=project, env=ENV)
    assert result.code in (1, 3, 4), result.text
    assert "Traceback" not in result.text
    doc = json.loads(run_cli("inspect", "latest", "--json", cwd=project).out)
    verdicts = {c["id"]: c["judgments"]["helpful"] for c in doc["cases"]}
    outputs = {c["id"]: c["output"] for c in doc["cases"]}
    split = 0
    for case_id, judgment in verdicts.items():
        output = outputs[case_id] or ""
        plain_pass = bool(output) and "FAIL" not in output
        picky_pass = "Billing" in output
        expected = (plain_pass if rule == "majority" else plain_pass and picky_pass)
        assert judgment["status"] == "OK" and judgment["passed"] is expected, (case_id, judgment)
        head = "split panel" if plain_pass != picky_pass else "panel agrees"
        assert judgment["reason"].startswith(f"{head}, "), judgment["reason"]
        assert "anthropic:picky-judge" in judgment["reason"]
        split += plain_pass != picky_pass
    assert 0 < split < len(verdicts)  # the data make the judges disagree on some cases
    line = next(x for x in result.out.splitlines() if x.startswith("Panel helpful:"))
    assert f"disagreed on {split} of {len(verdicts)} cases" in line
    judges = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    assert judges["panels"] == {"helpful": {"split": split, "judged": len(verdicts)}}
    # Every judge was asked about every case, once (and the scored judge, not a panel).
    assert plain.total_calls("/v1/messages") == 3 * len(verdicts)
    assert picky.total_calls("/v1/messages") == len(verdicts)


def test_panel_config_mistakes_are_named(tmp_path: Path,
                                         servers: tuple[FakeServer, FakeServer]) -> None:
    plain, picky = servers
    project = _panel_project(tmp_path, plain, picky, "majority")
    config = project / "oloproof.yaml"
    good = config.read_text()
    config.write_text(good.replace("      - model: fake-judge-2\n", "      - model: fake-judge-2\n"
                                   "        max_completion_tokens: 10\n"))
    result = run_cli("run", cwd=project, env=ENV)
    assert result.code == 2, result.text
    assert "oloproof.yaml:32: evaluators[0].panel[1].max_completion_tokens:" in result.err
    config.write_text(good.replace("""    panel:
      - {}
      - model: fake-judge-2
""", "    panel:\n"))
    result = run_cli("run", cwd=project, env=ENV)
    assert result.code == 2 and "at least 2 judges" in result.err, result.err
    assert "Traceback" not in result.text


def _judge(rule: str, n: int) -> PanelJudge:
    panel = PanelJudge.__new__(PanelJudge)
    panel.rule = rule
    return panel


@pytest.mark.parametrize("rule", ["majority", "unanimous"])
@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_a_missing_verdict_is_never_guessed(rule: str, n: int) -> None:
    """The panel decides only when every completion of the missing verdicts agrees."""
    panel = _judge(rule, n)

    def decide(full: tuple[bool, ...]) -> bool:
        passes = sum(full)
        return passes > n / 2 if rule == "majority" else passes == n

    for verdicts in itertools.product([True, False, None], repeat=n):
        gaps = [i for i, v in enumerate(verdicts) if v is None]
        outcomes = set()
        for fill in itertools.product([True, False], repeat=len(gaps)):
            full = list(verdicts)
            for i, value in zip(gaps, fill, strict=True):
                full[i] = value
            outcomes.add(decide(tuple(bool(v) for v in full)))
        expected = outcomes.pop() if len(outcomes) == 1 else None
        assert panel.combine(list(verdicts)) is expected, verdicts


def test_a_panel_member_inherits_what_it_does_not_set() -> None:
    config = RubricJudgeEvaluator.validate({
        "type": "rubric_judge", "criterion": "c", "provider": "anthropic", "model": "m1",
        "rubric_text": "be helpful", "max_tokens": 64, "api_key_env": "K",
        "panel": [{}, {"model": "m2", "provider": "openai", "max_completion_tokens": 9}],
    })
    first, second = config.members()
    assert (first.provider, first.model, first.max_tokens, first.rubric) == (
        "anthropic", "m1", 64, "be helpful")
    assert (second.provider, second.model, second.max_completion_tokens) == ("openai", "m2", 9)
    # Another provider: its own key variable and request parameters, not the panel's.
    assert second.api_key_env is None and second.max_tokens is None
    assert second.rubric == "be helpful"
    third = RubricJudgeEvaluator.validate({
        "type": "rubric_judge", "criterion": "c", "provider": "anthropic", "model": "m1",
        "rubric_text": "r", "max_tokens": 64, "api_key_env": "K",
        "panel": [{}, {"model": "m3"}],
    }).members()[1]
    assert (third.provider, third.model, third.max_tokens, third.api_key_env) == (
        "anthropic", "m3", 64, "K")
