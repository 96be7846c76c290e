"""Importing user code named as ``module:function``, with clear errors."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from oloproof._json import digest_bytes
from oloproof.errors import ConfigError

if TYPE_CHECKING:
    from typing import Any


def import_callable(
    spec: str, root: Path, *, file: str, field: str, line: int | None = None
) -> tuple[Callable[..., Any], ModuleType]:
    """Import ``module:function`` with the project directory first on ``sys.path``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"'{spec}' is not of the form module:function",
            file=file, field=field, line=line, accepted="module:function, e.g. app:answer",
        )
    root_s = str(root.resolve())
    if root_s in sys.path:
        sys.path.remove(root_s)
    sys.path.insert(0, root_s)  # first: this project's module, not another's of that name
    _forget_if_stale(module_name, Path(root_s))
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:
        import traceback

        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" ({Path(last[0].filename).name}:{last[0].lineno})" if last else ""
        raise ConfigError(
            f"cannot import module '{module_name}': {type(exc).__name__}: {exc}{where}",
            file=file, field=field, line=line,
            accepted="a module importable from the project directory",
        ) from exc
    if not hasattr(module, "__oloproof_source__"):
        try:
            module.__oloproof_source__ = module_source(module)  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # a module that refuses new attributes
            pass
    fn = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            names = [n for n in dir(module) if not n.startswith("_")]
            fns = [n for n in names if callable(getattr(module, n))]
            raise ConfigError(
                f"module '{module_name}' has no attribute '{attr}'",
                file=file, field=field, line=line,
                accepted=", ".join(fns[:12]) or "a function defined in the module",
            )
        fn = getattr(fn, part)
    if not callable(fn):
        raise ConfigError(
            f"'{spec}' is not callable", file=file, field=field, line=line,
            accepted="a function",
        )
    return fn, module


def _forget_if_stale(module_name: str, root: Path) -> None:
    """Drop an imported ``module_name`` that is not this project's current file.

    Several runs in one process (a notebook, ``oloproof.run`` twice, the pytest plugin)
    would otherwise reuse the first project's ``app`` for every project with an
    ``app.py``, or the code of an ``app.py`` as it was before an edit, while the
    identity (and so the cache) would follow the file on disk.
    """
    loaded = sys.modules.get(module_name)
    if loaded is None:
        return
    path = source_file(loaded)
    if not path:
        return  # a built-in or namespace module: nothing of the project's
    file = Path(path).resolve()
    stale = not file.is_relative_to(root)
    if not stale:
        try:
            stale = file.read_bytes() != getattr(loaded, "__oloproof_source__", None)
        except OSError:
            stale = True
    if stale and (file.is_relative_to(root) or _shadowed(module_name, root)):
        for name in [n for n in sys.modules if n == module_name or n.startswith(module_name + ".")]:
            del sys.modules[name]
        importlib.invalidate_caches()


def _shadowed(module_name: str, root: Path) -> bool:
    """Whether ``root`` holds its own ``module_name`` (so the loaded one is another's)."""
    top = root / module_name.split(".")[0]
    return top.with_suffix(".py").exists() or (top / "__init__.py").exists()


def source_file(module: ModuleType) -> str | None:
    """The Python source file of ``module``, or ``None`` (a built-in, an extension, a
    namespace package): what ``inspect.getsourcefile`` answers for a module, without
    importing inspect and all it imports (start-up, issue 16; a test compares the two)."""
    filename = getattr(module, "__file__", None)
    if not isinstance(filename, str):
        return None
    from importlib.machinery import BYTECODE_SUFFIXES, EXTENSION_SUFFIXES, SOURCE_SUFFIXES

    if filename.endswith(tuple(BYTECODE_SUFFIXES)):
        filename = os.path.splitext(filename)[0] + SOURCE_SUFFIXES[0]
    elif filename.endswith(tuple(EXTENSION_SUFFIXES)):
        return None
    if os.path.exists(filename):
        return filename
    if getattr(module, "__loader__", None) is not None:
        return filename
    if getattr(getattr(module, "__spec__", None), "loader", None) is not None:
        return filename
    import linecache

    return filename if filename in linecache.cache else None


def module_source(module: ModuleType) -> bytes:
    """The bytes of the file that defines ``module`` (empty if it has none)."""
    path = source_file(module)
    if not path:
        return b""
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def code_paths_digest(
    root: Path, code_paths: list[str], *, file: str, field: str
) -> dict[str, str]:
    """Digest of every file under ``code_paths`` (relative to ``root``), by relative path."""
    files: dict[str, str] = {}
    for i, entry in enumerate(code_paths):
        path = (root / entry).resolve()
        if not path.exists():
            raise ConfigError(
                f"'{entry}' does not exist (looked for {path})",
                file=file, field=f"{field}[{i}]",
                accepted="files or directories relative to the project directory",
            )
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for p in found:
            if "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            try:
                rel = p.relative_to(root.resolve()).as_posix()
            except ValueError:
                rel = p.as_posix()
            files[rel] = digest_bytes(p.read_bytes())
    return files
