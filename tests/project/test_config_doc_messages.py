"""docs/configuration.md's "Real messages" are the real ones (issue 30: the page showed fewer
accepted keys than the command printed). Each mistake the page describes is made on a fresh
copy of the support_bot example, and what `oloproof run` prints must be the block verbatim."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import run_cli

from oloproof.project import models

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _documented() -> list[str]:
    text = DOC.read_text()
    start = text.index("Real\nmessages, from the `support_bot` example")
    block = text[text.index("```\n", start) + 4:]
    return block[: block.index("```\n")].splitlines()


def _edit(root: Path, name: str, old: str, new: str) -> None:
    text = (root / "oloproof.yaml").read_text()
    assert old in text
    (root / name).write_text(text.replace(old, new, 1))


def test_the_documented_messages_are_what_oloproof_prints(tmp_path: Path) -> None:
    root = tmp_path / "bot"
    assert run_cli("init", str(root), "--example", "support_bot", cwd=tmp_path).code == 0
    printed: list[str] = []
    for old, new in (("\nconcurrency:", "\nconcurency:"),
                     ("type: exact_match", "type: exact"),
                     ("    field: label\n", "   field: label\n"),
                     ("app:answer", "app:answr")):
        _edit(root, "bad.yaml", old, new)
        result = run_cli("run", "--config", "bad.yaml", cwd=root)
        assert result.code == 2 and "Traceback" not in result.err, result.text
        printed.append(result.err)
    suite = root / "data" / "support.jsonl"
    lines = suite.read_text().splitlines(keepends=True)
    suite.write_text("".join([*lines, lines[0]]))
    duplicate = run_cli("run", cwd=root)
    assert duplicate.code == 2
    printed.insert(3, duplicate.err)  # in the page's order
    assert "".join(printed).splitlines() == _documented()


def test_the_oloproof_yaml_block_lists_every_field_the_loader_accepts() -> None:
    """The page says it "lists every field"; its oloproof.yaml block left out `limits:` (six
    fields, documented only in refusals.md), `store:` and `matrix:`. Every key of the file,
    and of its blocks that are written out there, must be in the block; `system.http` and
    `system.model` have pages of their own, named beside the block."""
    text = DOC.read_text()
    block = text[text.index("```yaml\n", text.index("## oloproof.yaml")) + 8:]
    block = block[: block.index("```\n")]
    top = set(re.findall(r"^([a-z_]+):", block, re.MULTILINE))
    nested: dict[str, set[str]] = {}
    section = ""
    for line in block.splitlines():
        if match := re.match(r"^([a-z_]+):", line):
            section = match.group(1)
        elif match := re.match(r"^  ([a-z_]+):", line):
            nested.setdefault(section, set()).add(match.group(1))

    def keys(model: type[models.BaseModel]) -> set[str]:
        return {field.alias or name for name, field in model.model_fields.items()}

    assert keys(models.ProjectConfig) == top
    assert keys(models.SystemConfig) - {"http", "model"} == nested["system"]
    assert "`system.http`" in text and "`system.model`" in text
    for section, model in (("concurrency", models.ConcurrencyConfig),
                           ("retry", models.RetryConfig), ("limits", models.LimitsConfig),
                           ("ray", models.RayConfig)):
        assert keys(model) == nested[section], section


def test_the_release_yaml_block_lists_every_key_of_a_policy() -> None:
    """`families:` (and a rule's `family:`) were only in statistics.md."""
    text = DOC.read_text()
    block = text[text.index("```yaml\n", text.index("## release.yaml")) + 8:]
    block = block[: block.index("```\n")]
    top = set(re.findall(r"^([a-z_]+):", block, re.MULTILINE))
    assert {field.alias or name for name, field in models.ReleasePolicy.model_fields.items()} == top
    in_rules = set(re.findall(r"^  (?:- |  )([a-z_]+):", block[block.index("\nrules:"):],
                              re.MULTILINE))
    for rule in (models.IntervalRule, models.ObservedCountRule):
        keys = {field.alias or name for name, field in rule.model_fields.items()}
        # Those the page's prose gives (trials, groups) rather than the block.
        assert keys - in_rules <= {"aggregate", "group", "each_group"}, keys - in_rules
