"""Issue 10: generated hostile suites, configs and system outputs, through the real CLI.

Each example copies a small project that already holds one decided run, makes
one hostile change (a suite file, an oloproof.yaml / release.yaml, or what the
system returns for a batch of cases), runs ``oloproof run --json`` in a
subprocess and checks what must hold whatever the input:

- the exit code is one of the contract's (0-5), never 70 (internal error);
- no traceback on either stream;
- the store passes ``PRAGMA integrity_check``, still holds the run stored
  before, and holds no run left RUNNING.

Examples are derandomized (the same ones every time, no example database), so a
failure here reproduces; each batches several hostile values in one run to keep
the wall time near a minute or two.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.conftest import run_cli, write_project

from oloproof.store.db import store_path

pytestmark = pytest.mark.slow

SETTINGS = settings(
    max_examples=40,  # x3 tests: 120 projects, 240 hostile outputs, 40 suites, 40 config edits
    deadline=None,
    derandomize=True,
    database=None,
    # No shrinking: each step is a subprocess, and the failing example as
    # generated is already small (a handful of values).
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: contains
  criterion: mentions
  field: null
  expected_field: label
- type: regex
  criterion: last_item
  field: items.-1.label
  pattern: "^o"
- type: json_schema
  criterion: shape
  schema: {"type": "object", "required": ["label"]}
- type: absolute_error
  criterion: score_error
  field: score
"""

# Rules that the smallest generated suites can still fail (a floor of 90% needs 2 cases;
# a budget of 0 failures, 1): a rule that no outcome could fail is refused (issue 25).
RELEASE = """
version: 1
rules:
  - id: label-floor
    metric: exact_label
    min: 0.9
  - id: no-failures
    metric: mentions
    max_failures: 0
"""

BASE_APP = """
from oloproof import system

@system(name="fuzz", version="1")
def answer(case_input):
    return {"label": "ok", "score": 1, "items": [{"label": "ok"}]}
"""


# -- values a system might return ------------------------------------------------


@dataclass(frozen=True)
class BigInt:
    """``10 ** digits``: written as an expression (repr refuses over 4,300 digits)."""

    digits: int


@dataclass(frozen=True)
class Deep:
    """A list nested ``depth`` times, built at run time."""

    depth: int


@dataclass(frozen=True)
class Raise:
    """The system raises ``kind(message)`` instead of returning."""

    kind: str
    message: str


MARKUP = st.sampled_from(
    ["[/x]", "[bold red]x", "[link=file:///etc/passwd]x[/link]", "\x1b[31mred", "\r\rx",
     "\x00", "\u202e", "{", "}", "%s%n", "\\", "'", '"']
)
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=20)  # surrogates included
PRINTABLE_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.builds(BigInt, st.sampled_from([20, 400, 5000])),
    st.floats(allow_nan=True, allow_infinity=True),
    ANY_TEXT,
    MARKUP,
    st.binary(max_size=8),
    # Around the one depth limit (100 levels, the output's own object included) and far
    # past it.
    st.builds(Deep, st.sampled_from([50, 98, 99, 100, 5000, 100_000])),
)

VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(ANY_TEXT, MARKUP, st.sampled_from(["label", "score", "items"])),
                        inner, max_size=4),
        st.fixed_dictionaries({"label": inner, "score": inner, "items": st.lists(inner, max_size=3)}),
    ),
    max_leaves=8,
)

OUTPUTS = st.one_of(
    VALUES,
    st.builds(Raise, st.sampled_from(["ValueError", "RuntimeError", "RecursionError",
                                      "UnicodeError", "MemoryError",
                                      # BaseExceptions from user code: per-case errors,
                                      # never a silent exit 0 or a stop of the run.
                                      "SystemExit", "KeyboardInterrupt", "GeneratorExit",
                                      "CancelledError"]), ANY_TEXT),
)


def to_source(value: Any) -> str:
    """Python source that rebuilds ``value`` (nan, huge ints and surrogates included)."""
    if isinstance(value, BigInt):
        return f"10 ** {value.digits}"
    if isinstance(value, Deep):
        return f"_deep({value.depth})"
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    if isinstance(value, bool | int | str | bytes) or value is None:
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(to_source(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{to_source(k)}: {to_source(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))  # pragma: no cover - the strategies make nothing else


def hostile_app(outputs: list[Any]) -> str:
    lines = [
        "import builtins",
        "",
        "from oloproof import system",
        "",
        "def _deep(n):",
        "    value = []",
        "    for _ in range(n):",
        "        value = [value]",
        "    return value",
        "",
        "def _outputs():",
        "    return [",
    ]
    for out in outputs:
        if isinstance(out, Raise):
            lines.append(f"        ({out.kind!r}, {out.message!r}),")
        else:
            lines.append(f"        (None, {to_source(out)}),")
    lines += [
        "    ]",
        "",
        "OUTPUTS = _outputs()",
        "",
        '@system(name="fuzz", version="1")',
        "def answer(case_input):",
        '    kind, value = OUTPUTS[case_input["i"]]',
        "    if kind == 'CancelledError':",
        "        import asyncio",
        "        raise asyncio.CancelledError(value)",
        "    if kind is not None:",
        "        raise getattr(builtins, kind)(value)",
        "    return value",
    ]
    return "\n".join(lines) + "\n"


# -- the project and what must hold --------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A project with one decided run, copied for every example; and that run's id."""
    root = tmp_path_factory.mktemp("fuzz") / "proj"
    cases = [
        {"id": f"c{i}", "input": {"i": i}, "expected": {"label": "ok", "score": 1}}
        for i in range(40)  # enough for the 90% floor to pass
    ]
    write_project(root, app=BASE_APP, cases=cases, evaluators=EVALUATORS, release=RELEASE)
    first = run_cli("run", cwd=root)
    assert first.code == 0, first.text
    yield root, _run_ids(root)[0]


def _run_ids(root: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{store_path(root)}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
    finally:
        conn.close()


@dataclass
class Copy:
    root: Path
    first_run: str


def _copy(template: tuple[Path, str], into: str) -> Copy:
    root = Path(into) / "proj"
    shutil.copytree(template[0], root)
    return Copy(root, template[1])


def _check(project: Copy, what: str) -> None:
    result = run_cli("run", "--json", cwd=project.root, timeout=120)
    assert result.code in {0, 1, 2, 3, 4, 5}, (what, result.code, result.text[-3000:])
    assert "Traceback" not in result.text, (what, result.text[-3000:])
    conn = sqlite3.connect(f"file:{store_path(project.root)}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ids = [row[0] for row in conn.execute("SELECT id FROM runs")]
        running = conn.execute("SELECT id FROM runs WHERE status = 'RUNNING'").fetchall()
    finally:
        conn.close()
    assert project.first_run in ids, (what, "the run stored before is lost")
    assert not running, (what, "a run left RUNNING", result.text[-2000:])
    if result.code == 2:
        assert len(ids) == 1, (what, "a refused run stored something")
    else:
        # Readable back, as text and as JSON: whatever was stored, every command prints.
        inspected = run_cli("inspect", "latest", "--json", cwd=project.root)
        assert inspected.code in {0, 1, 3, 4, 5}, (what, inspected.text[-2000:])
        assert "Traceback" not in inspected.text
        doc = json.loads(inspected.out)
        for args in (["inspect", "latest", "--failures"],
                     # (a NUL cannot be passed in a command line's argument)
                     *(["inspect", "latest", "--case", c["id"]]
                       for c in [c for c in doc["cases"] if "\x00" not in c["id"]][:1])):
            shown = run_cli(*args, cwd=project.root)
            assert shown.code in {0, 1, 3, 4, 5}, (what, args, shown.text[-2000:])
            assert "Traceback" not in shown.text, (what, args)
        if result.code == 0:
            # An ALLOW needs the evidence its rules ask for: label-floor (min 0.9 on
            # exact_label) can only pass on observed passes, of which there must be some.
            passes = [
                c for c in doc["cases"]
                if c["status"] == "OK"
                and (c["judgments"].get("exact_label") or {}).get("passed") is True
            ]
            assert passes, (what, "ALLOW without one observed pass", result.text[-2000:])


# -- hostile system outputs and case ids ----------------------------------------------

CASE_IDS = st.lists(
    st.one_of(PRINTABLE_TEXT.filter(lambda s: s.strip() != ""), MARKUP),
    min_size=6, max_size=6, unique=True,
)


@SETTINGS
@given(outputs=st.lists(OUTPUTS, min_size=6, max_size=6), ids=CASE_IDS)
def test_hostile_system_outputs(template: tuple[Path, str], outputs: list[Any], ids: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = _copy(template, tmp)
        (project.root / "app.py").write_text(hostile_app(outputs), encoding="utf-8")
        cases = [
            {"id": case_id, "input": {"i": i}, "expected": {"label": "ok", "score": 1}}
            for i, case_id in enumerate(ids)
        ]
        (project.root / "data" / "cases.jsonl").write_text(
            "".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8"
        )
        _check(project, f"outputs={outputs!r} ids={ids!r}")


# -- hostile suite files ---------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), ANY_TEXT, MARKUP),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(ANY_TEXT, inner, max_size=3)),
    max_leaves=6,
)

GOOD_LINE = st.builds(
    lambda i, v: json.dumps({"id": f"g{i}", "input": v, "expected": {"label": "ok"}}),
    st.integers(0, 10**6), JSON_VALUES,
)
RAW_LINES = st.one_of(
    GOOD_LINE,
    st.sampled_from([
        "[" * 100_000 + "]" * 100_000,
        '{"id": "n", "input": 1e999999}',
        '{"id": "n", "input": NaN}',
        '{"id": "n", "input": ' + "9" * 5000 + "}",
        '{"id": "[/x]", "input": 1}',
        '{"id": "d", "input": 1}\n{"id": "d", "input": 2}',
        '{"id": "s\\ud800", "input": 1}',
        '{"id": "k", "input": {"\\udc80": 1}}',
        '{"id": 1, "input": 1}',
        '{"id": "", "input": 1}',
        '{"input": 1}',
        '{"id": "x"}',
        '{"id": "x", "input": 1, "expected": [1]}',
        '{"id": "x", "input": 1, "metadata": "m"}',
        "[]",
        "null",
        '"just a string"',
        "\ufeff{}",
        '{"id": "x", "input": 1, "id": "y"}',
        # Around the one depth limit (100 levels, the line's own object included).
        '{"id": "deep99", "input": ' + "[" * 98 + "]" * 98 + "}",
        '{"id": "deep100", "input": ' + "[" * 99 + "]" * 99 + "}",
        '{"id": "deep101", "input": ' + "[" * 100 + "]" * 100 + "}",
        '{"id": "deepm", "input": 1, "metadata": {"m": ' + "[" * 5000 + "]" * 5000 + "}}",
        '{"id": "deepe", "input": 1, "expected": {"label": ' + "{\"a\": " * 150 + "1"
        + "}" * 150 + "}}",
    ]),
    st.builds(lambda d: json.dumps({"id": "r", "input": d}), JSON_VALUES),
    ANY_TEXT,
    st.binary(max_size=30),
)


def _as_bytes(line: str | bytes) -> bytes:
    return line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")


@SETTINGS
@given(lines=st.lists(RAW_LINES, min_size=1, max_size=6))
def test_hostile_suites(template: tuple[Path, str], lines: list[str | bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = _copy(template, tmp)
        (project.root / "data" / "cases.jsonl").write_bytes(
            b"\n".join(_as_bytes(line) for line in lines) + b"\n"
        )
        _check(project, f"suite lines={[repr(x)[:200] for x in lines]!r}")


# -- hostile oloproof.yaml and release.yaml --------------------------------------------

YAML_SCALARS = st.one_of(
    st.sampled_from([
        "true", "false", "1e8", "100000000", "-1", "0", "1.5", ".nan", ".inf", "-.inf", "~",
        "[]", "{}", "''", "*nowhere", "&a [*a]", "!!python/object/apply:os.system ['true']",
        '"\\ud800"', "'[/x]'", "99999999999999999999999999999", "2024-05-01", "0x10", "0o17",
        "yes", "null", "|\n  text", "!!binary aGVsbG8=", "!!set {a, b}", "<<: *x",
        # Around the one depth limit, and far past it (PyYAML's own limit speaks then).
        "[" * 99 + "]" * 99, "[" * 101 + "]" * 101, "[" * 5000 + "]" * 5000,
        "{a: " * 150 + "1" + "}" * 150,
    ]),
    ANY_TEXT.map(json.dumps),
)

CONFIG_KEYS = st.sampled_from([
    "version", "project", "dataset", "name", "version", "callable", "system", "judge",
    "criterion", "field", "pattern", "type", "schema", "expected_field", "timeout_s",
])
RELEASE_KEYS = st.sampled_from(["version", "id", "metric", "min", "max_failures", "rules"])

ALIAS_BOMB = textwrap.dedent("""
    a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
""")


def _replace_value(text: str, key: str, value: str, nth: int) -> str:
    """Replace the value of the ``nth`` line (cyclically) that sets ``key``."""
    lines = text.splitlines()
    spots = [i for i, ln in enumerate(lines) if ln.strip().lstrip("- ").startswith(key + ":")]
    if not spots:
        return text + f"\n{key}: {value}\n"
    i = spots[nth % len(spots)]
    head = lines[i][: lines[i].index(key + ":") + len(key) + 1]
    lines[i] = f"{head} {value}"
    return "\n".join(lines) + "\n"


EDITS = st.one_of(
    st.tuples(st.just("oloproof.yaml"), CONFIG_KEYS, YAML_SCALARS, st.integers(0, 5)),
    st.tuples(st.just("release.yaml"), RELEASE_KEYS, YAML_SCALARS, st.integers(0, 5)),
    st.tuples(st.sampled_from(["oloproof.yaml", "release.yaml"]), st.just("append"),
              st.sampled_from([ALIAS_BOMB, "policy: none", "policy: release.yml", "\t- x",
                               "concurrency: {system: true}", "concurrency: {judge: 1e8}",
                               "%YAML 1.1\n---\n", "--- !!omap\n", "? [a]\n: b"]),
              st.just(0)),
    st.tuples(st.sampled_from(["oloproof.yaml", "release.yaml"]), st.just("whole"),
              ANY_TEXT, st.just(0)),
)


@SETTINGS
@given(edits=st.lists(EDITS, min_size=1, max_size=3))
def test_hostile_configs(template: tuple[Path, str], edits: list[tuple[str, str, str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = _copy(template, tmp)
        for name, key, value, nth in edits:
            path = project.root / name
            text = path.read_text(encoding="utf-8")
            if key == "append":
                text += "\n" + value + "\n"
            elif key == "whole":
                text = value
            else:
                text = _replace_value(text, key, value, nth)
            path.write_bytes(text.encode("utf-8", "surrogatepass"))
        _check(project, f"edits={edits!r}")


# -- hostile labels files ------------------------------------------------------------------

LABEL_LINES = st.one_of(
    st.sampled_from([
        '{"id": "c0", "criterion": "exact_label", "pass": true}',
        '{"id": "c0", "criterion": "exact_label", "pass": true, "pass": false}',
        '{"id": "c\\ud800", "criterion": "exact_label", "pass": true}',
        '{"id": "c0", "criterion": "exact_label", "pass": true, "note": '
        + "[" * 5000 + "]" * 5000 + "}",
        '{"id": "c0", "criterion": "exact_label", "pass": true, "note": '
        + "[" * 100 + "]" * 100 + "}",
        '{"id": "c0", "criterion": "exact_label", "pass": NaN}',
        '{"id": "c0", "criterion": "exact_label", "pass": 1e999}',
        '{"id": "c0", "criterion": "exact_label", "pass": ' + "9" * 5000 + "}",
        "[" * 100_000,
        "\ufeff{}",
        "null",
    ]),
    st.builds(lambda v: json.dumps({"id": "c1", "criterion": "exact_label", "pass": v}),
              JSON_VALUES),
    ANY_TEXT,
    st.binary(max_size=30),
)


@SETTINGS
@given(lines=st.lists(LABEL_LINES, min_size=1, max_size=4))
def test_hostile_labels_files(template: tuple[Path, str], lines: list[str | bytes]) -> None:
    """Every line of a labels file is read strictly and within the depth limit: whatever
    it holds, the run is refused with a line naming it (exit 2) or goes on, never 70."""
    with tempfile.TemporaryDirectory() as tmp:
        project = _copy(template, tmp)
        config = project.root / "oloproof.yaml"
        config.write_text(config.read_text().replace(
            "dataset: data/cases.jsonl", "dataset: data/cases.jsonl\nhuman_labels: data/labels.jsonl"))
        (project.root / "data" / "labels.jsonl").write_bytes(
            b"\n".join(_as_bytes(line) for line in lines) + b"\n"
        )
        _check(project, f"labels lines={[repr(x)[:200] for x in lines]!r}")


# -- tampered configuration snapshots --------------------------------------------------------

STRICT_RELEASE = "version: 1\nrules:\n  - id: near-perfect\n    metric: exact_label\n    min: 0.99\n"


@pytest.fixture(scope="module")
def strict_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A project whose policy blocks (8 of 8 cannot show 99%: exit 3), run twice: its
    snapshots are written and were read back once."""
    root = tmp_path_factory.mktemp("fuzz-snap") / "proj"
    cases = [{"id": f"c{i}", "input": {"i": i}, "expected": {"label": "ok", "score": 1}}
             for i in range(8)]
    write_project(root, app=BASE_APP, cases=cases, evaluators=EVALUATORS, release=STRICT_RELEASE)
    for _ in range(2):
        result = run_cli("run", cwd=root)
        assert result.code == 3, result.text
    yield root, _run_ids(root)[0]


SNAPSHOT_TAMPERS = st.one_of(
    st.sampled_from(["deps=[]", "deps=config-only", "rules=[]", "resolved=none", "all",
                     "deep", "not-json", "empty", "swap-classes"]),
    st.tuples(st.sampled_from(["deps", "resolved", "config", "policy", "classes", "key",
                               "code", "format", "stored"]), JSON_VALUES),
)


def _no_rules(node: Any) -> None:
    if isinstance(node, dict) and isinstance(node.get("f"), dict) and "rules" in node["f"]:
        rules = node["f"]["rules"]
        node["f"]["rules"] = {"$t": []} if isinstance(rules, dict) else []


def _tamper(path: Path, how: Any) -> None:
    if how == "not-json":
        path.write_bytes(b"\xff{not json")
        return
    if how == "empty":
        path.write_bytes(b"")
        return
    if how == "deep":
        path.write_text('{"format": 1, "deps": ' + "[" * 5000 + "]" * 5000 + "}")
        return
    doc = json.loads(path.read_text())
    if isinstance(how, tuple):
        doc[how[0]] = how[1]
    else:
        if how in ("deps=[]", "all"):
            doc["deps"] = []
        if how == "deps=config-only":
            doc["deps"] = [d for d in doc.get("deps", []) if d[1].endswith("oloproof.yaml")]
        if how in ("rules=[]", "all"):
            _no_rules(doc.get("policy"))
        if how in ("resolved=none", "all") and "resolved" in doc:
            doc["resolved"] = ["none", None]
        if how == "swap-classes":
            doc["classes"] = {k: {"fields": [], "alias": {}, "exclude": []}
                              for k in doc.get("classes", {})}
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8", errors="surrogatepass")


@settings(SETTINGS, max_examples=25)
@given(tampers=st.lists(SNAPSHOT_TAMPERS, min_size=1, max_size=2))
def test_tampered_snapshots_never_override_the_files(
    strict_template: tuple[Path, str], tampers: list[Any]
) -> None:
    """Whatever a snapshot is made to say, run and gate decide as release.yaml on disk
    says: the rule is there, and blocks (exit 3), as it did before the tampering."""
    with tempfile.TemporaryDirectory() as tmp:
        project = _copy(strict_template, tmp)
        snapshots = sorted((project.root / ".oloproof" / "snapshots").glob("*.json"))
        assert {p.name.split("-")[0] for p in snapshots} == {"config", "policy"}
        for path in snapshots:
            for how in tampers:
                _tamper(path, how)
        what = f"tampers={tampers!r}"
        gate = run_cli("gate", "latest", "--json", cwd=project.root)
        assert gate.code == 3, (what, gate.text[-2000:])
        assert [d["rule"] for d in json.loads(gate.out)["decisions"]] == ["near-perfect"], what
        result = run_cli("run", "--json", cwd=project.root)
        assert result.code == 3, (what, result.text[-2000:])
        assert "Traceback" not in result.text, what
        finished = json.loads(result.out.strip().splitlines()[-1])
        assert [d["rule"] for d in finished["decisions"]] == ["near-perfect"], what
