"""Custom evaluators: the user's own Python, run inline.

The function is called as ``fn(output, case)`` (or ``fn(output)`` if it takes
one parameter) and returns a ``bool`` (BINARY), a number (MEAN), or a
:class:`Verdict` for more: an exclusion, a reason. Anything else, or an
exception, is an evaluator error: the case is missing for that criterion.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

from oloproof.evaluators.base import CaseView, Outcome, Verdict
from oloproof.systems.identity import digest, digest_bytes
from oloproof.systems.loading import import_callable, module_source


class Custom:
    is_judge = False

    def __init__(self, config: Any, root: Path, *, file: str, field: str) -> None:
        self.config = config
        self.criterion: str = config.criterion
        self.metric_kind = "MEAN" if config.kind == "mean" else "BINARY"
        rng = getattr(config, "range", None)
        self.value_range = (float(rng[0]), float(rng[1])) if rng else None
        self.fn, module = import_callable(config.function, root, file=file, field=field)
        try:
            params = [
                p for p in inspect.signature(self.fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            self._arity = 1 if len(params) == 1 else 2
        except (TypeError, ValueError):
            self._arity = 2
        self.identity = digest(
            {
                "config": config.model_dump(mode="json", by_alias=True),
                "source": digest_bytes(module_source(module)),
            }
        )

    def evaluate(self, case: CaseView, output: Any) -> Outcome:
        try:
            result = self.fn(output) if self._arity == 1 else self.fn(output, case)
        except Exception as exc:  # noqa: BLE001 - a user's bug is recorded, not raised
            return Outcome("ERROR", reason=f"{type(exc).__name__}: {exc}")
        return self._outcome(result)

    def _outcome(self, result: Any) -> Outcome:
        binary = self.metric_kind == "BINARY"
        if isinstance(result, Verdict):
            if result.excluded:
                return Outcome("EXCLUDED", reason=result.reason)
            if binary and result.passed is not None:
                return Outcome("OK", passed=bool(result.passed), reason=result.reason)
            if not binary and result.score is not None:
                return self._score(result.score, result.reason)
            need = "passed" if binary else "score"
            return Outcome("ERROR", reason=f"the Verdict has no {need}")
        if isinstance(result, bool):
            if binary:
                return Outcome("OK", passed=result)
            return Outcome("ERROR", reason="returned a bool for a MEAN criterion")
        if isinstance(result, int | float):
            if binary:
                return Outcome("ERROR", reason="returned a number for a BINARY criterion")
            return self._score(float(result), None)
        return Outcome(
            "ERROR", reason=f"returned {type(result).__name__}; expected bool, number or Verdict"
        )

    def _score(self, score: float, reason: str | None) -> Outcome:
        if not math.isfinite(score):
            return Outcome("ERROR", reason=f"score {score} is not finite")
        return Outcome("OK", score=float(score), reason=reason)
