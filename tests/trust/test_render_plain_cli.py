"""Through the real CLI, with standard output a pipe: every command that prints a report
writes it in Oloproof's plain format (render/plain.py) and never imports rich, which is
for the terminal (start-up, issue 16; own format, issue 31)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import run_cli

# The command in this process; at exit, the rich modules it imported.
PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write(
    "\\nRICH " + " ".join(sorted(m for m in sys.modules if m.split(".")[0] == "rich")) + "\\n"))
sys.argv = ["oloproof", *sys.argv[1:]]
from oloproof.cli.main import entry
entry()
"""


def _printed(root: Path, *args: str) -> tuple[int, str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=root, env=env, text=True,
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, proc.stderr.rsplit("\nRICH ", 1)[1].split()


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    base = tmp_path_factory.mktemp("plain")
    root = base / "compare"
    assert run_cli("init", str(root), "--example", "compare", cwd=base).code == 0
    assert run_cli("run", "--config", "baseline.yaml", cwd=root).code == 3
    baseline = json.loads(run_cli("runs", "--json", cwd=root).out)[0]["id"]
    assert run_cli("run", cwd=root).code == 0
    assert run_cli("compare", "latest", baseline, cwd=root).code == 3
    cmp_id = json.loads(run_cli("compare", "latest", baseline, "--json", cwd=root).out)[
        "comparison_id"]
    return root, baseline, cmp_id


def test_reports_in_a_pipe_import_no_rich(compared: tuple[Path, str, str]) -> None:
    root, baseline, cmp_id = compared
    commands = [
        (["run"], "Run run_"), (["gate", "latest"], "Gate      ALLOW"), (["runs"], "Runs\n┏"),
        (["inspect", "latest"], "Metrics\n┏"), (["inspect", "latest", "--failures"], "Failures"),
        (["inspect", "latest", "--case", "refund_00"], "Judgments\n┏"),
        (["compare", "latest", baseline], "Paired metrics"), (["inspect", cmp_id], cmp_id),
        (["plan", baseline, "--run"], "exact-label-floor"),
    ]
    for args, shown in commands:
        code, out, rich = _printed(root, *args)
        assert code in (0, 3), (args, out)
        assert shown in out, (args, out)
        assert rich == [], (args, rich[:5])
        assert "\x1b" not in out and all(x == x.rstrip() for x in out.splitlines()), args
