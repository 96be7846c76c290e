"""Turn pydantic validation errors into one ConfigError a user can act on.

A pydantic error carries a location (``("evaluators", 2, "regex",
"pattern")``) and a machine type (``string_type``). We strip the
discriminated-union tags from the location, look the line up in the YAML
line map, and say what went wrong in plain words: "expected a number, got
'abc'", never "Input should be a valid number".

Validators in :mod:`oloproof.project.models` report their own problems with
:func:`fail`, which can point below the field being validated (``at``) and
say what is accepted.

The same walk along the model classes gives text fields the text as written
(:func:`as_written`) before validation: ``version: 1.10`` is ``"1.10"``.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from oloproof.errors import ConfigError
from oloproof.project._words import accepted_list, describe
from oloproof.project._yaml import LineMap, PathKey, format_path

_CUSTOM = "oloproof"


def fail(message: str, *, at: PathKey = (), accepted: str | None = None) -> NoReturn:
    """Raise, from inside a validator, an error worded for the user.

    ``at`` extends the location below the field or model being validated (so
    a model validator can point at ``rubric_file``).
    """
    raise PydanticCustomError(
        _CUSTOM, "{message}", {"message": message, "at": tuple(at), "accepted": accepted}
    )


def to_config_error(
    exc: ValidationError,
    *,
    data: Any,
    lines: LineMap,
    display: str,
    model: type[BaseModel],
    tags: frozenset[str],
) -> ConfigError:
    """The one ConfigError to show for ``exc`` (the earliest line first)."""
    candidates: list[tuple[int, int, int, ConfigError]] = []
    for index, err in enumerate(exc.errors()):
        path = _user_path(tuple(err["loc"]), data, tags)
        field, detail, accepted, path = _explain(err, path, data, model, lines.text(path))
        line = lines.nearest(path)
        missing = 1 if err["type"] in ("missing", "union_tag_not_found") else 0
        error = ConfigError(detail, file=display, field=field or None, line=line, accepted=accepted)
        # An unknown key usually explains a missing one (a typo): report it first.
        candidates.append((missing, line if line is not None else 10**9, index, error))
    candidates.sort(key=lambda c: c[:3])
    return candidates[0][3]


def _user_path(loc: tuple[Any, ...], data: Any, tags: frozenset[str]) -> PathKey:
    """The location in the user's file: discriminated-union tags removed."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part not in node and part in tags:
            continue
        path.append(part)
        node = _child(node, part)
    return tuple(path)


def _child(node: Any, part: str | int) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def _at(data: Any, path: PathKey) -> Any:
    node = data
    for part in path:
        node = _child(node, part)
    return node


def _explain(
    err: Mapping[str, Any], path: PathKey, data: Any, model: type[BaseModel],
    written: str | None = None,
) -> tuple[str, str, str | None, PathKey]:
    """``(field, detail, accepted, path)`` for one pydantic error; ``written`` is the value
    as the file writes it, when YAML read it as a number or true/false.

    Only pydantic's machine-readable parts are read: the error ``type``, its
    ``ctx`` values and the location. What is accepted (the choices of a
    ``Literal``, the tags of a union, the keys of a model) comes from the model
    classes themselves, never from pydantic's English text.
    """
    kind: str = err["type"]
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    value = err.get("input")
    got = describe(value)
    if isinstance(value, bool) and written is not None and written != got:
        got = f"{written} (which YAML reads as {got})"
    elif isinstance(value, float) and written is not None:
        got = written  # 1e8 as written, not 100000000.0
    accepted: str | None = None
    last = path[-1] if path else ""

    if kind == _CUSTOM:
        path = (*path, *ctx.get("at", ()))
        detail = str(ctx["message"])
        accepted = ctx.get("accepted")
    elif kind == "extra_forbidden":
        key = str(last)
        keys = _keys_of(model, path[:-1], data)
        detail = f"unknown key '{key}'"
        if key == "max_failures":
            detail += " (max_failures belongs to kind: observed_count)"
        if keys:
            accepted = accepted_list(keys, key)
    elif kind in ("union_tag_invalid", "union_tag_not_found"):
        disc = str(ctx.get("discriminator", "type")).strip("'")
        tag_list = _tags_of(model, path, data, disc)
        path = (*path, disc)
        if kind == "union_tag_not_found":
            detail = "required field is missing"
            accepted = ", ".join(tag_list) or None
        else:
            tag = _at(data, path)
            what = {"type": "evaluator type", "kind": "rule kind"}.get(disc, disc)
            detail = f"unknown {what} {describe(tag)}"
            accepted = accepted_list(tag_list, tag)
    elif kind == "literal_error":
        choices = [str(c) for c in _literal_args(_annotation_at(model, path, data))]
        if path == ("version",):
            detail = f"unsupported version {got}; this version of Oloproof reads version 1"
        else:
            detail = f"got {got}"
        accepted = accepted_list(choices, value) if choices else None
    elif kind == "string_pattern_mismatch":
        if last == "criterion":
            detail = f"a criterion name is made of letters, digits, '_', '.' and '-', got {got}"
        else:
            detail = f"{got} does not have the expected form ({ctx.get('pattern')})"
    elif kind in ("too_short", "too_long"):
        detail = _length_detail(kind, ctx, last)
    elif kind in _BOUNDS:
        word, key = _BOUNDS[kind]
        detail = f"must be {word} {_number(ctx.get(key))}, got {got}"
    elif kind in ("value_error", "assertion_error"):
        detail = str(ctx.get("error", kind))
    else:
        detail = _SIMPLE.get(kind, "not accepted here: got {got}").format(got=got)
        if kind in _QUOTED and isinstance(value, str) and _QUOTED[kind](value.strip()):
            detail += f" (quoted, a value is text: write {value.strip()} without quotes)"
        elif kind == "string_type" and type(value) in (int, float):
            # Where the loader cannot tell a text field (a matrix product's values).
            detail += " (write it quoted: unquoted, YAML reads it as a number)"
    return format_path(path), detail, accepted, path


# The type errors whose value, given as text, YAML would read as the type expected were it
# not quoted (a plain decimal: YAML reads ``1e3`` as text).
_QUOTED: dict[str, Callable[[str], object]] = {
    "float_type": re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)").fullmatch,
    "int_type": re.compile(r"[+-]?\d+").fullmatch,
    "bool_type": lambda text: text in ("true", "false"),
}


# Error types whose message needs nothing but the value received.
_SIMPLE: dict[str, str] = {
    "missing": "required field is missing",
    "string_type": "expected text, got {got}",
    "string_too_short": "must not be empty",
    "int_type": "expected a whole number, got {got}",
    "int_parsing": "expected a whole number, got {got}",
    "int_from_float": "expected a whole number, got {got}",
    "float_type": "expected a number, got {got}",
    "float_parsing": "expected a number, got {got}",
    "finite_number": "expected a finite number, got {got}",
    "bool_type": "expected true or false, got {got}",
    "bool_parsing": "expected true or false, got {got}",
    "dict_type": "expected a mapping (key: value), got {got}",
    "model_type": "expected a mapping (key: value), got {got}",
    "model_attributes_type": "expected a mapping (key: value), got {got}",
    "mapping_type": "expected a mapping (key: value), got {got}",
    "list_type": "expected a list, got {got}",
    "tuple_type": "expected a list, got {got}",
    "iterable_type": "expected a list, got {got}",
}

# Bound errors: the words, and the ctx key holding the bound.
_BOUNDS: dict[str, tuple[str, str]] = {
    "greater_than": ("greater than", "gt"),
    "greater_than_equal": ("at least", "ge"),
    "less_than": ("less than", "lt"),
    "less_than_equal": ("at most", "le"),
}


def _literal_args(ann: Any) -> tuple[Any, ...]:
    """The values of the ``Literal`` that ``ann`` is (or holds), else ``()``."""
    inner = _strip(ann)
    if typing.get_origin(inner) is typing.Literal:
        return typing.get_args(inner)
    if typing.get_origin(inner) in (typing.Union, types.UnionType):
        found: list[Any] = []
        for arg in typing.get_args(inner):
            found.extend(_literal_args(arg))
        return tuple(found)
    return ()


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _length_detail(kind: str, ctx: Mapping[str, Any], last: str | int) -> str:
    actual = ctx.get("actual_length")
    if last == "range":
        return f"expected two numbers [low, high], got {actual} item(s)"
    if kind == "too_short":
        wanted = ctx.get("min_length")
        if wanted == 1:
            return "must not be empty"
        return f"expected at least {wanted} items, got {actual}"
    return f"expected at most {ctx.get('max_length')} items, got {actual}"


# -- walking the model classes along a path ----------------------------------


def as_written(model: type[BaseModel], data: Any, lines: LineMap) -> Any:
    """``data`` with every value YAML read as a number or as true/false, where ``model``
    expects text, replaced by its text as written: ``version: 1.10`` is ``"1.10"``, not
    ``1.1`` (which ``1.1`` and ``1.100`` would also be), ``010`` is ``"010"``, not 8,
    ``1:30`` is ``"1:30"``, not 90. A field that takes text or a number (a group's value)
    keeps the number. The models accept no number as text: a value that did not come
    from YAML has to be text already."""
    return _written(model, data, (), lines)


def _written(ann: Any, node: Any, path: PathKey, lines: LineMap) -> Any:
    if isinstance(node, int | float):  # bool included
        text = lines.text(path)
        return text if text is not None and _strip(ann) is str else node
    current = _pick_model(ann, node)
    if current is not None:
        if not isinstance(node, dict):
            return node
        fields = {f.alias or n: f.annotation for n, f in current.model_fields.items()}
        return {
            key: _written(fields[key], value, (*path, key), lines) if key in fields else value
            for key, value in node.items()
        }
    inner = _strip(ann)
    origin = typing.get_origin(inner)
    args = typing.get_args(inner)
    if origin in (list, tuple) and args and isinstance(node, list):
        return [_written(args[0], item, (*path, i), lines) for i, item in enumerate(node)]
    if origin is dict and len(args) == 2 and isinstance(node, dict):
        return {key: _written(args[1], value, (*path, key), lines) for key, value in node.items()}
    return node


def _keys_of(model: type[BaseModel], path: PathKey, data: Any) -> list[str]:
    """The keys accepted by the model that sits at ``path``."""
    found = _model_at(model, path, data)
    if found is None:
        return []
    return [info.alias or name for name, info in found.model_fields.items()]


def _tags_of(model: type[BaseModel], path: PathKey, data: Any, disc: str) -> list[str]:
    ann = _annotation_at(model, path, data)
    tags: list[str] = []
    for member in _union_members(ann):
        field = member.model_fields.get(disc)
        if field is not None:
            tags.extend(str(a) for a in typing.get_args(field.annotation))
    return tags


def _model_at(model: type[BaseModel], path: PathKey, data: Any) -> type[BaseModel] | None:
    ann = _annotation_at(model, path, data)
    return _pick_model(ann, _at(data, path))


def _annotation_at(model: type[BaseModel], path: PathKey, data: Any) -> Any:
    ann: Any = model
    node = data
    for part in path:
        current = _pick_model(ann, node)
        if current is not None:
            if not isinstance(part, str):
                return None
            field = next(
                (f for n, f in current.model_fields.items() if (f.alias or n) == part), None
            )
            if field is None:
                return None
            ann = field.annotation
        else:
            inner = _strip(ann)
            origin = typing.get_origin(inner)
            args = typing.get_args(inner)
            if origin in (list, tuple) and args:
                ann = args[0]
            elif origin is dict and len(args) == 2:
                ann = args[1]
            else:
                return None
        node = _child(node, part)
    return ann


def _strip(ann: Any) -> Any:
    """Remove ``Annotated[...]`` and a ``| None``."""
    while typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return _strip(args[0])
    return ann


def _union_members(ann: Any) -> list[type[BaseModel]]:
    inner = _strip(ann)
    if typing.get_origin(inner) in (typing.Union, types.UnionType):
        candidates = [_strip(a) for a in typing.get_args(inner)]
    else:
        candidates = [inner]
    return [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]


def _pick_model(ann: Any, node: Any) -> type[BaseModel] | None:
    """The model class ``ann`` stands for at ``node`` (choosing in a union)."""
    members = _union_members(ann)
    if len(members) <= 1:
        return members[0] if members else None
    if isinstance(node, dict):
        for disc in ("type", "kind"):
            value = node.get(disc)
            for member in members:
                field = member.model_fields.get(disc)
                if field is not None and value in typing.get_args(field.annotation):
                    return member
        # No tag: the member that knows most of the keys written.
        keys = set(node)
        return max(
            members,
            key=lambda m: len(keys & {f.alias or n for n, f in m.model_fields.items()}),
        )
    return None
