"""The validated configuration, kept so that an unchanged project is not validated again.

Validating oloproof.yaml and the release policy with pydantic costs more than the rest of
an unchanged rerun together: importing pydantic and building the models is about ten
times the interpreter's own start. So after a validation succeeds, ``run`` writes what it
produced to ``.oloproof/snapshots/`` as JSON, with everything the validation read:

- the bytes (SHA-256) of oloproof.yaml, of the release policy file, of every rubric file,
  and of the modules that define the validation (models, shapes, loader, this module,
  and pydantic's version file);
- the answers to the questions it asked the disk: the dataset and the labels file are
  regular files, each ``code_paths`` entry exists.

The next run with the same ``--config`` and ``--policy`` checks every one of those (a
few reads and hashes, well under a millisecond for a project of usual size) and, when
all hold, reads the configuration back as plain objects (:class:`Plain`) that answer the
same fields, properties and methods as the models (project/_shapes.py) and import
neither pydantic nor PyYAML. When anything differs, or the snapshot cannot be read, the
files are validated as always: errors (file, field, line) come only from a validation,
and a snapshot is only written after one succeeded. A snapshot is an optimisation,
never a source of truth: deleting ``.oloproof/snapshots/`` changes nothing but time.

The same holds for a run's stored policy (``gate``, ``inspect``): ``run`` keeps the
validated form of the policy it stores, keyed by the digest of that stored JSON.

Reading a snapshot builds only the classes named in :data:`_MODELS`, from JSON: nothing
in a snapshot is executed, whoever wrote it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof._json import MAX_JSON_DEPTH, depth_of, loads_bounded
from oloproof.errors import ConfigError
from oloproof.project._files import read_bytes
from oloproof.project._project import DEFAULT_POLICY_FILE, Project, ResolvedPolicy, beside
from oloproof.project._shapes import (
    AbsoluteErrorShape,
    ComparePolicyShape,
    CompareRuleShape,
    ConcurrencyShape,
    CustomShape,
    EvaluatorShape,
    IntervalRuleShape,
    JudgeValidationShape,
    MatrixShape,
    MatrixVariantShape,
    ObservedCountRuleShape,
    ProjectConfigShape,
    RegexShape,
    ReleasePolicyShape,
    RubricJudgeShape,
)

if TYPE_CHECKING:
    from typing import Any

    from oloproof.project.models import ReleasePolicy

__all__ = ["Plain", "load_config", "load_stored_policy", "save_config", "save_stored_policy"]

FORMAT = 1
_DIR = "snapshots"
#: A snapshot larger than this is not read (a configuration is at most a few MiB).
_MAX_BYTES = 16 << 20
#: A snapshot is written to a new file only: a named pipe put where it goes would block
#: the open, a link would have another file overwritten.
_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0))
#: The modules whose code decides what a validation produces.
_CODE = ("models.py", "_shapes.py", "_snapshot.py", "loader.py", "_project.py")

# The models a snapshot may name, and what each answers besides its fields.
_MODELS: dict[str, type] = {
    "ProjectConfig": ProjectConfigShape,
    "SystemConfig": object,
    "HttpSystemConfig": object,
    "ModelSystemConfig": object,
    "MatrixConfig": MatrixShape,
    "MatrixVariant": MatrixVariantShape,
    "ConcurrencyConfig": ConcurrencyShape,
    "AdaptiveConfig": object,
    "RetryConfig": object,
    "RayConfig": object,
    "LimitsConfig": object,
    "ExactMatchEvaluator": EvaluatorShape,
    "ContainsEvaluator": EvaluatorShape,
    "RegexEvaluator": RegexShape,
    "JsonSchemaEvaluator": EvaluatorShape,
    "AbsoluteErrorEvaluator": AbsoluteErrorShape,
    "RubricJudgeEvaluator": RubricJudgeShape,
    "PanelMember": object,
    "CustomEvaluator": CustomShape,
    "ReleasePolicy": ReleasePolicyShape,
    "RuleFamily": object,
    "IntervalRule": IntervalRuleShape,
    "ObservedCountRule": ObservedCountRuleShape,
    "JudgeValidation": JudgeValidationShape,
    "ComparePolicy": ComparePolicyShape,
    "CompareRule": CompareRuleShape,
}


class SnapshotUnusable(Exception):
    """A snapshot that does not hold, or a value a snapshot cannot keep."""


# -- the plain mirror ---------------------------------------------------------------


class Plain:
    """A validated model's fields as attributes, without pydantic.

    ``model_fields_set``, ``model_dump`` and ``model_copy`` behave as the model's do for
    what Oloproof asks of them (a test compares them on every example project).
    """

    _meta: dict[str, Any]  # per class: {"fields": [...], "alias": {...}, "exclude": [...]}
    model_fields_set: frozenset[str]

    def __init__(self, values: dict[str, Any], fields_set: frozenset[str]) -> None:
        self.__dict__.update(values)
        self.__dict__["model_fields_set"] = fields_set

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):  # frozen, as the models are; private state is not
            raise AttributeError(f"{type(self).__name__} is frozen")
        self.__dict__[name] = value

    def __eq__(self, other: object) -> bool:
        if type(other).__name__ != type(self).__name__ or not hasattr(other, "model_dump"):
            return NotImplemented
        return bool(self.model_dump() == other.model_dump())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={self.__dict__[n]!r}" for n in self._meta["fields"])
        return f"{type(self).__name__}({fields})"

    def model_dump(
        self, *, mode: str = "python", by_alias: bool = False,
        exclude: set[str] | None = None, exclude_unset: bool = False,
    ) -> dict[str, Any]:
        meta = self._meta
        out: dict[str, Any] = {}
        for name in meta["fields"]:
            if name in meta["exclude"] or (exclude and name in exclude):
                continue
            if exclude_unset and name not in self.model_fields_set:
                continue
            key = meta["alias"].get(name, name) if by_alias else name
            out[key] = _dump(self.__dict__[name], mode, by_alias, exclude_unset)
        return out

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Plain:
        values = {n: self.__dict__[n] for n in self._meta["fields"]}
        private = {k: v for k, v in self.__dict__.items() if k.startswith("_")}
        values.update(update or {})
        copy = type(self)(values, self.model_fields_set | frozenset(update or ()))
        copy.__dict__.update(private)
        return copy


def _dump(value: Any, mode: str, by_alias: bool, exclude_unset: bool) -> Any:
    if isinstance(value, Plain):
        return value.model_dump(mode=mode, by_alias=by_alias, exclude_unset=exclude_unset)
    if isinstance(value, tuple):
        items = [_dump(v, mode, by_alias, exclude_unset) for v in value]
        return items if mode == "json" else tuple(items)
    if isinstance(value, list):
        return [_dump(v, mode, by_alias, exclude_unset) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v, mode, by_alias, exclude_unset) for k, v in value.items()}
    return value


class _Members:
    """A rubric judge's ``members()``: its panel as complete configurations, validated
    when the snapshot was written."""

    def members(self) -> list[Any]:
        return list(self.__dict__["_members"])


_classes: dict[str, type[Plain]] = {}


def _plain_class(name: str, meta: dict[str, Any]) -> type[Plain]:
    shape = _MODELS.get(name)
    if shape is None:
        raise SnapshotUnusable(f"unknown model {name!r}")
    cls = _classes.get(name)
    if cls is None or cls._meta != meta:
        bases: tuple[type, ...] = (Plain,) if shape is object else (shape, Plain)
        if name == "RubricJudgeEvaluator":
            bases = (_Members, *bases)
        cls = type(name, bases, {"_meta": meta, "__module__": __name__})
        _classes[name] = cls
    return cls


# -- encoding (after a validation, with pydantic loaded) ----------------------------

_SCALARS = (str, int, float, bool, type(None))


def _encode(value: Any, classes: dict[str, Any]) -> Any:
    fields = getattr(type(value), "model_fields", None)
    if fields is not None:
        cls = type(value)
        name = cls.__name__
        if name not in _MODELS:
            raise SnapshotUnusable(f"unknown model {name!r}")
        classes.setdefault(name, {
            "fields": list(fields),
            "alias": {n: f.alias for n, f in fields.items() if f.alias and f.alias != n},
            "exclude": [n for n, f in fields.items() if f.exclude],
        })
        node: dict[str, Any] = {
            "$m": name,
            "f": {n: _encode(getattr(value, n), classes) for n in fields},
            "s": sorted(value.model_fields_set),
        }
        private = getattr(value, "__pydantic_private__", None) or {}
        if private:
            node["p"] = {k: _encode(v, classes) for k, v in private.items()}
        if name == "RubricJudgeEvaluator":
            node["members"] = [_encode(m, classes) for m in value.members()]
        return node
    if type(value) in _SCALARS:
        if isinstance(value, float) and not math.isfinite(value):
            raise SnapshotUnusable("a number JSON cannot hold")
        return value
    if type(value) is tuple:
        return {"$t": [_encode(v, classes) for v in value]}
    if type(value) is list:
        return [_encode(v, classes) for v in value]
    if type(value) is dict:
        if not all(type(k) is str for k in value):
            raise SnapshotUnusable("a mapping with keys that are not text")
        return {"$d": {k: _encode(v, classes) for k, v in value.items()}}
    raise SnapshotUnusable(f"a value of type {type(value).__name__}")


def _decode(node: Any, classes: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_decode(v, classes) for v in node]
    if isinstance(node, dict):
        if "$d" in node:
            return {k: _decode(v, classes) for k, v in node["$d"].items()}
        if "$t" in node:
            return tuple(_decode(v, classes) for v in node["$t"])
        name = node["$m"]
        meta = classes[name]
        cls = _plain_class(name, meta)
        values = {n: _decode(node["f"][n], classes) for n in meta["fields"]}
        obj = cls(values, frozenset(node["s"]))
        for key, value in node.get("p", {}).items():
            if not key.startswith("_"):
                raise SnapshotUnusable(f"private attribute {key!r}")
            obj.__dict__[key] = _decode(value, classes)
        if "members" in node:
            obj.__dict__["_members"] = [_decode(m, classes) for m in node["members"]]
        return obj
    if type(node) in _SCALARS:
        return node
    raise SnapshotUnusable("not a value a snapshot holds")


# -- what a snapshot depends on ---------------------------------------------------------


def _sha(data: bytes) -> str:
    return sha256(data).hexdigest()


def _bytes(path: Path) -> bytes | None:
    """The file's bytes, or ``None``: missing, too large, or not a regular file (a FIFO put
    where a checked file was must not hang the run; the validation then names it)."""
    try:
        return read_bytes(path, str(path), _MAX_BYTES)
    except ConfigError:
        return None


def _content(path: Path) -> str | None:
    data = _bytes(path)
    return None if data is None else _sha(data)


@functools.cache
def _code_digest() -> str:
    """The digest of the validating modules: read once per process (a run asks twice)."""
    here = Path(__file__).parent
    h = sha256(f"{FORMAT}".encode())
    for name in _CODE:
        h.update((here / name).read_bytes())
    return h.hexdigest()


def _check(dep: list[Any]) -> bool:
    kind, path, expected = dep
    p = Path(path)
    if kind == "content":
        return bool(_content(p) == expected)
    if kind == "isfile":
        return bool(p.is_file() == expected)
    if kind == "exists":
        return bool(p.exists() == expected)
    return False


def _folder(root: Path) -> Path:
    return root / ".oloproof" / _DIR


def _request(config_path: str | Path, policy_arg: str | None) -> tuple[Path, str]:
    config = Path(os.path.abspath(config_path))
    policy = None if policy_arg is None else os.path.abspath(policy_arg)
    key = _sha(json.dumps([str(config), policy]).encode("utf-8", "surrogatepass"))
    return _folder(config.parent) / f"config-{key[:40]}.json", key


def _read(path: Path) -> dict[str, Any] | None:
    data = _bytes(path)
    if data is None:
        return None
    try:
        doc = loads_bounded(data)  # the one depth limit: a snapshot nested deeper is not one
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _write(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically, readable by the owner only; a snapshot that
    cannot be written is simply not there next time."""
    if not path.parent.parent.is_dir():  # no store yet: the run creates it
        return
    if depth_of(doc) > MAX_JSON_DEPTH:
        return  # it could not be read back (_read)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
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
    config_path: str | Path, policy_arg: str | None
) -> tuple[Project, ResolvedPolicy] | None:
    """The project and its release policy from the snapshot, if every file it was
    validated from is unchanged; ``None`` otherwise (then validate)."""
    path, key = _request(config_path, policy_arg)
    doc = _read(path)
    try:
        if doc is None or doc.get("format") != FORMAT or doc.get("key") != key:
            return None
        if doc.get("code") != _code_digest():
            return None
        classes = doc["classes"]
        config = _decode(doc["config"], classes)
        policy = _decode(doc["policy"], classes)
        if not isinstance(config, ProjectConfigShape) or not isinstance(policy, ReleasePolicyShape):
            return None
        display = str(config_path)
        abspath = Path(os.path.abspath(config_path))
        project = Project(root=abspath.parent, config_path=abspath, config=config,  # type: ignore[arg-type]
                          display=display)
        # What to check is decided here, from the files this command resolves (the
        # --config and --policy it was given, the policy, dataset, labels, code paths
        # and rubrics the configuration names), never taken from the snapshot: a
        # snapshot written with "deps": [] was used whatever release.yaml said.
        how, name, deps = _dependencies(project, policy_arg)
        for dep in deps:
            if dep[0] == "content":
                dep[2] = _content(Path(dep[1]))
            elif not _check(dep):
                return None
        if doc["deps"] != deps or doc["resolved"] != [how, name]:
            return None
        shown = {"arg": policy_arg, "declared": None, "default": None, "none": None}[how]
        if how in ("declared", "default") and name is not None:
            shown = beside(project, name)
        resolved = ResolvedPolicy(policy, shown, declared_none=how == "none")  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError, AttributeError, SnapshotUnusable, RecursionError):
        return None
    return project, resolved


def save_config(
    config_path: str | Path, policy_arg: str | None, project: Project, resolved: ResolvedPolicy
) -> None:
    """Keep what a successful validation produced (see the module's docstring)."""
    path, key = _request(config_path, policy_arg)
    config = project.config
    how, name, deps = _dependencies(project, policy_arg)
    for dep in deps:
        if dep[0] == "content":
            dep[2] = _content(Path(dep[1]))
            if dep[2] is None:
                return
    classes: dict[str, Any] = {}
    try:
        doc = {
            "format": FORMAT, "key": key, "code": _code_digest(), "deps": deps,
            "resolved": [how, name],
            "config": _encode(config, classes), "policy": _encode(resolved.policy, classes),
            "classes": classes,
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
    deps: list[list[Any]] = [["content", str(project.config_path), None]]
    how: str
    name: str | None
    if policy_arg is not None:
        how, name = "arg", policy_arg
        deps.append(["content", os.path.abspath(policy_arg), None])
    elif config.policy is not None and config.declares_no_policy:
        how, name = "none", None
    elif config.policy is not None:
        how, name = "declared", config.policy
        deps.append(["content", str(root / config.policy), None])
    else:
        how, name = "default", DEFAULT_POLICY_FILE
        deps.append(["content", str(root / DEFAULT_POLICY_FILE), None])
    deps.append(["isfile", str(root / config.dataset), True])
    if config.human_labels is not None:
        deps.append(["isfile", str(root / config.human_labels), True])
    deps += [["exists", str(root / entry), True] for entry in config.system.code_paths]
    for evaluator in config.evaluators:
        if evaluator.type == "rubric_judge" and evaluator.rubric_file is not None:
            deps.append(["content", str(root / evaluator.rubric_file), None])
    deps.append(["content", _pydantic_version_file(), None])
    return how, name, deps


def _pydantic_version_file() -> str:
    """pydantic's version file, found without importing pydantic (a run from its snapshot
    never does)."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("pydantic")
    if spec is None or not spec.submodule_search_locations:
        return "pydantic/version.py (not found)"
    return os.path.join(next(iter(spec.submodule_search_locations)), "version.py")


# -- a run's stored policy ------------------------------------------------------------------


def _policy_path(root: Path, stored: Any) -> Path:
    from oloproof._json import canonical_json

    key = _sha(canonical_json(stored).encode("utf-8", "surrogatepass"))
    return _folder(root) / f"policy-{key[:40]}.json"


def _policy_deps() -> list[list[Any]]:
    """What a stored policy's snapshot rests on (beside this code): pydantic's version."""
    version = _pydantic_version_file()
    return [["content", version, _content(Path(version))]]


def _current(doc: dict[str, Any] | None, stored: Any) -> bool:
    """Whether a stored policy's snapshot can be used: written by this code (a snapshot
    of an older Oloproof is written again, not kept forever), for this policy, and every
    file it rests on unchanged (the list decided here, not read from the snapshot)."""
    return (
        doc is not None and doc.get("format") == FORMAT and doc.get("code") == _code_digest()
        and doc.get("stored") == stored and doc.get("deps") == _policy_deps()
    )


def _as_stored(policy: Any) -> Any:
    """A validated policy as a run stores it (runner/build.py policy_json, which this
    mirrors: the project layer may not import the runner's)."""
    data = dict(policy.model_dump(mode="json"))
    for rule in data.get("rules", []):
        if rule.get("aggregate") is None:
            rule.pop("aggregate", None)
    return data


def load_stored_policy(root: Path, stored: Any) -> ReleasePolicy | None:
    """The validated form of a run's stored policy (the JSON in its row), when a run kept
    it; ``None`` otherwise (then validate)."""
    try:
        path = _policy_path(root, stored)
        doc = _read(path)
        if doc is None or not _current(doc, stored):
            return None
        policy = _decode(doc["policy"], doc["classes"])
        # The validated form must be the stored policy itself: a snapshot whose rules
        # were edited ("rules": []) would otherwise decide the run in their place.
        if not isinstance(policy, ReleasePolicyShape) or _as_stored(policy) != stored:
            return None
    except (KeyError, TypeError, ValueError, AttributeError, SnapshotUnusable, RecursionError,
            OSError):
        return None
    return policy  # type: ignore[return-value]


def save_stored_policy(root: Path, stored: Any) -> None:
    """Validate a policy as it is stored with a run, and keep the result for ``gate``."""
    try:
        path = _policy_path(root, stored)
        if _current(_read(path), stored):
            return
        from oloproof.project.models import ReleasePolicy

        classes: dict[str, Any] = {}
        policy = ReleasePolicy.model_validate(stored)
        doc = {
            "format": FORMAT, "code": _code_digest(), "stored": stored,
            "deps": _policy_deps(), "policy": _encode(policy, classes), "classes": classes,
        }
    except Exception:  # noqa: BLE001 - a snapshot is an optimisation; gate validates then
        return
    _write(path, doc)
