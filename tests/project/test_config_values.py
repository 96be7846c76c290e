"""What a value of the configuration is: text as written, numbers and flags strictly,
URLs and headers that can be sent, code paths outside the store, a confidence level that is
a coverage, a store setting that is not empty. Real files, loaded as a command loads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_helpers import Writer, check, config_error, line_of, project_yaml

from oloproof.project import load_compare_policy, load_project, load_release_policy

METRICS = {"exact_label": "BINARY", "days_error": "MEAN"}
_CALLABLE = 'name: bot\nversion: "1"\ncallable: app:answer\n'


# -- text is the text as written (YAML would read it as a number) ----------------------------


@pytest.mark.parametrize("written", [
    "1.10", "1.100", "010", "1:30", "1_000", "0x1F", "+1", ".inf", "1.0e3", "1e3", "2", "yes",
])
def test_a_version_is_read_as_written(write: Writer, written: str) -> None:
    # YAML reads 1.10 and 1.100 as the number 1.1, 010 as 8, 1:30 as 90 (base 60), yes as
    # true: as text (str(number)) two versions would be one identity, and the cache would
    # serve the results of the other.
    write("oloproof.yaml", project_yaml(
        system=f"name: 1.10\nversion: {written}\ncallable: app:answer\n",
    ).replace("project: demo", "project: 2.50"))
    config = load_project("oloproof.yaml").config
    assert config.system.version == written
    assert (config.project, config.system.name) == ("2.50", "1.10")


def test_every_text_field_takes_the_text_as_written(write: Writer) -> None:
    write("oloproof.yaml", project_yaml(
        system="name: bot\nhttp:\n  url: http://127.0.0.1:8000/x\n  version: 1.10\n"
               "  headers: {X-Model-Version: 3.10}\n",
        evaluators="- {type: rubric_judge, criterion: helpful, provider: openai, model: 4.10,"
                   " rubric_text: be kind, panel: [{model: 010}, {model: 1.20}]}\n"
                   "- {type: exact_match, criterion: exact_label, field: 1.10}\n",
    ))
    config = load_project("oloproof.yaml").config
    assert config.system.http is not None
    assert config.system.http.version == "1.10"
    assert config.system.http.headers == {"X-Model-Version": "3.10"}
    judge, exact = config.evaluators
    assert judge.model == "4.10"
    assert [m.model for m in judge.panel] == ["010", "1.20"]
    assert exact.field == "1.10"


def test_a_number_among_a_matrix_products_values_is_refused_not_rounded(
    write: Writer, project_dir: Path
) -> None:
    # A product's values are of any type until each variant is made: 1.10 cannot be told
    # from 1.1 there, so a number where a model's name goes is refused, saying to quote it.
    write("prompts/a.md", "{{ input }}\n")
    text = project_yaml(
        system="name: bot\nversion: v\nmodel:\n  provider: openai\n  model: m\n"
               "  prompt_file: prompts/a.md\n",
        top="matrix:\n  product:\n    model: [1.10, '1.20']\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="matrix.variants[0].model",
          line=line_of(text, "matrix:"),
          contains=("expected text, got 1.1 (write it quoted: unquoted, YAML reads it as a number)",))


def test_a_group_value_keeps_its_number(write: Writer) -> None:
    # A group's value is text or a number (a case's metadata may hold either): it stays what
    # YAML read.
    write("release.yaml", "version: 1\nrules:\n  - {id: a, metric: exact_label, min: 0.5,"
                          " group: {tier: 2}}\n")
    rule = load_release_policy("release.yaml", METRICS).rules[0]
    assert rule.group == {"tier": 2}


# -- a number is a number, a flag a flag ------------------------------------------------------

_RULE = "  - id: r\n    metric: exact_label\n"


@pytest.mark.parametrize(("body", "field", "says"), [
    ("    max_failures: true\n", "rules[0].max_failures", "expected a whole number, got true"),
    ("    max_failures: no\n", "rules[0].max_failures",
     "expected a whole number, got no (which YAML reads as false)"),
    ("    max_failures: 1.0\n", "rules[0].max_failures", "expected a whole number, got 1.0"),
    ("    min: true\n", "rules[0].min", "expected a number, got true"),
    ("    min: '0.70'\n", "rules[0].min",
     "expected a number, got '0.70' (quoted, a value is text: write 0.70 without quotes)"),
    ("    min: ' 0.7 '\n", "rules[0].min", "write 0.7 without quotes"),
    ("    min: 0.7\n    each_group: 'on'\n", "rules[0].each_group",
     "expected true or false, got 'on'"),
    ("    min: 0.7\n    each_group: 1\n", "rules[0].each_group", "expected true or false, got 1"),
    ("    min: 0.7\n    judge_validation: {min_labels: 30.0}\n",
     "rules[0].judge_validation.min_labels", "expected a whole number, got 30.0"),
])
def test_a_release_rule_takes_numbers_and_flags_only(
    write: Writer, body: str, field: str, says: str
) -> None:
    text = "version: 1\nrules:\n" + _RULE + body
    write("release.yaml", text)
    err = config_error(lambda: load_release_policy("release.yaml", METRICS))
    check(err, file="release.yaml", field=field, line=line_of(text, field.split(".")[-1] + ":"),
          contains=(says,))


@pytest.mark.parametrize(("top", "says"), [
    ("max_missing: yes", "expected a number, got yes (which YAML reads as true)"),
    ("confidence_level: '0.9'", "expected a number, got '0.9'"),
    ("confidence_level: true", "expected a number, got true"),
])
def test_a_policy_takes_numbers_only(write: Writer, top: str, says: str) -> None:
    for name, load in (("release.yaml", load_release_policy),
                       ("compare.yaml", load_compare_policy)):
        text = f"version: 1\n{top}\nrules: []\n"
        write(name, text)
        err = config_error(lambda name=name, load=load: load(name, METRICS))
        check(err, file=name, field=top.split(":")[0], line=2, contains=(says,))
    text = "version: 1\nrules:\n  - {id: r, kind: non_inferiority, metric: exact_label," \
           " margin: '0.05'}\n"
    write("compare.yaml", text)
    err = config_error(lambda: load_compare_policy("compare.yaml", METRICS))
    check(err, file="compare.yaml", field="rules[0].margin", line=3,
          contains=("expected a number, got '0.05'",))


@pytest.mark.parametrize(("arguments", "field", "on_line", "says"), [
    ({"system": _CALLABLE + "timeout_s: true\n"}, "system.timeout_s", "timeout_s",
     "expected a number, got true"),
    ({"system": _CALLABLE + "timeout_s: '30'\n"}, "system.timeout_s", "timeout_s",
     "expected a number, got '30' (quoted, a value is text: write 30 without quotes)"),
    ({"evaluators": "- {type: absolute_error, criterion: d, field: d, range: [true, 30]}\n"},
     "evaluators[0].range[0]", "range", "expected a number, got true"),
    ({"evaluators": "- {type: exact_match, criterion: a, strip: 'no'}\n"},
     "evaluators[0].strip", "strip", "expected true or false, got 'no'"),
    ({"evaluators": "- {type: exact_match, criterion: a, casefold: 0}\n"},
     "evaluators[0].casefold", "casefold", "expected true or false, got 0"),
    ({"top": "retry:\n  max_retry_wait_s: '5'\n"}, "retry.max_retry_wait_s", "max_retry",
     "expected a number, got '5'"),
    ({"top": "limits:\n  max_json_depth: 64.0\n"}, "limits.max_json_depth", "max_json_depth",
     "expected a whole number, got 64.0"),
    ({"top": "sequential: {margin: 'off'}\n"}, "sequential.margin", "sequential",
     "expected a number, got 'off'"),
    ({"evaluators": "- {type: rubric_judge, criterion: h, provider: openai, model: m,"
                    " rubric_text: r, max_tokens: 512.0}\n"},
     "evaluators[0].max_tokens", "max_tokens", "expected a whole number, got 512.0"),
])
def test_oloproof_yaml_takes_numbers_and_flags_only(
    write: Writer, arguments: dict[str, str], field: str, on_line: str, says: str
) -> None:
    text = project_yaml(**arguments)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field=field, line=line_of(text, on_line), contains=(says,))


def test_an_int_is_a_number_and_both_flags_are_flags(write: Writer) -> None:
    write("release.yaml", "version: 1\nconfidence_level: 0.9\nmax_missing: 0\nrules:\n"
                          "  - {id: r, metric: days_error, max: 2, each_group: false}\n")
    policy = load_release_policy("release.yaml", METRICS)
    assert (policy.max_missing, policy.rules[0].max) == (0.0, 2.0)
    assert type(policy.rules[0].max) is float


def test_a_number_with_an_exponent_is_a_number_unless_quoted(write: Writer) -> None:
    # YAML 1.1 (PyYAML) reads 5e-1 as text (it wants 5.0e-1); YAML 1.2 and JSON read the
    # number the user wrote. Quoted, it is text, and refused where a number goes.
    write("release.yaml", "version: 1\nmax_missing: 1e-1\nrules:\n"
                          "  - {id: r, metric: exact_label, min: 5e-1}\n"
                          "  - {id: s, metric: days_error, max: 1.5E+1}\n")
    policy = load_release_policy("release.yaml", METRICS)
    assert (policy.max_missing, policy.rules[0].min, policy.rules[1].max) == (0.1, 0.5, 15.0)
    text = "version: 1\nrules:\n  - {id: r, metric: exact_label, min: '5e-1'}\n"
    write("release.yaml", text)
    err = config_error(lambda: load_release_policy("release.yaml", METRICS))
    check(err, file="release.yaml", field="rules[0].min", line=3,
          contains=("expected a number, got '5e-1'",))


# -- the confidence level is a coverage ------------------------------------------------------


@pytest.mark.parametrize("value", ["0.05", "0.1", "0.49"])
def test_a_confidence_level_below_one_half_is_refused(write: Writer, value: str) -> None:
    for name, load in (("release.yaml", load_release_policy),
                       ("compare.yaml", load_compare_policy)):
        write(name, f"version: 1\nconfidence_level: {value}\nrules: []\n")
        err = config_error(lambda name=name, load=load: load(name, METRICS))
        check(err, file=name, field="confidence_level", line=2,
              contains=(f"{value} would decide on a", "not the error rate alpha",
                        "accepted: a number from 0.5 to below 1"))
    write("release.yaml", "version: 1\nconfidence_level: 0.5\nrules: []\n")
    assert load_release_policy("release.yaml", METRICS).confidence_level == 0.5


# -- URLs and headers that can be sent --------------------------------------------------------


def _http(url: str, more: str = "") -> str:
    return project_yaml(system=f"name: bot\nhttp:\n  url: '{url}'\n  version: v\n{more}")


@pytest.mark.parametrize(("url", "says"), [
    ("http://127.0.0.1:65536/triage", "port 65536 is out of range"),
    ("http://127.0.0.1:99999/triage", "port 99999 is out of range"),
    ("http://127.0.0.1:0/triage", "port 0 is out of range"),
    ("http://127.0.0.1:http/triage", "'http' is not a port"),
    ("http:///triage", "the URL names no host"),
    ("http://:8000/triage", "the URL names no host"),
    ("http://[::1/triage", "not an IPv6 address"),
    ("http://exa mple.com/", "white space"),
])
def test_a_url_that_cannot_be_reached_is_refused_at_load(
    write: Writer, url: str, says: str
) -> None:
    text = _http(url)
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="system.http.url", line=line_of(text, "url:"),
          contains=(says, "accepted: an http:// or https:// URL with a host"))


def test_a_base_url_is_checked_as_a_url_is(write: Writer) -> None:
    text = project_yaml(evaluators="- {type: rubric_judge, criterion: h, provider:"
                                   " openai_compatible, model: m, rubric_text: r,"
                                   " base_url: 'http://localhost:80000/v1'}\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="evaluators[0].base_url", line=line_of(text, "- {"),
          contains=("port 80000 is out of range",))
    write("oloproof.yaml", _http("http://[::1]:8000/x"))
    assert load_project("oloproof.yaml").config.system.http is not None


@pytest.mark.parametrize(("headers", "field", "says"), [
    ('{"Bad Header": x}', "system.http.headers.Bad Header", "'Bad Header' is not a header name"),
    ('{"X-Aé": x}', "system.http.headers.X-Aé", "'X-Aé' is not a header name"),
    ('{"X-Key:": x}', "system.http.headers.X-Key:", "is not a header name"),
    ('{X-Key: "é"}', "system.http.headers.X-Key", "a header value is ASCII text on one line"),
    ('{X-Key: "a\\nb"}', "system.http.headers.X-Key", "a header value is ASCII text on one line"),
    ('{Authorization: "Bearer ${INTAKE_TOKEN"}', "system.http.headers.Authorization",
     "'${INTAKE_TOKEN' is not closed: write ${INTAKE_TOKEN}"),
    ('{Authorization: "Bearer ${}"}', "system.http.headers.Authorization",
     "'${}' does not name an environment variable: write ${NAME}"),
    ('{Authorization: "Bearer ${1X}"}', "system.http.headers.Authorization",
     "'${1X}' does not name an environment variable"),
])
def test_a_header_that_cannot_be_sent_is_refused_at_load(
    write: Writer, headers: str, field: str, says: str
) -> None:
    text = _http("http://127.0.0.1:8000/x", f"  headers: {headers}\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field=field, line=line_of(text, "headers:"),
          contains=(says,))


def test_a_header_may_hold_a_dollar_sign_and_variables(write: Writer) -> None:
    write("oloproof.yaml", _http("http://127.0.0.1:8000/x",
                                 '  headers: {X-A: "$INTAKE_TOKEN ${A_B}${C} x\\ty"}\n'))
    http = load_project("oloproof.yaml").config.system.http
    assert http is not None and http.headers == {"X-A": "$INTAKE_TOKEN ${A_B}${C} x\ty"}


# -- code paths outside the store --------------------------------------------------------------


@pytest.mark.parametrize("entry", [".oloproof", ".oloproof/store.sqlite", "./.oloproof/",
                                   "prompts/../.oloproof"])
def test_a_code_path_in_the_store_is_refused(
    write: Writer, project_dir: Path, entry: str
) -> None:
    (project_dir / ".oloproof").mkdir()
    (project_dir / ".oloproof" / "store.sqlite").write_bytes(b"")
    (project_dir / "prompts").mkdir()
    (project_dir / "checks.py").write_text("def ok(output):\n    return True\n")
    for arguments, field, on_line in (
        ({"system": _CALLABLE + f"code_paths: ['{entry}']\n"}, "system.code_paths[0]",
         "code_paths"),
        ({"evaluators": f"- {{type: custom, criterion: c, function: checks:ok,"
                        f" code_paths: ['{entry}']}}\n"},
         "evaluators[0].code_paths[0]", "- {"),
    ):
        text = project_yaml(**arguments)
        write("oloproof.yaml", text)
        err = config_error(lambda: load_project("oloproof.yaml"))
        check(err, file="oloproof.yaml", field=field, line=line_of(text, on_line),
              contains=(f"'{entry}' is in .oloproof/, the store's directory",
                        "miss the cache"))
    write("oloproof.yaml", project_yaml(system=_CALLABLE + "code_paths: [checks.py, prompts]\n"))
    assert load_project("oloproof.yaml").config.system.code_paths == ["checks.py", "prompts"]


# -- the store setting is not empty ------------------------------------------------------------


@pytest.mark.parametrize("written", ['""', "' '", ""])
def test_an_empty_store_is_refused(write: Writer, written: str) -> None:
    text = project_yaml(top=f"store: {written}\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="store", line=line_of(text, "store:"),
          contains=("the store is empty: write store: sqlite",))
    write("oloproof.yaml", project_yaml(top="store: sqlite\n"))
    assert load_project("oloproof.yaml").config.store is None
