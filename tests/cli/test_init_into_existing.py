"""oloproof init into a directory the user already has: their .gitignore, paths it cannot write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import run_cli


def test_init_force_keeps_the_users_gitignore(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("node_modules/\n*.secret\n")
    r = run_cli("init", str(repo), "--force", "--example", "support_bot", cwd=tmp_path)
    assert r.code == 0, r.text
    lines = (repo / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["node_modules/", "*.secret"]
    assert ".oloproof/" in lines and lines.count(".oloproof/") == 1
    again = run_cli("init", str(repo), "--force", "--example", "support_bot", cwd=tmp_path)
    assert again.code == 0, again.text
    assert (repo / ".gitignore").read_text().splitlines() == lines


def test_init_into_a_path_it_cannot_write_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    r = run_cli("init", "afile/sub", cwd=tmp_path)
    assert r.code == 2, r.text
    assert "internal error" not in r.err
    assert "afile/sub" in r.err and "Not a directory" in r.err


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to nobody with setpriv")
def test_init_into_a_read_only_directory_is_bad_input(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    tmp_path.chmod(0o755)
    import shutil
    import subprocess

    from tests.conftest import OLOPROOF

    if not shutil.which("setpriv"):
        pytest.skip("setpriv missing")
    p = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *OLOPROOF, "init", "ro"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert "Permission denied" in p.stderr and "internal error" not in p.stderr
    assert p.stderr.count("\n") == 1


def test_init_next_line_quotes_a_directory_with_spaces(tmp_path: Path) -> None:
    r = run_cli("init", "my evals ü", cwd=tmp_path)
    assert r.code == 0, r.text
    assert "cd 'my evals ü' && oloproof run" in r.out
