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


#: The most files the ``code_paths`` of one system (or of one custom evaluator) may hold.
MAX_CODE_PATH_FILES = 10_000
#: The most bytes they may hold in all: they are read and hashed on every run.
MAX_CODE_PATH_BYTES = 256 << 20
_CODE_PATHS_ACCEPTED = (
    "files or directories of code and prompts, relative to the project directory and inside"
    " or beside it"
)


class _CodePathError(Exception):
    """Why one ``code_paths`` entry cannot be hashed (a ConfigError once it names the entry)."""


def _code_files(path: Path, found: list[tuple[Path, int]], budget: list[int]) -> None:
    """Append the regular files under ``path`` (a directory) and their sizes, in a stable
    order; ``budget`` is [files left, bytes left]. Entries that are neither files nor
    directories (a socket, a named pipe) are not code and are passed over; a directory
    or file that cannot be read is an error, so that nothing is left out unseen."""
    import stat

    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        raise _CodePathError(f"{path} cannot be read ({exc.strerror or exc})") from None
    for entry in entries:
        if entry.name == "__pycache__" or entry.name.endswith(".pyc"):
            continue
        try:
            st = entry.stat()  # follows a link to a file, as reading it will
            is_link_dir = entry.is_symlink() and stat.S_ISDIR(st.st_mode)
        except OSError as exc:
            raise _CodePathError(f"{entry.path} cannot be read ({exc.strerror or exc})") from None
        if stat.S_ISDIR(st.st_mode):
            if not is_link_dir:  # a link to a directory is not followed (no loops)
                _code_files(Path(entry.path), found, budget)
        elif stat.S_ISREG(st.st_mode):
            _count(Path(entry.path), st.st_size, found, budget)


def _count(path: Path, size: int, found: list[tuple[Path, int]], budget: list[int]) -> None:
    budget[0] -= 1
    budget[1] -= size
    if budget[0] < 0 or budget[1] < 0:
        raise _CodePathError(
            f"the code paths hold more than {MAX_CODE_PATH_FILES:,} files or"
            f" {MAX_CODE_PATH_BYTES >> 20} MiB, the limit (they are read and hashed on every"
            " run); list the code and prompts only, and name what is too large to hash (a"
            " model's weights) in the system's version"
        )
    found.append((path, size))


def code_paths_digest(
    root: Path, code_paths: list[str], *, file: str, field: str
) -> dict[str, str]:
    """Digest of every file under ``code_paths`` (relative to ``root``), by relative path.

    Refused (a ConfigError, exit 2, before anything is stored): an entry that does not
    exist; one that holds the project directory itself (``.``, ``..``, ``/``: the store
    would be part of the system's identity and change it on every run); one that is
    neither a file nor a directory (a named pipe would block the read); anything that
    cannot be read; more than :data:`MAX_CODE_PATH_FILES` files or
    :data:`MAX_CODE_PATH_BYTES` bytes in all."""
    import stat

    files: dict[str, str] = {}
    project = root.resolve()
    budget = [MAX_CODE_PATH_FILES, MAX_CODE_PATH_BYTES]
    for i, entry in enumerate(code_paths):

        def refuse(message: str, i: int = i) -> ConfigError:
            return ConfigError(message, file=file, field=f"{field}[{i}]",
                               accepted=_CODE_PATHS_ACCEPTED)

        path = (root / entry).resolve()
        try:
            st = path.stat()
        except FileNotFoundError:
            raise refuse(f"'{entry}' does not exist (looked for {path})") from None
        except OSError as exc:
            raise refuse(f"'{entry}' cannot be read ({exc.strerror or exc})") from None
        if project.is_relative_to(path):
            raise refuse(
                f"'{entry}' holds the whole project directory ({project}), its store included,"
                " which changes with every run; list the files or directories the code is in"
            )
        found: list[tuple[Path, int]] = []
        try:
            if stat.S_ISDIR(st.st_mode):
                _code_files(path, found, budget)
            elif stat.S_ISREG(st.st_mode):
                _count(path, st.st_size, found, budget)
            else:
                raise _CodePathError(
                    "is not a regular file or a directory (a device, a pipe or a socket)"
                )
            for p, size in found:
                rel = p.relative_to(project).as_posix() if p.is_relative_to(project) else p.as_posix()
                files[rel] = digest_bytes(_read_code(p, size))
        except _CodePathError as exc:
            raise refuse(f"'{entry}': {exc}") from None
    return files


def _read_code(path: Path, size: int) -> bytes:
    """The bytes of one code file, at most a little more than ``stat`` said it holds (a
    file that grows while it is read is not read for ever), opened without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _CodePathError(f"{path} cannot be read ({exc.strerror or exc})") from None
    try:
        chunks = []
        left = size + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise _CodePathError(f"{path} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
