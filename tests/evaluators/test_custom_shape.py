"""A custom evaluator's signature read from its code object (no `inspect` at a run's start)
agrees with `inspect.signature` on every kind of plain function; anything else goes to
`inspect`."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from oloproof.evaluators.custom import _inspected_shape, _plain_function_shape


def both(output, case): ...
def one(output): ...
def defaults(output, case=None, timeout_s=10.0): ...
def keyword_only(output, case, *, timeout_s, memory_mb=512): ...
def positional_only(output, case, /, limit=3): ...
def var_args(output, *rest, strict=False): ...
def any_keyword(output, case, **params): ...
def everything(a, b=1, /, c=2, *args, d, e=5, **kw): ...
async def coroutine(output, case, pause=0.1): ...
def generator(output, case):
    yield True
def closure_maker(offset: int) -> Any:
    def inner(output, case, scale=1):
        return output + offset * scale
    return inner


PLAIN = [both, one, defaults, keyword_only, positional_only, var_args, any_keyword,
         everything, coroutine, generator, closure_maker(3), lambda output, case=None: True]


@pytest.mark.parametrize("fn", PLAIN, ids=lambda f: getattr(f, "__name__", "fn"))
def test_the_code_object_reads_as_inspect_does(fn: Any) -> None:
    fast, slow = _plain_function_shape(fn), _inspected_shape(fn)
    assert fast is not None
    assert (fast.positional, fast.keywords, fast.any_keyword, fast.is_async) == (
        slow.positional, slow.keywords, slow.any_keyword, slow.is_async)


class Callable:
    def __call__(self, output, case): ...

    def method(self, output, case, k=1): ...


@functools.wraps(both)
def wrapper(*args: Any, **kwargs: Any) -> Any:
    return both(*args, **kwargs)


def with_attribute(output, case): ...
with_attribute.marker = True  # type: ignore[attr-defined]


@pytest.mark.parametrize("fn", [Callable(), Callable().method, functools.partial(defaults, 1),
                                wrapper, with_attribute, len])
def test_anything_but_a_plain_function_is_left_to_inspect(fn: Any) -> None:
    assert _plain_function_shape(fn) is None
    if fn is wrapper:  # inspect follows __wrapped__ to the real parameters
        assert _inspected_shape(fn).positional == ["output", "case"]
