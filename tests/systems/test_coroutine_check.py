"""`is_coroutine_function` answers as `inspect.iscoroutinefunction` does, on every Python we
test (the fast tier runs on 3.11, 3.12 and 3.13), and a run that calls a plain function does
not import inspect for it."""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys
import textwrap

import pytest

from oloproof.systems import callable as callable_system
from oloproof.systems.callable import is_coroutine_function


def plain(case_input):
    return case_input


async def coro(case_input):
    return case_input


def gen(case_input):
    yield case_input


async def agen(case_input):
    yield case_input


class Holder:
    def method(self, x):
        return x

    async def amethod(self, x):
        return x

    @staticmethod
    async def astatic(x):
        return x

    @classmethod
    async def aclass(cls, x):
        return x

    async def __call__(self, x):
        return x


def marked_function():
    def f(x):
        return x

    mark = getattr(inspect, "markcoroutinefunction", None)
    return mark(f) if mark is not None else f


def spoofed_marker():
    def f(x):
        return x

    f._is_coroutine_marker = object()  # not inspect's mark: not a coroutine function
    return f


def wrapped_async():
    @functools.wraps(coro)
    def sync_wrapper(x):
        return coro(x)

    return sync_wrapper


CANDIDATES = {
    "plain def": plain,
    "async def": coro,
    "generator": gen,
    "async generator": agen,
    "lambda": lambda x: x,
    "bound method": Holder().method,
    "bound async method": Holder().amethod,
    "async staticmethod": Holder.astatic,
    "async classmethod": Holder.aclass,
    "object with async __call__": Holder(),
    "partial of async def": functools.partial(coro),
    "partial of plain def": functools.partial(plain),
    "marked with inspect.markcoroutinefunction": marked_function(),
    "another marker": spoofed_marker(),
    "sync wrapper of async def (functools.wraps)": wrapped_async(),
    "builtin": len,
    "class": Holder,
    "not callable": 3,
}


@pytest.mark.parametrize("name", list(CANDIDATES))
def test_the_answer_is_inspects(name):
    fn = CANDIDATES[name]
    assert is_coroutine_function(fn) is inspect.iscoroutinefunction(fn)


def test_the_flag_is_inspects():
    assert callable_system._CO_COROUTINE == inspect.CO_COROUTINE


def test_a_plain_function_is_answered_without_inspect():
    code = textwrap.dedent(
        """
        import sys
        from oloproof.systems.callable import is_coroutine_function

        def f(x):
            return x

        async def g(x):
            return x

        assert "inspect" not in sys.modules, "imported before the check"
        assert is_coroutine_function(f) is False
        assert is_coroutine_function(g) is True
        print("inspect" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
