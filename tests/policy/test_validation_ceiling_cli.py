"""A scored judge's max_mean_abs_diff at or over its scale's width could not fail: no two
scores on the scale are further apart, so the bound validated any judge, one that always
gave the opposite end of the scale included. It is refused where the policy is loaded
(exit 2, naming the file, line and key), by run, by gate --policy and by the Python API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer

import oloproof
from oloproof.errors import ConfigError

ENV = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}

POLICY = """version: 1
rules:
  - id: quality-validated
    metric: quality
    min: 3.95
    judge_validation: {{min_labels: 1, max_mean_abs_diff: {ceiling}}}
"""


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def test_a_ceiling_no_judge_can_exceed_is_refused(tmp_path: Path, srv: FakeServer) -> None:
    project = tmp_path / "judged"
    assert run_cli("init", str(project), "--example", "judge", cwd=tmp_path).code == 0
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace("http://127.0.0.1:8787",
                                                 srv.anthropic_base_url))
    assert run_cli("run", cwd=project, env=ENV).code == 4
    for ceiling in ("4", "4.5", "100"):
        (project / "wide.yaml").write_text(POLICY.format(ceiling=ceiling))
        for args in (("run", "--policy", "wide.yaml"), ("gate", "latest", "--policy", "wide.yaml")):
            result = run_cli(*args, cwd=project, env=ENV)
            assert result.code == 2, result.text
            assert result.err.startswith(
                "oloproof " + args[0] + ": error: wide.yaml:6: rules[0].judge_validation."
                f"max_mean_abs_diff: max_mean_abs_diff: {ceiling} cannot fail on 'quality''s"
                " scale [1, 5]"), result.err
            assert "(accepted: a number of points under 4" in result.err
            assert "Traceback" not in result.text
        with pytest.raises(ConfigError, match="cannot fail on 'quality''s scale"):
            oloproof.read_run("latest", project=project, policy=project / "wide.yaml")
    # Under the width, it is a ceiling a judge can exceed: accepted as before.
    (project / "wide.yaml").write_text(POLICY.format(ceiling="3.99"))
    result = run_cli("gate", "latest", "--policy", "wide.yaml", cwd=project)
    assert result.code in (1, 3, 4), result.text
