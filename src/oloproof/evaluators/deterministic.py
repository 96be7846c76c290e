"""Deterministic evaluators: run inline, no calls, no limits.

Each applies to one field of the output (``field``, a dotted path; ``null``
for the whole output). A case whose ``expected`` lacks the value an evaluator
compares against is EXCLUDED from that criterion rather than failed.
"""

from __future__ import annotations

import math

from oloproof._json import digest
from oloproof.enums import JudgmentStatus, MetricKind
from oloproof.evaluators.base import MISSING, CaseView, Outcome, as_text, get_field, is_missing

# The config classes are imported at run time, not only for the type checker: a generic
# subscripted with a name in quotes makes typing compile that name (a ForwardRef), and
# the seven below cost about 0.9 ms of every run's start-up that way (docs/performance.md).
from oloproof.project.config import (
    AbsoluteErrorEvaluator,
    ContainsEvaluator,
    ExactMatchEvaluator,
    JsonSchemaEvaluator,
    RegexEvaluator,
    _EvaluatorBase,
    nothing_to_find,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Generic, TypeVar

    from oloproof.project.config import ConfigRecord
else:  # typing stays off the run path: docs/design-notes.md, "Imports: one rule"
    from oloproof._generic import Generic, TypeVar

C = TypeVar("C", bound=_EvaluatorBase)
CC = TypeVar("CC", ExactMatchEvaluator, ContainsEvaluator)


def _config_identity(config: ConfigRecord) -> str:
    data = config.dump(mode="json", by_alias=True)
    return digest(data)


def _expected(case: CaseView, key: str | None) -> Any:
    """The expected value to compare against; MISSING when the case has none."""
    if case.expected is None:
        return MISSING
    return case.expected if key is None else get_field(case.expected, key)


#: How much of a value a reason quotes.
_QUOTED_CHARS = 200


def _quoted(value: Any) -> str:
    """``repr(value)``, cut to its first 200 characters with how long it is: a reason
    quoted the whole output, so a 5 MB answer made a 5 MB reason, stored twice (the run's
    verdict and the cache) beside the output, and printed in full by inspect."""
    text = repr(value)
    if len(text) <= _QUOTED_CHARS:
        return text
    return f"{text[:_QUOTED_CHARS]}… ({len(text):,} characters)"


def _cut(text: str) -> str:
    """A reason that quotes a value of its own (jsonschema's message quotes the output),
    cut as :func:`_quoted` cuts a value."""
    if len(text) <= 2 * _QUOTED_CHARS:
        return text
    return f"{text[:2 * _QUOTED_CHARS]}… ({len(text):,} characters)"


def _absent_output(field: str | None) -> Outcome:
    return Outcome(JudgmentStatus.OK, passed=False, reason=f"the output has no field '{field}'")


class _Base(Generic[C]):
    """What every built-in evaluator has: its typed config, criterion and identity."""

    metric_kind: MetricKind = MetricKind.BINARY
    value_range: tuple[float, float] | None = None
    is_judge = False
    cache_salt = ""

    def __init__(self, config: C) -> None:
        self.config: C = config
        self.criterion: str = config.criterion
        self.identity = _config_identity(config)
        #: What the verdicts are cached under: the identity, with ``cache_salt`` when the
        #: evaluator's verdicts changed on some cases since they were first cached.
        self.cache_identity: str = (
            digest({"identity": self.identity, "salt": self.cache_salt})
            if self.cache_salt else self.identity
        )


class _Comparing(_Base[CC]):
    """An evaluator that compares an output field with an expected value."""

    def evaluate(self, case: CaseView, output: Any) -> Outcome:
        key = self.config.expected_field or self.config.field
        expected = _expected(case, key)
        if is_missing(expected):
            return Outcome(JudgmentStatus.EXCLUDED, reason=f"no expected '{key or 'value'}' for this case")
        actual = get_field(output, self.config.field)
        if is_missing(actual):
            return _absent_output(self.config.field)
        return self.compare(actual, expected)

    def compare(self, actual: Any, expected: Any) -> Outcome:
        raise NotImplementedError


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal as JSON: as Python's ``==``, except that
    ``true``/``false`` equal only ``true``/``false`` (Python's ``0 == False`` and
    ``1 == True`` made an output ``0`` pass where ``false`` was expected), at any depth.
    Numbers are equal by value (``1`` and ``1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return bool(a == b)


class ExactMatch(_Comparing[ExactMatchEvaluator]):
    #: A boolean equals only a boolean (it equalled 0 or 1): verdicts cached before then
    #: are judged again (engine/pipeline.py, ``_key_identity``).
    cache_salt = "booleans-are-not-numbers"

    def _norm(self, value: Any) -> Any:
        if isinstance(value, str):
            if self.config.strip:
                value = value.strip()
            if self.config.casefold:
                value = value.casefold()
        return value

    def compare(self, actual: Any, expected: Any) -> Outcome:
        ok = same_json(self._norm(actual), self._norm(expected))
        return Outcome(
            JudgmentStatus.OK, passed=ok,
            reason=None if ok else f"expected {_quoted(expected)}, got {_quoted(actual)}",
        )


class Contains(_Comparing[ContainsEvaluator]):
    #: An empty expected text excludes its case (it used to pass), and so does a null (it
    #: was looked for as the text 'null'): verdicts cached before then are judged again
    #: (engine/pipeline.py, ``_key_identity``).
    cache_salt = "empty-or-null-expected-excluded"

    def evaluate(self, case: CaseView, output: Any) -> Outcome:
        key = self.config.expected_field or self.config.field
        expected = _expected(case, key)
        if not is_missing(expected) and nothing_to_find(expected):
            return Outcome(
                JudgmentStatus.EXCLUDED,
                reason=(f"the expected '{key or 'value'}' is empty ({as_text(expected)}):"
                        " there is no text to look for, and any output would contain it"),
            )
        return super().evaluate(case, output)

    def compare(self, actual: Any, expected: Any) -> Outcome:
        fold = self.config.casefold
        text = as_text(actual)
        hay = text.casefold() if fold else text
        # A null among other texts asks for nothing (nothing_to_find): it is not the text 'null'.
        needles = [n for n in (expected if isinstance(expected, list) else [expected])
                   if n is not None]
        absent = [
            n for n in needles if (as_text(n).casefold() if fold else as_text(n)) not in hay
        ]
        if absent:
            return Outcome(JudgmentStatus.OK, passed=False,
                           reason=f"does not contain {_quoted(absent[0])}")
        return Outcome(JudgmentStatus.OK, passed=True)


def _texts_in(value: Any) -> list[str]:
    """Every text a JSON value holds (its strings and its objects' keys), each once, in the
    order first met; without recursion."""
    seen: dict[str, None] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            seen.setdefault(item)
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                stack.extend((child, key))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return list(seen)


class Regex(_Base[RegexEvaluator]):
    #: Under no_match, the texts inside a value that is not text are searched too (the
    #: value's JSON text hid a tab or a line break as \t or \n): verdicts cached before
    #: then are judged again (engine/pipeline.py, ``_key_identity``).
    cache_salt = "no-match-searches-each-text"

    def __init__(self, config: RegexEvaluator) -> None:
        super().__init__(config)
        self.pattern = config.compiled

    def evaluate(self, case: CaseView, output: Any) -> Outcome:
        actual = get_field(output, self.config.field)
        if is_missing(actual):
            return _absent_output(self.config.field)
        found = self.pattern.search(as_text(actual))
        if found is None and self.config.pass_if == "no_match" and not isinstance(actual, str):
            # The JSON text writes a tab, a line break or a quote as an escape and puts each
            # text between quotes, so 'DROP\s+TABLE' or '^ignore' is not found in it where
            # a text of the value holds it: each text is searched as it is.
            for text in _texts_in(actual):
                found = self.pattern.search(text)
                if found is not None:
                    break
        if self.config.pass_if == "match":
            return Outcome(
                JudgmentStatus.OK,
                passed=found is not None,
                reason=None if found else f"no match for /{self.config.pattern}/",
            )
        return Outcome(
            JudgmentStatus.OK,
            passed=found is None,
            reason=None if found is None else f"matched {_quoted(found.group(0))}",
        )


class JsonSchema(_Base[JsonSchemaEvaluator]):
    #: format is checked (it was read as a note, and let every value through): verdicts
    #: cached before then are judged again (engine/pipeline.py, ``_key_identity``).
    cache_salt = "formats-checked"

    def __init__(self, config: JsonSchemaEvaluator) -> None:
        super().__init__(config)
        self._validator: Any = None
        #: Validates in a child process under the time limit, for a schema that holds
        #: regular expressions (runner/build.py; transport/regex_guard.py).
        self.guard: Any = None

    def _get_validator(self) -> Any:
        if self._validator is None:
            import jsonschema
            from referencing import Registry
            from referencing.exceptions import NoSuchResource

            def never_retrieve(uri: str) -> Any:
                # Remote $refs are refused at load time; this is the backstop:
                # nothing is ever fetched while cases are judged.
                raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

            schema = self.config.schema_
            cls = jsonschema.validators.validator_for(schema)
            # format is checked (JSON Schema reads it as a note unless asked): `format:
            # email` let any text through; a format no checker here knows is refused at
            # load (project/models.py).
            self._validator = cls(schema, registry=Registry(retrieve=never_retrieve),  # type: ignore[call-arg]
                                  format_checker=cls.FORMAT_CHECKER)
        return self._validator

    def evaluate(self, case: CaseView, output: Any) -> Outcome:
        actual = get_field(output, self.config.field)
        if is_missing(actual):
            return _absent_output(self.config.field)
        if self.guard is not None:
            reason = self.guard.validate(actual)
            if reason is None:
                return Outcome(JudgmentStatus.OK, passed=True)
            return Outcome(JudgmentStatus.OK, passed=False, reason=_cut(reason))
        error = next(iter(self._get_validator().iter_errors(actual)), None)
        if error is None:
            return Outcome(JudgmentStatus.OK, passed=True)
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return Outcome(JudgmentStatus.OK, passed=False, reason=_cut(f"{where}: {error.message}"))


def _is_number(value: Any) -> bool:
    """A JSON number: an int or a float, never a boolean."""
    return isinstance(value, int | float) and not isinstance(value, bool)


class AbsoluteError(_Base[AbsoluteErrorEvaluator]):
    metric_kind = MetricKind.MEAN
    #: An expected true/false is not a number (it was read as 1/0), nor is a text ('3',
    #: ' 3 ', '1_000', read by float()); integers are subtracted exactly: verdicts cached
    #: before then are judged again (engine/pipeline.py, ``_key_identity``).
    cache_salt = "only-json-numbers"

    def __init__(self, config: AbsoluteErrorEvaluator) -> None:
        super().__init__(config)
        rng = config.range
        self.value_range = (float(rng[0]), float(rng[1])) if rng else None

    def evaluate(self, case: CaseView, output: Any) -> Outcome:
        key = self.config.expected_field or self.config.field
        expected = _expected(case, key)
        if is_missing(expected):
            return Outcome(JudgmentStatus.EXCLUDED, reason=f"no expected '{key}' for this case")
        actual = get_field(output, self.config.field)
        if is_missing(actual):
            return Outcome(JudgmentStatus.ERROR, reason=f"the output has no field '{self.config.field}'")
        if not (_is_number(actual) and _is_number(expected)):
            # JSON numbers only: true/false are not (Python reads them as 1 and 0), nor is
            # a text (float() reads '3', ' 3 ', '1_000' and '٣'), as exact_match has it.
            return Outcome(JudgmentStatus.ERROR, reason=(
                f"not a number: output {_quoted(actual)}, expected {_quoted(expected)}"))
        try:
            if isinstance(actual, int) and isinstance(expected, int):
                # Exactly: as floats, 9007199254740993 and ...992 were 0 apart.
                error = float(abs(actual - expected))
            else:
                a, e = float(actual), float(expected)
                if not math.isfinite(a) or not math.isfinite(e):
                    return Outcome(JudgmentStatus.ERROR, reason=(
                        f"not a finite number: output {_quoted(actual)},"
                        f" expected {_quoted(expected)}"))
                error = abs(a - e)
        except OverflowError:
            error = math.inf
        if not math.isfinite(error):
            return Outcome(JudgmentStatus.ERROR, reason=(
                f"the absolute error between {_quoted(actual)} and {_quoted(expected)} is"
                " beyond the largest float"))
        return Outcome(JudgmentStatus.OK, score=error)


INLINE = {
    "exact_match": ExactMatch,
    "contains": Contains,
    "regex": Regex,
    "json_schema": JsonSchema,
    "absolute_error": AbsoluteError,
}
