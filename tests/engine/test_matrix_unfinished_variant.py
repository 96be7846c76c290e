"""A matrix variant whose run did not finish is neither compared nor ranked: its estimate is
over the cases that happened to finish, and `plan MX` sized more cases for "the top two"
from it ("over 10 pairs") where `plan` on the same stopped run refuses. Two real runs of one
project in one store: the first whole, the second stopped after 10 cases."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import labelled_cases, write_project

from oloproof.analysis.matrix import conclude_matrix, plan_matrix
from oloproof.api._run import execute, load
from oloproof.runner.stop import StopRequest
from oloproof.store.db import open_store_readonly
from oloproof.store.location import locate

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    return {"label": x.get("label", "ok")}
"""


def test_an_unfinished_variant_is_not_ranked_nor_planned(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40), concurrency=(1, 1))
    whole = execute(load(root))
    stop, seen = StopRequest(), []

    def sink(event: object) -> None:
        if type(event).__name__ == "CaseExecuted":
            seen.append(event)
            if len(seen) == 10:
                stop("interrupted (Ctrl-C)")

    root.joinpath("app.py").write_text(APP.replace('version="1"', 'version="2"'))
    stopped = execute(load(root), sinks=[sink], stop=stop)
    assert (whole.completeness, stopped.completeness) == ("COMPLETE", "PARTIAL")
    estimates = {
        "whole": {"exact_label": whole.metrics["exact_label"].estimate},
        "stopped": {"exact_label": stopped.metrics["exact_label"].estimate},
    }
    assert estimates["stopped"]["exact_label"] is not None  # it has one, over 10 cases
    conn = open_store_readonly(locate(root / "oloproof.yaml"))
    try:
        _, warnings, ranking = conclude_matrix(
            conn, [("whole", whole.run_id), ("stopped", stopped.run_id)], "whole", 0.95,
            {"exact_label": "higher"}, estimates,
        )
        assert [r["variant"] for r in ranking["exact_label"]] == ["whole"]
        assert any("stopped" in w and "not compared" in w for w in warnings), warnings
        doc = {"matrix_id": "mx_test", "confidence_level": 0.95, "ranking": ranking,
               "variants": [{"name": "whole", "run_id": whole.run_id, "state": "DECIDED/COMPLETE"},
                            {"name": "stopped", "run_id": stopped.run_id,
                             "state": "RUN_ERROR/PARTIAL"}]}
        [metric] = plan_matrix(conn, doc)["metrics"]
    finally:
        conn.close()
    assert metric["status"] == "not_computable" and "top" not in metric, metric
