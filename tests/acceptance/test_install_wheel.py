"""Installing Oloproof in someone else's environment (issue 30, README "Install"): the wheel
built from this tree, installed in a clean virtualenv outside the repository (no ``-e``, no
access to ``src/``), runs ``oloproof init`` and ``oloproof run`` of every shipped example.

Slow (a build and an install: about a minute); the virtualenv gets its dependencies from
the same package index as ``make`` does."""

from __future__ import annotations

import json
import os
import py_compile
import re
import shutil
import socket
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What each shipped example's first run exits with (its README says why), and the
# environment it needs. judge and http also need a server: started below.
EXPECTED = {"code": 3, "compare": 0, "http": 0, "judge": 4, "starter": 3, "support_bot": 3,
            "sequential": 0, "prompts": 0}

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OLOPROOF_DEBUG", "COLUMNS", "PYTHONHOME")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env or _env(), capture_output=True, text=True,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtualenv with the wheel installed; returns its bin/ directory."""
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy, so that the build leaves nothing in the work tree and takes
    # nothing that is not in it (a store, caches, an example someone ran in place).
    source = work / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".demo", "build", "dist", "*.egg-info", "__pycache__", ".oloproof",
        ".pytest_cache", ".mypy_cache", ".ruff_cache", "tests", "bench", "docs"))
    # An example run in place (the tests do it) leaves its bytecode beside it: the wheel
    # must not ship it, nor setuptools warn about a "__pycache__" package.
    py_compile.compile(str(source / "src/oloproof/examples/support_bot/app.py"), doraise=True)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w",
                  str(work / "dist"), str(source)], cwd=work)
    assert built.returncode == 0, built.stderr
    assert "__pycache__" not in built.stdout + built.stderr, built.stdout + built.stderr
    [wheel] = (work / "dist").glob("oloproof-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as shipped:
        stale = [n for n in shipped.namelist() if "__pycache__" in n or n.endswith(".pyc")]
    assert stale == [], stale
    target = work / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(target)
    bin_dir = target / "bin"
    install = _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=work)
    assert install.returncode == 0, install.stderr
    return bin_dir


def test_the_wheel_runs_every_shipped_example_from_a_clean_venv(
    installed: Path, tmp_path: Path
) -> None:
    python, oloproof = str(installed / "python"), str(installed / "oloproof")
    where = _run([python, "-c", "import oloproof, sys; print(oloproof.__file__, oloproof.__version__)"],
                 cwd=tmp_path)
    module, version = where.stdout.split()
    assert Path(module).is_relative_to(installed.parent), module  # the venv's, not src/
    assert version == _run([sys.executable, "-c", "import oloproof; print(oloproof.__version__)"],
                           cwd=REPO).stdout.strip()
    listed = _run([oloproof, "init", "--example", "list"], cwd=tmp_path)
    names = sorted(re.findall(r"^\s*(\w+)", listed.stdout, re.MULTILINE))
    assert set(EXPECTED) <= set(names), listed.stdout
    assert set(names) <= set(EXPECTED), f"a new example: add its exit code here ({names})"

    for name in sorted(EXPECTED):
        project = tmp_path / name
        init = _run([oloproof, "init", str(project), "--example", name], cwd=tmp_path)
        assert init.returncode == 0, init.stderr
        code, out = _run_example(name, project, python, oloproof)
        assert code == EXPECTED[name], (name, out)
        stored = json.loads(_run([oloproof, "runs", "--json"], cwd=project).stdout)
        completeness = "SEQUENTIAL" if name == "sequential" else "COMPLETE"
        assert (stored[0]["status"], stored[0]["completeness"], stored[0]["exit_code"]) == (
            "DECIDED", completeness, EXPECTED[name]), (name, stored)

    # The README's stricter policy re-decides the stored support_bot run: a FAIL.
    strict = _run([oloproof, "gate", "latest", "--policy", "strict.yaml"],
                  cwd=tmp_path / "support_bot")
    assert strict.returncode == 1, strict.stdout + strict.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run_example(name: str, project: Path, python: str, oloproof: str) -> tuple[int, str]:
    env = _env()
    server: subprocess.Popen[str] | None = None
    try:
        if name in ("judge", "prompts"):
            # The fake provider that ships in the wheel, as the example's README says.
            server = subprocess.Popen([python, "-m", "oloproof.testing.fake_provider"],
                                      cwd=project, env=env, stdout=subprocess.PIPE, text=True)
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            config = project / "oloproof.yaml"
            config.write_text(config.read_text().replace("http://127.0.0.1:8787", url))
            env["FAKE_PROVIDER_KEY"] = "dummy-key-for-the-fake"
        elif name == "http":
            port = _free_port()
            server = subprocess.Popen([python, "service.py", "--port", str(port)], cwd=project,
                                      env=env, stdout=subprocess.PIPE, text=True)
            assert server.stdout is not None
            assert "triage service on" in server.stdout.readline()
            config = project / "oloproof.yaml"
            config.write_text(config.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
            env["INTAKE_TOKEN"] = "demo-token"
        result = _run([oloproof, "run"], cwd=project, env=env)
        return result.returncode, result.stdout + result.stderr
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


def test_a_pinned_git_url_installs_the_same_package(installed: Path, tmp_path: Path) -> None:
    """The README's other way: ``pip install "oloproof @ git+URL@<sha>"``. Here the URL is
    this repository's own (``git+file://``), pinned to its HEAD commit; pip clones it,
    builds it and installs it over the wheel's copy in the clean venv."""
    head = _run(["git", "rev-parse", "HEAD"], cwd=REPO)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    sha = head.stdout.strip()
    # file://localhost/...: the pip that venv bundles wants a host in a file URL.
    spec = f"oloproof @ git+file://localhost{REPO}@{sha}"
    install = _run([str(installed / "python"), "-m", "pip", "install", "-q", "--no-deps",
                    "--force-reinstall", spec], cwd=tmp_path)
    assert install.returncode == 0, install.stderr
    shown = _run([str(installed / "python"), "-m", "pip", "show", "oloproof"], cwd=tmp_path)
    assert "Location: " + str(installed.parent) in shown.stdout.replace("Editable project", "")
    oloproof = str(installed / "oloproof")
    assert _run([oloproof, "init", "bot", "--example", "support_bot"], cwd=tmp_path).returncode == 0
    assert _run([oloproof, "run"], cwd=tmp_path / "bot").returncode == 3
