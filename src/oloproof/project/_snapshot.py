"""The validated configuration, kept so that an unchanged project is not validated again.

Validating oloproof.yaml and the release policy with pydantic costs more than the rest of
an unchanged rerun together: importing pydantic and building the models is about ten
times the interpreter's own start. So after a validation succeeds, ``run`` writes the
records it produced (project/config.py) to ``.oloproof/snapshots/`` as JSON, keyed by
what the command itself resolved:

- the bytes (SHA-256) of oloproof.yaml, of the release policy file and of every rubric
  file, and the answers to the questions the validation asked the disk (the dataset and
  the labels file are regular files, each ``code_paths`` entry exists): the list is made
  by the command from the files it resolves (:func:`_dependencies`), never read from the
  snapshot;
- the code digest (:func:`code_digest`): the source of every module that builds the
  records, found by following the imports of the records, the models, the loader and this
  module (:func:`code_modules`, not a hand-kept list), and the versions of pydantic,
  pydantic-core, jsonschema and PyYAML; with it, the stamp of those inputs (each module
  file's size and modification time, the modification time of the directories the
  versions were read in, the interpreter and environment), which lets the next command
  skip recomputing the digest while none of them changed (:func:`code_stamp`).

The next run with the same ``--config`` and ``--policy`` checks every one of those (a few
reads and hashes, about a millisecond) and, when all hold, reads the records back as the
same classes a validation makes, importing neither pydantic nor PyYAML. When anything
differs, or the snapshot cannot be read, the files are validated as always: errors (file,
field, line) come only from a validation, and a snapshot is only written after one
succeeded. A snapshot is an optimisation, never a source of truth: deleting
``.oloproof/snapshots/`` changes nothing but time.

The same holds for a run's stored policy (``gate``, ``inspect``, ``plan``, ``report``):
``run`` keeps the validated form of the policy it stores, keyed by the digest of that
stored JSON, and it is used only if it dumps back to exactly that JSON.

Reading a snapshot makes only the records of :data:`~oloproof.project.config.RECORDS`
(a stored policy's: :data:`~oloproof.project.policies.POLICY_RECORDS`), with exactly
their fields, from JSON: nothing in a snapshot is executed, whoever wrote it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import sys

from oloproof._json import MAX_JSON_DEPTH, depth_of, loads_bounded
from oloproof.errors import ConfigError
from oloproof.project._files import read_bytes
from oloproof.project._project import DEFAULT_POLICY_FILE, Project, ResolvedPolicy, beside
from oloproof.project.policies import POLICY_RECORDS, ConfigRecord, ReleasePolicy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["code_digest", "load_config", "load_stored_policy", "save_config",
           "save_stored_policy"]

FORMAT = 1
_DIR = "snapshots"
#: A snapshot larger than this is not read (a configuration is at most a few MiB).
_MAX_BYTES = 16 << 20
#: A snapshot is written to a new file only: a named pipe put where it goes would block
#: the open, a link would have another file overwritten.
_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0))


class SnapshotUnusable(Exception):
    """A snapshot that does not hold, or a value a snapshot cannot keep."""


# -- encoding and decoding the records -------------------------------------------------

_SCALARS = (str, int, float, bool, type(None))


def _encode(value: Any, records: dict[str, type[ConfigRecord]]) -> Any:
    """``value`` as JSON: a record is ``{"$m": class name, "f": {field: value}}``, a tuple
    ``{"$t": [...]}``, a frozenset ``{"$s": [...]}``, a dict ``{"$d": {...}}``."""
    cls = type(value)
    if isinstance(value, ConfigRecord):
        if records.get(cls.__name__) is not cls:
            raise SnapshotUnusable(f"unknown record {cls.__name__!r}")
        return {
            "$m": cls.__name__,
            "f": {f.name: _encode(getattr(value, f.name), records)
                  for f in cls.__record_fields__},  # type: ignore[attr-defined]
        }
    if cls in _SCALARS:
        if cls is float and not math.isfinite(value):
            raise SnapshotUnusable("a number JSON cannot hold")
        return value
    if cls is tuple:
        return {"$t": [_encode(v, records) for v in value]}
    if cls is frozenset:
        return {"$s": sorted(_encode(v, records) for v in value)}
    if cls is list:
        return [_encode(v, records) for v in value]
    if cls is dict:
        if not all(type(k) is str for k in value):
            raise SnapshotUnusable("a mapping with keys that are not text")
        return {"$d": {k: _encode(v, records) for k, v in value.items()}}
    raise SnapshotUnusable(f"a value of type {cls.__name__}")


def _decode(node: Any, records: dict[str, type[ConfigRecord]]) -> Any:
    """What :func:`_encode` wrote, as the same classes: only the records of ``records``
    are made, with exactly their fields."""
    if isinstance(node, list):
        return [_decode(v, records) for v in node]
    if isinstance(node, dict):
        if "$d" in node:
            return {k: _decode(v, records) for k, v in node["$d"].items()}
        if "$t" in node:
            return tuple(_decode(v, records) for v in node["$t"])
        if "$s" in node:
            return frozenset(_decode(v, records) for v in node["$s"])
        cls = records.get(node["$m"])
        if cls is None:
            raise SnapshotUnusable(f"unknown record {node['$m']!r}")
        values = node["f"]
        names = [f.name for f in cls.__record_fields__]  # type: ignore[attr-defined]
        if not isinstance(values, dict) or sorted(values) != sorted(names):
            raise SnapshotUnusable(f"not the fields of {cls.__name__}")
        return cls(**{n: _decode(values[n], records) for n in names})
    if type(node) in _SCALARS:
        return node
    raise SnapshotUnusable("not a value a snapshot holds")


# -- what a snapshot depends on ---------------------------------------------------------


def _sha(data: bytes) -> str:
    from hashlib import sha256  # OpenSSL's: not imported by `gate` (see _policy_path)

    return sha256(data).hexdigest()


def _bytes(path: str) -> bytes | None:
    """The file's bytes, or ``None``: missing, too large, or not a regular file (a FIFO put
    where a checked file was must not hang the run; the validation then names it)."""
    try:
        return read_bytes(path, path, _MAX_BYTES)
    except ConfigError:
        return None


def _content(path: str) -> str | None:
    data = _bytes(path)
    return None if data is None else _sha(data)


#: Where the modules that build the records start: the records, the models that validate
#: into them, the loader and this module. Every module of Oloproof these import, at the
#: top or in a function, is followed (:func:`code_modules`).
_ROOTS = ("oloproof.project.config", "oloproof.project.models", "oloproof.project.loader",
          "oloproof.project._snapshot")
#: The libraries whose version decides what a validation produces: (import name, name of
#: the distribution as its ``.dist-info`` directory spells it).
_LIBRARIES = (("pydantic", "pydantic"), ("pydantic_core", "pydantic_core"),
              ("jsonschema", "jsonschema"), ("yaml", "pyyaml"))
# Compiled by `re` when a digest is computed (the stamp missed), not at every import.
_NAME = rb"oloproof(?:\.\w+)*"
_COMMENT = rb"#[^\n]*"


def _imports(source: bytes) -> list[tuple[str, list[str]]]:
    """The ``oloproof`` modules ``source`` imports, each with the names imported from it
    (``from oloproof.x import a, b``: ``("oloproof.x", ["a", "b"])``). Any import statement
    counts, at the top or in a function (a lazy import builds records too), except under
    ``if TYPE_CHECKING:`` (never run); the literal search keeps it fast (every run that
    uses a snapshot reads these)."""
    found: list[tuple[str, list[str]]] = []
    for match in re.finditer(_NAME, source):
        before = source[max(0, match.start() - 7):match.start()]
        if not before.endswith((b"import ", b"from ")):
            continue  # a name in text (oloproof.yaml, a docstring): most of the matches
        start = source.rfind(b"\n", 0, match.start()) + 1
        head = source[start:match.start()]
        words = head.split()
        if words not in ([b"import"], [b"from"]) or _type_checking_only(source, start):
            continue
        if words == [b"import"]:
            found.append((match.group().decode(), []))
        elif words == [b"from"]:
            rest_start = match.end()
            end = source.find(b"\n", rest_start)
            rest = source[rest_start:end if end >= 0 else len(source)]
            if not rest.lstrip().startswith(b"import"):
                continue
            names = rest.lstrip()[len(b"import"):]
            if names.strip().startswith(b"("):
                close = source.find(b")", rest_start)
                names = source[rest_start:close if close >= 0 else len(source)]
                names = re.sub(_COMMENT, b"", names[names.find(b"(") + 1:])
            found.append((match.group().decode(),
                          [w.split()[0].decode() for w in names.split(b",") if w.split()]))
    return found


def _type_checking_only(source: bytes, start: int) -> bool:
    """Whether the indented line at ``start`` is in the block of an ``if TYPE_CHECKING:``
    (the nearest line above it that is indented less)."""
    line_end = source.find(b"\n", start)
    line = source[start:line_end if line_end >= 0 else len(source)]
    indent = len(line) - len(line.lstrip())
    end = start - 1
    while indent and end > 0:
        begin = source.rfind(b"\n", 0, end) + 1
        above = source[begin:end]
        stripped = above.lstrip()
        if stripped and not stripped.startswith(b"#") and len(above) - len(stripped) < indent:
            return stripped.startswith(b"if TYPE_CHECKING")
        end = begin - 1
    return False


def code_modules() -> list[str]:
    """The files of the modules that build the configuration's records: the roots above
    and every ``oloproof`` module they import, transitively, found by reading their
    source (no module is imported). A name imported from a package that is one of its
    modules (``from oloproof.project import suite``) counts as that module, and a package's
    ``__init__`` counts with any module of it (it runs first)."""
    return sorted(_code_sources())


def _code_sources() -> dict[str, bytes]:
    """:func:`code_modules`' files and their bytes, each read once."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found: dict[str, bytes] = {}
    done: set[str] = set()
    todo = list(_ROOTS)
    while todo:
        name = todo.pop()
        if name in done:
            continue
        done.add(name)
        base = os.path.join(package, *name.split(".")[1:])
        path = base + ".py"
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError:
            path = os.path.join(base, "__init__.py")
            try:
                with open(path, "rb") as f:
                    source = f.read()
            except OSError:
                continue  # a name imported from a package that is not a module of it
        found[path] = source
        todo.append(name.rpartition(".")[0])
        for module, names in _imports(source):
            todo.append(module)
            if names and _is_package(package, module):
                todo += [f"{module}.{n}" for n in names if n.isidentifier()]
    return found


@functools.cache
def _is_package(package: str, module: str) -> bool:
    return os.path.isfile(os.path.join(package, *module.split(".")[1:], "__init__.py"))


def _library_versions() -> list[str]:
    """``name-version.dist-info`` of each library in :data:`_LIBRARIES`, found without
    importing it (a run read from its snapshot never imports pydantic)."""
    return _libraries()[0]


def _library_dirs() -> list[str]:
    """The directories :func:`_library_versions` listed."""
    return _libraries()[1]


@functools.cache
def _libraries() -> tuple[list[str], list[str]]:
    """What :func:`_library_versions` returns, and the directories it listed: the
    directory the first library is installed in is listed once, and usually holds them
    all."""
    from importlib.machinery import PathFinder

    listed: dict[str, list[str]] = {}
    out: list[str] = []
    for top, dist in _LIBRARIES:
        prefix = f"{dist}-"
        found: list[str] = []
        for site, names in listed.items():
            found = [n for n in names if n.endswith(".dist-info") and n.lower().startswith(prefix)
                     and os.path.isdir(os.path.join(site, top))]
            if found:
                break
        if not found:
            spec = PathFinder.find_spec(top)
            if spec is None or not spec.submodule_search_locations:
                out.append(f"{dist} (not found)")
                continue
            site = os.path.dirname(next(iter(spec.submodule_search_locations)))
            try:
                listed[site] = sorted(os.listdir(site))
            except OSError:
                listed[site] = []
            found = [n for n in listed[site]
                     if n.endswith(".dist-info") and n.lower().startswith(prefix)]
        out.append(",".join(found) or f"{dist} (no version found)")
    return out, sorted(listed)


@functools.cache
def code_digest() -> str:
    """The digest of what decides what a validation produces: the source of every module in
    :func:`code_modules` and the versions of pydantic, pydantic-core, jsonschema and
    PyYAML. Computed once per process (a run asks twice)."""
    from hashlib import sha256

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = _code_sources()
    h = sha256(f"{FORMAT}".encode())
    for path in sorted(sources):
        h.update(os.path.relpath(path, package).encode() + b"\0" + sources[path] + b"\0")
    for version in _library_versions():
        h.update(version.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


# The code stamp: what a snapshot's code digest was computed from, as the file system
# describes it (size and modification time of each module file, as Python checks a .pyc
# against its source; the modification time of each directory a library's version was
# read in, which an install or removal there changes), with the interpreter and the
# environment. When every one of them still holds, the modules and libraries are the
# ones the digest was made of, and it is not computed again: reading and following 19
# modules' imports and listing site-packages cost about 3 ms of each command that reads
# a snapshot (docs/performance.md). The list comes from the snapshot, so it is checked
# to hold the roots (the graph of imports is a function of the files it starts from:
# none of them changed, so neither did the graph).


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _environment() -> list[str]:
    return [sys.version, sys.prefix, str(FORMAT)]


def code_stamp() -> dict[str, Any]:
    """The stamp of :func:`code_digest`'s inputs (written with a snapshot)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = [[os.path.relpath(path, package), *(_stat(path) or [-1, -1])]
             for path in sorted(_code_sources())]
    return {"env": _environment(), "files": files,
            "dirs": [[d, *(_stat(d) or [-1, -1])] for d in _library_dirs()]}


def _stamp_holds(stamp: Any) -> bool:
    """Whether the code a snapshot's stamp describes is the code here (see above)."""
    if type(stamp) is not dict or stamp.get("env") != _environment():
        return False
    files, dirs = stamp.get("files"), stamp.get("dirs")
    if type(files) is not list or type(dirs) is not list or not dirs:
        return False
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = {os.path.join(*name.split(".")[1:]) + ".py" for name in _ROOTS}
    seen: set[str] = set()
    for entry in files:
        if type(entry) is not list or len(entry) != 3 or type(entry[0]) is not str:
            return False
        rel = entry[0]
        if os.path.isabs(rel) or ".." in rel.split(os.sep) or not rel.endswith(".py"):
            return False
        if _stat(os.path.join(package, rel)) != entry[1:]:
            return False
        seen.add(rel)
    for entry in dirs:
        if type(entry) is not list or len(entry) != 3 or type(entry[0]) is not str:
            return False
        if _stat(entry[0]) != entry[1:]:
            return False
    return roots <= seen


def _stamp_again(path: str, doc: dict[str, Any]) -> None:
    """A current snapshot whose stamp did not hold (the same code, its files touched):
    written again with the stamp of now, so that the next command need not compute the
    digest; nothing written when the stamp would not change."""
    fresh = code_stamp()
    if fresh != doc.get("stamp"):
        _write(path, {**doc, "stamp": fresh})


def _code_current(doc: dict[str, Any], restamp: str | None = None) -> bool:
    """Whether a snapshot was made by this code: its stamp holds, or (the files were
    touched, a library installed beside) its digest is still this code's; in that case,
    with ``restamp``, the snapshot there is written again with the stamp of now."""
    if _stamp_holds(doc.get("stamp")):
        return True
    if doc.get("code") != code_digest():
        return False
    if restamp is not None:
        _stamp_again(restamp, doc)
    return True


def _check(dep: list[Any]) -> bool:
    kind, path, expected = dep
    if kind == "content":
        return bool(_content(path) == expected)
    if kind == "isfile":
        return bool(os.path.isfile(path) == expected)
    if kind == "exists":
        return bool(os.path.exists(path) == expected)
    return False


def _folder(root: str) -> str:
    return os.path.join(root, ".oloproof", _DIR)


def _request(config_path: str | os.PathLike[str], policy_arg: str | None) -> tuple[str, str]:
    config = os.path.abspath(config_path)
    policy = None if policy_arg is None else os.path.abspath(policy_arg)
    key = _sha(json.dumps([config, policy]).encode("utf-8", "surrogatepass"))
    return os.path.join(_folder(os.path.dirname(config)), f"config-{key[:40]}.json"), key


def _read(path: str) -> dict[str, Any] | None:
    data = _bytes(path)
    if data is None:
        return None
    try:
        doc = loads_bounded(data)  # the one depth limit: a snapshot nested deeper is not one
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _write(path: str, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically, readable by the owner only; a snapshot that
    cannot be written is simply not there next time."""
    folder = os.path.dirname(path)
    if not os.path.isdir(os.path.dirname(folder)):  # no store yet: the run creates it
        return
    if depth_of(doc) > MAX_JSON_DEPTH:
        return  # it could not be read back (_read)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # a leftover, or whatever was put there: never written through
        fd = os.open(tmp, _NEW_FILE, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass


# -- the project's configuration and its release policy ----------------------------------


def load_config(
    config_path: str | os.PathLike[str], policy_arg: str | None
) -> tuple[Project, ResolvedPolicy] | None:
    """The project and its release policy from the snapshot, if every file it was
    validated from is unchanged; ``None`` otherwise (then validate)."""
    # The project's records: not made by the commands that read a stored policy only.
    from oloproof.project.config import RECORDS, ProjectConfig

    path, key = _request(config_path, policy_arg)
    doc = _read(path)
    try:
        if doc is None or doc.get("format") != FORMAT or doc.get("key") != key:
            return None
        stamped = _stamp_holds(doc.get("stamp"))
        if not stamped and doc.get("code") != code_digest():
            return None
        config = _decode(doc["config"], RECORDS)
        policy = _decode(doc["policy"], POLICY_RECORDS)
        if type(config) is not ProjectConfig or type(policy) is not ReleasePolicy:
            return None
        display = os.fspath(config_path)
        abspath = os.path.abspath(config_path)
        project = Project(root=os.path.dirname(abspath), config_path=abspath, config=config,
                          display=display)
        # What to check is decided here, from the files this command resolves (the
        # --config and --policy it was given, the policy, dataset, labels, code paths
        # and rubrics the configuration names), never taken from the snapshot: a
        # snapshot written with "deps": [] was used whatever release.yaml said.
        how, name, deps = _dependencies(project, policy_arg)
        for dep in deps:
            if dep[0] == "content":
                dep[2] = _content(dep[1])
            elif not _check(dep):
                return None
        if doc["deps"] != deps or doc["resolved"] != [how, name]:
            return None
        if not stamped:
            _stamp_again(path, doc)
        shown = {"arg": policy_arg, "declared": None, "default": None, "none": None}[how]
        if how in ("declared", "default") and name is not None:
            shown = beside(project, name)
        resolved = ResolvedPolicy(policy, shown, declared_none=how == "none")
    except (KeyError, TypeError, ValueError, AttributeError, SnapshotUnusable, RecursionError):
        return None
    return project, resolved


def save_config(
    config_path: str | os.PathLike[str], policy_arg: str | None, project: Project,
    resolved: ResolvedPolicy,
) -> None:
    """Keep what a successful validation produced (see the module's docstring)."""
    from oloproof.project.config import RECORDS

    path, key = _request(config_path, policy_arg)
    config = project.config
    how, name, deps = _dependencies(project, policy_arg)
    for dep in deps:
        if dep[0] == "content":
            dep[2] = _content(dep[1])
            if dep[2] is None:
                return
    try:
        doc = {
            "format": FORMAT, "key": key, "code": code_digest(), "stamp": code_stamp(),
            "deps": deps,
            "resolved": [how, name],
            "config": _encode(config, RECORDS),
            "policy": _encode(resolved.policy, POLICY_RECORDS),
        }
    except (SnapshotUnusable, RecursionError):
        return
    _write(path, doc)


def _dependencies(
    project: Project, policy_arg: str | None
) -> tuple[str, str | None, list[list[Any]]]:
    """How the release policy is resolved (``arg``, ``declared``, ``default``, ``none``)
    and its name, and what a configuration snapshot rests on: ``["content", path,
    None]`` (its digest to be filled in), ``["isfile", path, True]``, ``["exists", path,
    True]``. Written by :func:`save_config` and recomputed by :func:`load_config`."""
    root = project.root
    config = project.config
    deps: list[list[Any]] = [["content", project.config_path, None]]
    how: str
    name: str | None
    if policy_arg is not None:
        how, name = "arg", policy_arg
        deps.append(["content", os.path.abspath(policy_arg), None])
    elif config.policy is not None and config.declares_no_policy:
        how, name = "none", None
    elif config.policy is not None:
        how, name = "declared", config.policy
        deps.append(["content", os.path.join(root, config.policy), None])
    else:
        how, name = "default", DEFAULT_POLICY_FILE
        deps.append(["content", os.path.join(root, DEFAULT_POLICY_FILE), None])
    deps.append(["isfile", os.path.join(root, config.dataset), True])
    if config.human_labels is not None:
        deps.append(["isfile", os.path.join(root, config.human_labels), True])
    deps += [["exists", os.path.join(root, entry), True] for entry in config.system.code_paths]
    for evaluator in config.evaluators:
        if evaluator.type == "rubric_judge" and evaluator.rubric_file is not None:
            deps.append(["content", os.path.join(root, evaluator.rubric_file), None])
    return how, name, deps


# -- a run's stored policy ------------------------------------------------------------------


def _policy_path(root: str, stored: Any) -> str:
    from binascii import crc32

    from oloproof._json import canonical_json

    # Not SHA-256: `gate` hashes nothing else, and OpenSSL's hashlib costs it 2-3 ms to
    # import. A name shared by two policies only makes one miss (the snapshot holds the
    # whole stored policy, compared by _current).
    data = canonical_json(stored).encode("utf-8", "surrogatepass")
    return os.path.join(_folder(root), f"policy-{crc32(data):08x}-{len(data)}.json")


def _current(doc: dict[str, Any] | None, stored: Any, restamp: str | None = None) -> bool:
    """Whether a stored policy's snapshot can be used: written by this code (a snapshot
    of an older Oloproof is written again, not kept forever), for this policy, and every
    file it rests on unchanged (the list decided here, not read from the snapshot).
    ``restamp``: as for :func:`_code_current`."""
    return (
        doc is not None and doc.get("format") == FORMAT and doc.get("stored") == stored
        and _code_current(doc, restamp)
    )


def _as_stored(policy: Any) -> Any:
    """A validated policy as a run stores it (runner/build.py policy_json, which this
    mirrors: the project layer may not import the runner's)."""
    data = dict(policy.dump(mode="json"))
    for rule in data.get("rules", []):
        if rule.get("aggregate") is None:
            rule.pop("aggregate", None)
    return data


def load_stored_policy(root: str, stored: Any) -> ReleasePolicy | None:
    """The validated form of a run's stored policy (the JSON in its row), when a run kept
    it; ``None`` otherwise (then validate)."""
    try:
        path = _policy_path(root, stored)
        doc = _read(path)
        if doc is None or not _current(doc, stored):
            return None
        policy = _decode(doc["policy"], POLICY_RECORDS)
        # The validated form must be the stored policy itself: a snapshot whose rules
        # were edited ("rules": []) would otherwise decide the run in their place.
        if type(policy) is not ReleasePolicy or _as_stored(policy) != stored:
            return None
    except (KeyError, TypeError, ValueError, AttributeError, SnapshotUnusable, RecursionError,
            OSError):
        return None
    return policy


def save_stored_policy(root: str, stored: Any) -> None:
    """Validate a policy as it is stored with a run, and keep the result for ``gate``."""
    try:
        path = _policy_path(root, stored)
        if _current(_read(path), stored, restamp=path):
            return
        policy = ReleasePolicy.validate(stored)
        doc = {
            "format": FORMAT, "code": code_digest(), "stamp": code_stamp(), "stored": stored,
            "policy": _encode(policy, POLICY_RECORDS),
        }
    except Exception:  # noqa: BLE001 - a snapshot is an optimisation; gate validates then
        return
    _write(path, doc)
