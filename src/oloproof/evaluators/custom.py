"""Custom evaluators: the user's own Python.

The function is called as ``fn(output, case, **params)`` (or ``fn(output, **params)``
if it takes one positional parameter besides ``params``), where ``params`` is the
evaluator's ``params:`` mapping from oloproof.yaml, and returns a ``bool`` (BINARY), a
number (MEAN), or a :class:`Verdict` for more: an exclusion, a reason. Anything else,
or an exception, is an evaluator error: the case is missing for that criterion. An
``async def`` function is awaited (on a loop of its own, never the run's: the engine
calls :meth:`Custom.evaluate_async` there); a sync one runs in a worker thread. Both
run under ``concurrency.evaluator`` and their own ``timeout_s``, and their time is
recorded as the judgment's latency, never the system's.

Guarantees: any ``BaseException`` the function raises (``SystemExit``,
``KeyboardInterrupt``, ``GeneratorExit``...) is an evaluator error for that case,
never a stop of the run; the engine runs the function in a worker thread under
``timeout_s`` (``limits.evaluator_timeout_s`` by default), so one that sleeps or
loops is a per-case error too. Its identity covers its module's source and every
file under its ``code_paths``, so editing a helper it imports invalidates its
cached verdicts.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from oloproof._json import digest, digest_bytes
from oloproof.enums import JudgmentStatus, MetricKind
from oloproof.errors import ConfigError
from oloproof.evaluators.base import CaseView, Outcome, Verdict
from oloproof.systems.loading import (
    code_files,
    code_paths_digest,
    defining_files,
    file_digests,
    import_callable,
    imports_outside_identity,
    module_source,
    patched_code,
    reached_modules,
    source_file,
)
from oloproof.transport.threads import describe_exception

if TYPE_CHECKING:
    from typing import Any

    from oloproof.project.config import CustomEvaluator
    from oloproof.transport.processes import ProcessPool

DEFAULT_TIMEOUT_S = 30.0
_CACHE_SALT = "verdict-fields-typed"


class Custom:
    is_judge = False
    #: The function is handed the case's metadata: its verdicts are cached under it too
    #: (engine/pipeline.py, ``Engine.judge_key``).
    reads_metadata = True

    def __init__(
        self,
        config: CustomEvaluator,
        root: str,
        *,
        file: str,
        field: str,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.config = config
        self.criterion: str = config.criterion
        self.metric_kind: str = MetricKind.MEAN if config.kind == "mean" else MetricKind.BINARY
        # Read by the engine: run in a worker thread, at most this long.
        self.timeout_s: float = (
            float(config.timeout_s) if config.timeout_s is not None else default_timeout_s
        )
        rng = getattr(config, "range", None)
        self.value_range = (float(rng[0]), float(rng[1])) if rng else None
        # Read before the import (as a system's: systems/callable.py).
        code_paths = code_paths_digest(
            root, list(config.code_paths), file=file,
            field=field.rsplit(".", 1)[0] + ".code_paths",
        ) if config.code_paths else None
        self.fn, module = import_callable(config.function, root, file=file, field=field,
                                          code_paths=code_paths)
        self.params: dict[str, Any] = dict(config.params)
        shape = _plain_function_shape(self.fn) or _inspected_shape(self.fn)
        self.is_async = shape.is_async
        if shape.positional is None:  # no signature to read (some builtins)
            self._arity = 2
        else:
            self._check_params(shape, file, field.rsplit(".", 1)[0] + ".params")
            positional = [name for name in shape.positional if name not in self.params]
            self._arity = 1 if len(positional) == 1 else 2
        # The timeout never changes a verdict: not part of the identity. The
        # code_paths enter as the digests of their files, and only when declared,
        # so an evaluator without them keeps the identity it had before they existed.
        identity: dict[str, Any] = {
            "config": config.dump(
                mode="json", by_alias=True,
                # params enter only when declared, like code_paths below.
                exclude={"timeout_s", "code_paths", *(() if config.params else ("params",))},
            ),
            "source": digest_bytes(module_source(module)),
        }
        if code_paths is not None:
            identity["code_paths"] = code_paths
        # A function imported into the module named for it: the module that defines it too
        # (only then, so that other evaluators keep their identities).
        defining = defining_files(self.fn, module, root)
        if defining:
            identity["defined_in"] = file_digests(defining)
        self.identity = digest(identity)
        #: What its verdicts are cached under (engine/pipeline.py, ``_key_identity``): a
        #: Verdict's passed and excluded are booleans, read no more by truth value
        #: (Verdict(passed='false') passed), so verdicts cached before then are judged again.
        self.cache_identity: str = digest({"identity": self.identity, "salt": _CACHE_SALT})
        #: Project files the module uses outside its identity (an edit to them keeps the
        #: cached verdicts): the run warns about them once, as for the system's
        #: (runner/build.py, identity_warning).
        self.outside_identity: list[str] = imports_outside_identity(
            module, root, list(config.code_paths), defining
        )
        #: Every project file the code reached, by path: what ``gate`` hashes again.
        self.code_files: dict[str, str] = code_files(
            root, module, defining, code_paths, self.outside_identity
        )
        self.module_file: str = os.path.basename(source_file(module) or config.function)
        #: The module and the project modules it reaches: what :meth:`patched_code` checks.
        self._modules = reached_modules(module, root)

    def patched_code(self) -> list[str]:
        """What of the check's code a patch in this process replaced (as a system's:
        systems/callable.py); none when it runs in worker processes, which import it."""
        return [] if self.process_pool is not None else patched_code(self._modules)

    def _check_params(self, shape: _Shape, file: str, field: str) -> None:
        """Every name under ``params:`` must be a keyword the function takes."""
        named = shape.keywords
        for name in self.params:
            if not shape.any_keyword and name not in named:
                raise ConfigError(
                    f"{self.config.function} takes no parameter named '{name}'",
                    file=file, field=f"{field}.{name}",
                    accepted=", ".join(named[1:]) or "no parameters beyond (output, case)",
                )

    # -- in worker processes (concurrency.evaluator_processes) ------------------------
    #: Set by :meth:`use_processes`: the run's pool, and this evaluator's place in it.
    process_pool: ProcessPool | None = None
    _pool_index = 0
    #: Read by the engine: run under ``concurrency.evaluator_processes``, not in threads.
    in_process = False

    def process_spec(self, root: str) -> tuple[str, str, dict[str, Any], int, str]:
        """What a worker process needs to call this evaluator as this process does."""
        return (os.path.realpath(root), self.config.function, self.params, self._arity,
                str(self.metric_kind))

    def use_processes(self, pool: ProcessPool, index: int) -> None:
        """Run this (sync) evaluator's calls in ``pool``'s processes, as evaluator ``index``
        of its set-up (:func:`process_handler`). An ``async def`` one stays on the async
        host: it waits on I/O, which threads already overlap."""
        if self.is_async:
            return
        self.process_pool = pool
        self._pool_index = index
        self.in_process = True

    def _evaluate_in_process(self, case: CaseView, output: Any) -> Outcome:
        """The call in a worker process (from an engine worker thread): the child times the
        call itself. A timeout is raised (the engine words it as for a thread); a child that
        died or could not answer is this case's error."""
        from oloproof.transport.processes import ProcessEnded, ReplyError

        assert self.process_pool is not None
        message = (self._pool_index, (case.id, case.input, case.expected, case.metadata), output)
        try:
            status, passed, score, reason, latency_ms = self.process_pool.call(message, self.timeout_s)
        except ProcessEnded as exc:
            return Outcome(JudgmentStatus.ERROR, reason=f"the evaluator failed: {exc}")
        except ReplyError as exc:
            return Outcome(
                JudgmentStatus.ERROR,
                reason=f"the evaluator's result could not be sent back from its process: {exc}",
            )
        return Outcome(status, passed=passed, score=score, reason=reason, latency_ms=latency_ms)

    @classmethod
    def _in_child(cls, fn: Any, params: dict[str, Any], arity: int, metric_kind: str) -> Custom:
        """The evaluator as a worker process rebuilds it: the same calling code, no config."""
        made = cls.__new__(cls)
        made.fn, made.params, made._arity = fn, params, arity
        made.metric_kind = metric_kind
        return made

    def _call(self, case: CaseView, output: Any) -> Any:
        if self._arity == 1:
            return self.fn(output, **self.params)
        return self.fn(output, case, **self.params)

    def evaluate(self, case: CaseView, output: Any) -> Outcome:
        """Call a sync function (in a worker thread); its time is the outcome's latency."""
        import asyncio

        if self.process_pool is not None:
            return self._evaluate_in_process(case, output)
        started = time.perf_counter()
        try:
            result = self._call(case, output)
            if not isinstance(result, _PLAIN_RESULTS) and _is_awaitable(result):
                # A sync callable that returned a coroutine (a partial of an async def):
                # this is a worker thread without a loop, so run it to its end here.
                result = asyncio.run(_awaited(result))
        except BaseException as exc:  # noqa: BLE001 - sys.exit() too: one case, not the run
            return self._timed(Outcome(JudgmentStatus.ERROR, reason=describe_exception(exc)),
                               started)
        return self._timed(self._outcome(result), started)

    async def evaluate_async(self, case: CaseView, output: Any) -> Outcome:
        """Await an ``async def`` function (on the evaluators' own loop, never the run's)."""
        import asyncio

        started = time.perf_counter()
        try:
            result = await self._call(case, output)
        except asyncio.CancelledError:
            raise  # a timeout or a stop: the engine records it
        except BaseException as exc:  # noqa: BLE001 - one case, not the run
            return self._timed(Outcome(JudgmentStatus.ERROR, reason=describe_exception(exc)),
                               started)
        return self._timed(self._outcome(result), started)

    @staticmethod
    def _timed(outcome: Outcome, started: float) -> Outcome:
        outcome.latency_ms = (time.perf_counter() - started) * 1000.0
        return outcome

    def _outcome(self, result: Any) -> Outcome:
        binary = self.metric_kind == MetricKind.BINARY
        if isinstance(result, Verdict):
            # A reason is text: anything else is stored as its str() (an object there
            # once stopped the whole run, its row refused by the store).
            reason = result.reason
            if reason is not None and not isinstance(reason, str):
                reason = _reason_text(reason)
            # passed and excluded are read as booleans, never by truth value: the text
            # 'false' (a judge's reply read as a string) is true, and passed every case.
            for name in ("excluded", "passed"):
                value = getattr(result, name)
                if value is not None and _as_bool(value) is None:
                    return Outcome(JudgmentStatus.ERROR, reason=(
                        f"the Verdict's {name} is {_shown(value)}, not True or False"))
            if _as_bool(result.excluded):
                return Outcome(JudgmentStatus.EXCLUDED, reason=reason)
            if binary and result.passed is not None:
                return Outcome(JudgmentStatus.OK, passed=_as_bool(result.passed), reason=reason)
            if not binary and result.score is not None:
                if _as_number(result.score) is None:
                    return Outcome(JudgmentStatus.ERROR, reason=(
                        f"the Verdict's score is {_shown(result.score)}, not a number"))
                return self._score(result.score, reason)
            need = "passed" if binary else "score"
            return Outcome(JudgmentStatus.ERROR, reason=f"the Verdict has no {need}")
        flag = _as_bool(result)
        if flag is not None:
            if binary:
                return Outcome(JudgmentStatus.OK, passed=flag)
            return Outcome(JudgmentStatus.ERROR, reason="returned a bool for a MEAN criterion")
        number = _as_number(result)
        if number is not None:
            if binary:
                return Outcome(
                    JudgmentStatus.ERROR, reason="returned a number for a BINARY criterion"
                )
            return self._score(number, None)
        return Outcome(
            "ERROR", reason=f"returned {_type_name(result)}; expected bool, number or Verdict"
        )

    def _score(self, score: Any, reason: str | None) -> Outcome:
        try:
            score = float(score)
        except OverflowError:
            return Outcome(JudgmentStatus.ERROR, reason="returned a number too large for a float")
        except (TypeError, ValueError):
            return Outcome(JudgmentStatus.ERROR, reason=f"score {score!r:.40} is not a number")
        if not math.isfinite(score):
            return Outcome(JudgmentStatus.ERROR, reason=f"score {score} is not finite")
        return Outcome(JudgmentStatus.OK, score=float(score), reason=reason)


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _is_numpy_bool(value: Any) -> bool:
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")


def _as_bool(value: Any) -> bool | None:
    """``value`` as True or False when it is a boolean (Python's, or NumPy's, which
    ``numpy.isclose`` and comparisons of NumPy values return); else None."""
    if isinstance(value, bool):
        return value
    if _is_numpy_bool(value):
        return bool(value)
    return None


def _as_number(value: Any) -> Any:
    """``value`` when it is a real number (an int or float, NumPy's float32 or int64, a
    Decimal or a Fraction), never a boolean nor a text ('0.9'); else None."""
    import numbers
    from decimal import Decimal

    if isinstance(value, bool) or _is_numpy_bool(value):
        return None
    if isinstance(value, numbers.Real | Decimal):
        return value
    return None


def _shown(value: Any) -> str:
    """``value`` named in a reason: its type and, briefly, what it holds."""
    try:
        held = repr(value)
    except Exception:  # noqa: BLE001 - a __repr__ that raises
        return _type_name(value)
    return f"{_type_name(value)} {held[:60]}"


def process_handler(
    specs: list[tuple[str, str, dict[str, Any], int, str]],
) -> Callable[[Any], tuple[Any, ...]]:
    """In a worker process (transport/processes.py): import every evaluator of the run as
    the parent did, and return what answers one call, ``(index, case, output)`` to
    ``(status, passed, score, reason, latency_ms)``: plain values (a reason is always text,
    :meth:`Custom._outcome`), so that any reply can be sent back."""
    evaluators = []
    for root, function, params, arity, kind in specs:
        fn, _module = import_callable(function, root, file="oloproof.yaml",
                                      field="evaluators.function")
        evaluators.append(Custom._in_child(fn, params, arity, kind))

    def handle(message: Any) -> tuple[Any, ...]:
        index, (case_id, input_, expected, metadata), output = message
        outcome = evaluators[index].evaluate(CaseView(case_id, input_, expected, metadata), output)
        return (outcome.status, outcome.passed, outcome.score, outcome.reason,
                outcome.latency_ms)

    return handle


def _reason_text(reason: Any) -> str:
    try:
        return str(reason)
    except Exception as exc:  # noqa: BLE001 - a __str__ that raises
        return f"(a reason of type {type(reason).__name__} that cannot be shown: {exc!r:.100})"


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


# What evaluators return, for which the check for an awaitable is skipped.
_PLAIN_RESULTS = (bool, int, float, str, dict, list, tuple, type(None), Verdict)


def _is_awaitable(value: Any) -> bool:
    import inspect

    return inspect.isawaitable(value)


class _Shape:
    """What the engine needs of a function's signature: its positional parameters (None
    when it has no signature to read), those that may be passed by keyword, whether it
    takes ``**kwargs``, and whether it is an ``async def``."""

    __slots__ = ("any_keyword", "is_async", "keywords", "positional")

    def __init__(self, positional: list[str] | None, keywords: list[str], any_keyword: bool,
                 is_async: bool) -> None:
        self.positional = positional
        self.keywords = keywords
        self.any_keyword = any_keyword
        self.is_async = is_async


_FUNCTION = type(_is_awaitable)
_CO_VARKEYWORDS = 0x08
_CO_COROUTINE = 0x80


def _plain_function_shape(fn: Any) -> _Shape | None:
    """The shape of a plain ``def``, read from its code object as :func:`inspect.signature`
    reads it (which costs importing :mod:`inspect`, 5 ms of a run's start); ``None`` for
    anything else (a method, a partial, a function with attributes such as a wrapper's
    ``__wrapped__``, a callable object), left to :mod:`inspect`."""
    if type(fn) is not _FUNCTION or fn.__dict__:  # __wrapped__, __signature__, markers
        return None
    code = fn.__code__
    argcount, posonly = code.co_argcount, code.co_posonlyargcount
    names = code.co_varnames
    keyword_only = list(names[argcount:argcount + code.co_kwonlyargcount])
    return _Shape(
        positional=list(names[:argcount]),
        keywords=[*names[posonly:argcount], *keyword_only],
        any_keyword=bool(code.co_flags & _CO_VARKEYWORDS),
        is_async=bool(code.co_flags & _CO_COROUTINE),
    )


def _inspected_shape(fn: Any) -> _Shape:
    import inspect

    is_async = inspect.iscoroutinefunction(fn)
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return _Shape(None, [], True, is_async)
    return _Shape(
        positional=[p.name for p in parameters
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)],
        keywords=[p.name for p in parameters
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)],
        any_keyword=any(p.kind == p.VAR_KEYWORD for p in parameters),
        is_async=is_async,
    )
