"""A model behind a provider as the system under test (system.model), and matrices of them.

Real projects on disk, real SQLite stores, the fake provider over real HTTP on 127.0.0.1;
the CLI in a subprocess where the command line is what is checked.
"""

from __future__ import annotations

import json
import os
import sqlite3
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer
from tests.report._browser import chromium, needs_chromium

import oloproof
from oloproof.errors import ConfigError, UsageError
from oloproof.project.loader import load_project
from oloproof.systems.model import ModelSystem, parse_json_output
from oloproof.testing.fake_provider import model_answer
from oloproof.transport.retry import PermanentFailure

LABELS = ("refund", "shipping", "account", "billing")
KEY = "sk-fake-secret-0123456789"


def _cases(n: int = 24) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        label = LABELS[i % 4]
        out.append({"id": f"c{i:02d}", "input": {"question": f"case {i}: my {label} question"},
                    "expected": {"label": label}})
    return out


def _project(
    root: Path, base_url: str, *, model_block: str = "", matrix: str = "",
    prompt: str = "Categories: refund, shipping, account, billing\n{{ question }}\n",
    cases: list[dict[str, Any]] | None = None, evaluators: str | None = None,
    release: str | None = None, concurrency: int = 4, extra: dict[str, str] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "prompts" / "answer.md").write_text(prompt)
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in (cases or _cases())))
    for name, text in (extra or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    evaluators = evaluators or """
      - type: exact_match
        criterion: correct
        field: null
        expected_field: label
    """
    config = textwrap.dedent("""\
        version: 1
        project: models-test
        dataset: data/cases.jsonl
        {policy}
        system:
          name: triage
          model:
            provider: openai_compatible
            model: fake-small
            base_url: {base_url}
            api_key_env: MODEL_TEST_KEY
            prompt_file: prompts/answer.md
            temperature: 0
            max_tokens: 16
        {model_block}
        concurrency:
          system: {concurrency}
        evaluators:
        {evaluators}
        {matrix}
    """).format(
        policy="policy: none" if release is None else "",
        base_url=base_url,
        model_block=textwrap.indent(textwrap.dedent(model_block).strip(), "    "),
        concurrency=concurrency,
        evaluators=textwrap.indent(textwrap.dedent(evaluators).strip("\n"), ""),
        matrix=textwrap.dedent(matrix).strip(),
    )
    (root / "oloproof.yaml").write_text(config)
    if release is not None:
        (root / "release.yaml").write_text(textwrap.dedent(release))
    return root


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MODEL_TEST_KEY", KEY)
    return KEY


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeServer() as srv:
        yield srv


# -- configuration ---------------------------------------------------------------------


MATRIX = """\
matrix:
  product:
    prompt_file: [prompts/answer.md, prompts/stepwise.md]
    model: {small: fake-small, large: fake-large}
"""
STEPWISE = ("Think step by step.\nCategories: refund, shipping, account, billing\n"
            "Message: {{ input.question }}\n")


def test_a_product_expands_first_axis_slowest_with_names(tmp_path: Path) -> None:
    root = _project(tmp_path, "http://127.0.0.1:9/v1", matrix=MATRIX,
                    extra={"prompts/stepwise.md": STEPWISE})
    matrix = load_project(root / "oloproof.yaml").config.matrix
    assert matrix is not None
    assert matrix.names() == ["answer/small", "answer/large", "stepwise/small", "stepwise/large"]
    assert matrix.baseline_name() == "answer/small"
    assert matrix.variants[3].overrides() == {
        "prompt_file": "prompts/stepwise.md", "model": "fake-large"}


def test_explicit_variants_follow_the_product_and_baseline_is_checked(tmp_path: Path) -> None:
    matrix = MATRIX + """\
  variants:
    - name: warm
      temperature: 0.7
  baseline: warm
"""
    root = _project(tmp_path, "http://127.0.0.1:9/v1", matrix=matrix,
                    extra={"prompts/stepwise.md": STEPWISE})
    config = load_project(root / "oloproof.yaml").config
    assert config.matrix is not None
    assert config.matrix.names()[-1] == "warm" and config.matrix.baseline_name() == "warm"
    (root / "oloproof.yaml").write_text(
        (root / "oloproof.yaml").read_text().replace("baseline: warm", "baseline: wram"))
    with pytest.raises(ConfigError) as caught:
        load_project(root / "oloproof.yaml")
    assert "no variant is named 'wram'; did you mean 'warm'?" in str(caught.value)
    assert caught.value.field == "matrix.baseline" and caught.value.line is not None


@pytest.mark.parametrize(("matrix", "words", "field"), [
    ("matrix:\n  product:\n    prompt: [a.md, b.md]\n",
     "'prompt' is not a field of system.model; did you mean 'prompt_file'?",
     "matrix.product.prompt"),
    ("matrix:\n  variants:\n    - {name: a}\n    - {name: a, model: m}\n",
     "duplicate variant name 'a'", "matrix.variants[1].name"),
    ("matrix:\n  variants:\n    - {name: only}\n", "a matrix needs at least 2 variants",
     "matrix.variants"),
    (("matrix:\n  variants:\n    - {name: a}\n"
      "    - {name: b, provider: anthropic, max_tokens: null}\n"),
     "variant 'b': the anthropic Messages API requires max_tokens", None),
])
def test_a_bad_matrix_is_refused_naming_the_field(
    tmp_path: Path, matrix: str, words: str, field: str | None
) -> None:
    root = _project(tmp_path, "http://127.0.0.1:9/v1", matrix=matrix)
    with pytest.raises(ConfigError) as caught:
        load_project(root / "oloproof.yaml")
    assert words in str(caught.value)
    if field is not None:
        assert caught.value.field == field, caught.value


def test_a_matrix_needs_a_model_system(tmp_path: Path) -> None:
    root = _project(tmp_path, "http://127.0.0.1:9/v1",
                    matrix="matrix:\n  variants:\n    - {name: a}\n    - {name: b}\n")
    text = (root / "oloproof.yaml").read_text()
    start = text.index("  model:")
    end = text.index("concurrency:")
    (root / "oloproof.yaml").write_text(
        text[:start] + '  version: "1"\n  callable: app:answer\n' + text[end:])
    (root / "app.py").write_text("def answer(x):\n    return x\n")
    with pytest.raises(ConfigError) as caught:
        load_project(root / "oloproof.yaml")
    assert "a matrix varies a model system" in str(caught.value)


def test_a_template_that_does_not_parse_is_refused_with_file_and_line(
    tmp_path: Path, key: str
) -> None:
    root = _project(tmp_path, "http://127.0.0.1:9/v1",
                    prompt="Categories: a, b\n\n{{ question }\n")
    with pytest.raises(ConfigError) as caught:
        oloproof.run(root)
    error = caught.value
    assert error.file == "prompts/answer.md" and error.line == 3, error
    assert "the template does not parse" in str(error)
    assert not (root / ".oloproof" / "store.sqlite").exists() or not _runs(root)


def _runs(root: Path) -> list[Any]:
    with sqlite3.connect(root / ".oloproof" / "store.sqlite") as conn:
        return conn.execute("SELECT id FROM runs").fetchall()


def test_a_missing_key_variable_stops_before_anything_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MODEL_TEST_KEY", raising=False)
    root = _project(tmp_path, "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError) as caught:
        oloproof.run(root)
    assert "MODEL_TEST_KEY is not set" in str(caught.value)
    assert caught.value.field == "system.model.api_key_env"


# -- identity ---------------------------------------------------------------------------


def _system(root: Path, **changes: Any) -> ModelSystem:
    config = {"provider": "openai_compatible", "model": "m", "base_url": "http://x/v1",
              "prompt_file": "prompts/answer.md", "temperature": 0, "max_tokens": 16,
              "timeout_s": 60, "api_key_env": "MODEL_TEST_KEY", **changes}
    return ModelSystem(name="triage", config=config, root=root)


def test_identity_holds_what_decides_the_answers_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path, "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MODEL_TEST_KEY", "first-key-aaaaaaaa")
    base = _system(root).identity
    for change in ({"model": "m2"}, {"temperature": 0.5}, {"max_tokens": 17},
                   {"base_url": "http://y/v1"}, {"extra_body": {"top_p": 0.9}},
                   {"output": "json"}):
        assert _system(root, **change).identity != base, change
    assert _system(root, timeout_s=5).identity == base
    monkeypatch.setenv("MODEL_TEST_KEY", "another-key-bbbbbbbb")
    assert _system(root).identity == base  # the key's value is never part of it
    (root / "prompts" / "answer.md").write_text("Categories: a, b\n{{ question }}!\n")
    assert _system(root).identity != base  # the template's source is


def test_json_output_takes_one_fence_off_and_refuses_anything_else() -> None:
    assert parse_json_output('{"label": "refund"}') == {"label": "refund"}
    assert parse_json_output('```json\n{"label": "refund"}\n```') == {"label": "refund"}
    for bad in ('Sure! {"label": "refund"}', "refund", "", '{"a": 1} {"b": 2}',
                '```json\n{"label": "x"}\n```\nHope this helps'):
        with pytest.raises(PermanentFailure):
            parse_json_output(bad)


def test_the_fake_model_depends_on_the_prompt_and_the_model_deterministically() -> None:
    prompt = "Categories: refund, shipping\nI want a refund"
    assert model_answer("fake-large", "", prompt) == model_answer("fake-large", "", prompt)
    assert model_answer("x", "", "no categories here") == "I cannot tell."
    assert json.loads(model_answer("fake-large", "Reply in JSON.", prompt))["label"] in (
        "refund", "shipping")
    # Over many prompts the small model errs more often than the large one.
    wrong = {m: sum(model_answer(m, "", f"Categories: refund, shipping\n{i}: a refund") != "refund"
                    for i in range(400)) for m in ("fake-small", "fake-large")}
    assert wrong["fake-large"] < wrong["fake-small"], wrong


# -- runs against the fake provider over HTTP -----------------------------------------------


def test_a_model_system_runs_records_usage_and_never_stores_the_key(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    root = _project(tmp_path, server.openai_base_url)
    result = oloproof.run(root)
    assert result.metrics["correct"].observed == 24 and result.metrics["correct"].missing == 0
    info = next(r for r in oloproof.list_runs(root) if r.run_id == result.run_id)
    assert info.system["kind"] == "model" and info.system["model"] == "fake-small"
    assert "api_key" not in json.dumps(info.system) or KEY not in json.dumps(info.system)
    first = next(result.cases())
    assert first.usage is not None
    assert first.usage["input_tokens"] > 0 and first.usage["output_tokens"] == 1
    assert first.output in LABELS
    stored = (root / ".oloproof" / "store.sqlite").read_bytes()
    assert key.encode() not in stored
    again = oloproof.run(root)
    assert again.cache["execution_hits"] == 24 and again.cache["execution_misses"] == 0


def test_a_field_the_case_lacks_is_a_per_case_error_naming_it(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    cases = _cases(8)
    del cases[3]["input"]["question"]
    cases[3]["input"]["text"] = "no question field"
    root = _project(tmp_path, server.openai_base_url, cases=cases,
                    prompt="Categories: refund, shipping, account, billing\n"
                           "{{ input.question }}\n")
    result = oloproof.run(root)
    assert result.metrics["correct"].missing == 1 and result.metrics["correct"].observed == 7
    broken = next(c for c in result.cases() if c.id == "c03")
    assert broken.status == "ERROR"
    assert "prompts/answer.md: the case has no field 'question'" in (broken.error or "")


def test_output_json_parses_the_reply_and_a_reply_that_is_not_json_is_missing(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    evaluators = """
      - type: exact_match
        criterion: correct
        field: label
    """
    root = _project(tmp_path / "json", server.openai_base_url, model_block="output: json",
                    prompt="Reply in JSON, in a code fence.\n"
                           "Categories: refund, shipping, account, billing\n{{ question }}\n",
                    evaluators=evaluators)
    result = oloproof.run(root)
    assert result.metrics["correct"].observed == 24, result.metrics
    output = next(result.cases()).output
    assert isinstance(output, dict) and "label" in output
    plain = _project(tmp_path / "plain", server.openai_base_url, model_block="output: json",
                     evaluators=evaluators)
    refused = oloproof.run(plain)
    assert refused.metrics["correct"].observed == 0
    assert refused.status == "RUN_ERROR" or refused.metrics["correct"].missing >= 1
    case = next(refused.cases())
    assert "output: json, and the reply is not JSON" in (case.error or "")


def test_a_wrong_key_names_the_url_and_masks_the_key(
    tmp_path: Path, key: str
) -> None:
    from oloproof.testing.fake_provider import JudgeRule, OfflineProvider

    with OfflineProvider(rule=JudgeRule(expected_api_key="the-right-key-zzzz")) as fake:
        root = _project(tmp_path, fake.url + "/v1")
        result = oloproof.run(root)
    assert result.exit_code == 5
    errors = " ".join(c.error or "" for c in result.cases())
    assert "401" in errors and "/v1/chat/completions" in errors
    assert key not in errors and "***" in errors
    assert key.encode() not in (root / ".oloproof" / "store.sqlite").read_bytes()


# -- matrices ---------------------------------------------------------------------------


def test_a_matrix_runs_each_variant_and_decides_comparisons_under_holm(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    root = _project(tmp_path, server.openai_base_url, matrix=MATRIX, cases=_cases(60),
                    extra={"prompts/stepwise.md": STEPWISE},
                    release="version: 1\nrules:\n  - id: floor\n    metric: correct\n"
                            "    min: 0.5\n")
    result = oloproof.run(root, matrix=True)
    assert isinstance(result, oloproof.MatrixResult)
    assert result.names == ["answer/small", "answer/large", "stepwise/small", "stepwise/large"]
    assert len({v.run_id for v in result.variants}) == 4
    assert result.baseline == "answer/small"
    # The exit code is the baseline's gate.
    assert result.exit_code == result.variant("answer/small").result.exit_code
    assert len(result.comparisons) == 3 and all(c.metric == "correct"
                                                 for c in result.comparisons)
    # Holm: the first step is at 1 - 0.05/3; a decided comparison's interval excludes 0.
    levels = {round(c.level, 12) for c in result.comparisons}
    assert max(levels) == round(1 - 0.05 / 3, 12)
    assert levels <= {round(1 - 0.05 / k, 12) for k in (3, 2, 1)}
    for c in result.comparisons:
        assert c.method.startswith("Newcombe")
        if c.verdict == "better":
            assert c.lower is not None and c.lower > 0
    assert "stepwise/large" in result.better_than_baseline()
    # The stored document is what inspect shows.
    shown = run_cli("inspect", result.matrix_id, "--json", cwd=root)
    assert shown.code == 0 and json.loads(shown.out) == result.to_json()


def test_variants_as_one_name(tmp_path: Path, server: FakeServer, key: str) -> None:
    """``variants="stepwise/large"`` is that variant, as ``cases="c1"`` is that case: it
    was read letter by letter and refused as "no variant 's'"."""
    root = _project(tmp_path, server.openai_base_url, matrix=MATRIX, cases=_cases(6),
                    extra={"prompts/stepwise.md": STEPWISE})
    result = oloproof.run(root, matrix=True, variants="stepwise/large")
    assert result.names == ["answer/small", "stepwise/large"]


def test_variants_share_the_judge_cache_where_their_outputs_agree(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    evaluators = f"""
      - type: rubric_judge
        criterion: helpful
        provider: openai_compatible
        model: fake-judge
        base_url: {server.openai_base_url}
        api_key_env: MODEL_TEST_KEY
        rubric_text: The answer names a category.
    """
    matrix = "matrix:\n  product:\n    temperature: [0, 0.5]\n"
    root = _project(tmp_path, server.openai_base_url, matrix=matrix, evaluators=evaluators,
                    cases=_cases(12))
    result = oloproof.run(root, matrix=True)
    cold, warm = (v.result.cache for v in result.variants)
    # The fake's answer does not depend on the temperature: the second variant calls the
    # model afresh (its identity differs) but finds every judgment in the cache.
    assert cold["execution_misses"] == 12 and warm["execution_misses"] == 12
    assert cold["judgment_misses"] == 12 and warm["judgment_hits"] == 12, (cold, warm)


def test_one_limit_per_endpoint_across_the_variants(
    tmp_path: Path, key: str
) -> None:
    with FakeServer() as srv:
        srv.configure(None, delay_s=0.05)
        matrix = "matrix:\n  product:\n    model: [fake-small, fake-large, fake-other]\n"
        root = _project(tmp_path, srv.openai_base_url, matrix=matrix, cases=_cases(24),
                        concurrency=3)
        oloproof.run(root, matrix=True)
        peak = srv.peak_in_flight("/v1/chat/completions")
        total = srv.total_calls("/v1/chat/completions")
    assert total == 72
    assert peak <= 3, peak


def test_run_matrix_through_the_cli_and_plan_the_top_two(
    tmp_path: Path, server: FakeServer
) -> None:
    root = _project(tmp_path, server.openai_base_url, matrix=MATRIX, cases=_cases(40),
                    extra={"prompts/stepwise.md": STEPWISE})
    env = {"MODEL_TEST_KEY": KEY}
    done = run_cli("run", "--matrix", cwd=root, env=env)
    assert done.code == 0, done.text
    assert "Variants × metrics" in done.out and "Holm over 3 comparisons" in done.out
    assert "answer/small (baseline)" in done.out
    matrix_id = next(w for w in done.out.split() if w.startswith("mx_"))
    plan = run_cli("plan", matrix_id, "--json", cwd=root)
    assert plan.code == 0, plan.text
    doc = json.loads(plan.out)
    assert doc["metrics"][0]["metric"] == "correct" and "top" in doc["metrics"][0]
    listed = run_cli("runs", cwd=root)
    assert "triage [stepwise/large]" in listed.out and "None" not in listed.out, listed.out
    only = run_cli("run", "--matrix", "--variant", "stepwise/large", cwd=root, env=env)
    assert only.code == 0 and "2 variants" in only.out, only.text
    unknown = run_cli("run", "--matrix", "--variant", "nope", cwd=root, env=env)
    assert unknown.code == 2 and "no variant 'nope'" in unknown.err, unknown.text
    assert "Traceback" not in unknown.err


def test_a_variant_run_is_named_the_same_by_inspect_compare_and_report(
    tmp_path: Path, server: FakeServer
) -> None:
    """A model system has no version: `inspect` printed `system triage None`, and `compare`
    named both sides `triage`, whatever their variants; every command now names a run's
    system as `runs` does (`triage [stepwise/large]`)."""
    root = _project(tmp_path, server.openai_base_url, matrix=MATRIX, cases=_cases(8),
                    extra={"prompts/stepwise.md": STEPWISE})
    done = run_cli("run", "--matrix", cwd=root, env={"MODEL_TEST_KEY": KEY})
    assert done.code == 0, done.text
    ids = [w for w in run_cli("runs", cwd=root).out.split() if w.startswith("run_")]
    shown = run_cli("inspect", ids[0], cwd=root)
    assert "   system triage [stepwise/large]   started " in shown.out, shown.out
    compared = run_cli("compare", ids[0], ids[-1], cwd=root)
    assert f"candidate  {ids[0]}  triage [stepwise/large]  (8 cases" in compared.out, compared.out
    assert f"baseline   {ids[-1]}  triage [answer/small]  (8 cases" in compared.out
    out = tmp_path / "run.html"
    assert run_cli("report", ids[0], "-o", str(out), cwd=root).code == 0
    page = out.read_text()
    assert "<dt>System</dt><dd>triage [stepwise/large]" in page
    assert "None" not in shown.out + compared.out


def test_matrix_true_without_a_matrix_is_a_usage_error(tmp_path: Path, key: str) -> None:
    root = _project(tmp_path, "http://127.0.0.1:9/v1")
    with pytest.raises(UsageError, match="declares no matrix"):
        oloproof.run(root, matrix=True)


def test_a_ranged_mean_is_compared_with_the_bounded_interval_and_trials_and_groups_work(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    from oloproof.analysis.matrix import BOUNDED_PAIRED

    evaluators = f"""
      - type: exact_match
        criterion: correct
        field: null
        expected_field: label
        group_by: [topic]
      - type: rubric_judge
        criterion: quality
        scale: [1, 5]
        provider: openai_compatible
        model: fake-judge
        base_url: {server.openai_base_url}
        api_key_env: MODEL_TEST_KEY
        rubric_text: Score how complete the answer is.
    """
    cases = [{**c, "metadata": {"topic": c["expected"]["label"]}} for c in _cases(16)]
    matrix = "matrix:\n  product:\n    model: [fake-small, fake-large]\n"
    root = _project(tmp_path, server.openai_base_url, matrix=matrix, evaluators=evaluators,
                    cases=cases)
    result = oloproof.run(root, matrix=True, trials=2)
    methods = {c.metric: c.method for c in result.comparisons}
    assert methods["quality"] == BOUNDED_PAIRED
    assert methods["correct"].startswith("Newcombe")
    for v in result.variants:
        assert v.result.trials == 2
        assert v.result.metrics["correct"].trials == 2
    assert any("trial 0" in w for w in result.warnings)


def test_a_matrix_is_stored_and_read_back_on_either_store(
    tmp_path: Path, server: FakeServer, key: str, backend: Any
) -> None:
    matrix = "matrix:\n  product:\n    model: [fake-small, fake-large]\n"
    root = _project(tmp_path, server.openai_base_url, matrix=matrix, cases=_cases(12))
    result = oloproof.run(root, matrix=True)
    assert backend.count(root, "matrices", "id = ?", (result.matrix_id,)) == 1
    from oloproof.store.db import open_store_readonly
    from oloproof.store.location import locate
    from oloproof.store.matrices import get_matrix, list_matrices

    conn = open_store_readonly(locate(root / "oloproof.yaml"))
    try:
        assert get_matrix(conn, result.matrix_id).document == result.to_json()
        assert get_matrix(conn, "latest").id == result.matrix_id
        assert [m.id for m in list_matrices(conn)] == [result.matrix_id]
    finally:
        conn.close()


def test_cli_mistakes_are_one_clear_message(tmp_path: Path) -> None:
    root = _project(tmp_path, "http://127.0.0.1:9/v1",
                    prompt="Categories: a, b\n{% if question %}\n{{ question }}\n")
    env = {"MODEL_TEST_KEY": KEY}
    broken = run_cli("run", cwd=root, env=env)
    assert broken.code == 2, broken.text
    assert "prompts/answer.md:3: system.model.prompt_file: the template does not parse" in (
        broken.err), broken.err
    no_matrix = run_cli("run", "--matrix", cwd=root, env=env)
    assert no_matrix.code == 2 and "declares no matrix" in no_matrix.err, no_matrix.text
    variant_alone = run_cli("run", "--variant", "x", cwd=root, env=env)
    assert variant_alone.code == 2 and "use it with --matrix" in variant_alone.err
    for result in (broken, no_matrix, variant_alone):
        assert "Traceback" not in result.err
    assert not (root / ".oloproof" / "store.sqlite").exists()


def test_a_base_url_with_credentials_is_stored_without_them(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    secret_url = server.openai_base_url.replace("http://", "http://user:pa55w0rd-xyz@") + "?t=tok-123"
    matrix = f"matrix:\n  variants:\n    - {{name: a}}\n    - {{name: b, base_url: '{secret_url}'}}\n"
    root = _project(tmp_path, secret_url, matrix=matrix, cases=_cases(4))
    result = oloproof.run(root, matrix=True)
    # httpx sends the user info as Basic auth, which the fake refuses (401): each variant's
    # run stops itself, and the matrix goes on to the next variant all the same.
    assert [v.result.status for v in result.variants] == ["RUN_ERROR", "RUN_ERROR"]
    assert result.exit_code == 5
    stored = (root / ".oloproof" / "store.sqlite").read_bytes()
    assert b"pa55w0rd-xyz" not in stored and b"tok-123" not in stored
    assert result.variant("b").overrides["base_url"].endswith("/v1?…")
    assert "user" not in result.variant("b").overrides["base_url"]


def test_a_variant_that_did_not_finish_is_named_on_the_exit_line(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    """The baseline allows and a variant's endpoint is down: the matrix exits 5, and the
    line above the gate said "The matrix exits on the baseline's gate: ... ALLOW (exit 0)"
    right over "Gate BLOCK exit code 5"."""
    matrix = ("matrix:\n  variants:\n    - {name: here}\n"
              "    - {name: gone, base_url: 'http://127.0.0.1:9/v1'}\n")
    root = _project(tmp_path, server.openai_base_url, matrix=matrix, cases=_cases(30),
                    release="version: 1\nrules:\n  - {id: floor, metric: correct, min: 0.5}\n")
    done = run_cli("run", "--matrix", cwd=root, env={"MODEL_TEST_KEY": KEY})
    assert done.code == 5, done.text
    assert ("The baseline here allows (exit 0), but the run of gone did not finish: the"
            " matrix is incomplete (exit 5).") in " ".join(done.out.split()), done.out
    assert "exits on the baseline's gate" not in done.out


def test_a_signal_stops_the_matrix_and_what_finished_is_stored(
    tmp_path: Path, key: str
) -> None:
    import os
    import signal
    import subprocess
    import sys

    with FakeServer() as srv:
        srv.configure(None, delay_s=0.2)
        matrix = "matrix:\n  product:\n    model: [fake-small, fake-large, fake-other]\n"
        root = _project(tmp_path, srv.openai_base_url, matrix=matrix, cases=_cases(12),
                        concurrency=2)
        env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
        env.update(MODEL_TEST_KEY=KEY, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "oloproof.cli.main", "run", "--matrix"], cwd=root,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL,
        )
        assert proc.stderr is not None
        seen = ""
        while "variant 2/3" not in seen:  # the second variant has started
            line = proc.stderr.readline()
            assert line, seen
            seen += line
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, (out, err)
    assert "the matrix stopped before 1 variant(s) ran: fake-other" in out, out
    assert "Traceback" not in err
    listed = run_cli("runs", "--json", cwd=root)
    states = sorted(f"{r['status']}/{r['completeness']}" for r in json.loads(listed.out))
    assert states == ["DECIDED/COMPLETE", "RUN_ERROR/PARTIAL"], states


@pytest.mark.parametrize("tag", ['{% include "other.md" %}', '{% import "m.md" as m %}',
                                 '{% extends "base.md" %}', '{% from "m.md" import x %}'])
def test_a_template_cannot_pull_in_another_file(tmp_path: Path, key: str, tag: str) -> None:
    root = _project(tmp_path, "http://127.0.0.1:9/v1",
                    prompt=f"Categories: a, b\n{{{{ question }}}}\n{tag}\n")
    (root / "prompts" / "other.md").write_text("more")
    with pytest.raises(ConfigError) as caught:
        oloproof.run(root)
    assert caught.value.file == "prompts/answer.md" and caught.value.line == 3
    assert "cannot" in str(caught.value) and "another file" in str(caught.value)


def test_a_sequential_matrix_decides_each_variant_early_in_one_order(tmp_path: Path) -> None:
    """``run --matrix --sequential``: each variant decided sequentially, its cases in the same
    seeded order, and stopped once its rules are decided; the table says after how many cases;
    the comparisons are read on the cases both runs read, with an anytime-valid interval.
    (The old code refused --matrix with --sequential, exit 2.)"""
    matrix = "matrix:\n  product:\n    model: [fake-small, fake-large]\n"
    release = "version: 1\nrules:\n  - id: floor\n    metric: correct\n    min: 0.5\n"
    with FakeServer() as srv:
        root = _project(tmp_path, srv.openai_base_url, matrix=matrix, cases=_cases(300),
                        release=release, concurrency=2)
        done = run_cli("run", "--matrix", "--sequential", cwd=root,
                       env={"MODEL_TEST_KEY": KEY}, timeout=300)
        calls = srv.total_calls("/v1/chat/completions")
    assert done.code == 0, done.text
    assert "Sequential" in done.out and "decided after" in done.out, done.out
    matrix_id = next(w for w in done.out.split() if w.startswith("mx_"))
    doc = json.loads(run_cli("inspect", matrix_id, "--json", cwd=root).out)
    readings = {v["name"]: v["sequential"] for v in doc["variants"]}
    for name, reading in readings.items():
        assert reading is not None and reading["decided"], (name, reading)
        assert reading["cases_total"] == 300 and reading["decided_after"] < 300, reading
        assert f"decided after {reading['decided_after']} of 300" in done.out
    # Fewer calls than the two full suites: each variant stopped calling once decided (a
    # few calls in flight at the decision finish and are stored, read by nothing).
    assert calls < 2 * 300 - 100, calls
    assert calls == sum(r["stored"] for r in readings.values())
    # Both runs took their cases in one order: the stored orders are the same.
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        orders = [json.loads(r[0])["order"] for r in conn.execute(
            "SELECT sequential_json FROM run_sequential")]
    finally:
        conn.close()
    assert len(orders) == 2 and orders[0] == orders[1]
    (cmp,) = doc["comparisons"]
    assert cmp["method"].startswith("betting confidence sequence"), cmp
    both = min(r["decided_after"] for r in readings.values())
    assert cmp["pairs"] + cmp["dropped"] == both, (cmp, readings)
    # The report's matrix page says it too.
    assert run_cli("report", matrix_id, "-o", "m.html", cwd=root).code == 0
    page = (root / "m.html").read_text()
    for reading in readings.values():
        assert f"decided after {reading['decided_after']} of 300 cases" in page
    # Each variant's run is decided again from the store, identically, by gate.
    for v in doc["variants"]:
        again = run_cli("gate", v["run_id"], "--json", cwd=root)
        assert again.code == v["exit_code"], again.text
        assert [d["state"] for d in json.loads(again.out)["decisions"]] == [
            d["state"] for d in v["decisions"]]


def test_a_sequential_matrix_from_python_names_each_reading(
    tmp_path: Path, server: FakeServer, key: str
) -> None:
    matrix = "matrix:\n  variants:\n    - {name: a}\n    - {name: b, model: fake-large}\n"
    release = "version: 1\nrules:\n  - id: floor\n    metric: correct\n    min: 0.5\n"
    root = _project(tmp_path, server.openai_base_url, matrix=matrix, cases=_cases(200),
                    release=release)
    result = oloproof.run(root, matrix=True, sequential=True)
    for v in result.variants:
        assert v.result.sequential is not None and v.result.sequential["decided"]
        assert str(v.result.completeness) == "SEQUENTIAL"
    assert result.comparisons[0].method.startswith("betting confidence sequence")
    # A sequential matrix still refuses a subset of cases (the run picks its own).
    with pytest.raises(UsageError, match="--sequential cannot be combined"):
        oloproof.run(root, matrix=True, sequential=True, limit=10)


def test_a_matrix_writes_one_junit_suite_per_variant_and_annotations_by_variant(
    tmp_path: Path, server: FakeServer
) -> None:
    """``run --matrix --junit-xml --github-annotations`` (refused, exit 2, by the old code):
    a suite per variant, one of the comparisons, valid against the JUnit schema; each
    annotation's title names its variant; the exit code is the matrix's."""
    import xml.etree.ElementTree as ET

    import xmlschema

    matrix = "matrix:\n  product:\n    model: {small: fake-small, large: fake-large}\n"
    release = "version: 1\nrules:\n  - id: floor\n    metric: correct\n    min: 0.85\n"
    root = _project(tmp_path, server.openai_base_url, matrix=matrix, cases=_cases(80),
                    release=release)
    summary = tmp_path / "summary.md"
    refused = run_cli("run", "--matrix", "--junit-xml", "nowhere/report.xml", cwd=root,
                      env={"MODEL_TEST_KEY": KEY})
    assert refused.code == 2 and "does not exist" in refused.err, refused.text
    (root / "out").mkdir()
    done = run_cli("run", "--matrix", "--junit-xml", "out/report.xml", "--github-annotations",
                   cwd=root, env={"MODEL_TEST_KEY": KEY, "GITHUB_STEP_SUMMARY": str(summary)})
    matrix_id = next(w for w in done.out.split() if w.startswith("mx_"))
    doc = json.loads(run_cli("inspect", matrix_id, "--json", cwd=root).out)
    assert done.code == doc["exit_code"] and done.code != 0, done.text
    text = (root / "out" / "report.xml").read_text()
    schema = xmlschema.XMLSchema(str(Path(__file__).resolve().parents[1] / "fixtures"
                                     / "junit-10.xsd"))
    assert not [str(e.reason) for e in schema.iter_errors(text)]
    suites = ET.fromstring(text).findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "oloproof models-test [small]", "oloproof models-test [large]",
        "oloproof models-test matrix comparisons"]
    for suite, v in zip(suites, doc["variants"], strict=False):
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["run_id"] == v["run_id"] and props["gate"] == v["gate"]
        (case,) = suite.findall("testcase")
        state = v["decisions"][0]["state"]
        assert (case.find("failure") is not None) == (state != "PASS"), (state, v)
    (cmp,) = doc["comparisons"]
    (case,) = suites[2].findall("testcase")
    assert case.get("name") == "large vs small: correct"
    expected = {"better": None, "worse": "failure", "not separated": "skipped"}[cmp["verdict"]]
    assert [c.tag for c in case if c.tag != "system-out"] == ([expected] if expected else [])
    assert cmp["verdict"] in case.findtext("system-out", "")
    # Annotations: one per blocking rule, its title naming the variant.
    notes = [ln for ln in done.out.splitlines() if ln.startswith("::")]
    blocking = [v["name"] for v in doc["variants"] if v["gate"] == "BLOCK"]
    assert [n.split("::")[1] for n in notes] == [
        f"error title=Oloproof [{name}] rule floor" for name in blocking], notes
    shown = summary.read_text()
    assert "Oloproof gate [small]" in shown and "Oloproof gate [large]" in shown


def test_store_push_copies_a_matrix_that_the_team_store_then_shows(
    tmp_path: Path, server: FakeServer, pg_url: str
) -> None:
    """``oloproof store push`` copies the matrix document with its variants' runs (the old
    code copied the runs only, and ``inspect``/``report``/``view`` on the team store did not
    know the matrix); pushing again writes nothing new."""
    import os
    import re
    import subprocess
    import urllib.request

    from tests.conftest import OLOPROOF

    matrix = "matrix:\n  product:\n    model: {small: fake-small, large: fake-large}\n"
    root = _project(tmp_path, server.openai_base_url, matrix=matrix, cases=_cases(16))
    local_env = {"MODEL_TEST_KEY": KEY, "OLOPROOF_STORE": ""}
    done = run_cli("run", "--matrix", cwd=root, env=local_env)
    assert done.code == 0, done.text
    matrix_id = next(w for w in done.out.split() if w.startswith("mx_"))
    local = json.loads(run_cli("inspect", matrix_id, "--json", cwd=root, env=local_env).out)
    team = {"OLOPROOF_STORE": pg_url}
    pushed = run_cli("store", "push", "--json", cwd=root, env=team)
    assert pushed.code == 0, pushed.text
    said = json.loads(pushed.out)
    assert said["matrices"] == [{"id": matrix_id, "result": "copied"}], said
    assert sorted(r["id"] for r in said["runs"]) == sorted(v["run_id"] for v in local["variants"])
    # On the team store: inspect, plan and report read the matrix as the local store did.
    there = run_cli("inspect", matrix_id, "--json", cwd=root, env=team)
    assert there.code == 0 and json.loads(there.out) == local, there.text
    assert run_cli("plan", matrix_id, "--json", cwd=root, env=team).code == 0
    report = run_cli("report", matrix_id, "-o", "matrix.html", cwd=root, env=team)
    assert report.code == 0, report.text
    html = (root / "matrix.html").read_text()
    assert matrix_id in html and "small" in html and "large" in html
    # A second push, and a push of the matrix by its id, write nothing new.
    again = json.loads(run_cli("store", "push", "--json", cwd=root, env=team).out)
    assert again["matrices"] == [{"id": matrix_id, "result": "already there"}]
    assert again["copied"] == 0
    by_id = run_cli("store", "push", matrix_id, cwd=root, env=team)
    assert by_id.code == 0 and f"{matrix_id}  already there" in by_id.out, by_id.text
    # The viewer on the team store lists the matrix and shows its page.
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"} | team
    view = subprocess.Popen([*OLOPROOF, "view", "--no-open", "--port", "0"], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    try:
        assert view.stdout is not None
        line = view.stdout.readline()
        address = re.search(r"(http://127\.0\.0\.1:\d+/\S*)", line)
        assert address, line
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        index = opener.open(address.group(1), timeout=60).read().decode()
        assert matrix_id in index
        base = address.group(1).split("?")[0].rstrip("/")
        page = opener.open(f"{base}/matrices/{matrix_id}", timeout=60).read().decode()
        assert "small" in page and "large" in page and local["variants"][1]["run_id"] in page
    finally:
        view.terminate()
        view.wait(timeout=30)


@pytest.mark.parametrize("use", [
    '{{ input.pop("question") }}',
    '{% set _ = input.setdefault("context", "none") %}{{ question }}',
    '{% set _ = input.update({"question": "changed"}) %}{{ input.question }}',
])
def test_a_template_cannot_change_the_cases_input(
    tmp_path: Path, server: FakeServer, key: str, use: str
) -> None:
    """The template's {{ input.pop("question") }} emptied the input the run stored ({}),
    and the judgments, keyed by it, missed the cache on every later run."""
    cases = _cases(8)
    root = _project(tmp_path, server.openai_base_url, cases=cases,
                    prompt="Categories: refund, shipping, account, billing\n" + use + "\n")
    result = run_cli("run", "--json", cwd=root)
    assert "Traceback" not in result.text
    assert result.code == 5, result.text
    shown = run_cli("inspect", "latest", "--json", cwd=root)
    stored = {c["id"]: c for c in json.loads(shown.out)["cases"]}
    for case in cases:
        got = stored[case["id"]]
        assert got["input"] == case["input"], got
        assert got["status"] == "ERROR"
        assert "prompts/answer.md: the sandbox refused the template" in got["error"], got


def test_case_data_is_sent_as_written_never_rendered_again(tmp_path: Path, key: str) -> None:
    """Template syntax in a case's input is data: a model system's prompt holds it as
    written (no second rendering, no environment variable), and a field named input is
    input.input."""
    from http.server import BaseHTTPRequestHandler

    from tests.trust._support import send_body, serving

    bodies: list[dict[str, Any]] = []

    class Model(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            send_body(self, json.dumps({"choices": [{"message": {
                "role": "assistant", "content": "refund {{ 6 * 7 }}"},
                "finish_reason": "stop"}]}).encode())

    hostile = ("{{ 7 * 7 }} {% if true %}yes{% endif %} ${MODEL_TEST_KEY} {expected}"
               " {{ lipsum.__globals__ }}")
    cases = [{"id": f"c{i}", "input": {"question": hostile, "input": "inner"},
              "expected": {"label": "{{ expected }}"}} for i in range(6)]
    with serving(Model) as base:
        root = _project(tmp_path, base + "/v1", cases=cases,
                        prompt="Q: {{ question }} | {{ input.input }}\n")
        result = run_cli("run", cwd=root)
    assert "Traceback" not in result.text
    assert len(bodies) == 6
    for body in bodies:
        assert body["messages"][-1]["content"] == f"Q: {hostile} | inner\n"
        assert key not in json.dumps(body)
    shown = json.loads(run_cli("inspect", "latest", "--json", cwd=root).out)
    assert {c["output"] for c in shown["cases"]} == {"refund {{ 6 * 7 }}"}


@pytest.mark.slow  # a browser
@needs_chromium
def test_a_variant_runs_report_names_its_system_in_a_browser(
    tmp_path: Path, server: FakeServer
) -> None:
    """The report's header, read in Chromium: the system of a variant run is named as
    `runs` names it (the page said `triage None` where a model system has no version)."""
    root = _project(tmp_path, server.openai_base_url, matrix=MATRIX, cases=_cases(8),
                    extra={"prompts/stepwise.md": STEPWISE})
    assert run_cli("run", "--matrix", cwd=root, env={"MODEL_TEST_KEY": KEY}).code == 0
    ids = [w for w in run_cli("runs", cwd=root).out.split() if w.startswith("run_")]
    out = tmp_path / "run.html"
    assert run_cli("report", ids[0], "-o", str(out), cwd=root).code == 0
    with chromium() as browser:
        page = browser.new_page()
        page.goto(out.as_uri())
        page.wait_for_load_state("load")
        shown = page.evaluate(
            "() => [...document.querySelectorAll('dt')]"
            ".filter(dt => dt.textContent.trim() === 'System')"
            ".map(dt => dt.nextElementSibling.innerText.trim())"
        )
    assert shown and shown[0].startswith("triage [stepwise/large]"), shown


def test_gate_names_a_prompt_file_edited_since_the_run(
    tmp_path: Path, server: FakeServer
) -> None:
    """A model system's prompt is its code: edited after the run and not run again, `gate
    latest` named nothing and exited on the old prompt's answers. It now names the prompt
    file (the exit code stays the run's); the same text written again says nothing."""
    release = "version: 1\nrules:\n  - {id: floor, metric: correct, min: 0.3}\n"
    root = _project(tmp_path, server.openai_base_url, release=release)
    env = {"MODEL_TEST_KEY": KEY}
    first = run_cli("run", cwd=root, env=env)
    prompt = root / "prompts" / "answer.md"

    def gate_after(text: str) -> str:
        prompt.write_text(text)
        later = time.time() + 5
        os.utime(prompt, (later, later))
        gated = run_cli("gate", "latest", cwd=root, env=env)
        assert gated.code == first.code, gated.text
        return gated.out

    same = gate_after(prompt.read_text())
    assert "The code the run called has changed" not in same, same
    edited = gate_after("Answer with one word.\n{{ question }}\n")
    assert ("The code the run called has changed since it started (" in edited
            and "): prompts/answer.md; these decisions" in edited), edited
