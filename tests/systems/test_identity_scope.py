"""Project code outside a system's identity (issue 30): the files a system's module uses
that are neither its own file nor in ``code_paths``. An edit to them alone keeps the cached
results, so a run warns about them once (CLI: one line on standard error; Python: a
StaleCacheWarning, which pytest lists in its summary)."""

from __future__ import annotations

import importlib
import json
import os
import sys
import warnings
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

import oloproof
from oloproof.systems.loading import defining_files, import_callable, imports_outside_identity

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



def test_a_custom_evaluators_helpers_outside_its_identity_are_warned_about(
    tmp_path: Path,
) -> None:
    """A custom evaluator whose module imports a project helper: an edit to the helper
    alone keeps every cached verdict, and the run said nothing (the system's module was
    warned about, the measuring check was not). A check made stricter in its helper then
    passed a failing system from the cache, exit 0."""
    app = 'def answer(case_input):\n    return {"label": "ok", "n": case_input["n"]}\n'
    evaluators = """
      - type: custom
        criterion: checked
        function: checks:check
    """
    root = write_project(
        tmp_path / "p", app=app, cases=labelled_cases(6), evaluators=evaluators,
        extra_files={"checks.py": "from rules import ALLOWED\n"
                                  "def check(output, case):\n"
                                  "    return output['label'] in ALLOWED\n",
                     "rules.py": "ALLOWED = {'ok'}\n"},
        release="version: 1\nrules:\n  - id: all\n    metric: checked\n"
                "    kind: observed_count\n    max_failures: 0\n",
    )
    first = run_cli("run", cwd=root)
    assert first.code == 0, first.text
    warned = [line for line in first.err.splitlines() if "warning" in line]
    assert warned == [(
        "oloproof run: warning: checks.py (evaluator checked) uses project code that is not"
        " part of its identity (rules.py): an edit to it alone keeps its cached verdicts."
        " List it in the evaluator's code_paths in oloproof.yaml (code_paths: [rules.py]),"
        " or run without the cache after such an edit (--no-cache; use_cache=False)"
    )]
    # Listed under the evaluator's code_paths: an edit to the helper judges every case again.
    yaml = root / "oloproof.yaml"
    yaml.write_text(yaml.read_text().replace(
        "function: checks:check\n", "function: checks:check\n    code_paths: [rules.py]\n"))
    listed = run_cli("run", cwd=root)
    assert listed.code == 0 and "warning" not in listed.err, listed.text
    (root / "rules.py").write_text("ALLOWED = {'refund'}\n")
    stricter = run_cli("run", cwd=root)
    assert stricter.code == 1, stricter.text


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


def _hits(root: Path) -> dict[str, int]:
    result = run_cli("inspect", "latest", "--json", cwd=root)
    cache = json.loads(result.out)["run"]["cache"]
    assert isinstance(cache, dict)
    return cache


def test_a_function_defined_in_another_module_than_the_one_named_is_keyed_on_both(
    tmp_path: Path,
) -> None:
    """``callable: app:answer`` where app.py only does ``from impl import answer``: impl.py
    is the module that defines the function (SPEC §2), and so is rules.py for a custom
    evaluator named ``checks:check``. An edit to either calls it again; a helper module
    that impl.py merely imports stays outside the identity, and the run names it."""
    files = {
        "impl.py": "from oloproof import system\nfrom helpers import LABEL\n\n"
                   "@system(name='t', version='1')\ndef answer(case_input):\n"
                   "    return {'label': LABEL}\n",
        "helpers.py": "LABEL = 'ok'\n",
        "checks.py": "from rules import check\n",
        "rules.py": "def check(output):\n    return output['label'] == 'ok'\n",
    }
    evaluators = """
      - type: exact_match
        criterion: exact_label
        field: label
      - type: custom
        criterion: custom_ok
        function: checks:check
    """
    root = write_project(tmp_path / "p", app="from impl import answer\n",
                         cases=labelled_cases(5), evaluators=evaluators, extra_files=files)
    first = run_cli("run", cwd=root)
    assert first.code == 0, first.text
    warned = [line for line in first.err.splitlines() if "warning" in line]
    assert len(warned) == 1 and "identity (helpers.py)" in warned[0], warned
    assert "impl.py" not in warned[0]

    (root / "impl.py").write_text(files["impl.py"].replace("{'label': LABEL}",
                                                           "{'label': 'bad'}"))
    edited = run_cli("run", cwd=root)
    assert edited.code == 0, edited.text  # policy: none; the outputs are what changed
    cache = _hits(root)
    assert (cache["execution_hits"], cache["execution_misses"]) == (0, 5)
    cases = json.loads(run_cli("inspect", "latest", "--json", cwd=root).out)["cases"]
    assert {c["output"]["label"] for c in cases} == {"bad"}

    (root / "rules.py").write_text("def check(output):\n    return True\n")
    assert run_cli("run", cwd=root).code == 0
    cache = _hits(root)
    assert cache["execution_hits"] == 5
    # custom_ok judged afresh (its defining module changed), exact_label from the cache.
    assert (cache["judgment_hits"], cache["judgment_misses"]) == (5, 5)

    (root / "helpers.py").write_text("LABEL = 'changed'\n")  # outside: the cache is kept
    assert run_cli("run", cwd=root).code == 0
    assert _hits(root)["execution_hits"] == 5


def test_the_files_that_define_a_function(tmp_path: Path) -> None:
    """Its own module when it is not the one named, and the project file a wrapper's code
    comes from; not an installed package's wrapper (functools here), and nothing at all
    for a function defined where it is named."""
    files = {
        "impl.py": "def answer(case_input):\n    return {'label': 'ok'}\n",
        "deco.py": "import functools\n\ndef traced(fn):\n    @functools.wraps(fn)\n"
                   "    def run(*args):\n        return fn(*args)\n    return run\n",
    }
    app = ("import functools\nfrom impl import answer as imported\nfrom deco import traced\n\n"
           "def own(case_input):\n    return {}\n\n@traced\ndef wrapped(case_input):\n"
           "    return {}\n\ncached = functools.lru_cache(own)\n")
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(1), extra_files=files)
    _forget()
    for name in ("impl", "deco"):
        sys.modules.pop(name, None)
    found = {}
    for attr in ("imported", "wrapped", "own", "cached"):
        fn, module = import_callable(f"app:{attr}", root, file="oloproof.yaml",
                                     field="system.callable")
        found[attr] = [os.path.relpath(p, os.path.realpath(root))
                       for p in defining_files(fn, module, str(root))]  # type: ignore[arg-type]
    assert found == {"imported": ["impl.py"], "wrapped": ["deco.py"], "own": [], "cached": []}


def test_a_ray_run_warns_about_the_same_files_as_a_local_one(tmp_path: Path) -> None:
    """Under executor: ray the system and the custom evaluators are wrapped to run on Ray
    workers (runner/ray_executor.py); the wrappers did not carry the files outside their
    identity, so a Ray run never warned that an edit to helpers.py keeps the cache. Built
    here without starting Ray (nothing starts before the first call)."""
    pytest.importorskip("ray")
    from oloproof.runner.build import identity_warning, prepare

    evaluators = """
      - type: exact_match
        criterion: exact_label
        field: label
      - type: custom
        criterion: checked
        function: checks:check
    """
    root = write_project(
        tmp_path / "p", app=APP, cases=labelled_cases(5), extra_files={
            **FILES, "checks.py": "from rules import OK\ndef check(output, case):\n    return OK\n",
            "rules.py": "OK = True\n"},
        evaluators=evaluators,
    )
    config = str(root / "oloproof.yaml")
    local = identity_warning(prepare(config, None, executor="local"))
    remote = prepare(config, None, executor="ray")
    assert type(remote.system).__name__ == "RaySystem"
    assert local is not None and "app.py uses project code" in local and "rules.py" in local
    assert identity_warning(remote) == local
