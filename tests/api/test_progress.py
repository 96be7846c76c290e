"""oloproof.run()'s progress bar (issue 30): when it is shown, and what it says.

In a notebook it is an output area updated in place (IPython's display ids); the kernel test
runs ``oloproof.run()`` in a real IPython kernel (ipykernel, through jupyter_client) and reads
the messages a notebook front end would render."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, write_project

import oloproof
from oloproof.render.progress import in_notebook_kernel, progress_mode

# 20 cases, 0.03 s each, one at a time: the run lasts long enough for several frames.
APP = """
import time

def answer(case_input):
    time.sleep(0.03)
    return {"label": "ok" if case_input["n"] % 5 else "no"}
"""


def _wilson_16_of_20() -> str:
    """16 of 20 as the bar prints it: statsmodels' Wilson interval, rounded outward."""
    import math

    from statsmodels.stats.proportion import proportion_confint

    lower, upper = proportion_confint(16, 20, alpha=0.05, method="wilson")
    return f"exact_label 80.0% [{math.floor(lower * 1000) / 10}%, {math.ceil(upper * 1000) / 10}%]"


RELEASE = "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.95}\n"


def _project(root: Path) -> Path:
    return write_project(root, app=APP, cases=labelled_cases(20), release=RELEASE,
                         concurrency=(1, 1))


@pytest.mark.parametrize(
    ("explicit", "environ", "expected"),
    [
        (None, {}, None),  # a script or a test suite: nothing, as before
        (None, {"CI": "true"}, None),
        (None, {"OLOPROOF_PROGRESS": "1"}, "stream"),
        (None, {"OLOPROOF_PROGRESS": "1", "CI": "true"}, "stream"),  # asked for: shown
        (None, {"OLOPROOF_PROGRESS": "0"}, None),
        (True, {"OLOPROOF_PROGRESS": "0"}, "stream"),  # the argument wins
        (False, {"OLOPROOF_PROGRESS": "1"}, None),
    ],
)
def test_when_the_bar_is_shown_outside_a_notebook(
    explicit: bool | None, environ: dict[str, str], expected: str | None
) -> None:
    assert not in_notebook_kernel()  # pytest is no IPython kernel
    assert progress_mode(explicit, environ) == expected


def test_a_script_gets_no_bar_unless_it_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("OLOPROOF_PROGRESS", raising=False)
    root = _project(tmp_path / "p")
    assert oloproof.run(root).exit_code == 1
    assert capsys.readouterr() == ("", "")  # the API prints nothing by default

    result = oloproof.run(root, use_cache=False, progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    # Not a terminal: a line at each tenth of the run, then the end (no carriage returns).
    assert "\r" not in err and 3 <= len(lines) <= 12, lines
    assert lines[-2].startswith("[####################] 20/20 cases · 0 cached · 0 errors")
    # 16 of 20, the provisional Wilson interval (the live view's), not the decision's CP.
    assert lines[-2].endswith(_wilson_16_of_20())
    assert lines[-1] == (f"Run {result.run_id} [DECIDED/COMPLETE]: gate BLOCK (exit 1)")


def test_a_configuration_error_draws_no_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "p")
    (root / "release.yaml").write_text("version: 1\nrules:\n  - {id: x, metric: nope, min: 0.5}\n")
    with pytest.raises(oloproof.ConfigError):
        oloproof.run(root, progress=True)
    assert capsys.readouterr().err == ""


KERNEL_CODE = """
import os
import oloproof
{setup}
result = oloproof.run({root!r}, use_cache=False{extra})
print("exit", result.exit_code, result.run_id)
"""


def _cell(kc: object, code: str) -> tuple[list[dict], str]:
    """Execute one cell; return its display messages and what it printed."""
    msg_id = kc.execute(code)  # type: ignore[attr-defined]
    displays: list[dict] = []
    printed = ""
    while True:
        msg = kc.get_iopub_msg(timeout=120)  # type: ignore[attr-defined]
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            return displays, printed
        if kind in ("display_data", "update_display_data"):
            displays.append({"type": kind, **content})
        elif kind == "stream" and content["name"] == "stdout":
            printed += content["text"]
        elif kind == "error":
            raise AssertionError(f"{content['ename']}: {content['evalue']}")


@pytest.mark.slow
def test_a_notebook_kernel_shows_one_bar_updated_in_place(tmp_path: Path) -> None:
    manager = pytest.importorskip("jupyter_client.manager")
    root = _project(tmp_path / "p")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "OLOPROOF_PROGRESS")}
    km, kc = manager.start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    try:
        displays, printed = _cell(kc, KERNEL_CODE.format(root=str(root), setup="", extra=""))
        run_id = printed.split()[-1]
        assert printed.startswith("exit 1 run_"), printed
        # One output area: a display, then updates of that same display id.
        assert displays[0]["type"] == "display_data"
        ids = {d["transient"]["display_id"] for d in displays}
        assert len(ids) == 1 and len(displays) >= 2, displays
        assert all(d["type"] == "update_display_data" for d in displays[1:])
        counts = [int(d["data"]["text/plain"].split("] ", 1)[1].split("/")[0]) for d in displays]
        assert counts == sorted(counts) and counts[0] < 20 and counts[-1] == 20, counts
        last = displays[-1]["data"]
        assert last["text/plain"].endswith(
            f"{_wilson_16_of_20()}\nRun {run_id} [DECIDED/COMPLETE]: gate BLOCK (exit 1)")
        assert '<progress value="20" max="20"' in last["text/html"]

        # The same kernel with CI set (a notebook executed in a CI job), or progress=False:
        # no output area at all.
        for setup, extra in (("os.environ['CI'] = 'true'", ""),
                             ("os.environ.pop('CI', None)", ", progress=False")):
            displays, printed = _cell(kc, KERNEL_CODE.format(root=str(root), setup=setup,
                                                             extra=extra))
            assert printed.startswith("exit 1 run_") and displays == [], (setup, displays)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
