"""An unchanged rerun reads its configuration from the snapshot (no pydantic, no PyYAML),
decides the same, and any edit brings the validation, and its errors, back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import events, labelled_cases, run_cli, write_project
from tests.store._support import RELEASE

APP = """
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 4 else "no"}
"""


VALIDATION = {"pydantic", "pydantic_core", "yaml", "oloproof.project.models",
              "oloproof.project.loader"}


def _modules_after(args: list[str], cwd: Path) -> set[str]:
    probe = (
        "import sys\n"
        "from oloproof.cli.main import main\n"
        "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as exc:\n    code = exc.code\n"
        "sys.stderr.write('\\nCODE ' + str(code) + '\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *args], cwd=cwd, capture_output=True,
                         check=False, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return set(out.stderr.rsplit("MODULES ", 1)[1].split())


def _decided(out: str) -> tuple[object, object]:
    finished = [e for e in events(out) if e["type"] == "run_finished"][-1]
    return finished["exit_code"], finished["decisions"]


def test_an_unchanged_rerun_skips_validation_and_an_edit_brings_it_back(tmp_path: Path) -> None:
    write_project(tmp_path, app=APP, cases=labelled_cases(40), release=RELEASE)
    first = run_cli("run", "--json", cwd=tmp_path)
    assert first.code == 0, first.text
    # The first run validated (and kept the snapshot once the store existed): the second
    # one, unchanged, imports no validation at all and decides the same from the cache.
    loaded = _modules_after(["run"], tmp_path)
    assert not VALIDATION & loaded, VALIDATION & loaded
    # Every result is cached too: no event loop, no thread pool (engine.run_cached).
    assert not {"asyncio", "concurrent.futures", "ssl"} & loaded
    again = run_cli("run", "--json", cwd=tmp_path)
    assert again.code == 0 and _decided(again.out) == _decided(first.out)
    cached = [e["from_cache"] for e in events(again.out) if "from_cache" in e]
    assert len(cached) >= 40 and all(cached)
    gated = _modules_after(["gate", "latest"], tmp_path)
    assert not VALIDATION & gated, VALIDATION & gated
    gate = run_cli("gate", "latest", "--json", cwd=tmp_path)
    assert gate.code == 0 and json.loads(gate.out)["decisions"][0]["state"] == "PASS"

    # Break the policy: the validation is back, with its one clear error.
    (tmp_path / "release.yaml").write_text(RELEASE.replace("min: 0.5", "min: 1.5"))
    broken = run_cli("run", cwd=tmp_path)
    assert broken.code == 2, broken.text
    assert "release.yaml:5: rules[0].min:" in broken.err and "Traceback" not in broken.err
    # A comment changes nothing but the bytes: validated again, then kept again.
    (tmp_path / "release.yaml").write_text(RELEASE + "# reviewed\n")
    assert VALIDATION & _modules_after(["run"], tmp_path)
    assert not VALIDATION & _modules_after(["run"], tmp_path)

    # Without the snapshots, the same decisions (validated again).
    for path in (tmp_path / ".oloproof" / "snapshots").iterdir():
        path.unlink()
    plain = run_cli("gate", "latest", "--json", cwd=tmp_path)
    assert plain.code == 0 and json.loads(plain.out) == json.loads(
        run_cli("gate", "latest", "--json", cwd=tmp_path).out)


def test_inspect_plan_and_report_read_the_stored_policy_as_gate_does(tmp_path: Path) -> None:
    """Issue 31: `inspect latest` validated the run's stored policy with pydantic on every
    call (174 ms against gate's 37 ms), and `plan` imported pydantic at module level. Each
    now reads the policy's snapshot the run kept; without it, each validates and answers the
    same."""
    write_project(tmp_path, app=APP, cases=labelled_cases(40), release=RELEASE)
    assert run_cli("run", cwd=tmp_path).code == 0
    commands = (["inspect", "latest", "--json"], ["inspect", "latest", "--judges", "--json"],
                ["plan", "latest", "--run", "--json"],
                ["report", "latest", "-o", str(tmp_path / "r.html")])
    kept = {}
    for args in commands:
        loaded = _modules_after(args, tmp_path)
        assert not VALIDATION & loaded, (args, VALIDATION & loaded)
        done = run_cli(*args, cwd=tmp_path)
        assert done.code == 0, (args, done.text)
        kept[tuple(args)] = done.out
    for path in (tmp_path / ".oloproof" / "snapshots").glob("policy-*.json"):
        path.unlink()
    for args in commands:
        if args[0] == "report":
            continue  # the page names the time it was made
        assert VALIDATION & _modules_after(args, tmp_path), args  # validated, then
        assert run_cli(*args, cwd=tmp_path).out == kept[tuple(args)], args
