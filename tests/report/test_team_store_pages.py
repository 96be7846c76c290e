"""The report and the viewer on a team store (PostgreSQL): the light outcome index, a page of
cases, a case by key, the discordant cases and the report's cap read the same on both
backends (the SQL is the one both databases speak)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import run_cli, write_project
from tests.report._viewer import running_viewer

pytestmark = pytest.mark.slow

APP = """
from oloproof import system

@system(name="pages", version="1")
def answer(case_input):
    n = case_input["n"]
    if n % 9 == 4:
        raise RuntimeError("no answer for " + str(n))
    return {"label": "ok" if n % 3 else "no", "days": n % 4}
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: absolute_error
  criterion: days_error
  field: days
  range: [0, 10]
"""


def _pages(root: Path, env: dict[str, str]) -> dict[str, Any]:
    """What the report and the viewer show of the project's latest run and comparison."""
    runs = json.loads(run_cli("runs", "--json", cwd=root, env=env).out)
    run_id, baseline = runs[0]["id"], runs[1]["id"]
    made = run_cli("compare", run_id, baseline, "--json", cwd=root, env=env)
    cmp_id = json.loads(made.out)["comparison_id"]
    out: dict[str, Any] = {}
    result = run_cli("report", run_id, "--cases", "7", "-o", "-", cwd=root, env=env)
    assert result.code == 0, result.err
    out["report rows"] = result.out.count('class="case-row"')
    out["left out"] = "Left out: " in result.out
    result = run_cli("report", cmp_id, "-o", "-", cwd=root, env=env)
    assert result.code == 0, result.err
    out["discordant"] = result.out.count("<td class=\"case-id\">")
    with running_viewer(root, env=env) as viewer:
        auth = viewer.auth()
        page = httpx.get(f"{viewer.base}runs/{run_id}?outcome=failed", headers=auth)
        assert page.status_code == 200, page.text[:500]
        out["failed on the page"] = page.text.count('class="case-row"')
        out["missing"] = httpx.get(f"{viewer.base}runs/{run_id}?outcome=missing",
                                   headers=auth).text.count('class="case-row"')
        case = httpx.get(f"{viewer.base}runs/{run_id}/case?id=c04", headers=auth)
        assert case.status_code == 200
        out["case error shown"] = "no answer for 4" in case.text
        out["comparison"] = httpx.get(f"{viewer.base}comparisons/{cmp_id}",
                                      headers=auth).status_code
    return out


def test_the_pages_read_the_same_on_both_stores(tmp_path: Path, pg_url: str) -> None:
    found = {}
    for name, env in (("sqlite", {}), ("postgresql", {"OLOPROOF_STORE": pg_url})):
        root = write_project(
            tmp_path / name, app=APP, evaluators=EVALUATORS,
            cases=[{"id": f"c{n:02d}", "input": {"n": n}, "expected": {"label": "ok", "days": 1}}
                   for n in range(30)],
        )
        assert run_cli("run", cwd=root, env=env).code in (0, 1, 3)
        (root / "app.py").write_text(APP.replace("n % 3", "n % 5"))
        assert run_cli("run", cwd=root, env=env).code in (0, 1, 3)
        found[name] = _pages(root, env)
    assert found["sqlite"] == found["postgresql"]
    assert found["sqlite"]["report rows"] == 7 and found["sqlite"]["left out"]
    assert found["sqlite"]["failed on the page"] > 0 and found["sqlite"]["missing"] == 3
    assert found["sqlite"]["discordant"] > 0
    assert found["sqlite"]["case error shown"] and found["sqlite"]["comparison"] == 200
