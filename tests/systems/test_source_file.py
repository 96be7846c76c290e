"""systems.loading.source_file answers what inspect.getsourcefile answers for a module
(the system's and custom evaluators' identities rest on it), without importing inspect."""

from __future__ import annotations

import _decimal
import importlib
import inspect
import json.decoder
import sys
import types
from pathlib import Path

import oloproof.systems.loading
from oloproof.systems.loading import module_source, source_file


def _inspect_answer(module: types.ModuleType) -> str | None:
    try:
        return inspect.getsourcefile(module)
    except TypeError:
        return None


def test_source_file_is_inspects_answer(tmp_path: Path) -> None:
    (tmp_path / "user_app_for_source_file.py").write_text("def answer(x):\n    return x\n")
    (tmp_path / "pkg_for_source_file").mkdir()
    (tmp_path / "pkg_for_source_file" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "namespace_for_source_file").mkdir()
    sys.path.insert(0, str(tmp_path))
    try:
        user = importlib.import_module("user_app_for_source_file")
        package = importlib.import_module("pkg_for_source_file")
        namespace = importlib.import_module("namespace_for_source_file")
        made = types.ModuleType("made_in_memory")
        pyc = types.ModuleType("from_bytecode")
        pyc.__file__ = str(tmp_path / "user_app_for_source_file.pyc")
        gone = types.ModuleType("gone")
        gone.__file__ = str(tmp_path / "gone.py")
        modules = [user, package, namespace, made, pyc, gone, json.decoder, _decimal, sys,
                   oloproof.systems.loading, inspect]
        for module in modules:
            assert source_file(module) == _inspect_answer(module), module
        assert module_source(user) == (tmp_path / "user_app_for_source_file.py").read_bytes()
        assert module_source(sys) == b""
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("user_app_for_source_file", "pkg_for_source_file",
                     "namespace_for_source_file"):
            sys.modules.pop(name, None)
