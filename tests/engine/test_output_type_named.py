"""An output JSON cannot hold names its type with its module: NumPy 2 names its boolean
'bool', so an output holding numpy.bool_(True) failed every case with 'Object of type bool
is not JSON serializable', which reads as if a Python bool were refused."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

from oloproof._json import output_snapshot


def test_a_numpy_boolean_in_an_output_is_named_as_numpy(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    app = """
    import numpy
    from oloproof import system

    @system(name="s", version="1")
    def answer(case_input):
        return {"label": "ok", "sure": numpy.bool_(True)}
    """
    project = write_project(tmp_path / "p", app=app, cases=labelled_cases(4))
    result = run_cli("run", cwd=project)
    assert result.code == 5, result.out
    assert ("Object of type numpy.bool is not JSON serializable: a NumPy value, turn it into"
            " a Python one with .item() or .tolist()") in result.out


def test_other_types_are_named_with_their_module() -> None:
    with pytest.raises(TypeError, match="Object of type decimal.Decimal is not JSON"):
        output_snapshot({"v": Decimal(1)})
    with pytest.raises(TypeError, match=r"Object of type set is not JSON serializable$"):
        output_snapshot([{1}])
