"""The configuration snapshot (project/_snapshot.py): what it gives back is what a
validation gives, as the same classes, and it is never used once a file it was validated
from changed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from oloproof._records import replace
from oloproof.project import config as records
from oloproof.project._snapshot import (
    code_digest,
    code_modules,
    load_config,
    load_stored_policy,
    save_config,
    save_stored_policy,
)
from oloproof.project.config import ConfigRecord, IntervalRule, ObservedCountRule, ProjectConfig
from oloproof.project.loader import load_project, resolve_release_policy
from oloproof.runner.build import build_evaluators, build_system, policy_json

EXAMPLES = ["starter", "support_bot", "judge", "http", "code", "compare", "sequential", "prompts"]

RICH_CONFIG = """\
version: 1
project: everything
dataset: data/cases.jsonl
human_labels: data/labels.jsonl
trials: 3
system:
  name: sys
  version: "7"
  callable: app:answer
  code_paths: [helpers.py]
  timeout_s: 12
concurrency:
  system: 16
  judge: 3
  evaluator: 2
  adaptive: {system: true}
retry:
  max_retry_wait_s: 5
limits:
  evaluator_timeout_s: 9
  failure_threshold: 0.5
evaluators:
  - type: exact_match
    criterion: exact
    field: label
    casefold: true
    group_by: [lang]
  - type: contains
    criterion: has
    field: answer
    expected_field: keyword
  - type: regex
    criterion: pii
    field: answer
    pattern: '\\d{3}-\\d{2}'
    pass_if: no_match
    flags: [IGNORECASE, MULTILINE]
  - type: json_schema
    criterion: shape
    schema: {type: object, required: [answer], properties: {answer: {type: string}}}
  - type: absolute_error
    criterion: err
    field: score
    range: [0, 10]
  - type: custom
    criterion: mine
    function: checks:grade
    kind: mean
    range: [0, 1]
    params: {timeout_s: 10, words: [a, b]}
  - type: rubric_judge
    criterion: helpful
    provider: openai
    model: gpt-x
    rubric_file: rubric.md
    max_completion_tokens: 300
    extra_body: {reasoning_effort: low}
  - type: rubric_judge
    criterion: polite
    provider: anthropic
    model: claude-x
    rubric_text: Be polite.
    temperature: 0.2
    panel:
      - {model: claude-y}
      - {provider: openai, model: gpt-y, max_completion_tokens: 50}
      - {max_tokens: 99}
    panel_rule: unanimous
"""

RICH_POLICY = """\
version: 1
confidence_level: 0.9
warn_on: [MANUAL_REVIEW]
block_on: [FAIL, INSUFFICIENT_EVIDENCE]
families:
  quality: {multiplicity: bonferroni}
rules:
  - {id: a, metric: exact, min: 0.5, family: quality}
  - {id: b, metric: has, max_failures: 2}
  - {id: c, metric: err, max: 3.5}
  - {id: d, metric: helpful, min: 0.6, judge_validation: {min_labels: 5, min_agreement: 0.7}}
  - {id: e, metric: exact, min: 0.4, group: {lang: fr}}
  - {id: f, metric: exact, min: 0.4, each_group: true}
  - {id: g, metric: exact, max_failures: 1, aggregate: pass_all_k}
  - {id: h, metric: polite, min: 0.3, estimate: corrected}
"""


def _rich_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir()
    (root / "data" / "cases.jsonl").write_text('{"id": "a", "input": {"q": 1}}\n')
    (root / "data" / "labels.jsonl").write_text(
        '{"case_id": "a", "criterion": "helpful", "label": "pass"}\n'
    )
    (root / "app.py").write_text("def answer(x):\n    return {'label': 'ok'}\n")
    (root / "helpers.py").write_text("X = 1\n")
    (root / "checks.py").write_text("def grade(case, output, **params):\n    return 1.0\n")
    (root / "rubric.md").write_text("Is it helpful?\n")
    (root / "oloproof.yaml").write_text(RICH_CONFIG)
    (root / "release.yaml").write_text(RICH_POLICY)
    (root / ".oloproof").mkdir()
    return root / "oloproof.yaml"


def _example(name: str, tmp_path: Path) -> Path:
    source = resources.files("oloproof") / "examples" / name
    root = tmp_path / name
    with resources.as_file(source) as path:
        shutil.copytree(path, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / ".oloproof").mkdir()
    return root / "oloproof.yaml"


def _projects(tmp_path: Path) -> list[Path]:
    return [*(_example(name, tmp_path) for name in EXAMPLES), _rich_project(tmp_path / "rich")]


def _dumps(obj: Any) -> list[Any]:
    """Every way Oloproof dumps a record, and what it asks of one."""
    out: list[Any] = [
        obj.dump(), obj.dump(mode="json"), obj.dump(mode="json", by_alias=True),
        obj.dump(exclude_unset=True), sorted(obj.fields_set),
    ]
    return out


def _answers(config: Any) -> list[Any]:
    out: list[Any] = [
        *_dumps(config), config.metrics(), config.judge_criteria(), config.declares_no_policy,
        config.concurrency.evaluator_limit(), *_dumps(config.system),
    ]
    for ev in config.evaluators:
        out += [ev.type, ev.metric_kind, *_dumps(ev), list(ev.group_by)]
        out.append(ev.dump(mode="json", by_alias=True,
                           exclude={"timeout_s", "code_paths", "params"}))
        if ev.type == "regex":
            out += [ev.re_flags, ev.compiled.pattern]
        if ev.type == "rubric_judge":
            out += [ev.rubric, ev.request_temperature, ev.request_max_tokens]
            out += [(*_dumps(m), m.rubric, m.request_temperature, m.request_max_tokens)
                    for m in ev.members()]
    return out


def _policy_answers(policy: Any) -> list[Any]:
    rules = [(type(r).__name__, isinstance(r, IntervalRule),
              isinstance(r, ObservedCountRule), *_dumps(r)) for r in policy.rules]
    copies = [replace(r, metric="zz").dump(mode="json") for r in policy.rules]
    return [*_dumps(policy), rules, copies, policy_json(policy)]


def _same_records(validated: Any, kept: Any, where: str = "config") -> int:
    """Walk both trees together: every record of the snapshot is of the very class the
    validation made, with the same fields (internal ones too); returns how many records."""
    assert type(kept) is type(validated), where
    if isinstance(validated, ConfigRecord):
        count = 1
        for f in type(validated).__record_fields__:  # type: ignore[attr-defined]
            count += _same_records(getattr(validated, f.name), getattr(kept, f.name),
                                   f"{where}.{f.name}")
        return count
    if isinstance(validated, (list, tuple)):
        assert len(kept) == len(validated), where
        return sum(_same_records(v, k, f"{where}[{i}]")
                   for i, (v, k) in enumerate(zip(validated, kept, strict=True)))
    if isinstance(validated, dict):
        assert list(kept) == list(validated), where
        return sum(_same_records(v, kept[key], f"{where}.{key}") for key, v in validated.items())
    assert kept == validated, where
    return 0


def test_a_snapshot_answers_what_the_validation_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (("FAKE_PROVIDER_KEY", "fake-key-0123456789"),
                        ("OPENAI_API_KEY", "sk-test-0123456789abcdef"),
                        ("INTAKE_TOKEN", "token-0123456789"),
                        ("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")):
        monkeypatch.setenv(name, value)
    for config_path in _projects(tmp_path):
        project = load_project(config_path)
        resolved = resolve_release_policy(project, None)
        save_config(config_path, None, project, resolved)
        kept = load_config(config_path, None)
        assert kept is not None, config_path
        plain, plain_resolved = kept
        assert type(plain.config) is ProjectConfig
        assert _answers(plain.config) == _answers(project.config), config_path
        assert _policy_answers(plain_resolved.policy) == _policy_answers(resolved.policy)
        assert (plain_resolved.path, plain_resolved.declared_none) == (
            resolved.path, resolved.declared_none)
        assert (plain.root, plain.config_path, plain.display) == (
            project.root, project.config_path, project.display)
        # What the run stores and caches by: evaluator and system identities.
        inline, judges = build_evaluators(project)
        plain_inline, plain_judges = build_evaluators(plain)
        assert [e.identity for e in [*plain_inline, *plain_judges]] == [
            e.identity for e in [*inline, *judges]]
        assert build_system(plain).identity == build_system(project).identity


def test_the_stored_policy_snapshot_answers_what_the_validation_answers(tmp_path: Path) -> None:
    from oloproof.project.config import ReleasePolicy

    config_path = _rich_project(tmp_path / "rich")
    project = load_project(config_path)
    stored = json.loads(json.dumps(policy_json(resolve_release_policy(project, None).policy)))
    assert load_stored_policy(project.root, stored) is None
    save_stored_policy(project.root, stored)
    kept = load_stored_policy(project.root, stored)
    assert kept is not None and type(kept) is ReleasePolicy
    validated = ReleasePolicy.validate(stored)
    assert _policy_answers(kept) == _policy_answers(validated)
    assert _same_records(validated, kept, "policy") > 1
    # Another stored policy is another snapshot.
    other = {**stored, "confidence_level": 0.8}
    assert load_stored_policy(project.root, other) is None
    # A snapshot written by another version of the code is written again by the next run
    # (not left stale, which would have every later `gate` validate with pydantic).
    (path,) = (Path(project.root) / ".oloproof" / "snapshots").glob("policy-*.json")
    older = json.loads(path.read_text())
    older["code"] = "older" + older["code"]
    older["stamp"]["env"][0] = "another Python"
    path.write_text(json.dumps(older))
    assert load_stored_policy(project.root, stored) is None
    save_stored_policy(project.root, stored)
    assert load_stored_policy(project.root, stored) is not None


def test_a_stored_policy_snapshot_of_this_code_with_a_stale_stamp_is_stamped_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oloproof.project import _snapshot

    project = load_project(_rich_project(tmp_path / "rich"))
    stored = json.loads(json.dumps(policy_json(resolve_release_policy(project, None).policy)))
    save_stored_policy(project.root, stored)
    (path,) = (Path(project.root) / ".oloproof" / "snapshots").glob("policy-*.json")
    doc = json.loads(path.read_text())
    doc["stamp"]["files"][0][2] -= 1  # a module touched (a checkout): same code, new time
    path.write_text(json.dumps(doc))
    validated: list[object] = []
    monkeypatch.setattr(_snapshot.ReleasePolicy, "validate",
                        lambda data: validated.append(data))
    save_stored_policy(project.root, stored)
    again = json.loads(path.read_text())
    assert validated == []  # kept, not validated again
    assert again["stamp"] == _snapshot.code_stamp() and _snapshot._stamp_holds(again["stamp"])
    assert {k: v for k, v in again.items() if k != "stamp"} == {
        k: v for k, v in doc.items() if k != "stamp"}


def _edit(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


@pytest.mark.parametrize(
    "change",
    [
        "config comment", "policy comment", "rubric", "dataset removed", "labels removed",
        "code path removed", "snapshot garbled", "snapshot foreign class", "snapshot code",
        "snapshot extra field", "snapshot missing field", "snapshot record class for another",
    ],
)
def test_a_snapshot_is_not_used_once_anything_it_rests_on_changed(
    tmp_path: Path, change: str
) -> None:
    config_path = _rich_project(tmp_path / "rich")
    root = config_path.parent
    project = load_project(config_path)
    save_config(config_path, None, project, resolve_release_policy(project, None))
    assert load_config(config_path, None) is not None
    [snapshot] = (root / ".oloproof" / "snapshots").glob("config-*.json")
    if change == "config comment":
        _edit(config_path, "# a comment\n")
    elif change == "policy comment":
        _edit(root / "release.yaml", "# a comment\n")
    elif change == "rubric":
        _edit(root / "rubric.md", "And kind?\n")
    elif change == "dataset removed":
        (root / "data" / "cases.jsonl").unlink()
    elif change == "labels removed":
        (root / "data" / "labels.jsonl").unlink()
    elif change == "code path removed":
        (root / "helpers.py").unlink()
    elif change == "snapshot garbled":
        snapshot.write_text(snapshot.read_text()[:-40])
    elif change == "snapshot foreign class":
        doc = json.loads(snapshot.read_text())
        doc["config"]["$m"] = "os.system"
        snapshot.write_text(json.dumps(doc))
    elif change == "snapshot code":  # written by another version: its digest and stamp
        doc = json.loads(snapshot.read_text())
        doc["code"] = "0" * 64
        doc["stamp"]["files"][0][2] += 1
        snapshot.write_text(json.dumps(doc))
    elif change == "snapshot extra field":  # a record is made with exactly its fields
        doc = json.loads(snapshot.read_text())
        doc["config"]["f"]["system"]["f"]["__class__"] = "x"
        snapshot.write_text(json.dumps(doc))
    elif change == "snapshot missing field":
        doc = json.loads(snapshot.read_text())
        del doc["config"]["f"]["evaluators"]
        snapshot.write_text(json.dumps(doc))
    elif change == "snapshot record class for another":  # the policy where the config goes
        doc = json.loads(snapshot.read_text())
        doc["config"] = doc["policy"]
        snapshot.write_text(json.dumps(doc))
    assert load_config(config_path, None) is None
    # Another --policy is another snapshot.
    assert load_config(config_path, str(root / "release.yaml")) is None


def test_no_snapshot_for_a_value_json_cannot_hold(tmp_path: Path) -> None:
    """A YAML timestamp in a schema stays a string (project/_yaml.py), but a value of any
    other type than JSON's is refused by the encoder, so the snapshot is not written."""
    from oloproof.project._snapshot import SnapshotUnusable, _encode

    with pytest.raises(SnapshotUnusable):
        _encode({"when": object()}, records.RECORDS)
    with pytest.raises(SnapshotUnusable):
        _encode(float("nan"), records.RECORDS)
    config_path = _rich_project(tmp_path / "rich")
    text = config_path.read_text().replace(
        "schema: {type: object,", "schema: {default: 2020-01-01, type: object,")
    config_path.write_text(textwrap.dedent(text))
    project = load_project(config_path)
    save_config(config_path, None, project, resolve_release_policy(project, None))
    kept = load_config(config_path, None)
    if kept is not None:  # the timestamp was kept as text: then it must read back the same
        assert _answers(kept[0].config) == _answers(project.config)


def test_one_runtime_type_validation_and_snapshot_make_the_same_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31: the configuration has one runtime type. Every record the snapshot gives
    back, at every depth (systems, evaluators, a panel's judges, rules, families), is of
    the class the validation made, and equal to it field by field."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    seen: set[str] = set()
    for config_path in _projects(tmp_path):
        project = load_project(config_path)
        resolved = resolve_release_policy(project, None)
        save_config(config_path, None, project, resolved)
        kept = load_config(config_path, None)
        assert kept is not None, config_path
        assert _same_records(project.config, kept[0].config) > 1
        assert _same_records(resolved.policy, kept[1].policy, "policy") >= 1
        for tree in (project.config, resolved.policy):
            seen |= _record_names(tree)
    # The rich project uses every record but compare.yaml's.
    assert set(records.RECORDS) - seen == {"ComparePolicy", "CompareRule"}


def _record_names(value: Any) -> set[str]:
    if isinstance(value, ConfigRecord):
        names = {type(value).__name__}
        for f in type(value).__record_fields__:  # type: ignore[attr-defined]
            names |= _record_names(getattr(value, f.name))
        return names
    if isinstance(value, (list, tuple)):
        return set().union(*(_record_names(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_record_names(v) for v in value.values())) if value else set()
    return set()


def test_a_new_property_on_a_record_works_after_a_snapshot_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug of issue 31: a property added to ProjectConfig passed mypy and the first
    run, and every later run (read from the snapshot, as other objects) exited 70. A
    property of a record is a property of what the snapshot gives back."""
    monkeypatch.setattr(ProjectConfig, "judge_count", property(
        lambda self: len(self.judge_criteria())), raising=False)
    monkeypatch.setattr(records.RubricJudgeEvaluator, "panel_size", property(
        lambda self: len(self.members())), raising=False)
    monkeypatch.setattr(records.IntervalRule, "bound", property(
        lambda self: self.min if self.min is not None else self.max), raising=False)
    config_path = _rich_project(tmp_path / "rich")
    project = load_project(config_path)
    resolved = resolve_release_policy(project, None)
    save_config(config_path, None, project, resolved)
    kept = load_config(config_path, None)
    assert kept is not None
    config, policy = kept[0].config, kept[1].policy
    assert config.judge_count == project.config.judge_count == 2  # type: ignore[attr-defined]
    assert [e.panel_size for e in config.evaluators if e.type == "rubric_judge"] == [0, 3]  # type: ignore[union-attr]
    assert [r.bound for r in policy.rules if r.kind == "interval_threshold"] == [  # type: ignore[union-attr]
        0.5, 3.5, 0.6, 0.4, 0.4, 0.3]


# -- the code digest ---------------------------------------------------------------------

_VALIDATE_EVERYTHING = """\
import sys
from oloproof.project._snapshot import code_modules, save_config, load_config
from oloproof.project.loader import load_project, resolve_release_policy, load_compare_policy
from oloproof.project.config import ReleasePolicy
project = load_project(sys.argv[1])
resolved = resolve_release_policy(project, None)
[e.members() for e in project.config.evaluators if e.type == "rubric_judge"]
load_compare_policy(sys.argv[2], project.config.metrics())
ReleasePolicy.validate({"version": 1})
save_config(sys.argv[1], None, project, resolved)
assert load_config(sys.argv[1], None) is not None
loaded = sorted(m.__file__ for name, m in list(sys.modules.items())
                if name.split(".")[0] == "oloproof" and getattr(m, "__file__", None))
missing = sorted(set(loaded) - set(code_modules()))
print("MISSING", *missing)
"""


def test_the_code_digest_covers_every_module_a_validation_runs(tmp_path: Path) -> None:
    """Every module of Oloproof that a validation (of a project using every option, a
    release policy and a compare policy) and a snapshot's writing and reading import, in a
    fresh interpreter, is among the files the code digest reads: a module that decides
    what the records hold can never change without the snapshots being written again."""
    config_path = _rich_project(tmp_path / "rich")
    compare = tmp_path / "compare.yaml"
    compare.write_text("version: 1\nrules:\n  - {id: x, kind: non_inferiority, metric: exact,"
                       " margin: 0.05}\n")
    done = subprocess.run(
        [sys.executable, "-c", _VALIDATE_EVERYTHING, str(config_path), str(compare)],
        capture_output=True, text=True, check=False, timeout=120,
        env={"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-ant-test-0123456789abcdef",
             "OPENAI_API_KEY": "sk-test-0123456789abcdef"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "MISSING", done.stdout


def test_the_code_digest_names_the_modules_the_old_list_missed() -> None:
    """The hand-kept list had models, shapes, loader, snapshot and project: enums.py,
    _files.py and suite.py (and jsonschema's version) were missed."""
    names = {Path(p).relative_to(Path(records.__file__).parents[1]).as_posix()
             for p in code_modules()}
    assert {"enums.py", "project/_files.py", "project/suite.py", "project/_errors.py",
            "project/config.py", "project/models.py", "project/loader.py",
            "project/_snapshot.py", "project/_yaml.py", "_records.py"} <= names
    # Nothing but the package and what the validation needs: not the engine, not rich.
    assert not any(n.startswith(("engine/", "runner/", "render/", "cli/")) for n in names)


def test_the_code_digest_changes_with_a_library_version(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib.metadata import version

    from oloproof.project import _snapshot

    listed = _snapshot._library_versions()
    for dist, entry in zip(("pydantic", "pydantic_core", "jsonschema", "pyyaml"), listed,
                           strict=True):
        assert entry.lower().startswith(f"{dist}-{version(dist)}".lower()), entry
    before = code_digest.__wrapped__()  # type: ignore[attr-defined]
    monkeypatch.setattr(_snapshot, "_library_versions",
                        lambda: [*listed[:2], "jsonschema-0.0.dist-info", listed[3]])
    assert code_digest.__wrapped__() != before  # type: ignore[attr-defined]


def _stamped(tmp_path: Path) -> tuple[Path, Any]:
    """A project whose configuration snapshot is written, and that snapshot's document."""
    config_path = _rich_project(tmp_path / "stamped")
    project = load_project(config_path)
    save_config(config_path, None, project, resolve_release_policy(project, None))
    (snapshot,) = (Path(project.root) / ".oloproof" / "snapshots").glob("config-*.json")
    return snapshot, json.loads(snapshot.read_text())


def test_the_code_stamp_describes_the_modules_and_libraries_of_the_digest(tmp_path: Path) -> None:
    from oloproof.project import _snapshot

    _snapshot_path, doc = _stamped(tmp_path)
    stamp = doc["stamp"]
    assert doc["code"] == code_digest()
    package = Path(_snapshot.__file__).parent.parent
    assert sorted(str(package / rel) for rel, _size, _mtime in stamp["files"]) == code_modules()
    for rel, size, mtime in stamp["files"]:
        st = (package / rel).stat()
        assert (size, mtime) == (st.st_size, st.st_mtime_ns)
    assert stamp["dirs"] and all(Path(d).is_dir() for d, _s, _m in stamp["dirs"])
    assert _snapshot._stamp_holds(stamp)


def test_a_snapshot_whose_stamp_holds_is_used_without_computing_the_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oloproof.project import _snapshot

    snapshot, _doc = _stamped(tmp_path)
    config_path = snapshot.parent.parent.parent / "oloproof.yaml"

    def refuse() -> str:
        raise AssertionError("the digest was computed although the stamp holds")

    monkeypatch.setattr(_snapshot, "code_digest", refuse)
    assert load_config(config_path, None) is not None


@pytest.mark.parametrize("change", ["a module touched", "a library directory changed",
                                    "no roots listed", "a path outside the package",
                                    "another interpreter", "not a stamp"])
def test_a_stamp_that_does_not_hold_falls_back_to_the_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    from oloproof.project import _snapshot

    snapshot, doc = _stamped(tmp_path)
    config_path = snapshot.parent.parent.parent / "oloproof.yaml"
    stamp = doc["stamp"]
    if change == "a module touched":  # as a checkout does: same bytes, a new time
        stamp["files"][0][2] -= 1
    elif change == "a library directory changed":  # an install beside pydantic
        stamp["dirs"][0][2] -= 1
    elif change == "no roots listed":  # nothing to stat would always hold
        stamp["files"] = []
    elif change == "a path outside the package":
        stamp["files"].append(["../../etc/passwd.py", 1, 1])
    elif change == "another interpreter":
        stamp["env"][0] = "3.99.0"
    else:
        doc["stamp"] = "holds"
    snapshot.write_text(json.dumps(doc))
    assert not _snapshot._stamp_holds(doc["stamp"])
    asked: list[str] = []
    real = _snapshot.code_digest

    def counted() -> str:
        asked.append("digest")
        return real()

    monkeypatch.setattr(_snapshot, "code_digest", counted)
    assert load_config(config_path, None) is not None  # the code is the same: still used
    assert asked == ["digest"]
    # ...and the digest, when it differs, still refuses the snapshot.
    doc["code"] = "0" * 64
    snapshot.write_text(json.dumps(doc))
    assert load_config(config_path, None) is None


def test_the_import_scanner_reads_every_form_of_import() -> None:
    from oloproof.project._snapshot import _imports

    source = b"""\
from __future__ import annotations
import oloproof.enums
from oloproof.project import suite, labels as lab
from oloproof.project._errors import (
    fail,  # a comment
    to_config_error,
)
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oloproof.runner.build import nothing

def lazy():
    if True:
        from oloproof.storeurl import masked
    return masked
x = "oloproof.engine is named in a string"
"""
    assert _imports(source) == [
        ("oloproof.enums", []),
        ("oloproof.project", ["suite", "labels"]),
        ("oloproof.project._errors", ["fail", "to_config_error"]),
        ("oloproof.storeurl", ["masked"]),
    ]
