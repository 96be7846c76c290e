"""oloproof.yaml: the good example loads; every mistake is one clear ConfigError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from project_helpers import (
    MINIMAL_CONFIG,
    Writer,
    check,
    config_error,
    line_of,
    project_yaml,
)

from oloproof.project import (
    AbsoluteErrorEvaluator,
    CustomEvaluator,
    ExactMatchEvaluator,
    JsonSchemaEvaluator,
    RegexEvaluator,
    RubricJudgeEvaluator,
    load_project,
)

EVALUATOR_TYPES = "exact_match, contains, regex, json_schema, absolute_error, rubric_judge, custom"

SPEC_EXAMPLE = r"""
version: 1
project: support-bot-example
dataset: data/support.jsonl
system:
  name: support-bot
  version: slice-a-example        # part of the system's identity
  callable: app:answer            # module:function, imported with the project dir on sys.path
  code_paths: [prompts/]          # optional: more files whose content is part of the identity
  timeout_s: 30
concurrency:
  system: 8
  judge: 4
evaluators:
  - type: exact_match
    criterion: exact_label
    field: label
    strip: true
    casefold: false
  - type: contains
    criterion: mentions_refund
    field: answer
    expected_field: keyword
  - type: regex
    criterion: pii_free
    field: answer
    pattern: '\b\d{3}-\d{2}-\d{4}\b'
    pass_if: no_match
  - type: json_schema
    criterion: format_valid
    field: null
    schema: {type: object, required: [answer, label]}
  - type: absolute_error
    criterion: days_error
    field: days
    range: [0, 30]
  - type: rubric_judge
    criterion: helpful
    provider: anthropic
    model: MODEL_ID
    rubric_file: rubrics/helpful.md
    api_key_env: ANTHROPIC_API_KEY
    base_url: null
    temperature: 0
    max_tokens: 512
    timeout_s: 60
  - type: custom
    criterion: polite
    function: checks:polite
"""


def _spec_project(write: Writer) -> None:
    write("oloproof.yaml", SPEC_EXAMPLE)
    write("data/support.jsonl", '{"id": "a", "input": "hello"}\n')
    write("rubrics/helpful.md", "Pass if the answer helps.\n")
    write("prompts/system.txt", "You are helpful.\n")


# -- the good example ----------------------------------------------------------------


def test_spec_example_loads(write: Writer, project_dir: Path) -> None:
    _spec_project(write)
    project = load_project("oloproof.yaml")
    config = project.config
    assert project.root == str(project_dir)
    assert project.config_path == str(project_dir / "oloproof.yaml")
    assert config.project == "support-bot-example"
    assert config.system.callable == "app:answer"
    assert config.system.version == "slice-a-example"
    assert config.system.code_paths == ["prompts/"]
    assert config.system.http is None
    assert (config.concurrency.system, config.concurrency.judge) == (8, 4)
    assert config.retry.max_retry_wait_s == 60
    assert config.metrics() == {
        "exact_label": "BINARY",
        "mentions_refund": "BINARY",
        "pii_free": "BINARY",
        "format_valid": "BINARY",
        "days_error": "MEAN",
        "helpful": "BINARY",
        "polite": "BINARY",
    }
    exact, _, regex, schema, absolute, judge, custom = config.evaluators
    assert isinstance(exact, ExactMatchEvaluator) and exact.strip and not exact.casefold
    assert isinstance(regex, RegexEvaluator) and regex.pass_if == "no_match"
    assert regex.pattern == r"\b\d{3}-\d{2}-\d{4}\b"
    assert isinstance(schema, JsonSchemaEvaluator)
    assert schema.field is None
    assert schema.schema_ == {"type": "object", "required": ["answer", "label"]}
    assert isinstance(absolute, AbsoluteErrorEvaluator) and absolute.range == (0.0, 30.0)
    assert isinstance(judge, RubricJudgeEvaluator)
    assert judge.rubric == "Pass if the answer helps.\n"
    assert isinstance(custom, CustomEvaluator) and custom.metric_kind == "BINARY"
    suite = project.load_suite()
    assert [c.id for c in suite.cases] == ["a"]


def test_defaults_and_http_system(write: Writer) -> None:
    write(
        "oloproof.yaml",
        project_yaml(
            system="""\
            name: intake
            http:
              url: http://127.0.0.1:8765/extract
              method: post
              version: rules-v1
              output_path: result
              headers: {Authorization: "Bearer ${INTAKE_TOKEN}"}
            """,
            top="retry:\n  max_retry_wait_s: 5\n",
        ),
    )
    config = load_project("oloproof.yaml").config
    http = config.system.http
    assert http is not None
    assert http.method == "POST" and http.version == "rules-v1" and http.timeout_s == 30
    assert http.headers == {"Authorization": "Bearer ${INTAKE_TOKEN}"}
    assert config.system.callable is None
    assert (config.concurrency.system, config.concurrency.judge) == (8, 4)
    assert config.retry.max_retry_wait_s == 5


def test_numbers_are_accepted_as_text_and_dates_stay_text(write: Writer) -> None:
    write(
        "oloproof.yaml",
        project_yaml(system="name: bot\nversion: 2024-05-01\ncallable: app:answer\n"),
    )
    assert load_project("oloproof.yaml").config.system.version == "2024-05-01"
    write("oloproof.yaml", project_yaml(system="name: bot\nversion: 2\ncallable: app:answer\n"))
    assert load_project("oloproof.yaml").config.system.version == "2"


def test_custom_mean_evaluator_is_a_mean_metric(write: Writer) -> None:
    write(
        "oloproof.yaml",
        project_yaml(
            evaluators="- {type: custom, criterion: tone, function: checks:tone, "
            "kind: mean, range: [0, 1]}\n"
        ),
    )
    assert load_project("oloproof.yaml").config.metrics() == {"tone": "MEAN"}


def test_importing_the_package_does_not_import_jsonschema() -> None:
    code = "import sys, oloproof.project; print('jsonschema' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(Path(__file__).parents[2] / "src")},
    )
    assert out.stdout.strip() == "False"


# -- the file itself ------------------------------------------------------------------


def test_file_not_found(project_dir: Path) -> None:
    err = config_error(lambda: load_project("missing/oloproof.yaml"))
    check(err, file="missing/oloproof.yaml", field=None, line=None, contains=("file not found",))


def test_not_valid_yaml(write: Writer) -> None:
    text = "version: 1\nproject: demo\nsystem:\n  name: [bot\n  callable: x\n"
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    message = str(err)
    assert message.startswith("oloproof.yaml:"), message
    assert "not valid YAML" in message and "column" in message
    assert err.line is not None and err.line >= 4


def test_yaml_error_points_at_the_line_and_column(write: Writer) -> None:
    write("oloproof.yaml", "version: 1\nproject: demo: x\n")
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field=None,
        line=2,
        contains=("not valid YAML: mapping values are not allowed", "at column 14"),
    )


def test_tab_indentation_is_explained(write: Writer) -> None:
    write("oloproof.yaml", "version: 1\nsystem:\n\tname: bot\n")
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field=None, line=3, contains=("not tabs",))


def test_empty_file(write: Writer) -> None:
    write("oloproof.yaml", "# nothing yet\n")
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field=None, line=None, contains=("empty", "version: 1"))


def test_top_level_not_a_mapping(write: Writer) -> None:
    write("oloproof.yaml", "- version: 1\n- project: demo\n")
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field=None,
        line=1,
        contains=("expected a mapping", "at the top level", "got a list"),
    )


def test_duplicate_yaml_key(write: Writer) -> None:
    text = MINIMAL_CONFIG + "project: again\n"
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="project",
        line=line_of(text, "project: again"),
        contains=("written twice", "also on line 2"),
    )


# -- version, keys, types -----------------------------------------------------------------


def test_version_not_1(write: Writer) -> None:
    text = MINIMAL_CONFIG.replace("version: 1", "version: 2")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="version",
        line=1,
        contains=("unsupported version 2", "(accepted: 1)"),
    )


def test_version_missing(write: Writer) -> None:
    write("oloproof.yaml", MINIMAL_CONFIG.replace("version: 1\n", "", 1))
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="version", line=1, contains=("missing", "accepted: 1"))


def test_unknown_top_level_key_suggests_the_closest(write: Writer) -> None:
    text = MINIMAL_CONFIG.replace("evaluators:", "evaluator:")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluator",
        line=line_of(text, "evaluator:"),
        contains=(
            "unknown key 'evaluator'",
            "accepted: version, project, dataset, system, concurrency, retry, limits, evaluators",
            "did you mean 'evaluators'?",
        ),
    )


def test_missing_top_level_section(write: Writer) -> None:
    text = "version: 1\nproject: demo\ndataset: data/suite.jsonl\nsystem:\n  name: b\n"
    write("oloproof.yaml", text + '  version: "1"\n  callable: a:b\n')
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="evaluators", line=1, contains=("required field",))


# -- evaluators ---------------------------------------------------------------------------------


def test_unknown_evaluator_type(write: Writer) -> None:
    text = project_yaml(evaluators="- type: exact\n  criterion: exact_label\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    line = line_of(text, "type: exact")
    message = check(err, file="oloproof.yaml", field="evaluators[0].type", line=line)
    assert message == (
        f"oloproof.yaml:{line}: evaluators[0].type: unknown evaluator type 'exact' "
        f"(accepted: {EVALUATOR_TYPES}; did you mean 'exact_match'?)"
    )


def test_invalid_json_schema(write: Writer) -> None:
    evaluators = """\
    - type: json_schema
      criterion: format_valid
      schema:
        type: object
        properties:
          answer: {type: strin}
    """
    text = project_yaml(evaluators=evaluators)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].schema.properties.answer.type",
        line=line_of(text, "answer: {type: strin}"),
        contains=("not a valid JSON Schema", "'strin'"),
    )


def test_json_schema_not_a_mapping(write: Writer) -> None:
    text = project_yaml(evaluators="- {type: json_schema, criterion: f, schema: object}\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].schema",
        line=line_of(text, "json_schema"),
        contains=("expected a mapping",),
    )


def test_duplicate_criterion(write: Writer) -> None:
    evaluators = "- type: exact_match\n  criterion: label\n- type: contains\n  criterion: label\n"
    text = project_yaml(evaluators=evaluators)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[1].criterion",
        line=line_of(text, "criterion: label", 2),
        contains=("duplicate criterion 'label'", "evaluators[0]"),
    )


def test_criterion_name_characters(write: Writer) -> None:
    text = project_yaml(evaluators="- type: exact_match\n  criterion: exact label\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].criterion",
        line=line_of(text, "criterion:"),
        contains=("letters, digits", "got 'exact label'"),
    )


def test_a_range_wider_than_the_largest_float_is_refused(write: Writer) -> None:
    text = project_yaml(
        evaluators=("- type: absolute_error\n  criterion: d\n  field: days\n"
                    "  range: [-1.7e308, 1.7e308]\n")
    )
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="evaluators[0].range", line=line_of(text, "range"),
          contains=("width high - low is a finite number", "[-1.7e+308, 1.7e+308]"))
    text = project_yaml(
        evaluators=("- type: absolute_error\n  criterion: d\n  field: days\n"
                    "  range: [0, 1.7e308]\n")
    )
    write("oloproof.yaml", text)
    assert load_project("oloproof.yaml").config.evaluators[0].range == (0.0, 1.7e308)


def test_absolute_error_range(write: Writer) -> None:
    text = project_yaml(
        evaluators="- type: absolute_error\n  criterion: d\n  field: days\n  range: [30, 0]\n"
    )
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].range",
        line=line_of(text, "range"),
        contains=("low < high", "[30, 0]"),
    )
    text = project_yaml(
        evaluators="- type: absolute_error\n  criterion: d\n  field: days\n  range: [0, 1, 2]\n"
    )
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].range",
        line=line_of(text, "range"),
        contains=("two numbers",),
    )


def test_custom_function_form(write: Writer) -> None:
    text = project_yaml(
        evaluators="- type: custom\n  criterion: polite\n  function: checks.polite\n"
    )
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].function",
        line=line_of(text, "function:"),
        contains=("module:function", "got 'checks.polite'"),
    )


def test_custom_range_needs_mean(write: Writer) -> None:
    text = project_yaml(
        evaluators="- type: custom\n  criterion: p\n  function: c:p\n  range: [0, 1]\n"
    )
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].range",
        line=line_of(text, "range:"),
        contains=("kind: mean",),
    )


RUBRIC_HEAD = "- type: rubric_judge\n  criterion: helpful\n  provider: {provider}\n  model: m\n"


def test_rubric_judge_neither_rubric(write: Writer) -> None:
    text = project_yaml(evaluators=RUBRIC_HEAD.format(provider="anthropic"))
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].rubric_file",
        line=line_of(text, "- type: rubric_judge"),
        contains=("rubric_file", "rubric_text", "missing"),
    )


def test_rubric_judge_both_rubrics(write: Writer) -> None:
    evaluators = RUBRIC_HEAD.format(provider="anthropic") + (
        "  rubric_file: rubrics/helpful.md\n  rubric_text: Be helpful.\n"
    )
    write("rubrics/helpful.md", "Be helpful.\n")
    text = project_yaml(evaluators=evaluators)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].rubric_text",
        line=line_of(text, "rubric_text"),
        contains=("rubric_file or rubric_text, not both",),
    )


def test_rubric_file_not_found(write: Writer) -> None:
    evaluators = RUBRIC_HEAD.format(provider="openai") + "  rubric_file: rubrics/nope.md\n"
    text = project_yaml(evaluators=evaluators)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].rubric_file",
        line=line_of(text, "rubric_file"),
        contains=("file not found: rubrics/nope.md", "project directory"),
    )


def test_rubric_text_and_project_in_another_directory(write: Writer) -> None:
    evaluators = RUBRIC_HEAD.format(provider="openai") + "  rubric_file: r.md\n"
    write("sub/oloproof.yaml", project_yaml(evaluators=evaluators))
    write("sub/r.md", "Helpful?\n")
    write("sub/data/suite.jsonl", '{"id": "x", "input": 1}\n')
    project = load_project("sub/oloproof.yaml")
    judge = project.config.evaluators[0]
    assert isinstance(judge, RubricJudgeEvaluator)
    assert judge.rubric == "Helpful?\n"
    assert project.dataset_display == "sub/data/suite.jsonl"
    write("sub/data/suite.jsonl", "{}\n")
    err = config_error(project.load_suite)
    assert str(err).startswith("sub/data/suite.jsonl:1: id: ")


def test_openai_compatible_needs_base_url(write: Writer) -> None:
    evaluators = RUBRIC_HEAD.format(provider="openai_compatible") + "  rubric_text: Helpful?\n"
    text = project_yaml(evaluators=evaluators)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].base_url",
        line=line_of(text, "- type: rubric_judge"),
        contains=("required for provider openai_compatible",),
    )


def test_unknown_provider(write: Writer) -> None:
    evaluators = RUBRIC_HEAD.format(provider="antropic") + "  rubric_text: Helpful?\n"
    text = project_yaml(evaluators=evaluators)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="evaluators[0].provider",
        line=line_of(text, "provider"),
        contains=(
            "got 'antropic'",
            "accepted: anthropic, openai, openai_compatible",
            "did you mean 'anthropic'?",
        ),
    )


# -- system ------------------------------------------------------------------------------------


def test_system_both_callable_and_http(write: Writer) -> None:
    system = 'name: bot\nversion: "1"\ncallable: app:answer\nhttp:\n  url: http://x\n  version: v\n'
    text = project_yaml(system=system)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="system",
        line=line_of(text, "system:"),
        contains=("declare one of callable, http and model, not callable and http",),
    )


def test_system_neither_callable_nor_http(write: Writer) -> None:
    text = project_yaml(system='name: bot\nversion: "1"\n')
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="system",
        line=line_of(text, "system:"),
        contains=("callable: module:function", "http:"),
    )


def test_callable_form(write: Writer) -> None:
    text = project_yaml(system='name: bot\nversion: "1"\ncallable: app.answer\n')
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="system.callable",
        line=line_of(text, "callable:"),
        contains=("module:function", "app:answer", "got 'app.answer'"),
    )


def test_callable_needs_version(write: Writer) -> None:
    text = project_yaml(system="name: bot\ncallable: app:answer\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="system.version",
        line=line_of(text, "system:"),
        contains=("required for a callable system",),
    )


def test_http_without_version(write: Writer) -> None:
    text = project_yaml(system="name: bot\nhttp:\n  url: http://127.0.0.1:8765/x\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="system.http.version",
        line=line_of(text, "http:"),
        contains=("required field is missing",),
    )


def test_http_url_and_method(write: Writer) -> None:
    text = project_yaml(system="name: bot\nhttp:\n  url: 127.0.0.1:8765\n  version: v\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="system.http.url",
        line=line_of(text, "url:"),
        contains=("http:// or https://",),
    )
    text = project_yaml(system="name: b\nhttp:\n  url: http://x\n  version: v\n  method: PATCH\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="system.http.method",
        line=line_of(text, "method:"),
        contains=("got 'PATCH'", "accepted: POST, PUT, GET"),
    )


def test_code_path_not_found(write: Writer) -> None:
    text = project_yaml(system='name: b\nversion: "1"\ncallable: a:b\ncode_paths: [prompts/]\n')
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="system.code_paths[0]",
        line=line_of(text, "code_paths"),
        contains=("not found: prompts/",),
    )


def test_dataset_missing(write: Writer) -> None:
    text = MINIMAL_CONFIG.replace("data/suite.jsonl", "data/support.jsonl")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(
        err,
        file="oloproof.yaml",
        field="dataset",
        line=3,
        contains=("file not found: data/support.jsonl",),
    )


def test_the_earliest_problem_is_reported(write: Writer) -> None:
    text = project_yaml(
        top="concurrency:\n  system: many\n",
        evaluators="- type: regex\n  criterion: a\n  pattern: x\n  pass_if: sometimes\n",
    )
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    assert err.field == "concurrency.system"


# -- one table: a mistake in oloproof.yaml -> file, field, line, message -------------------------

_SYSTEM = 'name: bot\nversion: "1"\ncallable: app:answer\n'

# (id, project_yaml arguments, field, the text on the reported line, what the message says)
CONFIG_ERRORS: list[tuple[str, dict[str, str], str, str, tuple[str, ...]]] = [
    ("unknown-key-in-evaluator",
     {"evaluators": "- type: regex\n  criterion: pii_free\n  patern: 'x'\n"},
     "evaluators[0].patern", "patern",
     ("unknown key 'patern'", "pattern, pass_if, flags", "did you mean 'pattern'?")),
    ("unknown-key-in-http",
     {"system": "name: bot\nhttp:\n  url: http://x\n  version: v1\n  timeout: 3\n"},
     "system.http.timeout", "timeout: 3",
     ("unknown key 'timeout'", "did you mean 'timeout_s'?", "url, method, version")),
    ("whole-number-expected", {"top": "concurrency:\n  system: abc\n"},
     "concurrency.system", "system: abc", ("expected a whole number, got 'abc'",)),
    ("number-expected", {"system": _SYSTEM + "timeout_s: soon\n"},
     "system.timeout_s", "timeout_s", ("expected a number, got 'soon'",)),
    ("bool-expected", {"evaluators": "- {type: exact_match, criterion: a, strip: [1]}\n"},
     "evaluators[0].strip", "strip", ("expected true or false, got a list",)),
    ("mapping-expected", {"system": "just-a-name\n"},
     "system", "system:", ("expected a mapping (key: value), got 'just-a-name'",)),
    ("list-expected", {"evaluators": "type: exact_match\n"},
     "evaluators", "evaluators:", ("expected a list, got a mapping",)),
    ("missing-field", {"system": 'version: "1"\ncallable: app:answer\n'},
     "system.name", "system:", ("required field is missing",)),
    ("missing-evaluator-field", {"evaluators": "- type: exact_match\n  field: label\n"},
     "evaluators[0].criterion", "- type: exact_match", ("required field is missing",)),
    ("evaluator-without-type", {"evaluators": "- criterion: exact_label\n  field: label\n"},
     "evaluators[0].type", "- criterion",
     ("required field is missing", f"accepted: {EVALUATOR_TYPES}")),
    ("evaluator-not-a-mapping", {"evaluators": "- exact_match\n"},
     "evaluators[0]", "- exact_match", ("expected a mapping",)),
    ("no-evaluators", {"evaluators": "[]\n"},
     "evaluators", "evaluators:", ("at least one evaluator", f"accepted: {EVALUATOR_TYPES}")),
    ("literal-suggests",
     {"evaluators": "- type: regex\n  criterion: pii\n  pattern: x\n  pass_if: nomatch\n"},
     "evaluators[0].pass_if", "pass_if",
     ("got 'nomatch'", "accepted: match, no_match", "did you mean 'no_match'?")),
    ("invalid-regex",
     {"evaluators": "- type: exact_match\n  criterion: a\n"
                    "- type: regex\n  criterion: pii_free\n  pattern: '[0-9'\n"},
     "evaluators[1].pattern", "pattern:",
     ("not a valid regular expression", "unterminated character set", "position 0")),
    ("regex-flags",
     {"evaluators": "- type: regex\n  criterion: a\n  pattern: x\n  flags: [IGNORECASE, CASE]\n"},
     "evaluators[0].flags[1]", "flags:", ("got 'CASE'", "accepted: IGNORECASE, MULTILINE, DOTALL")),
    ("timeout-positive", {"system": 'name: b\nversion: "1"\ncallable: a:b\ntimeout_s: 0\n'},
     "system.timeout_s", "timeout_s", ("must be greater than 0, got 0",)),
    ("system-concurrency-below-one", {"top": "concurrency:\n  system: 0\n"},
     "concurrency.system", "system: 0", ("must be at least 1, got 0",)),
    ("judge-concurrency-below-one", {"top": "concurrency:\n  judge: 0\n"},
     "concurrency.judge", "judge: 0", ("must be at least 1, got 0",)),
    ("system-concurrency-bool", {"top": "concurrency:\n  system: true\n"},
     "concurrency.system", "system: true", ("expected a whole number, got true",)),
    ("judge-concurrency-1e8", {"top": "concurrency:\n  judge: 1e8\n"},
     "concurrency.judge", "judge: 1e8", ("expected a whole number, got 1e8",)),
    ("judge-concurrency-float", {"top": "concurrency:\n  judge: 1.0e+8\n"},
     "concurrency.judge", "judge: 1.0e+8", ("expected a whole number, got 1.0e+8",)),
    ("judge-concurrency-too-high", {"top": "concurrency:\n  judge: 257\n"},
     "concurrency.judge", "judge: 257", ("must be at most 256, got 257",)),
    ("system-concurrency-too-high", {"top": "concurrency:\n  system: 1025\n"},
     "concurrency.system", "system: 1025", ("must be at most 1024, got 1025",)),
    ("policy-empty", {"top": "policy:\n"},
     "policy", "policy:", ("write policy: none",)),
    ("json-schema-remote-ref",
     {"evaluators": "- type: json_schema\n  criterion: s\n  schema:\n"
                    "    $ref: http://example.invalid/s.json\n"},
     "evaluators[0].schema.$ref", "$ref", ("points outside the schema", "never fetches")),
    ("json-schema-relative-ref",
     {"evaluators": "- type: json_schema\n  criterion: s\n  schema:\n"
                    "    items: {$ref: other.json}\n"},
     "evaluators[0].schema.items.$ref", "items:", ("'other.json' points outside the schema",)),
]


@pytest.mark.parametrize(
    ("arguments", "field", "on_line", "contains"),
    [pytest.param(*row[1:], id=row[0]) for row in CONFIG_ERRORS],
)
def test_config_error_table(
    write: Writer, arguments: dict[str, str], field: str, on_line: str, contains: tuple[str, ...]
) -> None:
    text = project_yaml(**arguments)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field=field, line=line_of(text, on_line), contains=contains)
