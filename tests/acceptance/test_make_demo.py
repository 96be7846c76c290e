"""``make demo`` as a new user meets it: the repository's Makefile, run by make, with the venv
it would have built stood in for by one whose ``bin/oloproof`` runs this checkout (building a
real one installs packages: a fresh clone does that, once, by hand).

Every command it prints must work when copied as printed, from where it was printed: the
demo ran ``init`` loudly, whose ``Next:  cd .demo/support_bot && oloproof run`` names a
command that is not on the PATH of someone who has only run ``make demo``, and the run's own
hint (``oloproof plan run_… --run``) is the same; the demo now says how to get there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _make_demo(root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS", "MAKEFLAGS")}
    return subprocess.run(["make", "--no-print-directory", "demo"], cwd=root, env=env,
                          capture_output=True, text=True, check=False, timeout=300)


@pytest.mark.skipif(shutil.which("make") is None, reason="make missing")
def test_make_demo_prints_only_commands_that_work_as_printed(tmp_path: Path) -> None:
    root = tmp_path / "clone"
    root.mkdir()
    shutil.copy(REPO / "Makefile", root / "Makefile")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "activate").write_text(
        f'PATH="{venv_bin}:$PATH"\nexport PATH\n'
    )
    oloproof = venv_bin / "oloproof"
    oloproof.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m oloproof.cli.main "$@"\n')
    oloproof.chmod(0o755)
    (root / ".venv" / ".installed").touch()  # newer than pyproject.toml: make installs nothing

    first = _make_demo(root)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Traceback" not in first.stderr
    out = first.stdout
    assert "Cache     executions 0 hits · 18 misses   judgments 0 hits · 54 misses" in out
    assert "oloproof run exited with code 3" in out

    # Each command the demo shows, run as printed, from the directory make ran in (bash, with
    # the PATH of someone who has only run `make demo`: no oloproof on it).
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if not (Path(p) / "oloproof").exists())
    env = {**os.environ, "PATH": path}
    env.pop("OLOPROOF_DEBUG", None)
    for suggested in re.findall(r"(?:Next:  |try: )(cd .+)$", out, flags=re.MULTILINE):
        done = subprocess.run(["bash", "-c", suggested], cwd=root, env=env,
                              capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode in (0, 3), (suggested, done.stderr)
    assert "Copied the support_bot example into .demo/support_bot/" in out
    report = re.search(r"^HTML report: (\S+)", out, flags=re.MULTILINE)
    assert report and (root / report.group(1)).is_file(), out
    # The run's own hint, `oloproof plan run_… --run`, works after the line the demo ends on.
    activate = re.search(r"^To type the oloproof commands above as they are printed: (.+)$",
                         out, flags=re.MULTILINE)
    assert activate, out
    plan = re.search(r"^    (oloproof plan run_[0-9A-Z]{26} --run)$", out, flags=re.MULTILINE)
    assert plan, out
    done = subprocess.run(["bash", "-c", f"{activate.group(1)} && {plan.group(1)}"], cwd=root,
                          env=env, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "about 1614 more cases would decide it" in done.stdout

    again = _make_demo(root)
    assert again.returncode == 0, again.stderr
    assert "Copied" not in again.stdout
    assert "Cache     executions 18 hits · 0 misses   judgments 54 hits · 0 misses" in again.stdout
