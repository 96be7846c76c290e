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


def test_init_force_writes_through_a_gitignore_that_is_a_link(tmp_path: Path) -> None:
    # A .gitignore kept in a dotfiles folder and linked into the repository: the link stays
    # a link, and the lines are added to the file it points to.
    shared = tmp_path / "dotfiles" / "gitignore"
    shared.parent.mkdir()
    shared.write_text("node_modules/\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").symlink_to(shared)
    r = run_cli("init", str(repo), "--force", "--example", "support_bot", cwd=tmp_path)
    assert r.code == 0, r.text
    assert (repo / ".gitignore").is_symlink()
    assert os.readlink(repo / ".gitignore") == str(shared)
    lines = shared.read_text().splitlines()
    assert lines[0] == "node_modules/" and lines.count(".oloproof/") == 1
    # All or nothing still: the file the link points to is put back when init fails.
    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitignore").symlink_to(tmp_path / "dotfiles" / "second")
    (tmp_path / "dotfiles" / "second").write_bytes(b"*.log")
    (other / "release.yaml").mkdir()  # a folder where the example has a file
    failed = run_cli("init", str(other), "--force", "--example", "support_bot", cwd=tmp_path)
    assert failed.code == 2 and "nothing was changed" in failed.err, failed.text
    assert (tmp_path / "dotfiles" / "second").read_bytes() == b"*.log"


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


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to nobody with setpriv")
@pytest.mark.parametrize("where", ["noread", "noread/sub"])
def test_init_into_a_directory_it_cannot_read_is_bad_input(tmp_path: Path, where: str) -> None:
    """A directory of mode 000 (or a path under one): Path.exists and iterdir raised
    PermissionError before the copy, and that was `internal error: PermissionError`, exit 70."""
    import shutil
    import subprocess

    from tests.conftest import OLOPROOF

    if not shutil.which("setpriv"):
        pytest.skip("setpriv missing")
    (tmp_path / "noread").mkdir(mode=0o000)
    tmp_path.chmod(0o777)
    p = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *OLOPROOF, "init", where],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr == (
        f"oloproof init: error: cannot read {where}: Permission denied"
        " (give a directory you may write, or one that can be created)\n"
    )


def test_init_force_keeps_a_gitignore_that_is_not_utf8_byte_for_byte(tmp_path: Path) -> None:
    """A .gitignore in Latin-1 (git reads bytes) ended `init --force` in
    `internal error: UnicodeDecodeError`, exit 70, after nothing was copied; a CRLF one was
    rewritten with LF lines. Both are kept as they were, the project's lines appended."""
    latin1 = tmp_path / "latin1"
    latin1.mkdir()
    (latin1 / ".gitignore").write_bytes(b"caf\xe9/\n*.secret")
    r = run_cli("init", "latin1", "--force", "--example", "support_bot", cwd=tmp_path)
    assert r.code == 0, r.text
    assert (latin1 / ".gitignore").read_bytes() == b"caf\xe9/\n*.secret\n.oloproof/\n__pycache__/\n"
    assert (latin1 / "oloproof.yaml").is_file()

    crlf = tmp_path / "crlf"
    crlf.mkdir()
    (crlf / ".gitignore").write_bytes(b"node_modules/\r\n__pycache__/\r\n")
    r = run_cli("init", "crlf", "--force", cwd=tmp_path)
    assert r.code == 0, r.text
    assert (crlf / ".gitignore").read_bytes() == b"node_modules/\r\n__pycache__/\r\n.oloproof/\r\n"


def test_init_into_the_current_directory_names_it_so(tmp_path: Path) -> None:
    """`init .` printed "Created the 'starter' project in .." and "Next:  cd . && oloproof
    run": a doubled dot and a `cd` to where the user already is."""
    r = run_cli("init", ".", cwd=tmp_path)
    assert r.code == 0, r.text
    assert r.out == ("Created the 'starter' project in the current directory.\n"
                     "Next:  oloproof run\n"), r.out
    assert (tmp_path / "oloproof.yaml").is_file()


def test_init_next_line_for_a_name_that_starts_with_a_dash(tmp_path: Path) -> None:
    """`cd -proj` reads the name as options (`cd: -p: invalid option`): the hint says ./-proj."""
    import subprocess

    r = run_cli("init", "--", "-proj", cwd=tmp_path)
    assert r.code == 0, r.text
    assert "Next:  cd ./-proj && oloproof run\n" in r.out
    cd = r.out.split("Next:  ", 1)[1].split(" && ")[0]
    assert subprocess.run(["bash", "-c", cd], cwd=tmp_path, check=False).returncode == 0


def test_every_example_ignores_what_running_it_leaves_behind(tmp_path: Path) -> None:
    """The code and sequential examples shipped Python modules and a .gitignore of
    `.oloproof/` alone: after their first run, `git status` listed `__pycache__/` beside the
    project's files. Every example with Python in it now ignores it, as the others did."""
    listed = run_cli("init", "--example", "list", cwd=tmp_path)
    names = [row.split()[0] for row in listed.out.splitlines()]
    assert {"code", "sequential", "support_bot", "starter"} <= set(names)
    for name in names:
        r = run_cli("init", name, "--example", name, cwd=tmp_path)
        assert r.code == 0, r.text
        project = tmp_path / name
        lines = (project / ".gitignore").read_text().splitlines()
        assert ".oloproof/" in lines, name
        if any(project.rglob("*.py")):
            assert "__pycache__/" in lines, name
        # The first command the hint gives names a config that is there.
        first = r.out.split("&& ", 1)[1]
        config = first.split("--config ", 1)[1].split()[0] if "--config" in first else "oloproof.yaml"
        assert (project / config).is_file(), (name, first)


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root, with a file's bytes (None for a folder)."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes())
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("in_the_way", ["release.yaml", "data"])
def test_init_force_over_something_in_the_way_changes_nothing(
    tmp_path: Path, in_the_way: str
) -> None:
    """A folder where the example has a file (`release.yaml/`) took the file inside it:
    `Created`, exit 0, a project `run` refused ("release.yaml: is a directory"); a file
    where it has a folder (`data`) wrote the other files over the user's, then exit 2. Now
    nothing is written: exit 2 naming the path, the user's files as they were."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("mine\n")
    (repo / ".gitignore").write_bytes(b"node_modules/\n")
    if in_the_way == "data":
        (repo / "data").write_text("a file of mine\n")
    else:
        (repo / in_the_way).mkdir()
        (repo / in_the_way / "notes.txt").write_text("mine\n")
    before = _tree(repo)
    r = run_cli("init", "repo", "--force", "--example", "support_bot", cwd=tmp_path)
    assert r.code == 2, r.text
    assert _tree(repo) == before
    assert r.err.count("\n") == 1 and "Traceback" not in r.err
    assert f"repo/{in_the_way}" in r.err and "nothing was changed" in r.err


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to nobody with setpriv")
def test_init_force_that_fails_midway_puts_every_file_back(tmp_path: Path) -> None:
    """A read-only data/ in the target: the top-level files (app.py, oloproof.yaml, the
    .gitignore...) were written over the user's, then data/support.jsonl could not be, exit
    2, half an example. Every file is now put back as it was, and the message names it."""
    import shutil
    import subprocess

    from tests.conftest import OLOPROOF

    if not shutil.which("setpriv"):
        pytest.skip("setpriv missing")
    tmp_path.chmod(0o755)
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "app.py").write_text("mine\n")
    (repo / "oloproof.yaml").write_text("mine: true\n")
    (repo / ".gitignore").write_bytes(b"node_modules/\n")
    (repo / "data" / "mine.jsonl").write_text("{}\n")
    for path in (repo, *repo.rglob("*")):
        os.chown(path, 65534, 65534)
    (repo / "data").chmod(0o555)
    before = _tree(repo)
    p = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *OLOPROOF, "init",
         "repo", "--force", "--example", "support_bot"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert _tree(repo) == before
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert "repo/data/support.jsonl: Permission denied; nothing was changed" in p.stderr


def test_init_force_interrupted_midway_puts_every_file_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the files are moved in: the user's files that were already moved aside
    were deleted with the staging folder. They are put back before the interrupt goes on."""
    from oloproof.cli import init

    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "app.py").write_text("mine\n")
    (repo / "oloproof.yaml").write_text("mine: true\n")
    (repo / ".gitignore").write_bytes(b"node_modules/\n")
    before = _tree(repo)
    real, calls = os.replace, []

    def interrupted(src: object, dst: object) -> None:
        calls.append(dst)
        if len(calls) == 5:  # app.py and oloproof.yaml replaced, the user's moved aside
            raise KeyboardInterrupt
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(init.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        init._copy(init.examples_root() / "support_bot", repo)
    monkeypatch.undo()
    assert len(calls) > 5  # the rollback's moves
    assert _tree(repo) == before
