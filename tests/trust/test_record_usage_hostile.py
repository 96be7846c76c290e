"""``current_case().record_usage`` takes what was spent, and nothing that cannot be: a NaN
or infinite cost, a negative, fractional or huge token count, a boolean raise
``ValueError`` in the system, so the case is recorded as an error naming the argument;
before, a NaN cost was stored and ``plan`` priced the suite at ``$nan``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project

from oloproof._context import CaseContext


@pytest.mark.parametrize(
    "kwargs",
    [{"cost_usd": math.nan}, {"cost_usd": math.inf}, {"cost_usd": -0.01},
     {"input_tokens": -1}, {"output_tokens": 2.5}, {"input_tokens": True},
     {"input_tokens": 2**60}],
)
def test_figures_that_cannot_be_spent_are_refused(kwargs: dict[str, object]) -> None:
    ctx = CaseContext("c1", {})
    name, value = next(iter(kwargs.items()))
    with pytest.raises(ValueError, match="record_usage: token counts must be") as caught:
        ctx.record_usage(**kwargs)  # type: ignore[arg-type]
    assert f"{name}={value!r}" in str(caught.value)
    assert ctx.usage is None


def test_real_figures_add_up() -> None:
    ctx = CaseContext("c1", {})
    ctx.record_usage(10, 5.0, 0.25)
    ctx.record_usage(output_tokens=1)
    assert (ctx.usage.input_tokens, ctx.usage.output_tokens, ctx.usage.cost_usd) == (10, 6, 0.25)  # type: ignore[union-attr]


def test_a_nan_cost_is_the_case_s_error_not_a_stored_figure(project_dir: Path) -> None:
    app = """
    from oloproof import current_case, system

    @system(name="s", version="1")
    def answer(x):
        current_case().record_usage(input_tokens=3, cost_usd=float("nan"))
        return {"label": "ok"}
    """
    cases = [{"id": f"c{i}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(3)]
    write_project(project_dir, app=app, cases=cases)
    result = run_cli("run", cwd=project_dir)
    assert result.code == 5, result.text  # every call failed: the run is incomplete
    shown = run_cli("inspect", "latest", "--case", "c0", "--json", cwd=project_dir)
    assert "record_usage: token counts must be whole numbers" in shown.out
    assert "cost_usd=nan" in shown.out
    assert "NaN" not in json.dumps(json.loads(shown.out).get("usage"))
