"""Records: the part of :mod:`dataclasses` Oloproof uses, cheaper to import and to apply.

``from oloproof._records import dataclass, field, asdict, replace`` is a drop-in for the
same names of :mod:`dataclasses` as Oloproof uses them (issue 16, start-up). Importing
:mod:`dataclasses` costs a fresh process about 13 ms (it imports :mod:`inspect`, which
brings ``ast``, ``dis``, ``tokenize``, ``linecache``...), and it compiles every method of
every class with an ``exec`` of its own. This module imports neither ``dataclasses`` nor
``inspect`` (``copy`` only when :func:`asdict` meets a value it must copy; ``linecache``
only where Python keeps no bytecode: see ``_init_code``), and compiles one function per
class, its ``__init__``
(kept between processes: see ``_compiled``): ``__repr__``, ``__eq__``,
``__hash__`` and a frozen class's ``__setattr__``/``__delattr__`` are closures over the
class's field names, made without compiling anything.

What the decorator does is what ``dataclasses.dataclass`` does with ``eq=True``,
``init=True``, ``repr=True``, ``order=False``, ``unsafe_hash=False``, ``match_args=True``,
``weakref_slot=False`` (its defaults) and the three arguments Oloproof passes, ``frozen``,
``slots`` and ``kw_only`` (every field of the class keyword-only unless its ``field()``
says otherwise, as in dataclasses):

- ``__init__`` takes the fields in order (inherited ones first), those declared
  ``field(kw_only=True)`` after a ``*``; a default is shared, a ``default_factory`` is
  called for each instance that is not given the value; ``__post_init__`` is called last
  when the class has one. A field without a default after one with a default, or a
  mutable default (a value whose class is unhashable: a list, a dict, a set), is refused
  as dataclasses refuses it.
- ``__repr__`` is ``ClassName(a=1, b='x')`` (the class's ``__qualname__``; fields with
  ``repr=False`` left out; ``...`` for a record met again inside itself).
- ``__eq__`` compares the tuples of the fields with ``compare=True`` of two instances of
  the same class (anything else: ``NotImplemented``); ``__hash__`` is ``None`` unless the
  class is frozen, then the hash of that tuple; a ``__hash__``, ``__init__``,
  ``__repr__`` or ``__eq__`` written in the class body is kept.
- A frozen class raises :class:`FrozenInstanceError` (an :class:`AttributeError`) on
  assignment or deletion; a record may not be frozen when its base record is not, or the
  other way round.
- ``slots=True`` makes the class again with ``__slots__`` (the fields its base classes do
  not already have), frozen ones with ``__getstate__``/``__setstate__`` for pickling.
- ``__match_args__`` names the positional fields.
- Annotations that are ``ClassVar`` (``ClassVar[...]``, ``typing.ClassVar[...]``, as the
  string ``from __future__ import annotations`` makes) are class attributes, not fields.

Where it does more than dataclasses (as attrs does): the source of each generated
``__init__`` can be read, so tracebacks, pdb and ``inspect.getsource`` show the line that
ran: it is a file beside the kept bytecode (``module.Class-<checksum>.py``), or, where
Python keeps no bytecode, registered with :mod:`linecache` (``<generated __init__ of
module.Class>``); and zero-argument ``super()`` works in the methods of a slotted record
(dataclasses fixed this in 3.14).

What it leaves out (nothing in Oloproof uses them): ``InitVar``, ``KW_ONLY``, ``order``,
``unsafe_hash``, ``field(metadata=...)``, the annotations of the generated ``__init__``,
and a ``__doc__`` made from the signature for a class without one. The fields of a record
are the tuple ``__record_fields__`` of :class:`Field`; ``__dataclass_fields__`` is made
from it when something asks (``dataclasses.fields()``, ``asdict()``, ``is_dataclass()``,
rich's pretty printer), so a user's code that treats our results as dataclasses works, and
``dataclasses`` is imported only then.

tests/test_records.py builds the same classes with ``dataclasses`` and with this module
and compares what they do.
"""

from __future__ import annotations

import marshal
import os
import sys
from _thread import get_ident
from enum import Enum
from operator import attrgetter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform, overload

    _T = TypeVar("_T")

__all__ = ["MISSING", "Field", "FrozenInstanceError", "asdict", "dataclass", "field", "replace"]

# Where dataclasses changed its words between the Pythons we support, a record says what the
# running Python's dataclasses says (tests/test_records.py compares the two on each).
_PY313 = sys.version_info >= (3, 13)


class FrozenInstanceError(AttributeError):
    """An assignment to (or deletion of) a field of a frozen record."""


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


class _HasDefaultFactory:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


#: No default (as ``dataclasses.MISSING``).
MISSING: Any = _Missing()
# The default of an __init__ parameter whose field has a default_factory.
_HAS_DEFAULT_FACTORY = _HasDefaultFactory()


class Field:
    """One field of a record: what ``field(...)`` returns and ``__record_fields__`` lists."""

    __slots__ = ("compare", "default", "default_factory", "hash", "init", "kw_only", "name",
                 "repr")

    def __init__(
        self, default: Any, default_factory: Any, init: bool, repr: bool,
        hash: bool | None, compare: bool, kw_only: Any,
    ) -> None:
        self.name: str = ""
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.kw_only = kw_only

    def __repr__(self) -> str:
        return (
            f"Field(name={self.name!r},default={self.default!r},"
            f"default_factory={self.default_factory!r},init={self.init!r},"
            f"repr={self.repr!r},hash={self.hash!r},compare={self.compare!r},"
            f"kw_only={self.kw_only!r})"
        )


class _DataclassFields:
    """A record's ``__dataclass_fields__``, made on first use: ``dataclasses.fields()``,
    ``asdict()`` and ``is_dataclass()`` (and libraries that read it) then work on records as
    on dataclasses, and only code that asks imports ``dataclasses``."""

    def __get__(self, obj: object, owner: type) -> dict[str, Any]:
        import dataclasses

        hints = {}
        for klass in reversed(owner.__mro__):
            hints.update(klass.__dict__.get("__annotations__", {}))  # noqa: RUF063 - no inspect
        spec = []
        for f in owner.__record_fields__:  # type: ignore[attr-defined]
            kw_only = False if f.kw_only is MISSING else f.kw_only
            spec.append((f.name, hints.get(f.name, "Any"), dataclasses.field(
                default=dataclasses.MISSING if f.default is MISSING else f.default,
                default_factory=(
                    dataclasses.MISSING if f.default_factory is MISSING else f.default_factory
                ),
                init=f.init, repr=f.repr, hash=f.hash, compare=f.compare, kw_only=kw_only,
            )))
        # The fields as dataclasses itself makes them, through its public make_dataclass: a
        # twin class with no methods of its own, whose fields are then this record's.
        twin = dataclasses.make_dataclass(owner.__name__, spec, init=False, repr=False,
                                          eq=False)
        made: dict[str, Any] = {f.name: f for f in dataclasses.fields(twin)}
        setattr(owner, "__dataclass_fields__", made)  # noqa: B010 - made once per class
        return made


_DATACLASS_FIELDS = _DataclassFields()


def _field(
    *, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,
    repr: bool = True, hash: bool | None = None, compare: bool = True, kw_only: Any = MISSING,
) -> Any:
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, hash, compare, kw_only)


def _is_classvar(annotation: object) -> bool:
    """``ClassVar[...]`` as a string (postponed annotations) or as the typing object."""
    if isinstance(annotation, str):
        if "ClassVar" not in annotation:  # nearly every field: one scan, nothing made
            return False
        text = annotation.lstrip().removeprefix("typing.")
        return text.startswith("ClassVar") and text[8:9] in ("", "[", " ")
    typing = sys.modules.get("typing")  # a typing object means typing is imported already
    return typing is not None and (
        annotation is typing.ClassVar or getattr(annotation, "__origin__", None) is typing.ClassVar
    )


def _slots_of(cls: type) -> tuple[str, ...]:
    slots = cls.__dict__.get("__slots__")
    if slots is None:
        return ()
    if isinstance(slots, str):
        return (slots,)
    if hasattr(slots, "__next__"):
        raise TypeError(f"Slots of '{cls.__name__}' cannot be determined")
    return tuple(slots)


def _dataclass_getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in self.__record_fields__]


def _dataclass_setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(self.__record_fields__, state, strict=False):
        object.__setattr__(self, f.name, value)


def _check_order(fields: list[Field]) -> None:
    """Refuse, as dataclasses does when the class is made, a parameter without a default
    after one with a default."""
    seen_default: str | None = None
    for f in fields:
        if not f.init or f.kw_only:
            continue
        if f.default_factory is not MISSING or f.default is not MISSING:
            seen_default = f.name
        elif seen_default is not None:
            after = f" {seen_default!r}" if _PY313 else ""
            raise TypeError(f"non-default argument {f.name!r} follows default argument{after}")


def _init_source(
    fields: list[Field], frozen: bool, slots: bool, post_init: bool, ns: dict[str, Any],
) -> str:
    """The source of ``__init__``; fills ``ns`` with the defaults and factories it names
    (the order of the parameters was checked when the class was made: _check_order)."""
    self_name = "__dataclass_self__" if any(f.name == "self" for f in fields) else "self"
    std: list[str] = []
    kw: list[str] = []
    body: list[str] = []
    for f in fields:
        name = f.name
        default_name = f"__dataclass_dflt_{name}__"
        if f.init:
            if f.default_factory is not MISSING:
                param = f"{name}=__dataclass_HAS_DEFAULT_FACTORY__"
            elif f.default is not MISSING:
                param = f"{name}={default_name}"
            else:
                param = name
            (kw if f.kw_only else std).append(param)
        if f.default_factory is not MISSING:
            ns[default_name] = f.default_factory
            value = (f"{default_name}() if {name} is __dataclass_HAS_DEFAULT_FACTORY__ "
                     f"else {name}") if f.init else f"{default_name}()"
        elif f.init:
            if f.default is not MISSING:
                ns[default_name] = f.default
            value = name
        elif f.default is not MISSING and slots:
            ns[default_name] = f.default
            value = default_name
        else:
            continue  # init=False without a default: left unset; with one: the class's
        if frozen:
            body.append(f"  __dataclass_setattr__({self_name},{name!r},{value})")
        else:
            body.append(f"  {self_name}.{name}={value}")
    if post_init:
        body.append(f"  {self_name}.__post_init__()")
    params = ",".join([self_name, *std, *(["*", *kw] if kw else [])])
    return f"def __init__({params}):\n" + ("\n".join(body) or "  pass") + "\n"


class _LazyInit:
    """A record's ``__init__`` until it is first needed: the class's first instance, or
    anything that reads ``cls.__init__`` (``inspect.signature``, a subclass calling it).
    Then the function is generated, compiled (or taken from the kept code objects) and put
    on the class in this descriptor's place, where it stays; the call goes on to it.

    Most record classes of a short command are never instantiated (a rerun makes 39 of its
    100, ``gate`` 10 of 98): generating and registering their ``__init__`` at import was a
    third of the records' import time (docs/performance.md)."""

    __slots__ = ("make", "owner")

    def __init__(self, owner: type, make: Callable[[], Callable[..., None]]) -> None:
        self.owner = owner
        self.make: Callable[[], Callable[..., None]] | None = make

    def function(self) -> Callable[..., None]:
        owner = self.owner
        current: Any = owner.__dict__.get("__init__")
        if current is not self:  # made meanwhile (another thread), or replaced
            made: Callable[..., None] = current
            return made
        make = self.make
        assert make is not None
        fn: Callable[..., None] = make()
        type.__setattr__(owner, "__init__", fn)
        self.make = None
        return fn

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        fn = self.function()
        return fn if obj is None else fn.__get__(obj, cls)


# Compiled __init__ functions, kept between processes. Compiling one costs about 75 µs, and
# an unchanged rerun makes some 60 records: a twelfth of its start-up. So the code objects
# are kept, keyed by their source, in one marshal file beside this module's own bytecode
# (``__pycache__/_records.cpython-311.inits``), as Python keeps a module's. It is read
# once, on the first record; a process that compiled something new merges what it made
# into the file when it exits (written whole to a temporary file, then renamed, so a
# reader never sees half of one). Nothing is kept when Python writes no bytecode
# (``-B``, ``PYTHONDONTWRITEBYTECODE``, ``sys.pycache_prefix``); a file that cannot be
# read, is not ours or comes from another Python is ignored and compiled anew. It is
# trusted as the ``.pyc`` files beside it are: whoever can write one can write the other.
# Each code object is kept as its own marshal bytes, unmarshalled when first used: a
# command uses a third of them or fewer, and unmarshalling them all on the first record
# was about a millisecond of every short command (docs/performance.md).
_INITS_HEADER = b"oloproof-inits/3 " + repr(sys.version_info[:3]).encode() + b"\n"
_INITS_MAX_BYTES = 8 << 20
_INITS_MAX = 4096  # more (records edited again and again): keep only those used
_CODE = type(_check_order.__code__)
_inits: dict[str, Any] | None = None  # key: code object, or its marshal bytes (unread)
_inits_used: set[str] = set()
_inits_new = False


def _inits_path() -> str | None:
    tag = sys.implementation.cache_tag
    if tag is None or sys.pycache_prefix is not None:
        return None
    return os.path.join(os.path.dirname(__file__), "__pycache__", f"_records.{tag}.inits")


def _read_inits(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            data = f.read(_INITS_MAX_BYTES + 1)
        if len(data) > _INITS_MAX_BYTES or not data.startswith(_INITS_HEADER):
            return {}
        kept = marshal.loads(data[len(_INITS_HEADER):])
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if type(kept) is not dict:
        return {}
    return {k: v for k, v in kept.items() if type(k) is str and type(v) is bytes}


def _write_inits() -> None:
    """Merge what this process compiled into the file (at exit)."""
    path = _inits_path()
    if path is None or sys.dont_write_bytecode or _inits is None:
        return
    merged = {**_read_inits(path)}
    for key, value in _inits.items():
        merged[key] = value if type(value) is bytes else marshal.dumps(value)
    if len(merged) > _INITS_MAX:
        merged = {k: v for k, v in merged.items() if k in _inits_used}
        _prune_sources(f"{path}.d", {key.partition("\n")[0] for key in merged})
    _write_whole(path, _INITS_HEADER + marshal.dumps(merged))


def _prune_sources(folder: str, kept: set[str]) -> None:
    """Remove the source files (``_init_code``) of the code no longer kept, but those
    written in the last hour: another process may have compiled them and not yet merged
    its code into the file."""
    import time

    recent = time.time() - 3600
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            if path not in kept and os.stat(path).st_mtime < recent:
                os.unlink(path)
        except OSError:
            pass


def _write_whole(path: str, data: bytes) -> bool:
    """Write ``data`` to a temporary file beside ``path`` and rename it there, so that a
    reader never sees half of it; False when that failed (nothing is left behind)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True


def _compiled(filename: str, source: str) -> Any:
    """The code object of ``source`` (a generated ``__init__``) compiled as ``filename``,
    kept or compiled."""
    global _inits_new
    inits = _kept()
    key = f"{filename}\n{source}"
    _inits_used.add(key)
    code = inits.get(key)
    if type(code) is bytes:
        try:
            code = marshal.loads(code)
        except (ValueError, EOFError, TypeError):
            code = None
        if type(code) is not _CODE:
            code = None
    if code is None:
        code = inits[key] = compile(source, filename, "exec")
        if not _inits_new:
            _inits_new = True
            import atexit

            atexit.register(_write_inits)
    return code


def _init_code(name: str, source: str) -> Any:
    """The code object of a generated ``__init__`` of the class ``name``, compiled under a
    file name that shows its source to tracebacks (Python's own printer included), pdb and
    ``inspect.getsource``, as attrs does for its generated methods.

    Where Python keeps bytecode, the source is a file beside the kept code objects
    (:func:`_source_base`), written when the function is first compiled: a process that
    takes the code from the cache touches no file and imports nothing for it (importing
    :mod:`linecache`, with :mod:`tokenize`, was about 4.9 million instructions of every
    short command; docs/performance.md). Where it keeps none, or the file cannot be
    written, the source is registered with :mod:`linecache` instead (:func:`_source_file`)."""
    base = _source_base(name, source)
    if base is not None:
        for n in range(1, 10):
            path = f"{base}.py" if n == 1 else f"{base}-{n}.py"
            if _is_kept(path, source):
                return _compiled(path, source)
            written = _write_source(path, source)
            if written is None:  # cannot be written
                break
            if written:
                return _compiled(path, source)
            # Another source has this name (the same class, its checksum shared): the next.
    return _compiled(_source_file(name, source), source)


def _source_base(name: str, source: str) -> str | None:
    """Where the source of a generated ``__init__`` is kept, without ``.py``: in a folder
    beside the kept code (``__pycache__/_records.cpython-311.inits.d/``), named after the
    class and a checksum of the source. ``None`` when no bytecode is kept."""
    kept = _inits_path()
    if kept is None or sys.dont_write_bytecode:
        return None
    if not name.replace(".", "").replace("_", "").isalnum():  # <locals>, say
        name = "".join(c if c.isalnum() or c in "._" else "_" for c in name)
    from binascii import crc32

    return os.path.join(f"{kept}.d", f"{name}-{crc32(source.encode()):08x}")


def _is_kept(path: str, source: str) -> bool:
    return f"{path}\n{source}" in _kept()


def _kept() -> dict[str, Any]:
    """The kept code objects, read from their file on first use."""
    global _inits
    if _inits is None:
        _inits = _read_inits(_inits_path())
    return _inits


def _write_source(path: str, source: str) -> bool | None:
    """Make ``path`` hold ``source``: True when it does, False when it holds another
    source, None when it cannot be read or written (written as the kept code is)."""
    data = source.encode()
    try:
        with open(path, "rb") as f:
            return f.read(len(data) + 1) == data
    except FileNotFoundError:
        pass
    except OSError:
        return None
    return True if _write_whole(path, data) else None


def _source_file(name: str, source: str) -> str:
    """The file name a generated ``__init__`` of the class ``name`` is compiled as when its
    source is not kept on the disk, with its source registered in :mod:`linecache`, so that
    tracebacks printed by :mod:`traceback`, pdb and ``inspect.getsource`` show the line
    that ran. The name is in angle brackets, as ``<string>``: nothing looks for it on the
    disk. A class made again with another source (a class defined in a function) gets
    ``-2``, ``-3``... rather than showing the lines of the other."""
    import linecache

    lines = source.splitlines(keepends=True)
    base = f"<generated __init__ of {name}>"
    filename, n = base, 1
    while filename in linecache.cache and linecache.cache[filename][2:3] != (lines,):
        n += 1
        filename = f"{base[:-1]}-{n}>"
    # No modification time: linecache.checkcache() keeps the entry (it is not a file).
    linecache.cache[filename] = (len(source), None, lines, filename)
    return filename


# What a class's namespace holds that has no ``__code__``, ``__closure__`` or
# ``__wrapped__`` (none of these types takes attributes): _repoint_class_cell skips them.
_HOLDS_NO_CODE = frozenset({
    str, dict, tuple, type(None), int, float, bool, frozenset,
    type(FrozenInstanceError.__dict__["__weakref__"]),  # a getset descriptor
    type(Field.__dict__["name"]),  # a member (slot) descriptor
})


def _repoint_class_cell(old: type, new: type) -> None:
    """Make zero-argument ``super()`` (and ``__class__``) in the methods of a slotted record
    name the class made again with ``__slots__``, not the one the class statement made:
    without this, ``super().method()`` raises TypeError (``obj must be an instance or
    subtype of type``), as it does with ``dataclasses`` before Python 3.14, which fixed it
    the same way. All the methods of one class statement share one ``__class__`` cell."""
    for member in new.__dict__.values():
        if type(member) in _HOLDS_NO_CODE:
            continue  # a slot, the class's name or annotations: nothing to look into
        if isinstance(member, property):
            candidates = [member.fget, member.fset, member.fdel]
        else:
            candidates = [member]
        for fn in candidates:
            for _ in range(100):  # a decorated method: the functions it wraps, in turn
                code, closure = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
                if code is not None and closure is not None and "__class__" in code.co_freevars:
                    cell = closure[code.co_freevars.index("__class__")]
                    if cell.cell_contents is old:
                        cell.cell_contents = new
                        return
                fn = getattr(fn, "__wrapped__", None)
                if fn is None:
                    break


def _fields_getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of those attributes (one attribute too: ``attrgetter`` alone would not)."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    if not names:
        return lambda obj: ()
    getter: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)
    return getter


def _make_repr(names: list[str]) -> Callable[[Any], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = id(self), get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            inner = ", ".join([f"{name}={getattr(self, name)!r}" for name in names])
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _make_eq(names: list[str]) -> Callable[[Any, Any], Any]:
    values = _fields_getter(names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _make_hash(names: list[str]) -> Callable[[Any], int]:
    values = _fields_getter(names)

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _make_frozen(cls: Any, names: frozenset[str]) -> tuple[Callable[..., None], ...]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _process(cls: Any, frozen: bool, slots: bool, kw_only: bool = False) -> Any:
    own = cls.__dict__
    fields: dict[str, Field] = {}
    has_bases = False
    any_frozen_base = False
    all_frozen_bases = True
    # The bases from the farthest, without ``object`` (always last, and never a record):
    # looking a missing attribute up on a class formats an AttributeError, as many
    # instructions as the rest of a base's turn.
    for base in cls.__mro__[-2:0:-1]:
        base_fields = getattr(base, "__record_fields__", None)
        if base_fields is not None:
            has_bases = True
            for f in base_fields:
                fields[f.name] = f
            if getattr(base, "__record_frozen__", False):
                any_frozen_base = True
            else:
                all_frozen_bases = False
    if has_bases:
        if any_frozen_base and not frozen:
            raise TypeError("cannot inherit non-frozen dataclass from a frozen one")
        if not all_frozen_bases and frozen:
            raise TypeError("cannot inherit frozen dataclass from a non-frozen one")

    annotations: dict[str, Any] = own.get("__annotations__", {})
    # Class attributes to set (a field's default) or remove (a field() without one).
    set_attrs: dict[str, Any] = {}
    del_attrs: list[str] = []
    for name, annotation in annotations.items():
        if _is_classvar(annotation):
            continue
        value = own.get(name, MISSING)
        if isinstance(value, Field):
            f = value
            if f.default is MISSING:
                del_attrs.append(name)
            else:
                set_attrs[name] = f.default
            if f.kw_only is MISSING:
                f.kw_only = kw_only
        else:
            f = Field(value, MISSING, True, True, None, True, kw_only)
        f.name = name
        if f.default is not MISSING and f.default.__class__.__hash__ is None:
            raise ValueError(
                f"mutable default {type(f.default)} for field {name} is not allowed:"
                " use default_factory"
            )
        fields[name] = f
    for name, value in own.items():
        if isinstance(value, Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")

    all_fields = list(fields.values())
    # The names each generated method uses, in one pass (a comprehension per list was a
    # tenth of a record's making, which is most of a short command's records' cost).
    names: list[str] = []
    shown: list[str] = []  # __repr__
    compared: list[str] = []  # __eq__
    hashed: list[str] = []  # __hash__
    positional: list[str] = []  # __match_args__
    for f in all_fields:
        name = f.name
        names.append(name)
        if f.repr:
            shown.append(name)
        if f.compare:
            compared.append(name)
        if f.compare if f.hash is None else f.hash:
            hashed.append(name)
        if f.init and not f.kw_only:
            positional.append(name)

    class_hash = own.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in own))
    if frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in own:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")

    ns: dict[str, Any] = {
        "__dataclass_HAS_DEFAULT_FACTORY__": _HAS_DEFAULT_FACTORY,
        "__dataclass_setattr__": object.__setattr__,
    }
    if slots:
        if "__slots__" in own:
            raise TypeError(f"{cls.__name__} already specifies __slots__")
        inherited: set[str] = set()
        for base in cls.__mro__[1:-1]:
            inherited.update(_slots_of(base))
        cls_dict = dict(own)
        for name in names:
            cls_dict.pop(name, None)
        cls_dict.pop("__dict__", None)
        cls_dict.pop("__weakref__", None)
        cls_dict["__slots__"] = tuple([n for n in names if n not in inherited])
        qualname = getattr(cls, "__qualname__", None)
        original, cls = cls, type(cls)(cls.__name__, cls.__bases__, cls_dict)
        if qualname is not None:
            cls.__qualname__ = qualname
        _repoint_class_cell(original, cls)
        if frozen:
            if "__getstate__" not in cls_dict:
                cls.__getstate__ = _dataclass_getstate
            if "__setstate__" not in cls_dict:
                cls.__setstate__ = _dataclass_setstate
    else:
        for name, value in set_attrs.items():
            setattr(cls, name, value)
        for name in del_attrs:
            delattr(cls, name)

    cls.__record_fields__ = tuple(all_fields)
    cls.__dataclass_fields__ = _DATACLASS_FIELDS
    cls.__record_frozen__ = frozen

    qualname = cls.__qualname__
    methods: dict[str, Callable[..., Any]] = {}
    if "__init__" not in own:
        _check_order(all_fields)
        post_init = hasattr(cls, "__post_init__")
        owner = cls

        def make_init() -> Callable[..., None]:
            source = _init_source(all_fields, frozen, slots, post_init, ns)
            exec(_init_code(f"{owner.__module__}.{qualname}", source), ns)  # noqa: S102
            fn: Callable[..., None] = ns["__init__"]
            fn.__qualname__ = f"{qualname}.__init__"
            fn.__module__ = owner.__module__
            return fn

        type.__setattr__(cls, "__init__", _LazyInit(cls, make_init))
    if "__repr__" not in own:
        methods["__repr__"] = _make_repr(shown)
    if "__eq__" not in own:
        methods["__eq__"] = _make_eq(compared)
    if frozen:
        methods["__setattr__"], methods["__delattr__"] = _make_frozen(cls, frozenset(names))
    if not explicit_hash and frozen:
        methods["__hash__"] = _make_hash(hashed)
    for name, fn in methods.items():
        fn.__qualname__ = f"{qualname}.{name}"
        fn.__module__ = cls.__module__  # as dataclasses' methods, made in the class's module
        setattr(cls, name, fn)
    if not explicit_hash and not frozen:
        cls.__hash__ = None
    if "__match_args__" not in own:
        cls.__match_args__ = tuple(positional)  # type: ignore[misc]  # (mypy: a class attribute)
    return cls


def _dataclass(
    cls: Any = None, /, *, frozen: bool = False, slots: bool = False, kw_only: bool = False,
) -> Any:
    if cls is None:
        return lambda c: _process(c, frozen, slots, kw_only)
    return _process(cls, frozen, slots, kw_only)


def _is_record(obj: object) -> bool:
    return hasattr(type(obj), "__record_fields__")


# Values asdict() may return as they are: copy.deepcopy returns these same objects. So it
# does an enum member (Enum.__deepcopy__ returns it), the one other kind our records hold:
# without this, the first one imported `copy` on every run's path (a rule's state).
_ATOMIC = frozenset({type(None), bool, int, float, complex, str, bytes})
_ENUM_DEEPCOPY = Enum.__deepcopy__


def _asdict_inner(obj: Any) -> Any:
    if type(obj) in _ATOMIC or getattr(type(obj), "__deepcopy__", None) is _ENUM_DEEPCOPY:
        return obj
    if hasattr(type(obj), "__record_fields__"):
        return {f.name: _asdict_inner(getattr(obj, f.name)) for f in obj.__record_fields__}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_asdict_inner(v) for v in obj])
    if isinstance(obj, list | tuple):
        return type(obj)(_asdict_inner(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((_asdict_inner(k), _asdict_inner(v)) for k, v in obj.items())
    import copy

    return copy.deepcopy(obj)


def asdict(obj: object) -> dict[str, Any]:
    """The record as a dict, recursing into records, lists, tuples and dicts; other values
    deep-copied (as ``dataclasses.asdict``)."""
    if not _is_record(obj):
        raise TypeError("asdict() should be called on dataclass instances")
    result: dict[str, Any] = _asdict_inner(obj)
    return result


def replace(obj: _T, /, **changes: Any) -> _T:
    """A new record of the same class: ``obj``'s field values, ``changes`` instead of some."""
    if not _is_record(obj):
        raise TypeError("replace() should be called on dataclass instances")
    for f in obj.__record_fields__:  # type: ignore[attr-defined]
        if not f.init:
            if f.name in changes:
                # ValueError up to 3.12, TypeError from 3.13, as dataclasses.replace.
                raise (TypeError if _PY313 else ValueError)(
                    f"field {f.name} is declared with init=False, it cannot be specified with"
                    " replace()"
                )
            continue
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    new: _T = obj.__class__(**changes)
    return new


if TYPE_CHECKING:
    # What type checkers see: dataclasses' signatures, and dataclass_transform so that a
    # record's constructor is checked as a dataclass's is.

    @overload
    def field(
        *, default: _T, init: bool = ..., repr: bool = ..., hash: bool | None = ...,
        compare: bool = ..., kw_only: bool = ...,
    ) -> _T: ...

    @overload
    def field(
        *, default_factory: Callable[[], _T], init: bool = ..., repr: bool = ...,
        hash: bool | None = ..., compare: bool = ..., kw_only: bool = ...,
    ) -> _T: ...

    @overload
    def field(
        *, init: bool = ..., repr: bool = ..., hash: bool | None = ..., compare: bool = ...,
        kw_only: bool = ...,
    ) -> Any: ...

    def field(**kwargs: Any) -> Any:
        return _field(**kwargs)

    @overload
    @dataclass_transform(field_specifiers=(field, Field))
    def dataclass(cls: type[_T], /) -> type[_T]: ...

    @overload
    def dataclass(
        cls: None = ..., /, *, frozen: bool = ..., slots: bool = ..., kw_only: bool = ...,
    ) -> Callable[[type[_T]], type[_T]]: ...

    def dataclass(
        cls: Any = None, /, *, frozen: bool = False, slots: bool = False,
        kw_only: bool = False,
    ) -> Any:
        return _dataclass(cls, frozen=frozen, slots=slots, kw_only=kw_only)

else:
    field = _field
    dataclass = _dataclass
