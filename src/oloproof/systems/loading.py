"""Importing user code named as ``module:function``, with clear errors."""

from __future__ import annotations

import _thread
import contextlib
import importlib
import importlib.util
import os
import re
import sys
import time
from collections.abc import Callable
from types import ModuleType

from oloproof._json import digest, digest_bytes
from oloproof.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


#: One import of user code at a time in this process: each puts its project's folder first
#: on ``sys.path`` and takes other projects' modules out of ``sys.modules``. Two runs loaded
#: at once from two threads (``asyncio.gather`` of two ``run_async``) took the first one's
#: ``app`` out while it was being imported ("KeyError: 'app'"), or gave it the second
#: project's ``app.py``. ``_thread``: built in, already loaded (start-up).
_IMPORTING = _thread.RLock()


def import_callable(
    spec: str, root: str, *, file: str, field: str, line: int | None = None,
    code_paths: dict[str, str] | None = None,
) -> tuple[Callable[..., Any], ModuleType]:
    """Import ``module:function`` with the project directory first on ``sys.path``.

    ``code_paths``: the digests of the files under the caller's ``code_paths``
    (:func:`code_paths_digest`), read before the import; a module imported while they
    held something else is imported afresh (:func:`_forget_if_code_paths_changed`)."""
    with _IMPORTING:
        return _import_callable(spec, root, file=file, field=field, line=line,
                                code_paths=code_paths)


def _import_callable(
    spec: str, root: str, *, file: str, field: str, line: int | None,
    code_paths: dict[str, str] | None,
) -> tuple[Callable[..., Any], ModuleType]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"'{spec}' is not of the form module:function",
            file=file, field=field, line=line, accepted="module:function, e.g. app:answer",
        )
    root_s = os.path.realpath(root)
    for name, parked in _PARKED.pop(root_s, {}).items():  # of its last run (release)
        sys.modules[name] = parked  # over another's of that name (_forget_shadowed)
    if root_s in sys.path:
        sys.path.remove(root_s)
    elif root_s not in _INSERTED:
        _INSERTED.append(root_s)  # not the process's own entry: ours to take out again
    others = [r for r in _INSERTED if r != root_s]
    for other in others:  # another project's folder, put there by an earlier run
        while other in sys.path:
            sys.path.remove(other)
    sys.path.insert(0, root_s)  # first: this project's module, not another's of that name
    _forget_shadowed(root_s, others)
    if code_paths:
        _forget_if_code_paths_changed(module_name, root_s, code_paths)
    _forget_if_stale(module_name, root_s)
    _drop_racy_bytecode(os.path.join(root_s, *module_name.split(".")))
    for path in code_paths or ():
        if path.endswith(".py"):  # imported by name at call time, too: from its file
            _drop_racy_bytecode(os.path.join(root_s, path)[:-3])
    before = dict(sys.modules)
    began = time.time_ns()
    try:
        module = importlib.import_module(module_name)
        reached = project_modules(module, root_s)
        uses = [m for m, _ in reached]
        racy = [m for m in uses if _racy(m)]
        # A helper imported before, where Oloproof did not see it (a notebook's `import
        # helpers`, then an edit): of its file as it was then, for all anyone knows.
        unseen = [m for m, path in reached
                  if m.__name__ in before and not hasattr(m, "__oloproof_source__")
                  and _changed_since_start(path)]
        if racy or unseen:  # a helper's code may be older than its source: from the sources
            for used in racy:
                _drop_bytecode(used)
            _forget(module_name, uses)
            module = importlib.import_module(module_name)
        elif any(_tainted(m) for m in (module, *uses)):
            # Imported by a run whose code was patched (patched_code): it may hold what the
            # patch put there (``from helpers import lookup`` bound the fake). Those alone.
            _forget(module_name, [m for m in uses if _tainted(m)])
            module = importlib.import_module(module_name)
    except BaseException as exc:
        import traceback

        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" ({os.path.basename(last[0].filename)}:{last[0].lineno})" if last else ""
        raise ConfigError(
            f"cannot import module '{module_name}': {type(exc).__name__}: {exc}{where}",
            file=file, field=field, line=line,
            accepted="a module importable from the project directory",
        ) from exc
    with contextlib.suppress(AttributeError, TypeError):  # a module that refuses new attributes
        if not isinstance(getattr(module, "__oloproof_imported_ns__", None), int):
            module.__oloproof_imported_ns__ = began  # type: ignore[attr-defined]
        if code_paths:
            seen = getattr(module, "__oloproof_code_paths__", None)
            if not isinstance(seen, dict):
                seen = module.__oloproof_code_paths__ = {}  # type: ignore[attr-defined]
            seen[_paths_key(code_paths)] = digest(code_paths)
    reaches = [m for m, _ in project_modules(module, root_s)]
    for loaded in (module, *reaches):
        if not hasattr(loaded, "__oloproof_source__"):
            try:
                loaded.__oloproof_source__ = module_source(loaded)  # type: ignore[attr-defined]
            except (AttributeError, TypeError):  # a module that refuses new attributes
                pass
        if before.get(loaded.__name__) is not loaded:  # imported by this call: as its file says
            with contextlib.suppress(AttributeError, TypeError):
                loaded.__oloproof_bindings__ = _bindings(loaded)  # type: ignore[attr-defined]
    with contextlib.suppress(AttributeError, TypeError):  # for reached_modules
        module.__oloproof_reached__ = reaches  # type: ignore[attr-defined]
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


#: The project directories put on ``sys.path`` by :func:`import_callable` (not there before).
_INSERTED: list[str] = []
#: By project directory, its modules a run from Python imported, kept for its next run
#: out of ``sys.modules`` (:func:`release`).
_PARKED: dict[str, dict[str, ModuleType]] = {}

#: ``sys.path`` and ``sys.modules`` as they were (:func:`imports_before`).
ImportState = tuple[list[str], dict[str, ModuleType]]


def imports_before() -> ImportState:
    """``sys.path`` and ``sys.modules`` now, before a run from Python (:func:`release`)."""
    with _IMPORTING:
        return list(sys.path), dict(sys.modules)


def release(root: str, before: ImportState) -> None:
    """After a run from Python (a notebook, a test session): take away what loading the
    project at ``root`` put in the process, and give back what it took.

    Left there, the project's folder stayed first on ``sys.path`` and its modules in
    ``sys.modules``: the caller's own ``helpers`` (a notebook's, a test suite's), taken out
    so that the project's ``from helpers import ...`` got its own, was the project's after
    the run, and so was every later ``import helpers``. Now the folder goes (unless it was
    there before), the project's modules wait in :data:`_PARKED` for its next run (a module
    that loads a model is imported once), and modules the caller had are back. A caller
    whose own ``sys.path`` reaches the folder (a notebook started in it, a test that put it
    there) imports those modules itself: they stay, one module with one state."""
    path, modules = before
    root_s = os.path.realpath(root)
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    with _IMPORTING:
        if root_s in _INSERTED and root_s not in path:
            while root_s in sys.path:
                sys.path.remove(root_s)
        if any(os.path.realpath(entry or cwd) == root_s for entry in path
               if isinstance(entry, str)):
            return  # the caller imports from the folder itself: the modules are its too
        parked = _PARKED.setdefault(root_s, {})
        try:
            tops = {n.removesuffix(".py") for n in os.listdir(root_s)} - {"oloproof"}
        except OSError:
            tops = set()
        for name, module in list(sys.modules.items()):
            if (name.partition(".")[0] not in tops or name == "__main__"
                    or modules.get(name) is module):
                continue
            # Found through the folder (``helpers``, ``lib.words``), not by other means (a
            # package of the caller's installed from ``src/``: the caller's as much).
            top = os.path.join(root_s, name.partition(".")[0])
            where = _where(module)
            file = os.path.realpath(where) if where else ""
            if file == top + ".py" or (file and _within(file, top)):
                parked[name] = module
                del sys.modules[name]
        for name, module in modules.items():
            sys.modules.setdefault(name, module)  # taken out for the run (_forget_shadowed)
        importlib.invalidate_caches()


def _forget_shadowed(root: str, others: list[str]) -> None:
    """Drop the loaded modules whose names ``root`` gives files of its own (``helpers``,
    ``lib.words``) but that were imported from elsewhere: the ``helpers`` of the project
    run before this one in this process, or of the test suite that calls the run; and every
    module imported from ``others``, the folders of projects run before (taken off
    ``sys.path``).

    ``oloproof run`` imports the system in a new process, where ``from helpers import ...``
    finds the project's own file first, and no other project's; in a process that had
    imported another ``helpers`` (a test session, a notebook) it would get that one, call
    its code and store the results under this project's identity, where a later ``oloproof
    run`` reads them from the cache. The Python installation's modules (the standard
    library, site-packages) stay: they are loaded in that new process too, before the
    project's."""
    try:
        entries = os.listdir(root)
    except OSError:
        entries = []
    tops = {n.removesuffix(".py") for n in entries} - {"oloproof", "__main__"}
    before = tuple(o.rstrip(os.sep) + os.sep for o in others)
    names = [n for n, m in list(sys.modules.items())
             if n.partition(".")[0] in tops or (before and _where(m).startswith(before))]
    if not names:
        return
    import site

    installed = tuple(
        d.rstrip(os.sep) + os.sep
        for d in (os.path.dirname(os.__file__), *getattr(site, "getsitepackages", list)(),
                  getattr(site, "getusersitepackages", str)())
        if d
    )
    gone = []
    for name in names:
        where = _where(sys.modules.get(name))
        if not where or where.startswith(installed):
            continue
        top = os.path.join(root, name.partition(".")[0])
        if not (where.startswith(before) or os.path.isfile(top + ".py") or os.path.isdir(top)):
            continue  # a name this project does not give (a data file, say)
        own = os.path.join(root, *name.split("."))
        if os.path.realpath(where) not in (own + ".py", own, os.path.join(own, "__init__.py")):
            gone.append(name)
    for name in gone:
        sys.modules.pop(name, None)
    if gone:
        importlib.invalidate_caches()


def _where(module: object) -> str:
    """A loaded module's file, or a namespace package's first folder ("" for neither)."""
    try:
        where = getattr(module, "__file__", None)
        if not isinstance(where, str):
            where = next(iter(getattr(module, "__path__", None) or ()), None)
    except Exception:  # noqa: BLE001 - a module object whose attributes raise is nobody's
        return ""
    return where if isinstance(where, str) else ""


def _forget_if_stale(module_name: str, root: str) -> None:
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
    file = os.path.realpath(path)
    stale = not _within(file, root)
    if not stale:
        try:
            stale = _read(file) != getattr(loaded, "__oloproof_source__", None)
        except OSError:
            stale = True
        if stale:
            _drop_bytecode(loaded)
    if _within(file, root):
        # A project module it uses may have changed too, or alone (a helper edited in a
        # notebook, between two runs of a test session). Its objects are bound in the
        # module, so the whole chain is imported afresh.
        uses = project_modules(loaded, root)
        edited = [m for m, path in uses if _edited(m, path)]
        if edited:
            for used in edited:
                _drop_bytecode(used)
            held = {m.__name__ for m, _ in project_modules(loaded, root, by_name=False)}
            if any(m.__name__ in held for m in edited):
                stale = True
                _forget(None, [m for m, _ in uses])
            else:  # imported by name when called (held by nothing): those alone
                _forget(None, edited)
    if stale and (_within(file, root) or _shadowed(module_name, root)):
        _forget(module_name, [])


def _forget_if_code_paths_changed(module_name: str, root: str, files: dict[str, str]) -> None:
    """Drop an imported ``module_name`` whose ``code_paths`` files (``files``, their digests
    by path) are not what they were when it was imported, with the project modules it uses
    and every loaded module whose file is one of them.

    A module may read a prompt or a table under ``code_paths`` when it is imported. Edited
    between two runs in one process (a notebook, a test session), the file changed the
    identity, so the run called the system again, but with the module as it was: the old
    text's answers were stored under the new identity, and a later ``oloproof run`` read
    them from the cache. A module that was imported with no record of its files (by the
    caller) is imported afresh as well.

    The module records the digest of each set of files it was loaded with
    (``__oloproof_code_paths__``): the same digest keeps it, another one drops it. A set it
    has no record of (a custom evaluator's code paths, where the system imported the
    module; a file added or removed) keeps it when none of those files, nor their folders,
    changed since it was imported: a project whose system and evaluator share a module
    imports it once, as before."""
    loaded = sys.modules.get(module_name)
    if loaded is None:
        return
    seen = getattr(loaded, "__oloproof_code_paths__", None)
    recorded = seen.get(_paths_key(files)) if isinstance(seen, dict) else None
    if recorded is not None:
        if recorded == digest(files):
            return
    else:
        since = getattr(loaded, "__oloproof_imported_ns__", None)
        if isinstance(since, int) and not _written_since(root, files, since):
            return
    listed = {os.path.realpath(os.path.join(root, path)) for path in files}
    under = []
    for name, module in list(sys.modules.items()):
        where = _where(module)
        if where and name != "__main__" and os.path.realpath(where) in listed:
            under.append(module)  # the script that runs is never forgotten
    path = source_file(loaded)
    uses = [m for m, _ in project_modules(loaded, root)] if path and _within(
        os.path.realpath(path), root) else []
    _forget(module_name, [*uses, *under])


#: File times are the kernel's coarse clock (and whole seconds on some file systems): a
#: file changed this long before an import began counts as changed after it.
_TIME_MARGIN_NS = 2_000_000_000


def _paths_key(files: dict[str, str]) -> str:
    """Which files a digest of ``code_paths`` is of (their paths, sorted)."""
    return "\0".join(sorted(files))


def _written_since(root: str, files: dict[str, str], since: int) -> bool:
    """Whether any of ``files`` (paths relative to ``root``), or a folder holding one (a
    file added or removed beside it), changed since ``since`` (``time.time_ns()``), or
    cannot be looked at."""
    paths = {os.path.join(root, path) for path in files}
    paths |= {os.path.dirname(path) for path in paths}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return True
        if max(st.st_mtime_ns, st.st_ctime_ns) >= since - _TIME_MARGIN_NS:
            return True
    return False


def _forget(module_name: str | None, uses: list[ModuleType]) -> None:
    """Drop the modules ``uses`` and ``module_name`` with its submodules from
    ``sys.modules``: the next import reads them from their files again."""
    for used in uses:
        sys.modules.pop(used.__name__, None)
    if module_name is not None:
        for name in [n for n in sys.modules if n == module_name or n.startswith(module_name + ".")]:
            del sys.modules[name]
    importlib.invalidate_caches()


def _drop_bytecode(module: ModuleType) -> None:
    """Remove the bytecode Python kept for ``module``, whose source changed since it was
    imported: Python checks a ``.pyc`` against its source's size and modification time in
    whole seconds, so a file edited within the second it was compiled in, to the same
    size (``version="1"`` to ``"2"``), would be imported again as it was."""
    cached = getattr(module, "__cached__", None)
    if isinstance(cached, str):
        _remove(cached)


def _within(path: str, base: str) -> bool:
    """Whether ``path`` is ``base`` or lies under it (both absolute and resolved)."""
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _racy(module: ModuleType) -> bool:
    """Whether ``module``'s kept bytecode may be older than its source. Python trusts a
    ``.pyc`` whose recorded size and whole-second modification time match its source's,
    so one written within the second its source last changed in cannot tell an edit made
    later in that second (to the same size): the race git calls a racy index entry. A
    ``.pyc`` written after that second is trusted: any later edit changes the second."""
    cached, origin = getattr(module, "__cached__", None), getattr(module, "__file__", None)
    if not isinstance(cached, str) or not isinstance(origin, str):
        return False
    return _racy_file(origin, cached)


def _racy_file(source: str, cached: str) -> bool:
    try:
        with open(cached, "rb") as f:
            flags = f.read(8)[4:8]
        written = os.stat(cached).st_mtime
        changed = os.stat(source).st_mtime
    except OSError:
        return False
    # A hash-based .pyc (PEP 552) is checked against the source's content: never racy.
    return flags == b"\0\0\0\0" and written < int(changed) + 1


def _drop_racy_bytecode(base: str) -> None:
    """Before the system's module is imported (``base``: its path without ``.py``), drop
    its bytecode if it is racy (:func:`_racy`): the module's code must be its file's. So
    for every ``.py`` file under ``code_paths``: part of the identity, such a file may be
    imported where the import machinery trusts its bytecode, not where Oloproof looks
    (``importlib.import_module("helpers")`` in the function), and a same-size edit within
    the second of the last one ran the old code under the new identity."""
    for source in (base + ".py", os.path.join(base, "__init__.py")):
        try:
            cached = importlib.util.cache_from_source(source)
        except (NotImplementedError, ValueError):
            return
        if _racy_file(source, cached):
            _remove(cached)


def _edited(module: ModuleType, path: str) -> bool:
    """Whether ``module``'s file may have changed since it was imported: it did, or it was
    imported where Oloproof did not see it (by the caller, or by the system when called,
    ``importlib.import_module("helpers")``), as it was then, which nothing records."""
    recorded = getattr(module, "__oloproof_source__", None)
    if recorded is None:
        return _changed_since_start(path)
    try:
        return bool(_read(path) != recorded)
    except OSError:
        return True


def _changed_since_start(path: str) -> bool:
    """Whether the file at ``path`` may have changed since this process started: if not,
    whatever imported it in this process read it as it is now (a test suite's
    ``monkeypatch`` of a helper it imported stays in place); if so, or where that cannot
    be known, a module imported where Oloproof did not see it is of unknown age."""
    started = _process_started()
    if started is None:
        return True
    try:
        st = os.stat(path)
    except OSError:
        return True
    return max(st.st_mtime_ns, st.st_ctime_ns) >= started - _TIME_MARGIN_NS


def _process_started() -> int | None:
    """When this process started (``time.time_ns()``'s clock), from Linux's ``/proc``;
    None elsewhere. Read once."""
    if not _STARTED:
        try:
            with open("/proc/self/stat", "rb") as f:
                ticks = int(f.read().rpartition(b")")[2].split()[19])  # field 22, starttime
            with open("/proc/stat", "rb") as f:
                boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
            _STARTED.append(boot * 10**9 + ticks * 10**9 // os.sysconf("SC_CLK_TCK"))
        except (OSError, ValueError, IndexError, StopIteration, AttributeError):
            _STARTED.append(None)
    return _STARTED[0]


#: :func:`_process_started`, once read.
_STARTED: list[int | None] = []


def _shadowed(module_name: str, root: str) -> bool:
    """Whether ``root`` holds its own ``module_name`` (so the loaded one is another's)."""
    top = os.path.join(root, module_name.split(".")[0])
    return os.path.exists(top + ".py") or os.path.exists(os.path.join(top, "__init__.py"))


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
        return _read(path)
    except OSError:
        return b""


def defining_files(fn: object, module: ModuleType, root: str) -> list[str]:
    """The source files that define ``fn`` besides ``module``'s own, resolved and sorted:
    empty for a function defined in the module named for it (the usual case).

    A function imported into the named module (``app.py`` holding ``from impl import
    answer``) is defined by ``impl.py``: that file is "the module that defines it" (SPEC
    §2), whose bytes belong in the identity as much as the named module's. Found from the
    module Python records for the function (``__module__``) and, for project code only,
    the file its code was compiled from (``__code__.co_filename``: a wrapper of a project
    module's own making); an installed package's wrapper (``functools.wraps`` keeps the
    ``__module__`` of what it wraps) stays out, as installed packages do."""
    own = source_file(module)
    skip = {os.path.realpath(own)} if own else set()
    found: set[str] = set()
    defining = _module_of(fn)
    path = None if defining is None else source_file(defining)
    if path:
        found.add(os.path.realpath(path))
    try:
        code = getattr(fn, "__code__", None)
    except Exception:  # noqa: BLE001 - an object whose attributes raise
        code = None
    filename = getattr(code, "co_filename", None)
    if isinstance(filename, str) and os.path.isfile(filename):
        file = os.path.realpath(filename)
        if _project_file_path(file, os.path.realpath(root)):
            found.add(file)
    return sorted(found - skip)


def file_digests(files: list[str]) -> list[str]:
    """The digests of the bytes of ``files`` (:func:`defining_files`), in their order; an
    unreadable one as the digest of nothing, as :func:`module_source` reads it."""
    out = []
    for path in files:
        try:
            data = _read(path)
        except OSError:
            data = b""
        out.append(digest_bytes(data))
    return out


def code_files(
    root: str, module: ModuleType, defining: list[str], code_paths: dict[str, str] | None,
    outside: list[str],
) -> dict[str, str]:
    """The digest of every project file a run of ``module``'s code reached, by its path
    from the project directory ``root`` (``../`` for a ``code_paths`` file beside it): the
    module's own file, the files that define its function (``defining``), its
    ``code_paths`` (as :func:`code_paths_digest` gave them) and the project files it uses
    outside its identity (``outside``, :func:`imports_outside_identity`); an installed
    package's files are not the project's, and are left out. Stored with the run, so that
    ``gate`` can say which of them changed since without importing any (analysis/stored.py)."""
    base = os.path.realpath(root)
    own = source_file(module)
    files = [p for p in {os.path.realpath(f) for f in [*([own] if own else []), *defining]}
             if _project_file_path(p, base)]  # an installed package's module is not
    found = dict(zip([os.path.relpath(p, base) for p in sorted(files)],
                     file_digests(sorted(files)), strict=True))
    # A code_paths file beside the project by its path from there too (``../shared/x.md``):
    # the store may be read in a checkout at another place (a CI artefact).
    found.update({os.path.relpath(k, base) if os.path.isabs(k) else k: v
                  for k, v in (code_paths or {}).items()})
    extra = [p for p in outside if p not in found]
    found.update(zip(extra, file_digests([os.path.join(base, p) for p in extra]), strict=True))
    return found


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


def _code_files(path: str, found: list[tuple[str, int]], budget: list[int]) -> None:
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
                _code_files(entry.path, found, budget)
        elif stat.S_ISREG(st.st_mode):
            _count(entry.path, st.st_size, found, budget)


def _count(path: str, size: int, found: list[tuple[str, int]], budget: list[int]) -> None:
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
    root: str, code_paths: list[str], *, file: str, field: str
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
    project = os.path.realpath(root)
    budget = [MAX_CODE_PATH_FILES, MAX_CODE_PATH_BYTES]
    for i, entry in enumerate(code_paths):

        def refuse(message: str, i: int = i) -> ConfigError:
            return ConfigError(message, file=file, field=f"{field}[{i}]",
                               accepted=_CODE_PATHS_ACCEPTED)

        path = os.path.realpath(os.path.join(root, entry))
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise refuse(f"'{entry}' does not exist (looked for {path})") from None
        except OSError as exc:
            raise refuse(f"'{entry}' cannot be read ({exc.strerror or exc})") from None
        if _within(project, path):
            raise refuse(
                f"'{entry}' holds the whole project directory ({project}), its store included,"
                " which changes with every run; list the files or directories the code is in"
            )
        found: list[tuple[str, int]] = []
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
                rel = os.path.relpath(p, project) if _within(p, project) else p
                files[rel] = digest_bytes(_read_code(p, size))
        except _CodePathError as exc:
            raise refuse(f"'{entry}': {exc}") from None
    return files


def imports_outside_identity(
    module: ModuleType, root: str, code_paths: list[str], defining: list[str] | None = None
) -> list[str]:
    """Project files the system's module uses that are not part of its identity.

    The identity of a callable system is the source of its own module plus the files of
    ``code_paths`` (SPEC §2), so an edit to any other file it imports leaves its cached
    results in place. A module "uses" what its ``import`` statements name (read from its
    source, so ``from helpers import RULES`` counts though ``RULES`` is data), what it
    imports by a name written in its source (``importlib.import_module("helpers")``, loaded
    or not yet: a call may import it), and what its globals hold (modules, and the modules
    imported functions and classes come from), followed through every module so reached
    that is itself project code: a helper of a helper counts. "Project code" is a source file under the project directory, outside
    hidden folders (``.venv``, ``.oloproof``) and ``site-packages``. The answer is those
    files, relative to the project directory and sorted, less the module's own file and
    anything at or under a ``code_paths`` entry, and the files that define the function
    (``defining``, :func:`defining_files`), which are part of the identity too. It does
    not depend on what was imported before, or in which order (a notebook, a test session).
    """
    base = os.path.realpath(root)
    covered = [os.path.realpath(os.path.join(base, entry)) for entry in code_paths]
    own = source_file(module)
    in_identity = {os.path.realpath(own) if own else None, *(defining or ())}
    unloaded: list[str] = []
    used = {path for _, path in project_modules(module, base, unloaded=unloaded)}
    for name in unloaded:  # imported by name when the code runs: its project file, if any
        stem = os.path.join(base, *name.split("."))
        for path in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(path) and _project_file_path(os.path.realpath(path), base):
                used.add(os.path.realpath(path))
    found = {
        path for path in used
        if path not in in_identity and not any(_within(path, c) for c in covered)
    }
    return sorted(os.path.relpath(p, base) for p in found)


def project_modules(
    module: ModuleType, base: str, *, by_name: bool = True, unloaded: list[str] | None = None
) -> list[tuple[ModuleType, str]]:
    """Every project module ``module`` uses, directly or through other project modules
    (see :func:`imports_outside_identity`), with its resolved source file. ``by_name``:
    with the loaded modules it imports by name (:data:`_BY_NAME`); without them, only
    those whose objects a module may hold (an import statement, a global). ``unloaded``
    receives the names imported by name that are not loaded (yet)."""
    seen: set[str] = {module.__name__}
    reached: list[tuple[ModuleType, str]] = []
    todo = [module]
    while todo:
        current = todo.pop()
        static, named = _imported_names(current)
        if unloaded is not None:
            unloaded.extend(n for n in named if n not in sys.modules)
        found = [sys.modules[n] for n in (*static, *(named if by_name else ()))
                 if n in sys.modules]
        for value in list(vars(current).values()):
            held = _module_of(value)
            if held is not None:
                found.append(held)
        for used in found:
            if used.__name__ in seen:
                continue
            seen.add(used.__name__)
            path = _project_file(used, base)
            if path is not None:
                todo.append(used)
                reached.append((used, path))
    return reached


if TYPE_CHECKING:
    #: What a module Oloproof imported held then (:func:`_bindings`): by global, the value
    #: and, for a class defined in the module, the callables of its own namespace.
    Bindings = dict[str, tuple[object, dict[str, object] | None]]


def _bindings(module: ModuleType) -> Bindings:
    """The callables ``module`` holds as Oloproof imported it (its functions and classes,
    and those it imported), with the members of each class it defines: what
    :func:`patched_code` compares, by identity, with what it holds when a run starts."""
    found: Bindings = {}
    name = module.__name__
    for key, value in list(vars(module).items()):
        if type(value) is ModuleType or not callable(value):
            continue
        members = None
        if issubclass(type(value), type) and vars(value).get("__module__") == name:
            members = {k: v for k, v in vars(value).items() if _member(v)}
        found[key] = (value, members)
    return found


def _member(value: object) -> bool:
    """Whether a class's attribute is code: a function, a callable, a static or class
    method or a property."""
    return callable(value) or type(value) in (staticmethod, classmethod, property)


def _tainted(module: ModuleType) -> bool:
    """Whether ``module`` was imported by a run whose code was patched (:func:`mark_patched`)."""
    return getattr(module, "__oloproof_bindings__", False) is None


def mark_patched(modules: list[ModuleType]) -> None:
    """After :func:`patched_code` found a patch: the modules Oloproof imported for the run
    may hold it (``from helpers import lookup`` while ``helpers.lookup`` was a fake), so
    the project's next run imports them afresh."""
    for module in modules:
        if isinstance(getattr(module, "__oloproof_bindings__", None), dict):
            with contextlib.suppress(AttributeError, TypeError):
                module.__oloproof_bindings__ = None  # type: ignore[attr-defined]


def reached_modules(module: ModuleType, root: str) -> list[ModuleType]:
    """``module`` and the project modules it reaches (:func:`project_modules`): as
    :func:`import_callable` found them last, else found now."""
    reached = getattr(module, "__oloproof_reached__", None)
    if not isinstance(reached, list):
        reached = [m for m, _ in project_modules(module, os.path.realpath(root))]
    return [module, *reached]


def patched_code(modules: list[ModuleType]) -> list[str]:
    """The functions and classes of ``modules`` (a system's module and the project modules
    it reaches) that are not what their files define, as ``module.name`` or
    ``module.Class.name``, sorted: empty when the code is its files'.

    In one process (a test session, a notebook) a test may patch the project's code
    (``monkeypatch.setattr(helpers, "lookup", fake)``, ``unittest.mock.patch``) and then
    run the project: the run calls the fake, while its identity is the files' source.
    A module Oloproof imported is compared with what it held then (:func:`_bindings`),
    by identity; one imported by the caller, as the caller may have left it, with its
    source: each top-level ``def`` must hold a function compiled from its file (through
    ``__wrapped__``), each ``class`` a class of the module whose functions are its file's,
    and each top-level ``from project_module import name`` what that module holds. And no
    mock may be held by them, or by the modules and classes they hold (``openai.OpenAI``
    under ``mock.patch``, where a helper does ``import openai``). When
    something is not, the modules Oloproof imported are imported afresh by the project's
    next run (:func:`mark_patched`): they may hold the patch."""
    found: list[str] = []
    by_name = {m.__name__: m for m in modules}
    for module in modules:
        recorded = getattr(module, "__oloproof_bindings__", None)
        try:
            if isinstance(recorded, dict):
                found += _rebound(module, recorded)
            else:  # imported by the caller: only a run from Python (docs/design-notes.md)
                from oloproof.systems.patches import unlike_source

                found += unlike_source(module, by_name)
        except Exception:  # noqa: BLE001 - an object whose attributes raise: cannot be vouched for
            found.append(module.__name__)
    if "unittest.mock" in sys.modules:  # a mock can exist only once mock is imported
        from oloproof.systems.patches import mocks_held

        found += mocks_held(modules)
    if found:
        mark_patched(modules)
    return sorted(set(found))


def _rebound(module: ModuleType, recorded: Bindings) -> list[str]:
    """The globals (and class members) of ``module`` that are not what Oloproof imported."""
    out = []
    now = vars(module)
    for key, (value, members) in recorded.items():
        if now.get(key, value) is not value:
            out.append(f"{module.__name__}.{key}")
        elif members is not None:
            held = vars(value)
            out += [f"{module.__name__}.{key}.{k}" for k, v in members.items()
                    if held.get(k, v) is not v]
    return out


_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<dots>\.*)(?P<base>[\w.]*)[ \t]+import[ \t]+"
    r"(?P<names>\([^)]*\)|[^\n#;]*)|import[ \t]+(?P<plain>[^\n#;]+))",
    re.MULTILINE,
)
#: A module imported by name, when the code runs: ``importlib.import_module("helpers")``,
#: ``__import__("lib.words")`` (a literal, absolute name; what a variable holds is unseen).
_BY_NAME = re.compile(r"""\b(?:import_module|__import__)\(\s*(?P<q>['"])(?P<name>\w[\w.]*)(?P=q)""")


def _imported_names(module: ModuleType) -> tuple[list[str], list[str]]:
    """The module names ``module``'s source names in its import statements, and those it
    imports by name (:data:`_BY_NAME`), each with its parents, in order."""
    names: list[str] = []
    path = source_file(module)
    try:
        if path:
            with open(path, encoding="utf-8", errors="replace") as f:
                source = f.read()
        else:
            source = ""
    except OSError:
        source = ""
    package = module.__package__ or ""
    for m in _IMPORT.finditer(source):
        if m.group("plain") is not None:
            for part in m.group("plain").split(","):
                name = part.split(" as ")[0].strip()
                names.extend(_prefixes(name))
            continue
        dots, stem = len(m.group("dots")), m.group("base")
        if dots:
            parent = package.rsplit(".", dots - 1)[0] if dots > 1 else package
            stem = f"{parent}.{stem}".strip(".") if parent else stem
        names.extend(_prefixes(stem))
        for part in m.group("names").strip("()").split(","):
            name = part.split(" as ")[0].strip()
            if name and name != "*":
                names.append(f"{stem}.{name}" if stem else name)
    named = [p for m in _BY_NAME.finditer(source) for p in _prefixes(m.group("name"))]
    return list(dict.fromkeys(names)), list(dict.fromkeys(named))


def _prefixes(dotted: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c`` (importing one imports its parents)."""
    parts = [p for p in dotted.split(".") if p.isidentifier()]
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _module_of(value: object) -> ModuleType | None:
    """A module, or the loaded module a function or class was defined in."""
    if isinstance(value, ModuleType):
        return value
    if not callable(value):
        return None
    try:
        name = getattr(value, "__module__", None)
    except Exception:  # noqa: BLE001 - an object whose attributes raise is nobody's module
        return None
    return sys.modules.get(name) if isinstance(name, str) else None


def _project_file(module: ModuleType, base: str) -> str | None:
    """The module's source file when it is project code (see above), else None."""
    path = source_file(module)
    if not path:
        return None
    file = os.path.realpath(path)
    return file if _project_file_path(file, base) else None


def _project_file_path(file: str, base: str) -> bool:
    """Whether the resolved ``file`` is project code: under ``base``, outside hidden
    folders and ``site-packages``."""
    if not _within(file, base) or file == base:
        return False
    parts = os.path.relpath(file, base).split(os.sep)
    return not any(
        p.startswith(".") or p in ("site-packages", "dist-packages") for p in parts[:-1]
    )


def _read_code(path: str, size: int) -> bytes:
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
