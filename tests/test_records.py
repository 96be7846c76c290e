"""oloproof._records against the real dataclasses module.

Every class below is written once and made twice, with ``dataclasses.dataclass`` and
with ``oloproof._records.dataclass``; the two must behave alike in everything Oloproof
relies on: the ``__init__`` (its parameters, its errors), the repr, equality and hashing,
frozen fields, ``__slots__``, ``__match_args__``, ``asdict`` and ``replace``, copying.
Then every record class of Oloproof itself is compared with the dataclass its module's
source makes with ``dataclasses``, and the short commands are checked not to import
``dataclasses`` or ``inspect`` at all.
"""

from __future__ import annotations

import ast
import binascii
import collections
import copy
import dataclasses
import inspect
import io
import linecache
import marshal
import os
import pdb  # noqa: T100 - the debugger is what one test drives
import pickle
import subprocess
import sys
import textwrap
import traceback
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

from oloproof import _records

SRC = Path(__file__).resolve().parent.parent / "src" / "oloproof"

# The class shapes of Oloproof's records: {name: source}, each made with both modules.
# The source runs with postponed annotations (strings), as every module of ours does.
SHAPES: dict[str, str] = {
    "plain": """
        @dataclass
        class C:
            a: int
            b: str = "x"
            c: float | None = None
    """,
    "frozen": """
        @dataclass(frozen=True)
        class C:
            a: int
            b: str = "x"
            c: tuple[int, ...] = ()
    """,
    "slots": """
        @dataclass(slots=True)
        class C:
            a: int
            b: str = "x"
            c: list[int] = field(default_factory=list)
    """,
    "frozen_slots": """
        @dataclass(frozen=True, slots=True)
        class C:
            a: int
            b: list[str]
            c: str = ""
    """,
    "slots_frozen_order": """
        @dataclass(slots=True, frozen=True)
        class C:
            path: str
            cases: list[int]
            digest: str
    """,
    "factories": """
        @dataclass
        class C:
            a: int
            b: list[int] = field(default_factory=list)
            c: dict[str, int] = field(default_factory=dict)
            d: list[float] = field(default_factory=list, repr=False)
            e: int | None = field(default=None)
    """,
    "no_fields": """
        @dataclass(frozen=True)
        class C:
            pass
    """,
    "classvars": """
        @dataclass
        class C:
            a: int
            kind: ClassVar[str] = "c"
            schema: typing.ClassVar[dict[str, int]] = {}
            b: int = 2
    """,
    # events.py: a slotted base with a kw_only field and ClassVars, slotted subclasses.
    "event_inheritance": """
        @dataclass(slots=True)
        class Base:
            run_id: str
            timestamp: str = field(default_factory=lambda: "2026-01-01", kw_only=True)
            type: ClassVar[str] = "event"

        @dataclass(slots=True)
        class C(Base):
            scenario_id: str
            status: str
            index: int = 0
            output: Any = None
            type: ClassVar[str] = "case_executed"
    """,
    # project/config.py: every field keyword-only (the decorator's kw_only), a required
    # field after one with a default, a field(kw_only=False) kept positional.
    "kw_only_class": """
        @dataclass(frozen=True, kw_only=True)
        class Base:
            fields_set: frozenset = field(default=frozenset(), repr=False, compare=False)
            names: ClassVar[dict[str, str]] = {}

        @dataclass(frozen=True, kw_only=True)
        class C(Base):
            a: int
            kind: str = "k"
            b: str
            c: tuple = field(default_factory=tuple)
            d: int = field(default=0, kw_only=False)
    """,
    "plain_inheritance": """
        @dataclass
        class Base:
            a: int
            b: str = "x"

        @dataclass
        class C(Base):
            b: str = "y"
            c: int = 3
    """,
    "frozen_inheritance": """
        @dataclass(frozen=True)
        class Base:
            a: int

        @dataclass(frozen=True)
        class C(Base):
            b: int = 0
    """,
    "post_init": """
        @dataclass(frozen=True)
        class C:
            limit: int | None = None
            sample: bool = False

            def __post_init__(self) -> None:
                if self.sample and self.limit is None:
                    raise ValueError("sample: a random sample needs its size")
    """,
    "generic": """
        T = typing.TypeVar("T")

        @dataclass
        class C(typing.Generic[T]):
            value: T
            attempts: int
    """,
    "own_methods": """
        @dataclass(frozen=True)
        class C:
            a: int
            b: int = 0

            def __add__(self, other: C) -> C:
                return C(self.a + other.a, self.b + other.b)

            def __len__(self) -> int:
                return self.a
    """,
    "explicit_dunders": """
        @dataclass
        class C:
            a: int

            def __repr__(self) -> str:
                return "custom"

            def __hash__(self) -> int:
                return 7
    """,
    "init_false": """
        @dataclass
        class C:
            a: int
            b: int = field(default=5, init=False)
            c: list[int] = field(default_factory=list, init=False)
            d: int = field(default=1, compare=False)
    """,
    "field_named_self": """
        @dataclass
        class C:
            self: int
            other: int = 0
    """,
}

# Calls to make for each shape: (args, kwargs); the ones that fail must fail alike.
CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((1,), {}),
    ((1, "y"), {}),
    ((1, "y", None), {}),
    ((1, "y", None, 4), {}),
    ((1, "y", None, 4, 5), {}),
    ((1, "y", None, 4, 5, 6), {}),
    ((), {"a": 1}),
    ((1,), {"a": 2}),
    ((1,), {"zzz": 2}),
    (("r", "s", "OK"), {}),
    (("r", "s", "OK"), {"timestamp": "t"}),
    (("r", "s", "OK", 3, "out"), {}),
    (("r", "s", "OK", 3, "out", "t"), {}),
    (("r",), {"scenario_id": "s", "status": "OK", "index": 4}),
    ((), {"limit": 3, "sample": True}),
    ((), {"sample": True}),
    ((3, [1], "d"), {}),
    ((), {"value": 1, "attempts": 2}),
    ((), {"self": 1, "other": 2}),
    ((1, 2, [3]), {}),
    ((1,), {"d": 9}),
    ((1,), {"b": 9}),
    ((), {"a": 1, "b": "x"}),
    ((5,), {"a": 1, "b": "x", "kind": "j", "fields_set": frozenset({"a"})}),
]


def _make(module: Any, source: str) -> dict[str, Any]:
    """The classes of ``source``, decorated by ``module``'s dataclass."""
    namespace: dict[str, Any] = {
        "dataclass": module.dataclass, "field": module.field, "ClassVar": ClassVar,
        "Any": Any, "typing": typing, "__name__": __name__,
    }
    code = compile("from __future__ import annotations\n" + textwrap.dedent(source),
                   "<shape>", "exec", dont_inherit=True)
    exec(code, namespace)  # noqa: S102
    return namespace


def _pair(shape: str) -> tuple[Any, Any]:
    return _make(dataclasses, SHAPES[shape])["C"], _make(_records, SHAPES[shape])["C"]


def _outcome(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """What ``fn(*args, **kwargs)`` gives: its repr, or its exception's class name and message."""
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - what is raised is what is compared
        return ("raised", type(exc).__name__, str(exc))
    return ("ok", repr(value))


def _instances(cls: Any) -> Iterator[tuple[tuple[Any, ...], dict[str, Any], Any]]:
    for args, kwargs in CALLS:
        try:
            yield args, kwargs, cls(*args, **kwargs)
        except (TypeError, ValueError):
            continue


def _signature(cls: Any) -> list[tuple[str, Any, bool]]:
    params = list(inspect.signature(cls.__init__).parameters.values())
    return [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in params]


@pytest.fixture(params=sorted(SHAPES))
def pair(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    return _pair(request.param)


def test_init_takes_the_same_arguments_and_refuses_the_same_ones(pair: tuple[Any, Any]) -> None:
    dc, rec = pair
    assert _signature(rec) == _signature(dc)
    made = 0
    for args, kwargs in CALLS:
        expected = _outcome(dc, *args, **kwargs)
        assert _outcome(rec, *args, **kwargs) == expected, (args, kwargs)
        made += expected[0] == "ok"
    assert made, "no call made an instance: add one to CALLS"
    assert rec.__init__.__qualname__ == dc.__init__.__qualname__
    assert rec.__match_args__ == dc.__match_args__
    # Made in the class's module, as dataclasses makes its methods.
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__"):
        if getattr(dc, name, None) is not None and name in dc.__dict__:
            assert rec.__dict__[name].__module__ == dc.__dict__[name].__module__, name


def test_repr_eq_and_hash_are_dataclasses(pair: tuple[Any, Any]) -> None:
    dc, rec = pair
    assert (rec.__hash__ is None) == (dc.__hash__ is None)
    for args, kwargs, ours in _instances(rec):
        theirs = dc(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        twin = rec(*args, **kwargs)
        assert (ours == twin) == (theirs == dc(*args, **kwargs))
        assert (ours != twin) == (theirs != dc(*args, **kwargs))
        assert ours != theirs and theirs != ours  # another class: never equal
        # Not even a subclass's instance with the same fields (dataclasses compares classes).
        sub_ours = type("Sub", (rec,), {})(*args, **kwargs)
        sub_theirs = type("Sub", (dc,), {})(*args, **kwargs)
        assert (ours == sub_ours, sub_ours == ours) == (theirs == sub_theirs, sub_theirs == theirs)
        assert (ours == object()) is False and (ours != object()) is True
        if dc.__hash__ is not None and _hashable(args, kwargs):
            assert hash(ours) == hash(theirs) == hash(twin)
        for other_args, other_kwargs, other in _instances(rec):
            same = dc(*args, **kwargs) == dc(*other_args, **other_kwargs)
            assert (ours == other) == same, (args, other_args)


def _hashable(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    try:
        hash((args, tuple(kwargs.values())))
    except TypeError:
        return False
    return True


def test_default_factories_make_a_fresh_value_per_instance() -> None:
    for shape in ("slots", "factories", "event_inheritance", "init_false"):
        dc, rec = _pair(shape)
        names = [f.name for f in dataclasses.fields(dc) if f.default_factory is not dataclasses.MISSING]
        args = ("r", "s", "OK") if shape == "event_inheritance" else (1,)
        first, second = rec(*args), rec(*args)
        for name in names:
            assert getattr(first, name) == getattr(dc(*args), name)
            if isinstance(getattr(first, name), list | dict):
                assert getattr(first, name) is not getattr(second, name)


def test_class_attributes_and_slots_are_dataclasses(pair: tuple[Any, Any]) -> None:
    dc, rec = pair
    assert rec.__dict__.get("__slots__") == dc.__dict__.get("__slots__")
    assert rec.__qualname__ == dc.__qualname__ and rec.__name__ == dc.__name__
    for name in [f.name for f in dataclasses.fields(dc)] + ["kind", "schema", "type"]:
        assert (name in rec.__dict__) == (name in dc.__dict__), name
        if name in dc.__dict__ and "__slots__" not in dc.__dict__:
            assert getattr(rec, name) == getattr(dc, name)
    for args, kwargs, ours in _instances(rec):
        theirs = dc(*args, **kwargs)
        assert hasattr(ours, "__dict__") == hasattr(theirs, "__dict__")
        if not (rec.__record_frozen__ and "__slots__" in rec.__dict__):  # see below
            assert _outcome(setattr, ours, "not_a_field", 1) == _outcome(
                setattr, theirs, "not_a_field", 1)
        break


def test_frozen_records_refuse_assignment_and_deletion_alike(pair: tuple[Any, Any]) -> None:
    dc, rec = pair
    names = [f.name for f in dataclasses.fields(dc)]
    for args, kwargs, ours in _instances(rec):
        theirs = dc(*args, **kwargs)
        for name in names:
            got = _outcome(setattr, ours, name, 0)
            assert got == _outcome(setattr, theirs, name, 0)
            got = _outcome(delattr, ours, name)
            assert got == _outcome(delattr, theirs, name)
        break


def test_frozen_error_is_an_attribute_error_named_like_dataclasses() -> None:
    dc, rec = _pair("frozen")
    with pytest.raises(_records.FrozenInstanceError, match="cannot assign to field 'a'") as got:
        rec(1).a = 2
    assert isinstance(got.value, AttributeError)
    assert type(got.value).__name__ == dataclasses.FrozenInstanceError.__name__
    with pytest.raises(AttributeError, match="cannot delete field 'b'"):
        del rec(1).b
    # Not a field, not slotted: refused as dataclasses refuses it.
    with pytest.raises(_records.FrozenInstanceError, match="cannot assign to field 'other'"):
        rec(1).other = 2
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'other'"):
        dc(1).other = 2


def test_frozen_slots_refuse_an_unknown_attribute_with_an_attribute_error() -> None:
    # Where ours differs, knowingly: Python 3.11's dataclasses answers this with the
    # TypeError of a super() call on the class it replaced (a bug fixed in 3.12); ours
    # raises the FrozenInstanceError that a frozen class without slots raises.
    dc, rec = _pair("frozen_slots")
    with pytest.raises(_records.FrozenInstanceError, match="cannot assign to field 'other'"):
        rec(1, []).other = 2
    with pytest.raises((TypeError, AttributeError)):
        dc(1, []).other = 2


def test_asdict_and_replace_are_dataclasses(pair: tuple[Any, Any]) -> None:
    dc, rec = pair
    for args, kwargs, ours in _instances(rec):
        theirs = dc(*args, **kwargs)
        assert _records.asdict(ours) == dataclasses.asdict(theirs)
        for changes in ({}, {"a": 9}, {"b": "z"}, {"run_id": "r2"}, {"zzz": 1},
                        {"value": 2, "attempts": 3}, {"c": 5}, {"sample": True}):
            got = _outcome(_records.replace, ours, **changes)
            assert got == _outcome(dataclasses.replace, theirs, **changes), changes


def test_dataclasses_own_functions_work_on_records(pair: tuple[Any, Any]) -> None:
    """A user may treat our results as dataclasses: fields(), asdict(), astuple() and
    is_dataclass() from the dataclasses module answer for a record what they answer for the
    dataclass made from the same source."""
    dc, rec = pair
    assert dataclasses.is_dataclass(rec) and dataclasses.is_dataclass(dc)

    def described(cls: Any) -> list[tuple[Any, ...]]:
        return [(f.name, f.default,  # a factory (made twice from one source): what it makes
                 f.default_factory if f.default_factory is dataclasses.MISSING
                 else f.default_factory(), f.init, f.repr, f.compare, f.hash, f.kw_only)
                for f in dataclasses.fields(cls)]

    assert described(rec) == described(dc)
    for args, kwargs, ours in _instances(rec):
        theirs = dc(*args, **kwargs)
        assert dataclasses.is_dataclass(ours)
        assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
        assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)


def test_asdict_recurses_like_dataclasses_and_deep_copies_the_rest() -> None:
    Point = collections.namedtuple("Point", "x y")  # asdict's namedtuple case
    source = """
        @dataclass(frozen=True)
        class Usage:
            tokens: int = 0
            cost: float = 0.0

        @dataclass
        class Row:
            id: str
            usage: Usage | None
            judgments: dict[str, Usage] = field(default_factory=dict)
            scores: list[Any] = field(default_factory=list)
            pair: tuple[Any, ...] = ()
            other: Any = None
    """
    made = {mod: _make(mod, source) for mod in (dataclasses, _records)}

    def build(mod: Any) -> Any:
        ns = made[mod]
        usage = ns["Usage"]
        return ns["Row"](
            "q1", usage(3, 0.5), {"judge": usage(1), "k": usage()},
            [usage(2), [usage(4)], {"x": usage(5)}, 1.5, None, "s"],
            (usage(6), Point(usage(7), [1, 2])), {"set": {1, 2}, "bytes": b"x"},
        )

    ours, theirs = build(_records), build(dataclasses)
    got, expected = _records.asdict(ours), dataclasses.asdict(theirs)
    assert got == expected
    assert type(got["pair"][1]) is Point and type(expected["pair"][1]) is Point
    # Values that are neither records nor containers are deep copies, as in dataclasses.
    assert got["other"]["set"] is not ours.other["set"]
    assert got["scores"] is not ours.scores
    for bad in (1, "x", type(ours), None):
        assert _outcome(_records.asdict, bad) == _outcome(dataclasses.asdict, bad)
        assert _outcome(_records.replace, bad) == _outcome(dataclasses.replace, bad)


def test_asdict_keeps_enum_members_without_deep_copying(monkeypatch: pytest.MonkeyPatch) -> None:
    """An enum member is what copy.deepcopy would return (Enum.__deepcopy__ gives the member
    itself), so asdict() returns it without importing `copy` (which every run paid for
    through a rule's state); an enum that copies itself otherwise is still deep-copied."""
    import enum

    class State(enum.StrEnum):
        PASS = "PASS"

    class Odd(enum.Enum):
        A = 1

        def __deepcopy__(self, memo: Any) -> str:
            return "copied"

    source = """
        @dataclass(frozen=True)
        class Decision:
            state: Any
            states: list[Any] = field(default_factory=list)
            odd: Any = None
    """
    made = {mod: _make(mod, source) for mod in (dataclasses, _records)}
    ours = made[_records]["Decision"](State.PASS, [State.PASS], Odd.A)
    theirs = made[dataclasses]["Decision"](State.PASS, [State.PASS], Odd.A)
    assert _records.asdict(ours) == dataclasses.asdict(theirs) == {
        "state": State.PASS, "states": [State.PASS], "odd": "copied"}

    def refuse(*args: Any) -> Any:
        raise AssertionError("copy.deepcopy called for an enum member")

    monkeypatch.setattr(copy, "deepcopy", refuse)
    plain = made[_records]["Decision"](State.PASS, [State.PASS])
    got = _records.asdict(plain)
    assert got == {"state": "PASS", "states": ["PASS"], "odd": None}
    assert got["state"] is State.PASS and got["states"][0] is State.PASS


def test_class_definitions_are_refused_alike() -> None:
    bad = {
        "non-default after default": """
            @dataclass
            class C:
                a: int = 0
                b: int
        """,
        "mutable default": """
            @dataclass
            class C:
                a: list[int] = []
        """,
        "default and factory": """
            @dataclass
            class C:
                a: list[int] = field(default=0, default_factory=list)
        """,
        "field without annotation": """
            @dataclass
            class C:
                a = field(default=0)
        """,
        "frozen from non-frozen": """
            @dataclass
            class B:
                a: int
            @dataclass(frozen=True)
            class C(B):
                b: int
        """,
        "non-frozen from frozen": """
            @dataclass(frozen=True)
            class B:
                a: int
            @dataclass
            class C(B):
                b: int
        """,
        "frozen with __setattr__": """
            @dataclass(frozen=True)
            class C:
                a: int
                def __setattr__(self, name, value):
                    pass
        """,
        "slots twice": """
            @dataclass(slots=True)
            class C:
                __slots__ = ("a",)
                a: int
        """,
    }
    for what, source in bad.items():
        expected = _outcome(_make, dataclasses, source)
        assert expected[0] == "raised", what
        assert _outcome(_make, _records, source) == expected, what


def test_kw_only_fields_of_a_base_come_after_the_subclass_fields() -> None:
    dc, rec = _pair("event_inheritance")
    assert _signature(rec) == _signature(dc)
    event = rec("r", "s", "OK", timestamp="t")
    assert repr(event) == repr(dc("r", "s", "OK", timestamp="t"))
    assert repr(event).startswith("C(run_id='r', timestamp='t', scenario_id='s'")
    assert rec.type == "case_executed" and "type" not in rec.__match_args__


def test_copies_and_pickles_like_dataclasses() -> None:
    # Nothing in Oloproof copies or pickles a record today; the frozen slotted ones still
    # get dataclasses' __getstate__/__setstate__ so that both would work.
    for shape in SHAPES:
        dc, rec = _pair(shape)
        for args, kwargs, ours in _instances(rec):
            theirs = dc(*args, **kwargs)
            for how in (copy.copy, copy.deepcopy):
                assert repr(how(ours)) == repr(how(theirs)), shape
                assert how(ours) == ours and type(how(ours)) is rec
            break
    ours = _PickledFrozenSlots(1, ["x"])
    theirs = _PickledFrozenSlotsDc(1, ["x"])
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert repr(pickle.loads(pickle.dumps(ours))) == repr(ours)
    assert pickle.loads(pickle.dumps(theirs)) == theirs


@_records.dataclass(frozen=True, slots=True)
class _PickledFrozenSlots:
    a: int
    b: list[str]


@dataclasses.dataclass(frozen=True, slots=True)
class _PickledFrozenSlotsDc:
    a: int
    b: list[str]


def test_recursive_repr_is_cut_like_dataclasses() -> None:
    dc, rec = _pair("plain")
    ours, theirs = rec(1), dc(1)
    ours.c, theirs.c = ours, theirs
    assert repr(ours) == repr(theirs) == "C(a=1, b='x', c=...)"


def test_annotations_that_are_objects_not_strings() -> None:
    # Without postponed annotations the ClassVar is an object of typing's.
    for mod in (dataclasses, _records):
        namespace: dict[str, Any] = {"dataclass": mod.dataclass, "ClassVar": ClassVar}
        code = compile("@dataclass\nclass C:\n    a: int\n    k: ClassVar[int] = 3\n",
                       "<plain>", "exec", dont_inherit=True)
        exec(code, namespace)  # noqa: S102
        assert namespace["C"].__match_args__ == ("a",)
        assert repr(namespace["C"](1)) == "C(a=1)"


# --- what dataclasses does not do: source for tracebacks, super() in slotted classes ---


def _failing_factory() -> list[int]:
    raise RuntimeError("the factory failed")


def _make_traced() -> type:
    @_records.dataclass(slots=True)
    class Traced:
        a: int
        b: list[int] = _records.field(default_factory=_failing_factory)

    return Traced


_FACTORY_LINE = "self.b=__dataclass_dflt_b__() if b is __dataclass_HAS_DEFAULT_FACTORY__ else b"


@pytest.fixture(params=["file", "linecache"])
def shown_from(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where a generated ``__init__`` shows its source from: a file beside the kept code
    (Python keeps bytecode), or linecache (it keeps none: ``-B``)."""
    monkeypatch.setattr(_records, "_inits_path", lambda: str(tmp_path / "__pycache__" / "x.inits"))
    monkeypatch.setattr(_records, "_inits", None)
    monkeypatch.setattr(_records, "_inits_new", False)
    monkeypatch.setattr(_records, "_inits_used", set())
    monkeypatch.setattr(sys, "dont_write_bytecode", request.param == "linecache")
    where: str = request.param
    return where


def test_a_generated_init_shows_its_source_to_tracebacks_pdb_and_inspect(
    shown_from: str, tmp_path: Path
) -> None:
    traced = _make_traced()
    with pytest.raises(RuntimeError) as got:
        traced(1)
    filename = traced.__init__.__code__.co_filename
    if shown_from == "file":
        assert filename == str(tmp_path / "__pycache__" / "x.inits.d" / (
            f"{__name__}._make_traced._locals_.Traced-{filename[-11:-3]}.py"))
    else:
        assert filename == f"<generated __init__ of {__name__}._make_traced.<locals>.Traced>"
    shown = "".join(traceback.format_exception(got.value))
    assert f'File "{filename}", line 3, in __init__' in shown and _FACTORY_LINE in shown, shown
    source = inspect.getsource(traced.__init__)
    assert source.startswith("def __init__(self,a,b=") and _FACTORY_LINE in source
    assert "".join(linecache.getlines(filename)) == source
    if shown_from == "file":
        assert Path(filename).read_text(encoding="utf-8") == source
    # A debugger stepping into the constructor sees the line it stops at.
    out = io.StringIO()
    debugger = pdb.Pdb(stdin=io.StringIO("step\nstep\ncontinue\n"), stdout=out)
    debugger.use_rawinput = False
    debugger.runcall(traced, 1, [2])
    assert "-> self.a=a" in out.getvalue() and "-> " + _FACTORY_LINE in out.getvalue()


def test_pythons_own_traceback_printer_shows_a_kept_init(tmp_path: Path) -> None:
    """An exception nobody catches is printed by the interpreter (in C up to Python 3.12),
    which reads the file and never linecache: with the source kept as a file, it shows
    the line too."""
    script = tmp_path / "fails.py"
    script.write_text(
        "from oloproof._records import dataclass, field\n"
        "def fail():\n    raise RuntimeError('the factory failed')\n"
        "@dataclass\nclass Traced:\n    a: int\n    b: list = field(default_factory=fail)\n"
        "Traced(1)\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         check=False, env=env, timeout=60)
    assert out.returncode == 1 and "RuntimeError: the factory failed" in out.stderr
    assert "__main__.Traced-" in out.stderr and _FACTORY_LINE in out.stderr, out.stderr


def _make_again(with_factory: bool) -> type:
    """_make_traced's class, or another with the same module and qualified name."""
    if with_factory:
        return _make_traced()
    return _records.dataclass(slots=True)(type("Traced", (), {
        "__module__": __name__, "__qualname__": _make_traced().__qualname__,
        "__annotations__": {"a": "int", "z": "int"}, "z": 0}))


def test_a_class_made_again_with_another_source_keeps_the_lines_of_each(shown_from: str) -> None:
    first, second = _make_again(True), _make_again(False)
    assert (first.__module__, first.__qualname__) == (second.__module__, second.__qualname__)
    files = [cls.__init__.__code__.co_filename for cls in (first, second)]
    if shown_from == "linecache":
        assert files[1] == files[0][:-1] + "-2>"
    else:  # each source its own file
        assert files[0] != files[1] and files[0].rsplit("-", 1)[0] == files[1].rsplit("-", 1)[0]
    for cls in (first, second):
        assert "".join(linecache.getlines(cls.__init__.__code__.co_filename)) == (
            inspect.getsource(cls.__init__))
    assert _FACTORY_LINE in inspect.getsource(first.__init__)
    assert "self.z=z" in inspect.getsource(second.__init__)
    assert _make_again(False).__init__.__code__.co_filename == files[1]  # the same source


def test_two_sources_with_one_checksum_get_a_file_each(
    inits_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(binascii, "crc32", lambda data: 7)
    first, second = _make_again(True), _make_again(False)
    files = [cls.__init__.__code__.co_filename for cls in (first, second)]
    assert files[0].endswith("-00000007.py") and files[1].endswith("-00000007-2.py")
    assert _FACTORY_LINE in inspect.getsource(first.__init__)
    assert "self.z=z" in inspect.getsource(second.__init__)
    # Taken again from what is kept, each still names its own file.
    monkeypatch.setattr(_records, "_inits", {k: marshal.dumps(v) if type(v) is not bytes else v
                                             for k, v in (_records._inits or {}).items()})
    assert _make_again(False).__init__.__code__.co_filename == files[1]


def test_zero_argument_super_works_in_slotted_records() -> None:
    # dataclasses(slots=True) raises TypeError here before Python 3.14: the methods'
    # __class__ cell names the class the class statement made, not the slotted one.
    @_records.dataclass(slots=True)
    class Base:
        a: int

        def __post_init__(self) -> None:
            self.a += 1

        def describe(self) -> str:
            return f"base {self.a}"

    @_records.dataclass(slots=True)
    class Child(Base):
        b: int = 0

        def __post_init__(self) -> None:
            super().__post_init__()
            self.b += 10

        def describe(self) -> str:
            return "child of " + super().describe()

        @property
        def label(self) -> str:
            return super().describe().upper()

        @classmethod
        def make(cls) -> Child:
            assert __class__ is Child  # the cell zero-argument super() reads
            return super().__new__(cls)  # type: ignore[misc]

        def __repr__(self) -> str:
            return "Child:" + super().__repr__()

    child = Child(1)
    assert (child.a, child.b) == (2, 10)
    assert child.describe() == "child of base 2" and child.label == "BASE 2"
    assert type(Child.make()) is Child and "__slots__" in Child.__dict__
    assert repr(child) == f"Child:{Child.__qualname__}(a=2)"  # Base's repr knows a only

    @_records.dataclass(frozen=True, slots=True)
    class Frozen:
        a: int

        def __post_init__(self) -> None:
            super().__setattr__("a", self.a * 2)  # object's, past the frozen guard

    assert Frozen(2).a == 4


# --- Oloproof's own record classes, against dataclasses made from the same source ------


def _record_modules() -> list[Path]:
    return sorted(
        path for path in SRC.rglob("*.py")
        if "examples" not in path.parts and path.name != "_records.py"
        and "from oloproof._records import" in path.read_text()
        and "@dataclass" in path.read_text()  # not a module that only calls replace()
    )


def _twin_module(path: Path, made: dict[str, types.ModuleType] | None = None) -> types.ModuleType:
    """The module at ``path`` run again under another name, with dataclasses' decorator;
    what it imports from another module of records (a base class: project/config.py's
    from project/policies.py) comes from that module's twin."""
    made = {} if made is None else made
    name = "_records_twin_" + "_".join(path.relative_to(SRC).with_suffix("").parts)
    source = path.read_text().replace("from oloproof._records import", "from dataclasses import")
    tree = ast.parse(source)
    bases = {b.id for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
             for b in node.bases if isinstance(b, ast.Name)}
    inherited_from = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)
                      and node.module and {a.name for a in node.names} & bases}
    for other in _record_modules():
        dotted = "oloproof." + ".".join(other.relative_to(SRC).with_suffix("").parts)
        if other != path and dotted in inherited_from:
            twin = made.get(dotted) or _twin_module(other, made)
            made[dotted] = twin
            source = source.replace(f"from {dotted} import", f"from {twin.__name__} import")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    # The module imports typing's ClassVar for the type checker only (typing is not imported
    # at run time); dataclasses resolves a string ClassVar through the class's module.
    module.ClassVar = typing.ClassVar  # type: ignore[attr-defined]
    twins = {twin.__name__: twin for twin in made.values()}
    sys.modules.update(twins)
    sys.modules[name] = module  # dataclasses resolves ClassVar through the class's module
    try:
        exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)  # noqa: S102
    finally:
        del sys.modules[name]
        for twin_name in twins:
            sys.modules.pop(twin_name, None)
    return module


@pytest.mark.slow  # measured: 3.1 s in-process on the shared machine (issue 31 tiers)
def test_every_module_of_ours_uses_records_not_dataclasses() -> None:
    for path in SRC.rglob("*.py"):
        if "examples" in path.parts or path.name == "_records.py":
            continue  # _records imports dataclasses only when asked for __dataclass_fields__
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert "dataclasses" not in [a.name for a in node.names], path
            elif isinstance(node, ast.ImportFrom):
                assert node.module != "dataclasses", path
    assert len(_record_modules()) >= 30


@pytest.mark.parametrize("path", _record_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_each_record_class_of_ours_is_its_dataclass(path: Path) -> None:
    module_name = "oloproof." + ".".join(path.relative_to(SRC).with_suffix("").parts)
    module_name = module_name.removesuffix(".__init__")
    ours_module = __import__(module_name, fromlist=["_"])
    twin = _twin_module(path)
    classes = [
        (name, value) for name, value in vars(ours_module).items()
        if isinstance(value, type) and "__record_fields__" in value.__dict__
        and value.__module__ == module_name
    ]
    assert classes, module_name
    for name, ours in classes:
        theirs = getattr(twin, name)
        assert dataclasses.is_dataclass(theirs)
        assert [f.name for f in ours.__record_fields__] == [
            f.name for f in dataclasses.fields(theirs)], name
        assert _signature(ours) == _signature(theirs), name
        assert ours.__match_args__ == theirs.__match_args__, name
        assert ours.__dict__.get("__slots__") == theirs.__dict__.get("__slots__"), name
        assert (ours.__hash__ is None) == (theirs.__hash__ is None), name
        assert [(f.name, f.type, f.init, f.kw_only) for f in dataclasses.fields(ours)] == [
            (f.name, f.type, f.init, f.kw_only) for f in dataclasses.fields(theirs)], name
        # Every parameter given, as a distinct int: the same instance, the same behaviour.
        params = _signature(theirs)[1:]
        args = [1000 + i for i, p in enumerate(params) if p[1] is not inspect.Parameter.KEYWORD_ONLY]
        kwargs = {p[0]: 2000 + i for i, p in enumerate(params)
                  if p[1] is inspect.Parameter.KEYWORD_ONLY}
        made = _outcome(ours, *args, **kwargs)
        assert made[0] == _outcome(theirs, *args, **kwargs)[0], (name, made)
        if made[0] != "ok":
            continue
        a, b = ours(*args, **kwargs), theirs(*args, **kwargs)
        assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1], name
        assert a == ours(*args, **kwargs) and b == theirs(*args, **kwargs)
        if theirs.__hash__ is not None:
            assert hash(a) == hash(b)
        assert _records.asdict(a) == dataclasses.asdict(b)
        first = params[0][0] if params else None
        if first is not None:
            assert _outcome(setattr, a, first, 1) == _outcome(setattr, b, first, 1)
            c, d = _records.replace(a), dataclasses.replace(b)
            assert repr(c).split("(", 1)[1] == repr(d).split("(", 1)[1]


# --- the short commands import neither dataclasses nor inspect ---------------------------

# Runs the command in this process and reports which modules imported dataclasses and
# inspect (the module whose code ran the import statement), and whether they were loaded.
_PROBE = r"""
import sys

class Watch:
    importers = {}

    def find_spec(self, name, path=None, target=None):
        if name in ("dataclasses", "inspect") and name not in self.importers:
            frame = sys._getframe(1)
            while frame and frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen")):
                frame = frame.f_back
            self.importers[name] = frame.f_globals.get("__name__", "?") if frame else "?"
        return None

watch = Watch()
sys.meta_path.insert(0, watch)
from oloproof.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in ("dataclasses", "inspect") if m in sys.modules)
sys.stderr.write(f"\nCODE {code}\nLOADED {','.join(loaded)}\nBY {watch.importers!r}\n")
"""


def _imports_of(args: list[str], cwd: Path) -> tuple[list[str], dict[str, str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True,
        check=False, timeout=120, stdin=subprocess.DEVNULL,
    )
    tail = proc.stderr.rsplit("\nCODE ", 1)[1].splitlines()
    assert tail[0] in ("0", "3"), proc.stderr[-2000:]
    loaded = tail[1].removeprefix("LOADED ").split(",") if tail[1] != "LOADED " else []
    importers: dict[str, str] = ast.literal_eval(tail[2].removeprefix("BY "))
    return loaded, importers


def test_runs_and_gate_import_neither_dataclasses_nor_inspect(tmp_path: Path) -> None:
    write_project(tmp_path, app="def answer(case_input):\n    return {'label': 'ok'}\n",
                  cases=labelled_cases(12),
                  release="version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n")
    assert run_cli("run", cwd=tmp_path).code in (0, 3)
    for args in (["runs", "--json"], ["gate", "latest", "--json"]):
        loaded, importers = _imports_of(args, tmp_path)
        assert loaded == [] and importers == {}, (args, importers)
    # `gate latest` prints its tables with rich, which imports dataclasses itself (rich's
    # console is made of dataclasses): none of ours does.
    loaded, importers = _imports_of(["gate", "latest"], tmp_path)
    assert importers.get("dataclasses", "rich.console").startswith("rich."), importers
    assert importers.get("inspect", "dataclasses") == "dataclasses", importers


# --- the compiled __init__ functions kept between processes --------------------------


def test_an_init_is_made_when_first_needed_and_only_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = _records._init_source

    def counting(*args: Any, **kwargs: Any) -> str:
        made.append("made")
        return real(*args, **kwargs)

    monkeypatch.setattr(_records, "_init_source", counting)
    point = _make_point()
    assert made == []  # defining the class generates nothing
    assert point(1).y == 2 and point(4, 5).y == 5
    assert made == ["made"]
    assert inspect.signature(point).parameters.keys() == {"x", "y", "tags"}
    assert "__init__" in point.__dict__ and point.__dict__["__init__"] is point.__init__
    assert made == ["made"]

    class Sub(point):  # type: ignore[misc,valid-type]  # a plain subclass uses the record's
        pass

    other = _make_point()
    assert Sub(7).x == 7 and made == ["made"]
    assert other.__init__ is not point.__init__ and made == ["made", "made"]


def test_an_order_error_is_still_raised_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @_records.dataclass
        class Wrong:
            a: int = 1
            b: int  # type: ignore[misc]


@pytest.fixture
def inits_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The records' code cache pointed at a file of this test's own, and emptied."""
    path = tmp_path / "__pycache__" / "_records.test.inits"
    monkeypatch.setattr(_records, "_inits_path", lambda: str(path))
    monkeypatch.setattr(_records, "_inits", None)
    monkeypatch.setattr(_records, "_inits_new", False)
    monkeypatch.setattr(_records, "_inits_used", set())
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return path


def _make_point() -> type:
    @_records.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: int = 2
        tags: list[str] = _records.field(default_factory=list)

    return Point


def _no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled although the code was kept")

    monkeypatch.setattr(_records, "compile", refuse, raising=False)


def test_a_kept_init_is_used_by_the_next_process_without_compiling(
    inits_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _make_point()
    assert first(1).y == 2
    _records._write_inits()  # what the process does at exit
    assert inits_file.is_file()
    monkeypatch.setattr(_records, "_inits", None)  # as a new process starts
    _no_compiling(monkeypatch)
    again = _make_point()
    made = again(3, tags=["a"])
    assert (made.x, made.y, made.tags) == (3, 2, ["a"])
    with pytest.raises(TypeError):
        again()
    assert again(3).tags is not again(3).tags  # the factory still runs per instance


def test_too_much_kept_keeps_what_this_process_used_and_its_sources(
    inits_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records edited again and again: past _INITS_MAX entries, the file keeps only the
    code this process used, and the folder of sources only their files (and any file
    written in the last hour: another process may not have merged its code yet)."""
    monkeypatch.setattr(_records, "_INITS_MAX", 2)
    point, traced = _make_point(), _make_traced()
    with pytest.raises(RuntimeError):
        traced(1)
    assert point(1).x == 1
    _records._write_inits()
    sources = inits_file.parent / f"{inits_file.name}.d"
    kept_files = sorted(sources.iterdir())
    assert len(kept_files) == 2
    old, fresh = sources / "gone.Old-00000001.py", sources / "new.Fresh-00000002.py"
    for stale in (old, fresh):
        stale.write_text("def __init__(self):\n  pass\n", encoding="utf-8")
    os.utime(old, (1, 1))  # written long ago
    _records._inits = {**(_records._inits or {}), f"{old}\nx": marshal.dumps(compile("", "x", "exec"))}
    _records._write_inits()
    assert sorted(sources.iterdir()) == sorted([*kept_files, fresh])
    kept = _records._read_inits(str(inits_file))
    assert len(kept) == 2 and not any(key.startswith(str(old)) for key in kept)
    assert _FACTORY_LINE in "".join(traceback.format_exception(
        pytest.raises(RuntimeError, traced, 1).value))


def test_a_kept_init_still_shows_its_source(inits_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _make_traced().__init__  # made (and compiled) when first asked for
    _records._write_inits()
    monkeypatch.setattr(_records, "_inits", None)  # as a new process starts
    linecache.clearcache()  # as a new process starts
    _no_compiling(monkeypatch)
    with pytest.raises(RuntimeError) as got:
        _make_traced()(1)
    assert _FACTORY_LINE in "".join(traceback.format_exception(got.value))


def test_what_two_processes_compiled_is_merged(inits_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def make_other() -> type:
        @_records.dataclass
        class Other:
            name: str

        return Other

    # Two processes start before either has written: each compiles its own record.
    monkeypatch.setattr(_records, "_inits", {})
    assert _make_point()(1).x == 1
    first = _records._inits
    monkeypatch.setattr(_records, "_inits", {})
    assert make_other()("a").name == "a"
    second = _records._inits
    for kept in (first, second):  # each writes at its exit, the second after the first
        monkeypatch.setattr(_records, "_inits", kept)
        _records._write_inits()
    monkeypatch.setattr(_records, "_inits", None)
    _no_compiling(monkeypatch)
    assert _make_point()(1).x == 1
    assert make_other()("a").name == "a"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage",
        _records._INITS_HEADER,
        _records._INITS_HEADER + b"\xff\x00 truncated",
        _records._INITS_HEADER + __import__("marshal").dumps([1, 2]),
        _records._INITS_HEADER + __import__("marshal").dumps({"def __init__(self):\n  pass\n": 1}),
        b"oloproof-inits/1 (3, 0, 0)\n" + __import__("marshal").dumps({}),
    ],
    ids=["empty", "garbage", "header-only", "truncated", "not-a-dict", "not-code", "other-python"],
)
def test_a_damaged_or_foreign_file_is_ignored_and_replaced(
    inits_file: Path, content: bytes
) -> None:
    inits_file.parent.mkdir(parents=True)
    inits_file.write_bytes(content)
    point = _make_point()
    assert point(1, 5).y == 5
    _records._write_inits()
    assert inits_file.read_bytes().startswith(_records._INITS_HEADER)
    assert len(_records._read_inits(str(inits_file))) >= 1


@pytest.mark.parametrize("kept", [b"garbage", __import__("marshal").dumps(42), b""])
def test_a_kept_entry_that_is_not_code_is_compiled_anew(
    inits_file: Path, monkeypatch: pytest.MonkeyPatch, kept: bytes
) -> None:
    import marshal

    assert _make_point()(1).y == 2
    _records._write_inits()
    entries = _records._read_inits(str(inits_file))
    assert entries and all(type(v) is bytes for v in entries.values())  # unread until used
    inits_file.write_bytes(_records._INITS_HEADER + marshal.dumps(dict.fromkeys(entries, kept)))
    monkeypatch.setattr(_records, "_inits", None)  # as a new process starts
    point = _make_point()
    assert point(3, 4).y == 4 and point(3).y == 2


def test_nothing_is_written_when_python_writes_no_bytecode(
    inits_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    made = _make_point()
    assert made(1).x == 1 and made.__init__.__code__.co_filename.startswith("<generated")
    _records._write_inits()
    assert not inits_file.exists() and not inits_file.parent.exists()


def test_an_unwritable_place_costs_nothing_but_the_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(_records, "_inits_path", lambda: str(blocker / "__pycache__" / "x.inits"))
    monkeypatch.setattr(_records, "_inits", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    made = _make_point()
    assert made(4).x == 4
    assert made.__init__.__code__.co_filename.startswith("<generated")  # shown by linecache
    _records._write_inits()  # no error
    assert list(tmp_path.iterdir()) == [blocker]
