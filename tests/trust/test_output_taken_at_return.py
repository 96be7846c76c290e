"""A Python system's output is taken when the function returns, in the thread (or on the
loop) that ran it: what is stored, what the evaluators judge and the text the judgments
are keyed on are one value (systems/callable.py, oloproof._json.output_snapshot). A
function that returns an object it goes on changing, or a dict that lies about what it
holds, can no longer pass on outputs nobody stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.trust._support import SMALL_RELEASE, cases_by_id, cli, no_traceback, project, runs

SHARED = {
    # One result object for every call, as a careless module-level cache would be: set
    # to "ok" while working, to the real answer (right for 3 cases in 10) at the end.
    "sync": """
        import time

        RESULT = {}

        def answer(inp):
            RESULT["label"] = "ok"
            time.sleep(0.005)
            RESULT["label"] = "ok" if inp["n"] % 10 < 3 else "bad"
            return RESULT
    """,
    "async": """
        import asyncio

        RESULT = {}

        async def answer(inp):
            RESULT["label"] = "ok"
            await asyncio.sleep(0.005)
            RESULT["label"] = "ok" if inp["n"] % 10 < 3 else "bad"
            return RESULT
    """,
}


@pytest.mark.parametrize("kind", sorted(SHARED))
def test_a_shared_result_object_is_judged_and_stored_as_it_was_returned(
    tmp_path: Path, kind: str
) -> None:
    root = project(tmp_path / "p", SHARED[kind], n=100, concurrency=4)
    result = cli(root, "run", timeout=90)
    no_traceback(result)
    # 30 of 100 right: far below the 50% floor. Taken after the call, the outputs read
    # "ok" nearly everywhere (the next calls had set it again) and the gate allowed.
    assert result.code == 1, result.text
    [run] = runs(root)
    assert run["gate"] == "BLOCK"
    cases = cases_by_id(root)
    assert len(cases) == 100
    for case_id, case in cases.items():
        passed = case["judgments"]["exact_label"]["passed"]
        assert passed is (case["output"]["label"] == "ok"), (case_id, case)
    assert sum(c["output"]["label"] == "ok" for c in cases.values()) < 50


def test_a_dict_that_lies_about_its_items_is_judged_on_what_it_encodes_to(tmp_path: Path) -> None:
    app = """
        class Lying(dict):
            def __getitem__(self, key):
                return "ok"

            def get(self, key, default=None):
                return "ok"

        def answer(inp):
            return Lying(label="wrong")
    """
    checks = """
        def plain(output):
            return type(output) is dict and output["label"] == "ok"
    """
    evaluators = (
        "  - type: exact_match\n    criterion: exact_label\n    field: label\n"
        "  - type: custom\n    criterion: plain\n    function: checks:plain\n"
    )
    root = project(tmp_path / "p", app, n=6, evaluators=evaluators, release=SMALL_RELEASE,
                   files={"checks.py": checks})
    result = cli(root, "run", timeout=60)
    no_traceback(result)
    assert result.code == 1, result.text  # 0 of 6: a FAIL of the 80% floor
    for case in cases_by_id(root).values():
        assert case["output"] == {"label": "wrong"}
        assert case["judgments"]["exact_label"]["passed"] is False
        assert case["judgments"]["plain"]["passed"] is False
