"""What invalidates the execution cache, and what must not (SPEC §2, §3)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="echo", version="1")
def answer(case_input):
    return {"label": "ok"}
"""


def _exec_counts(out: str) -> tuple[int, int]:
    m = re.search(r"executions (\d+) hits · (\d+) misses", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def _project(root: Path, **kw: object) -> Path:
    return write_project(
        root, app=kw.pop("app", APP), cases=labelled_cases(6), system_extra="code_paths: [prompts/]",
        extra_files={"prompts/answer.txt": "Answer briefly."}, **kw,  # type: ignore[arg-type]
    )


def test_unchanged_rerun_and_concurrency_or_timeout_changes_hit_the_cache(project_dir: Path) -> None:
    _project(project_dir)
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (0, 6)
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (6, 0)
    _project(project_dir, concurrency=(1, 1))
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (6, 0)
    _project(project_dir, concurrency=(3, 2))
    config = project_dir / "oloproof.yaml"
    config.write_text(config.read_text().replace("  callable: app:answer\n", "  callable: app:answer\n  timeout_s: 7\n"))
    result = run_cli("run", cwd=project_dir)
    assert _exec_counts(result.out) == (6, 0), result.text


def test_version_source_and_code_paths_changes_re_execute(project_dir: Path) -> None:
    _project(project_dir)
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (0, 6)
    # The declared version.
    _project(project_dir, version="2")
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (0, 6)
    # The defining module's source.
    (project_dir / "app.py").write_text(APP.replace('"ok"}', '"ok"}  # reworded'))
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (0, 6)
    # A code_paths file.
    (project_dir / "prompts" / "answer.txt").write_text("Answer in one sentence.")
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (0, 6)
    # And back to a state seen before: its entries are still there.
    (project_dir / "prompts" / "answer.txt").write_text("Answer briefly.")
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (6, 0)


def test_no_cache_calls_everything_and_refreshes(project_dir: Path) -> None:
    _project(project_dir)
    run_cli("run", cwd=project_dir)
    result = run_cli("run", "--no-cache", cwd=project_dir)
    assert _exec_counts(result.out) == (0, 6)
    assert "judgments 0 hits" in result.out
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (6, 0)


def test_a_failed_call_is_retried_next_run_not_replayed(project_dir: Path) -> None:
    app = """
    from pathlib import Path
    from oloproof import system

    @system(name="sometimes", version="1")
    def answer(case_input):
        if case_input["n"] == 2 and not (Path(__file__).parent / "fixed").exists():
            raise RuntimeError("backend down")
        return {"label": "ok"}
    """
    _project(project_dir, app=app)
    first = run_cli("run", cwd=project_dir)
    assert "5 / 5 observed · 1 missing" in first.out
    (project_dir / "fixed").write_text("")
    second = run_cli("run", cwd=project_dir)
    assert _exec_counts(second.out) == (5, 1)
    assert "6 / 6 observed · 0 missing" in second.out


def _judgment_counts(out: str) -> tuple[int, int]:
    m = re.search(r"judgments (\d+) hits · (\d+) misses", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def test_a_metadata_edit_re_judges_custom_evaluators_only(project_dir: Path) -> None:
    """A custom evaluator is handed the case's metadata, so its verdict is cached under it:
    flipping a flag it reads judges the case again (it was served from the cache, and the
    gate allowed on the old verdicts). Built-in evaluators never read metadata: their
    verdicts stay cached."""
    cases = [{**c, "metadata": {"lenient": True}} for c in labelled_cases(6)]
    evaluators = """
      - type: custom
        criterion: lenient_ok
        function: checks:lenient
      - type: exact_match
        criterion: exact_label
        field: label
    """
    app = APP.replace('{"label": "ok"}', '{"label": "bad"}')
    checks = ("def lenient(output, case):\n"
              "    return bool(case.metadata.get('lenient')) or output['label'] == 'ok'\n")
    release = "version: 1\nrules:\n  - id: floor\n    metric: lenient_ok\n    min: 0.5\n"
    write_project(project_dir, app=app, cases=cases, evaluators=evaluators, release=release,
                  extra_files={"checks.py": checks})
    first = run_cli("run", cwd=project_dir)
    assert first.code == 0, first.text  # every case lenient: all pass
    suite = project_dir / "data" / "cases.jsonl"
    suite.write_text(suite.read_text().replace('"lenient": true', '"lenient": false'))
    second = run_cli("run", cwd=project_dir)
    assert second.code == 1, second.text  # none lenient now, and every label is "bad"
    assert _exec_counts(second.out) == (6, 0)
    assert _judgment_counts(second.out) == (6, 6)  # exact_label's 6 hits, lenient_ok's 6 misses
    third = run_cli("run", cwd=project_dir)
    assert third.code == 1 and _judgment_counts(third.out) == (12, 0), third.text


def test_the_judgment_key_holds_metadata_only_for_an_evaluator_that_reads_it() -> None:
    from oloproof.engine.pipeline import Engine, EngineCase

    with_md = EngineCase("q1", {"n": 1}, {"label": "ok"}, {"lenient": True}, 0)
    without = EngineCase("q1", {"n": 1}, {"label": "ok"}, None, 0)
    out = '{"label":"ok"}'
    # The key every earlier version made, for an evaluator that does not read metadata, and
    # for a case without metadata whoever reads it: caches made before stay valid.
    plain = Engine.judge_key("sha256:e", without, out)
    assert Engine.judge_key("sha256:e", with_md, out) == plain
    assert Engine.judge_key("sha256:e", without, out, metadata=True) == plain
    assert Engine.judge_key("sha256:e", with_md, out, metadata=True) != plain
    other = EngineCase("q1", {"n": 1}, {"label": "ok"}, {"lenient": False}, 0)
    assert (Engine.judge_key("sha256:e", other, out, metadata=True)
            != Engine.judge_key("sha256:e", with_md, out, metadata=True))
