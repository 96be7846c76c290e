"""Whether a project module the caller imported (a test, a notebook) holds what its source
defines: the half of :func:`oloproof.systems.loading.patched_code` for modules Oloproof did
not import, so a run from Python only (``oloproof run`` imports every module itself)."""

from __future__ import annotations

import os
import re
import site
import sys
from types import ModuleType

from oloproof.systems.loading import _IMPORT, _read, source_file

__all__ = ["mocks_held", "unlike_source"]

#: A top-level ``def``, ``async def`` or ``class`` statement (at the start of a line).
_DEFINES = re.compile(r"^(?P<kind>async[ \t]+def|def|class)[ \t]+(?P<name>\w+)", re.MULTILINE)


def unlike_source(module: ModuleType, by_name: dict[str, ModuleType]) -> list[str]:
    """What ``module`` (imported by the caller) holds that its source does not define."""
    path = source_file(module)
    if not path:
        return []
    file = os.path.realpath(path)
    try:
        source = _read(file).decode("utf-8", "replace")
    except OSError:
        return []
    out = []
    installed = _installed()
    now = vars(module)
    name = module.__name__
    for m in _DEFINES.finditer(source):
        key = m.group("name")
        if key not in now:
            continue
        value = now[key]
        if m.group("kind") != "class":
            if _foreign(value, file, installed):
                out.append(f"{name}.{key}")
        elif not issubclass(type(value), type) or vars(value).get("__module__") != name:
            out.append(f"{name}.{key}")
        else:
            out += [f"{name}.{key}.{k}" for k, v in vars(value).items()
                    if _foreign(v, file, installed, value.__qualname__)]
    for stem, theirs, alias in _from_imports(module, source):
        held = by_name.get(stem)
        value = None if held is None else vars(held).get(theirs)
        if value is not None and type(value) is not ModuleType and alias in now \
                and now[alias] is not value:
            out.append(f"{name}.{alias}")
    return out


def _installed() -> tuple[str, ...]:
    """The Python installation's folders (the standard library, site-packages), as
    ``_forget_shadowed`` in loading.py finds them."""
    return tuple(
        os.path.realpath(d).rstrip(os.sep) + os.sep
        for d in (os.path.dirname(os.__file__), *getattr(site, "getsitepackages", list)(),
                  getattr(site, "getusersitepackages", str)())
        if d
    )


def _foreign(value: object, file: str, installed: tuple[str, ...], owner: str = "") -> bool:
    """Whether ``value``, a class member or (``function``) what a ``def`` of ``file``
    binds, is not that file's code: a mock; a function compiled from another file, unless
    it wraps one of ``file``'s (``__wrapped__``: ``functools.wraps``, ``lru_cache``) or
    comes with Python or a package installed (``installed``: the methods ``enum`` or
    ``typing.Protocol`` give a class, a library's decorator), or is a method generated for
    the class ``owner`` (``dataclasses``, ``NamedTuple``: compiled from ``<string>``, named
    ``Owner.method``); for a ``def`` (no ``owner``), any callable that is not a function
    too (a ``functools.partial``)."""
    function = not owner
    mock = sys.modules.get("unittest.mock")
    for _ in range(100):
        if mock is not None and (isinstance(value, mock.NonCallableMock) or isinstance(
                getattr(value, "mock", None), mock.NonCallableMock)):  # create_autospec's
            return True
        if type(value) in (staticmethod, classmethod):
            value = value.__func__  # type: ignore[attr-defined]
            continue
        filename = getattr(getattr(value, "__code__", None), "co_filename", None)
        if isinstance(filename, str) and not filename.startswith("<"):
            where = os.path.realpath(filename)
            if where == file or where.startswith(installed):
                return False
        inner = getattr(value, "__wrapped__", None)
        if inner is None:
            if not isinstance(filename, str):
                return function and callable(value)
            if filename.startswith("<"):  # generated, or typed in a console (IPython's)
                made = getattr(value, "__qualname__", None)
                return function or not (isinstance(made, str) and made.startswith(owner + "."))
            return True
        value = inner
    return True


def _from_imports(module: ModuleType, source: str) -> list[tuple[str, str, str]]:
    """The top-level ``from M import name [as alias]`` of ``source``: (M, name, alias)."""
    out = []
    package = module.__package__ or ""
    for m in _IMPORT.finditer(source):
        if m.group("plain") is not None or m.group(0)[:1] in (" ", "\t"):
            continue
        dots, stem = len(m.group("dots")), m.group("base")
        if dots:
            parent = package.rsplit(".", dots - 1)[0] if dots > 1 else package
            stem = f"{parent}.{stem}".strip(".") if parent else stem
        for part in m.group("names").strip("()").split(","):
            theirs, _, alias = part.strip().partition(" as ")
            theirs, alias = theirs.strip(), (alias or theirs).strip()
            if theirs.isidentifier() and alias.isidentifier():
                out.append((stem, theirs, alias))
    return out


def mocks_held(modules: list[ModuleType]) -> list[str]:
    """The ``unittest.mock`` objects ``modules`` hold, and those held one level further, by
    the modules and classes they hold (an installed package's: ``mock.patch("openai.OpenAI")``
    where a helper does ``import openai``, ``mock.patch.object(OpenAI, "create")`` where it
    does ``from openai import OpenAI``), as ``holder.name``. Deeper is not looked at: a
    patch inside an installed package is not part of the project's code."""
    mocks = sys.modules["unittest.mock"].NonCallableMock
    out: list[str] = []
    seen: set[int] = set()
    for module in modules:
        for key, value in list(vars(module).items()):
            kind = type(value)
            if issubclass(kind, mocks):
                out.append(f"{module.__name__}.{key}")
                continue
            if id(value) in seen or not (kind is ModuleType or issubclass(kind, type)):
                continue
            seen.add(id(value))
            try:
                names = list(vars(value).items())
                holder = (value.__name__ if kind is ModuleType
                          else f"{value.__module__}.{value.__qualname__}")
            except (AttributeError, TypeError):
                continue
            out += [f"{holder}.{name}" for name, held in names if issubclass(type(held), mocks)]
    return out
