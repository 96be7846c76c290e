"""Switch one of Oloproof's start-up mechanisms off, for bench/mechanisms.py only.

Put this folder first on ``PYTHONPATH`` and name the mechanism in ``OLOPROOF_BENCH_OFF``;
the command then runs as it would without it, so the difference in time is what the
mechanism buys. Nothing here is part of Oloproof: each switch replaces, right after the
module is imported, the one function or value that makes the mechanism.

With ``OLOPROOF_BENCH_SEEN`` set to a file name, the switch appends its mechanism's name to
that file when the command reaches it: bench/mechanisms.py checks, before it times
anything, that every switch it times is really reached by its command (a switch that is
never reached would measure nothing and report a gain of zero).

Without ``OLOPROOF_BENCH_OFF`` this file does nothing (and imports nothing): the command
"with the mechanism" pays only for Python finding and running an empty module, as the
command without it does.
"""

from __future__ import annotations

import os
import sys

OFF = os.environ.get("OLOPROOF_BENCH_OFF", "")


def _seen() -> None:
    path = os.environ.get("OLOPROOF_BENCH_SEEN")
    if path:
        with open(path, "a") as f:
            f.write(OFF + "\n")


def _rich_plain_text(stream, item):  # type: ignore[no-untyped-def]
    """What outside a terminal printed before render/plain.py: rich's plain console."""
    import io

    from rich.console import Console

    _seen()
    out = io.StringIO()
    Console(file=out, force_terminal=False, no_color=True, color_system=None, highlight=False,
            markup=False, width=100_000, height=10_000, soft_wrap=False, emoji=False).print(item)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


def _records(module):  # type: ignore[no-untyped-def]
    """dataclasses' decorator for every record. It finds a string ``ClassVar[...]``
    annotation through the class's module, where our modules name ClassVar for the type
    checker only: it is put there first (as tests/test_records.py does)."""
    import dataclasses
    import typing

    def dataclass(cls=None, /, **options):  # type: ignore[no-untyped-def]
        def wrap(c):  # type: ignore[no-untyped-def]
            vars(sys.modules[c.__module__]).setdefault("ClassVar", typing.ClassVar)
            return dataclasses.dataclass(c, **options)

        return wrap if cls is None else wrap(cls)

    _seen()
    module.dataclass = dataclass
    for name in ("field", "asdict", "replace"):
        setattr(module, name, getattr(dataclasses, name))


def _no_snapshot(module):  # type: ignore[no-untyped-def]
    def none(*args, **kwargs):  # type: ignore[no-untyped-def]
        _seen()

    for name in ("load_config", "load_stored_policy", "save_config", "save_stored_policy"):
        setattr(module, name, none)


def _no_inits(module):  # type: ignore[no-untyped-def]
    def no_path():  # type: ignore[no-untyped-def]
        _seen()

    module._inits_path = no_path


def _no_code_stamp(module):  # type: ignore[no-untyped-def]
    """A snapshot's stamp never holds: its code digest is computed, as before the stamp."""
    def never(stamp):  # type: ignore[no-untyped-def]
        _seen()
        return False

    module._stamp_holds = never
    # Nor stamped again: the next command "with" the stamp must find the snapshots as
    # they were (bench/mechanisms.py alternates the two in one project).
    module._write = lambda path, doc: None


def _eager_init(module):  # type: ignore[no-untyped-def]
    """Every record's __init__ made when its class is made, as before they were lazy: what
    _process puts on the class is the function itself, not the descriptor."""
    def made_now(owner, make):  # type: ignore[no-untyped-def]
        _seen()
        return make()

    module._LazyInit = made_now


def _no_fast_args(module):  # type: ignore[no-untyped-def]
    def fast_parse(words):  # type: ignore[no-untyped-def]
        _seen()

    module.fast_parse = fast_parse


def _no_help_text(module):  # type: ignore[no-untyped-def]
    _seen()
    module.WIDTH = -1  # never the width asked for: argparse formats the help


def _no_cached_loop(module):  # type: ignore[no-untyped-def]
    def all_cached(self):  # type: ignore[no-untyped-def]
        _seen()
        return False

    module.Engine.all_cached = all_cached


def _no_committer(module):  # type: ignore[no-untyped-def]
    """A team store's writer commits on the event loop's thread (bench/team_store.py)."""
    _seen()
    module.COMMITTER_THREAD = False


PATCHES = {
    # mechanism: (module, what to do once it is imported)
    "snapshot": ("oloproof.project._snapshot", _no_snapshot),
    "records": ("oloproof._records", _records),
    "inits": ("oloproof._records", _no_inits),
    "lazy-init": ("oloproof._records", _eager_init),
    "code-stamp": ("oloproof.project._snapshot", _no_code_stamp),
    "plain": ("oloproof.render.console",
              lambda m: setattr(m, "_plain_text", _rich_plain_text)),
    "fast-args": ("oloproof.cli._fast", _no_fast_args),
    "help-text": ("oloproof.cli._help", _no_help_text),
    "cached-loop": ("oloproof.engine.pipeline", _no_cached_loop),
    "pg-committer": ("oloproof.store.writer", _no_committer),
}


class _AfterImport:
    """A meta path finder that runs ``patch`` on module ``name`` right after the module's
    own code (no importlib.abc: it would cost the command without the mechanism an import
    that the command with it does not pay)."""

    def __init__(self, name, patch):  # type: ignore[no-untyped-def]
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, patch = spec.loader, self.patch
        run = loader.exec_module

        def exec_module(module):  # type: ignore[no-untyped-def]
            run(module)
            patch(module)

        loader.exec_module = exec_module
        return spec


if OFF == "freeze":
    import gc

    def _no_freeze():  # type: ignore[no-untyped-def]
        _seen()

    gc.freeze = _no_freeze  # type: ignore[assignment]
    gc.disable = lambda: None  # type: ignore[assignment]
elif OFF == "no-typing":
    # The --help path's modules write TYPE_CHECKING = False instead of importing typing:
    # without that, they would import typing first thing, as this does.
    import typing  # noqa: F401

    _seen()
elif OFF in PATCHES:
    sys.meta_path.insert(0, _AfterImport(*PATCHES[OFF]))
elif OFF:
    raise SystemExit(f"OLOPROOF_BENCH_OFF: unknown mechanism {OFF!r}")
