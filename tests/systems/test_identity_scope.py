"""Project code outside a system's identity (issue 30): the files a system's module uses
that are neither its own file nor in ``code_paths``. An edit to them alone keeps the cached
results, so a run warns about them once (CLI: one line on standard error; Python: a
StaleCacheWarning, which pytest lists in its summary)."""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

import oloproof
from oloproof.systems.loading import import_callable, imports_outside_identity

APP = """
from oloproof import system
from helpers import label_of          # a function: its module is project code
import pkg.tools                      # a package and its module

@system(name="t", version="1")
def answer(case_input):
    return {"label": label_of(case_input["n"]), "x": pkg.tools.X}
"""

FILES = {
    "helpers.py": "from lib.words import LABEL  # data, not a function\n"
                  "def label_of(n):\n    return LABEL\n",
    "lib/words.py": "LABEL = 'ok'\n",                         # reached through helpers
    "pkg/__init__.py": "from . import _private\n",             # a relative import
    "pkg/_private.py": "Y = 1\n",
    "pkg/tools.py": "X = 1\n",
    "unused.py": "Z = 1\n",                                     # never imported: not listed
    ".venv/lib/python3/site-packages/vendored.py": "V = 1\n",  # a venv in the project
}


def _forget() -> None:
    """Each test's project has its own helpers.py: forget another test's modules."""
    for name in [n for n in sys.modules if n.split(".")[0] in ("app", "helpers", "lib", "pkg")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def _load(root: Path) -> tuple[object, object]:
    _forget()
    return import_callable("app:answer", root, file="oloproof.yaml", field="system.callable")


def test_what_is_outside_the_identity(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(5), extra_files=FILES)
    _, module = _load(root)
    everything = ["helpers.py", "lib/words.py", "pkg/__init__.py", "pkg/_private.py",
                  "pkg/tools.py"]
    assert imports_outside_identity(module, root, []) == everything  # type: ignore[arg-type]
    # A code_paths entry covers a file, or everything under a folder.
    assert imports_outside_identity(module, root, ["helpers.py", "pkg/"]) == [  # type: ignore[arg-type]
        "lib/words.py"]
    assert imports_outside_identity(module, root, ["helpers.py", "lib", "pkg"]) == []  # type: ignore[arg-type]
    # The same answer when the modules were imported before, in another order.
    _load(root)
    import helpers  # noqa: F401

    _, module = import_callable("app:answer", root, file="oloproof.yaml", field="system.callable")
    assert imports_outside_identity(module, root, []) == everything  # type: ignore[arg-type]


def test_an_edit_outside_the_identity_keeps_the_cache_and_the_run_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(5), extra_files=FILES)
    _forget()
    monkeypatch.setattr("oloproof.api._run._WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = oloproof.run(root)
        oloproof.run(root)  # the same warning is not repeated
    caught = [w for w in caught if issubclass(w.category, oloproof.StaleCacheWarning)]
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("app.py uses project code that is not part of the system's"
                              " identity (helpers.py, lib/words.py, pkg/__init__.py,")
    assert "code_paths: [helpers.py, lib/words.py, pkg/__init__.py" in message
    assert first.metrics["exact_label"].passed == 5

    # The warning is about this: the edit changes every answer, and the cache keeps them.
    (root / "lib" / "words.py").write_text("LABEL = 'changed'\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", oloproof.StaleCacheWarning)
        stale = oloproof.run(root)
    assert stale.cache["execution_hits"] == 5 and stale.metrics["exact_label"].passed == 5

    # Listed in code_paths, the files are part of the identity: no warning, and an edit
    # calls the system again.
    yaml = root / "oloproof.yaml"
    yaml.write_text(yaml.read_text().replace(
        "  callable: app:answer\n", "  callable: app:answer\n  code_paths: [helpers.py, lib/, pkg/]\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", oloproof.StaleCacheWarning)
        fresh = oloproof.run(root)
    assert fresh.cache["execution_misses"] == 5 and fresh.metrics["exact_label"].passed == 0


def test_the_command_line_warns_in_one_line(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(5), extra_files=FILES)
    result = run_cli("run", "--json", cwd=root)
    assert result.code == 0, result.err
    warned = [line for line in result.err.splitlines() if "warning" in line]
    assert warned == [(
        "oloproof run: warning: app.py uses project code that is not part of the system's"
        " identity (helpers.py, lib/words.py, pkg/__init__.py, pkg/_private.py, pkg/tools.py):"
        " an edit to them alone keeps this system's cached results. List them in"
        " system.code_paths in oloproof.yaml (code_paths: [helpers.py, lib/words.py,"
        " pkg/__init__.py, pkg/_private.py, pkg/tools.py]), or run without the cache after"
        " such an edit (--no-cache; use_cache=False)"
    )]


def test_an_edit_within_the_second_is_imported_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python checks a kept .pyc against its source's size and modification time in whole
    seconds: an app.py and a helper edited in the second they were compiled in, to the same
    size, were imported again as they were, while the identity followed the file."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a user's Python does
    app = APP.replace('from helpers import label_of', 'from helpers import label_of, V')
    files = {**FILES, "helpers.py": FILES["helpers.py"] + "V = '1'\n"}
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(5), extra_files=files)
    fn, module = _load(root)
    assert module.__cached__ and Path(module.__cached__).is_file()  # type: ignore[attr-defined]
    stamp = (root / "app.py").stat().st_mtime_ns
    for edit in ("2", "3"):  # the same size, the same second as the kept bytecode
        (root / "app.py").write_text(app.replace('version="1"', f'version="{edit}"'))
        (root / "helpers.py").write_text(files["helpers.py"].replace("'1'", f"'{edit}'"))
        for name in ("app.py", "helpers.py"):
            os.utime(root / name, ns=(stamp, stamp))
        fn, module = import_callable("app:answer", root, file="oloproof.yaml",
                                     field="system.callable")
        assert fn.__oloproof_system__["version"] == edit  # type: ignore[attr-defined]
        assert module.V == edit  # type: ignore[attr-defined]


def test_bytecode_as_old_as_its_sources_second_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new process (here: the modules forgotten) whose app.py and helper were edited to
    the same size in the second their kept bytecode was written in: Python would import
    that bytecode, the code before the edit, while the identity follows the files."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a user's Python does
    app = APP.replace('from helpers import label_of', 'from helpers import label_of, V')
    files = {**FILES, "helpers.py": FILES["helpers.py"] + "V = '1'\n"}
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(5), extra_files=files)
    _, module = _load(root)
    kept = {name: Path(sys.modules[name].__cached__) for name in ("app", "helpers")}
    assert all(path.is_file() for path in kept.values()) and module.V == "1"  # type: ignore[attr-defined]
    second = int((root / "app.py").stat().st_mtime)
    (root / "app.py").write_text(app.replace('version="1"', 'version="2"'))
    (root / "helpers.py").write_text(files["helpers.py"].replace("'1'", "'2'"))
    for path in (root / "app.py", root / "helpers.py", *kept.values()):
        os.utime(path, ns=(second * 10**9 + 1, second * 10**9 + 1))  # all in one second
    fn, module = _load(root)  # a new process: nothing imported yet
    assert fn.__oloproof_system__["version"] == "2"  # type: ignore[attr-defined]
    assert module.V == "2"  # type: ignore[attr-defined]
    # Bytecode written after its source's second is trusted: imported, not compiled again.
    later = (second + 5) * 10**9
    for name in ("app", "helpers"):
        os.utime(sys.modules[name].__cached__, ns=(later, later))
    _forget()
    compiled: list[str] = []
    real = compile

    def counting(source: object, filename: object, *args: object, **kwargs: object) -> object:
        compiled.append(str(filename))
        return real(source, filename, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.compile", counting)
    fn, _ = _load(root)
    assert fn.__oloproof_system__["version"] == "2"  # type: ignore[attr-defined]
    assert not [f for f in compiled if f.endswith(("app.py", "helpers.py"))], compiled
