"""How the project files are validated: oloproof.yaml, release.yaml and compare.yaml.

These pydantic models are the schema and the checks, nothing more: what a validation
produced is converted into the records of project/config.py (:func:`to_record`), which is
what every other module uses; no pydantic model leaves project/. Each model has a record
of the same name with the same fields (tests/project/test_config_records.py).

Every model forbids unknown keys and is frozen. Checks that need the disk or
the project's metrics read them from the pydantic validation context, which
the loaders in :mod:`oloproof.project.loader` pass:

- ``root`` (a :class:`~pathlib.Path`): the project directory. With it, the
  dataset, ``code_paths`` and a rubric judge's ``rubric_file`` must exist, and
  the rubric is read once, at load time.
- ``metrics`` (criterion -> ``"BINARY"`` | ``"MEAN"``): with it, a rule must
  name a known metric, and bounds on a BINARY metric must lie in [0, 1].

Choices worth knowing (also in the user docs):

- where text is expected, a value YAML reads as a number or true/false is its text as
  written (``version: 1.10`` is ``"1.10"``, ``010`` is ``"010"``: the loader's
  :func:`~oloproof.project._errors.as_written`); the models take no number as text;
- a number is a number and a flag a flag (:data:`Number`, :data:`Whole`, :data:`Flag`):
  ``true``, ``"0.7"`` or ``8.0`` for a whole number are refused, never converted;
- ``system.version`` is required for a callable system, ``system.http.version``
  for an HTTP system: a version is part of the system's identity;
- the optional top-level ``retry:`` block holds ``max_retry_wait_s`` (default
  60): a ``Retry-After`` longer than that gives the attempt up;
- a release rule without ``kind`` is an ``observed_count`` rule when it has
  ``max_failures`` and neither ``min`` nor ``max``, else an
  ``interval_threshold`` rule;
- a ``superiority`` comparison rule without ``margin`` gets margin 0; after
  validation a comparison rule's ``margin`` is never None.
"""

from __future__ import annotations

import math
import os.path
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from oloproof._fs import absent, missing, not_a_file
from oloproof._json import DEFAULT_MAX_JSON_DEPTH, MAX_JSON_DEPTH
from oloproof.enums import MetricKind
from oloproof.errors import ConfigError
from oloproof.project._errors import fail
from oloproof.project._files import MAX_CONFIG_BYTES, read_bytes
from oloproof.project._words import closest, describe
from oloproof.project.config import (
    DEFAULT_MAX_CONSECUTIVE_FAILURES,
    DEFAULT_MAX_MISSING,
    EVALUATOR_TYPES,
    MAX_EVALUATOR_CONCURRENCY,
    MAX_SCALE_SPAN,
    RECORDS,
    STATES,
    ConfigRecord,
    regex_flags,
)
from oloproof.storeurl import STORE_DIR, masked, store_setting

# A rule's state, read by pydantic at run time: the Literal of STATES. project/policies.py's
# State, the same for the type checker, is not made at run time (typing stays off the run
# path: docs/design-notes.md, "Imports: one rule").
if TYPE_CHECKING:
    from oloproof.project.policies import State
else:
    State = Literal[STATES]

__all__ = [
    "MAX_JUDGE_CONCURRENCY",
    "MAX_SYSTEM_CONCURRENCY",
    "AbsoluteErrorEvaluator",
    "AdaptiveConfig",
    "ComparePolicy",
    "CompareRule",
    "ConcurrencyConfig",
    "ContainsEvaluator",
    "CustomEvaluator",
    "Evaluator",
    "ExactMatchEvaluator",
    "HttpSystemConfig",
    "IntervalRule",
    "JsonSchemaEvaluator",
    "JudgeValidation",
    "MatrixConfig",
    "MatrixVariant",
    "ModelSystemConfig",
    "ObservedCountRule",
    "ProjectConfig",
    "RegexEvaluator",
    "ReleasePolicy",
    "ReleaseRule",
    "RetryConfig",
    "RubricJudgeEvaluator",
    "State",
    "SystemConfig",
    "model_of",
    "to_record",
    "validate",
]


_FUNCTION_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
Criterion = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$")]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
#: The types of every number and flag of the configuration, strict: a number is an int or
#: a float as YAML writes one, never ``true`` (pydantic would read it as 1) nor text
#: (``"0.70"``, ``" 0.7 "``: quoted, it is text); a whole number is never ``8.0`` nor
#: ``1e8``; a flag is ``true`` or ``false``, never ``"on"`` nor ``1``.
Number = Annotated[float, Strict()]
Whole = Annotated[int, Strict()]
Flag = Annotated[bool, Strict()]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
        populate_by_name=True,
        defer_build=True,
    )


def _context(info: ValidationInfo, key: str) -> Any:
    ctx = info.context
    return ctx.get(key) if isinstance(ctx, dict) else None


def _check_function(value: str, example: str) -> str:
    if not _FUNCTION_RE.match(value):
        fail(f"expected the form module:function (for example {example}), got '{value}'")
    return value


def _check_range(value: tuple[float, float] | None) -> tuple[float, float] | None:
    if value is not None and not value[0] < value[1]:
        fail(f"expected [low, high] with low < high, got [{value[0]:g}, {value[1]:g}]")
    if value is not None and value[1] - value[0] == float("inf"):
        # Each end is finite, but high - low is not: the betting interval, plan, the
        # sequential test and the can-it-fail check all work with the width.
        fail(f"expected [low, high] whose width high - low is a finite number, got"
             f" [{value[0]:g}, {value[1]:g}] (wider than the largest float, about 1.8e308)")
    return value


_URL_ACCEPTED = "an http:// or https:// URL with a host, for example http://127.0.0.1:8000/v1"


def _check_url(value: str) -> str:
    """An http(s) URL a request can be sent to: a host, a port from 1 to 65535 (or none),
    no white space. Checked at load, so that a typo is not met at every call."""
    if not value.startswith(("http://", "https://")):
        fail(f"expected a URL starting with http:// or https://, got '{value}'",
             accepted=_URL_ACCEPTED)
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        fail("the URL holds white space or a control character (percent-encode it: %20"
             " for a space)", accepted=_URL_ACCEPTED)
    if "${" in value:
        # It would be sent as written, ${NAME} and all: a key meant for the query string
        # reached the server as the text '${API_KEY}', and a host as '${HOST}'.
        fail("a URL is sent as written, and ${NAME} in it is not filled from the"
             " environment: write the URL itself (a key goes in api_key_env, or in an HTTP"
             " system's headers: X-Api-Key: \"${API_KEY}\")", accepted=_URL_ACCEPTED)
    from urllib.parse import urlsplit  # only where a URL is configured

    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        if "[" in value.partition("//")[2].partition("/")[0]:
            fail("the host in brackets is not an IPv6 address", accepted=_URL_ACCEPTED)
        written = value.partition("//")[2].partition("/")[0].rpartition(":")[2]
        what = f"port {written} is out of range" if written.isdigit() else (
            f"'{written}' is not a port")
        fail(f"{what}: a port is a whole number from 1 to 65535", accepted=_URL_ACCEPTED)
    if port == 0:
        fail("port 0 is out of range: a port is a whole number from 1 to 65535",
             accepted=_URL_ACCEPTED)
    if not parts.hostname:
        fail(f"the URL names no host (after {parts.scheme}://)", accepted=_URL_ACCEPTED)
    return value


#: A URL of the configuration: an HTTP system's, a provider's ``base_url``.
HttpUrl = Annotated[str, AfterValidator(_check_url)]

#: A header name as HTTP defines it (RFC 9110, 5.1: a token).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: What is read from the environment in a header value: ``${NAME}``, as
#: transport/http.py fills it when the run starts.
_HEADER_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def _check_header(name: str, template: str) -> None:
    if not _HEADER_NAME.fullmatch(name):
        fail(f"'{name}' is not a header name (RFC 9110: no space, no ':', ASCII only)",
             at=(name,), accepted="letters, digits and !#$%&'*+-.^_`|~, for example"
                                  " X-Api-Key")
    left = _HEADER_VARIABLE.sub("", template)
    broken = re.search(r"\$\{([^}]*)(\}?)", left)
    if broken is not None:
        written, variable = broken.group(0), broken.group(1).strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable):
            variable = "NAME"
        what = "does not name an environment variable" if broken.group(2) else "is not closed"
        fail(f"'{written}' {what}: write ${{{variable}}} to send the value of the environment"
             f" variable {variable} (a name is letters, digits and '_')", at=(name,),
             accepted="text, with ${NAME} where a variable's value goes")
    if not template.isascii() or any(ch < " " and ch != "\t" or ch == "\x7f"
                                      for ch in template):
        fail("a header value is ASCII text on one line: HTTP sends no other characters",
             at=(name,), accepted="printable ASCII, with ${NAME} where a variable's value"
                                  " goes")


def _check_code_paths(
    entries: list[str], info: ValidationInfo, at: tuple[str, ...] = ()
) -> None:
    """No code path is the store's directory or inside it: what the store holds changes with
    every run, and as part of an identity it would make every case miss the cache (a path
    that holds the whole project is refused where the files are read, systems/loading.py)."""
    root = _context(info, "root")
    if not isinstance(root, Path) or not entries:
        return
    store = os.path.realpath(root / STORE_DIR)
    for index, entry in enumerate(entries):
        path = os.path.realpath(root / entry)
        if path == store or path.startswith(store + os.sep):
            fail(f"'{entry}' is in {STORE_DIR}/, the store's directory, whose content changes"
                 " with every run: as part of the identity it would make every case miss the"
                 " cache. List the files or directories the code is in", at=(*at, index),
                 accepted="files or directories of code and prompts, relative to the project"
                          f" directory and outside {STORE_DIR}/")


# -- the system under test ----------------------------------------------------


class HttpSystemConfig(_Model):
    """A system reached over HTTP; the case's input is sent as the JSON body."""

    url: HttpUrl
    method: Literal["POST", "PUT", "GET"] = "POST"
    version: NonEmpty
    output_path: str | None = None
    usage_path: str | None = None
    timeout_s: Number = Field(default=30, gt=0)
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("method", mode="before")
    @classmethod
    def _upper_method(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, template in value.items():
            _check_header(name, template)
        return value


#: The request parameters a model system and a matrix variant may set (system.model).
MODEL_FIELDS = (
    "provider", "model", "base_url", "prompt_file", "system_prompt_file", "output",
    "temperature", "max_tokens", "max_completion_tokens", "extra_body", "api_key_env",
    "timeout_s",
)
_OWNED_BODY = {"model", "messages", "system", "temperature", "max_tokens",
               "max_completion_tokens", "stream"}


def _check_model_request(cfg: Any) -> None:
    """What the providers' APIs refuse, said before anything is called (as for judges)."""
    if cfg.provider == "anthropic":
        if cfg.max_tokens is None:
            fail("the anthropic Messages API requires max_tokens; give a number "
                 "(for example max_tokens: 1024)", at=("max_tokens",))
        if cfg.max_completion_tokens is not None:
            fail("max_completion_tokens is OpenAI's parameter; anthropic uses max_tokens",
                 at=("max_completion_tokens",))
    if cfg.max_completion_tokens is not None and cfg.max_tokens is not None:
        fail("declare max_tokens or max_completion_tokens, not both (current OpenAI "
             "models take max_completion_tokens)", at=("max_completion_tokens",))
    if cfg.provider == "openai_compatible" and not cfg.base_url:
        fail("required for provider openai_compatible (the server's URL, for example "
             "http://localhost:8000/v1)", at=("base_url",))
    for key in cfg.extra_body or {}:
        if key in _OWNED_BODY:
            own = key in ("temperature", "max_tokens", "max_completion_tokens")
            hint = f"set {key}: in system.model itself" if own else "Oloproof sets it"
            fail(f"extra_body may not set '{key}' ({hint})", at=("extra_body", key))


class ModelSystemConfig(_Model):
    """An LLM behind a provider's API as the system under test (``system.model``).

    The prompt is a Jinja2 template (``prompt_file``, relative to the project directory),
    rendered per case in a sandbox with the case's ``input``; ``output: json`` parses the
    reply as JSON. The files are read when the system is built (systems/model.py).
    """

    provider: Literal["anthropic", "openai", "openai_compatible"]
    model: NonEmpty
    base_url: HttpUrl | None = None
    prompt_file: NonEmpty
    system_prompt_file: NonEmpty | None = None
    output: Literal["text", "json"] = "text"
    temperature: Number | None = Field(default=None, ge=0)
    max_tokens: Whole | None = Field(default=None, ge=1)
    max_completion_tokens: Whole | None = Field(default=None, ge=1)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    api_key_env: str | None = None
    timeout_s: Number = Field(default=60, gt=0)

    @model_validator(mode="after")
    def _check_request(self) -> ModelSystemConfig:
        _check_model_request(self)
        return self


class MatrixVariant(_Model):
    """One variant of a matrix: a name and what it changes of ``system.model``."""

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:/+-]+$", max_length=120)]
    provider: Literal["anthropic", "openai", "openai_compatible"] | None = None
    model: NonEmpty | None = None
    base_url: HttpUrl | None = None
    prompt_file: NonEmpty | None = None
    system_prompt_file: NonEmpty | None = None
    output: Literal["text", "json"] | None = None
    temperature: Number | None = Field(default=None, ge=0)
    max_tokens: Whole | None = Field(default=None, ge=1)
    max_completion_tokens: Whole | None = Field(default=None, ge=1)
    extra_body: dict[str, Any] | None = None
    api_key_env: str | None = None
    timeout_s: Number | None = Field(default=None, gt=0)


#: The most variants a matrix may have: each is a run of the whole suite.
MAX_MATRIX_VARIANTS = 64


def _value_name(axis: str, value: Any) -> str:
    """A variant name's part for one value of a product axis given as a list."""
    if isinstance(value, str):
        text = value
        if axis.endswith("_file"):
            text = Path(value).stem
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float):
        text = f"{value:g}"
    elif value is None:
        text = "none"
    else:
        fail(f"a list of values names each variant by its value; {describe(value)} cannot "
             f"name one: write {axis}: as a mapping of names to values", at=(axis,))
    return re.sub(r"[^A-Za-z0-9_.:+-]+", "_", text).strip("_") or "value"


def expand_product(product: Any) -> list[dict[str, Any]]:
    """The variants of ``product:`` (axis -> values), first axis slowest, as dicts.

    An axis is a ``system.model`` field; its values a list (each names itself: a file's
    stem, a model's id, a number) or a mapping ``name: value``. A variant's name joins
    its values' names with ``/`` in axis order: ``terse/small``.
    """
    if not isinstance(product, dict) or not product:
        fail("expected a mapping of system.model fields to their values, e.g. "
             "{prompt_file: [prompts/a.md, prompts/b.md], model: [m1, m2]}")
    axes: list[list[tuple[str, Any]]] = []
    for axis, values in product.items():
        if axis not in MODEL_FIELDS:
            hint = closest(str(axis), list(MODEL_FIELDS))
            mean = f"; did you mean '{hint}'?" if hint else ""
            fail(f"'{axis}' is not a field of system.model{mean}", at=(axis,),
                 accepted=", ".join(MODEL_FIELDS))
        if isinstance(values, list):
            if not values:
                fail("an axis needs at least one value", at=(axis,))
            pairs = [(_value_name(axis, v), v) for v in values]
        elif isinstance(values, dict) and values:
            pairs = [(str(k), v) for k, v in values.items()]
        else:
            fail(f"expected a list of values or a mapping of names to values, got "
                 f"{describe(values)}", at=(axis,))
        names = [n for n, _ in pairs]
        for i, n in enumerate(names):
            if names.index(n) != i:
                fail(f"two values of {axis} give the variant name part '{n}': write {axis}: "
                     "as a mapping of names to values", at=(axis,))
        axes.append([(n, (axis, v)) for n, v in pairs])
    variants: list[dict[str, Any]] = [{"name": ""}]
    for axis_values in axes:
        variants = [
            {**v, "name": f"{v['name']}/{n}" if v["name"] else n, a: value}
            for v in variants for n, (a, value) in axis_values
        ]
    return variants


class MatrixConfig(_Model):
    """``matrix:``: the variants of a model system, each run as its own run.

    ``product:`` (axes of ``system.model`` fields, every combination) and ``variants:`` (an
    explicit list, each a name and its overrides) may be combined: the product's variants
    come first. ``baseline`` names the variant the others are compared against (default:
    the first).
    """

    variants: list[MatrixVariant] = Field(default_factory=list)
    baseline: NonEmpty | None = None
    #: The product as written (its variants are in ``variants``, expanded at load).
    product: dict[str, Any] | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _expand(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("product") is None:
            return data
        try:
            expanded = expand_product(data["product"])
        except PydanticCustomError as exc:
            ctx = dict(exc.context or {})
            ctx["at"] = ("product", *ctx.get("at", ()))
            raise PydanticCustomError(exc.type, exc.message_template, ctx) from None
        explicit = data.get("variants") or []
        if not isinstance(explicit, list):
            return data
        return {**data, "variants": [*expanded, *explicit]}

    @model_validator(mode="after")
    def _check(self) -> MatrixConfig:
        if len(self.variants) < 2:
            fail(f"a matrix needs at least 2 variants, got {len(self.variants)}",
                 at=("variants",))
        if len(self.variants) > MAX_MATRIX_VARIANTS:
            fail(f"a matrix has at most {MAX_MATRIX_VARIANTS} variants (each runs the whole"
                 f" suite), got {len(self.variants)}", at=("variants",))
        first: dict[str, int] = {}
        for index, variant in enumerate(self.variants):
            seen = first.setdefault(variant.name, index)
            if seen != index:
                fail(f"duplicate variant name '{variant.name}' (also variants[{seen}])",
                     at=("variants", index, "name"))
        if self.baseline is not None and self.baseline not in first:
            hint = closest(self.baseline, list(first))
            mean = f"; did you mean '{hint}'?" if hint else ""
            fail(f"no variant is named '{self.baseline}'{mean}", at=("baseline",),
                 accepted=", ".join(first))
        return self


class SystemConfig(_Model):
    """The system under test: exactly one of ``callable``, ``http`` and ``model``."""

    name: NonEmpty
    version: NonEmpty | None = None
    callable: str | None = None
    code_paths: list[str] = Field(default_factory=list)
    timeout_s: Number = Field(default=30, gt=0)
    http: HttpSystemConfig | None = None
    model: ModelSystemConfig | None = None

    @field_validator("callable")
    @classmethod
    def _check_callable(cls, value: str | None) -> str | None:
        return None if value is None else _check_function(value, "app:answer")

    @model_validator(mode="after")
    def _check_kind(self, info: ValidationInfo) -> SystemConfig:
        kinds = [k for k in ("callable", "http", "model") if getattr(self, k) is not None]
        if len(kinds) > 1:
            fail(f"declare one of callable, http and model, not {' and '.join(kinds)}")
        if not kinds:
            fail(
                "declare how to reach the system: callable: module:function, "
                "an http: block with url and version, or a model: block (provider, model,"
                " prompt_file)"
            )
        if self.callable is not None and self.version is None:
            fail(
                "required for a callable system: the version is part of its identity "
                "(for example version: '1')",
                at=("version",),
            )
        root = _context(info, "root")
        if isinstance(root, Path):
            for index, entry in enumerate(self.code_paths):
                if absent(root / entry):
                    fail(
                        f"not found: {entry} (code paths are relative to the project directory)",
                        at=("code_paths", index),
                    )
        _check_code_paths(self.code_paths, info, at=("code_paths",))
        return self


#: Upper bounds on ``concurrency``: each slot is a task (and, for a sync system,
#: a thread); a typo such as ``judge: 100000000`` must not exhaust memory.
MAX_SYSTEM_CONCURRENCY = 1024
MAX_JUDGE_CONCURRENCY = 256
#: Upper bound on ``trials``: each trial is a call per case (and a row per case).
MAX_TRIALS = 100


class AdaptiveConfig(_Model):
    """Which limits adapt to rate limits (``concurrency.adaptive``)."""

    system: Flag = False
    judge: Flag = False


ADAPTIVE_ACCEPTED = "true, false, or a mapping such as {system: true, judge: false}"


class ConcurrencyConfig(_Model):
    """How many calls may be in flight at once, to the system and to judges.

    Whole numbers only (:data:`Whole`: ``system: true`` or ``judge: 1e8`` are
    refused, not read as 1 or as a number), within bounds. With ``adaptive``
    (``true`` for both limits, or ``{system: ..., judge: ...}``), ``system`` and
    ``judge`` are ceilings and the number in flight follows the rate limits
    (transport/limiter.py); off by default.
    """

    system: Whole = Field(default=8, ge=1, le=MAX_SYSTEM_CONCURRENCY)
    judge: Whole = Field(default=4, ge=1, le=MAX_JUDGE_CONCURRENCY)
    #: Custom evaluators (and guarded regular expressions) running at once; when absent,
    #: the number of CPUs (:meth:`evaluator_limit`).
    evaluator: Whole | None = Field(default=None, ge=1, le=MAX_EVALUATOR_CONCURRENCY)
    #: Run (sync) custom evaluators in this many worker processes instead of threads: for
    #: evaluators that burn CPU (docs/scaling.md). Absent: threads, as always.
    evaluator_processes: Whole | None = Field(
        default=None, ge=1, le=MAX_EVALUATOR_CONCURRENCY
    )
    #: ``true`` / ``false`` for both limits, or one flag per limit.
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)

    @field_validator("system", "judge", mode="before")
    @classmethod
    def _a_limit_not_a_mode(cls, value: Any, info: ValidationInfo) -> Any:
        # `system: adaptive` (or auto) reads as a way to ask for an adaptive limit: say
        # where that is written, rather than only that a number was expected.
        if isinstance(value, str) and value.strip().lower() in ("adaptive", "auto"):
            fail(
                f"expected a whole number, got {describe(value)}",
                accepted=f"a whole number; for a limit that follows the rate limits, write"
                f" the most calls at once here and add `adaptive: {{{info.field_name}: true}}`"
                " under concurrency",
            )
        return value

    @field_validator("adaptive", mode="before")
    @classmethod
    def _adaptive(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return {"system": value, "judge": value}
        if isinstance(value, dict | AdaptiveConfig):
            return value
        fail(f"expected true or false, got {describe(value)}", accepted=ADAPTIVE_ACCEPTED)



class RayConfig(_Model):
    """The optional top-level ``ray:`` block: how the Ray executor runs (``executor: ray``;
    docs/scaling.md). The cluster's address is never here: ``--ray-address`` or
    ``RAY_ADDRESS`` (it is where the run happens, not what the project is)."""

    #: Ray worker processes (actors) that run the calls; absent: one per CPU of the cluster.
    workers: Whole | None = Field(default=None, ge=1, le=1024)


class SequentialConfig(_Model):
    """``sequential:`` in oloproof.yaml: ``true`` (or this block) decides every run rule by an
    anytime-valid test and stops calling once every rule is decided
    (docs/sequential-decisions.md)."""

    #: Seeds the order the cases run and are tested in. Fixed by default, so that a rerun
    #: asks for the same cases and the cache answers them.
    seed: Whole = Field(default=0, ge=0, le=2**63 - 1)
    #: BINARY rules: the distance from the threshold the test is tuned to detect fastest
    #: (its design alternative); any rate beyond the threshold is still detected.
    margin: Number = Field(default=0.05, gt=0, lt=0.5)


class RetryConfig(_Model):
    """The optional top-level ``retry:`` block."""

    max_retry_wait_s: Number = Field(default=60, ge=0)


class LimitsConfig(_Model):
    """The optional top-level ``limits:`` block: bounds on work and on what is read.

    Each limit, its default and why: docs/refusals.md.
    """

    evaluator_timeout_s: Number = Field(default=30, gt=0, le=3600)
    max_response_bytes: Whole = Field(default=10 * 1024 * 1024, ge=1024, le=1024**3)
    max_json_depth: Whole = Field(default=DEFAULT_MAX_JSON_DEPTH, ge=2, le=MAX_JSON_DEPTH)
    failure_threshold: Number | None = Field(default=None, gt=0, le=1)
    store_busy_timeout_s: Number = Field(default=30, gt=0, le=3600)
    #: Calls in a row (each after its retries) of the system, or of one judge, that may
    #: fail before the run stops as an outage (RUN_ERROR/PARTIAL, exit 5).
    max_consecutive_failures: Whole = Field(
        default=DEFAULT_MAX_CONSECUTIVE_FAILURES, ge=1, le=1_000_000
    )


# -- evaluators -----------------------------------------------------------------


GroupKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$")]


class _EvaluatorBase(_Model):
    criterion: Criterion
    #: Metadata keys to break this metric down by (one group per value of each key).
    #: Never part of an evaluator's identity (excluded from model_dump).
    group_by: list[GroupKey] = Field(default_factory=list, exclude=True)

class ExactMatchEvaluator(_EvaluatorBase):
    """``output[field] == expected[expected_field or field]``."""

    type: Literal["exact_match"]
    field: str | None = None
    expected_field: str | None = None
    strip: Flag = True
    casefold: Flag = False


class ContainsEvaluator(_EvaluatorBase):
    """The expected text is a substring of ``output[field]``."""

    type: Literal["contains"]
    field: str | None = None
    expected_field: str | None = None
    casefold: Flag = False


class RegexEvaluator(_EvaluatorBase):
    """``output[field]`` matches (or, with ``pass_if: no_match``, does not match) ``pattern``."""

    type: Literal["regex"]
    field: str | None = None
    pattern: str
    pass_if: Literal["match", "no_match"] = "match"
    flags: list[Literal["IGNORECASE", "MULTILINE", "DOTALL"]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _compile(self) -> RegexEvaluator:
        try:
            compiled = re.compile(self.pattern, regex_flags(self.flags))
        except re.error as exc:
            where = f" at position {exc.pos}" if exc.pos is not None else ""
            fail(f"not a valid regular expression: {exc.msg}{where}", at=("pattern",))
        if self.pass_if == "match" and all(compiled.search(t) for t in _ANY_TEXTS):
            # '\d*', 'refund|', '(yes)?', '$': an empty match is found in any text, so
            # every output would pass and a rule on the criterion could not fail.
            fail(f"pattern '{self.pattern}' matches every text, the empty one included (a"
                 " part that may match nothing, such as x* or x? or an empty alternative,"
                 " is found anywhere), so with pass_if: match every output would pass and a"
                 " rule on the criterion could not fail. Did you mean + for *, or to drop"
                 " an empty alternative?", at=("pattern",),
                 accepted="a pattern that some text does not match")
        doubled = _DOUBLED_ESCAPE.search(self.pattern)
        if self.pass_if == "no_match" and doubled is not None:
            # '\\d' in single quotes is a backslash and a d, not a digit: a pattern
            # written as for a Python string finds nothing, and every output passes.
            letter = doubled.group(0)[-1]
            fail(f"pattern '{self.pattern}' holds '{doubled.group(0)}', which looks for a"
                 f" backslash followed by '{letter}', not the escape \\{letter}: YAML keeps a"
                 " backslash in single quotes as it is, so with pass_if: no_match a pattern"
                 " written as for a Python string finds nothing and every output passes."
                 f" Write one backslash (\\{letter}); to look for a backslash itself, write"
                 f" [\\\\]{letter}", at=("pattern",),
                 accepted="a pattern with single backslashes, in single quotes")
        return self


#: Two backslashes (or any even number) before an escape letter: a backslash and the
#: letter, in a pattern that meant the escape (RegexEvaluator._compile).
_DOUBLED_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)+[dDwWsSbB]")


#: Texts a ``regex`` with ``pass_if: match`` is tried on at load: a pattern found in every
#: one of them, the empty text included, matches anything (RegexEvaluator._compile).
_ANY_TEXTS = ("", "\x00", " ", "\n", "A", "z", "0", "-", "\uffff", "\u00e9")


_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def _refs(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every ``$ref``-like string in a schema, with where it is."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _REF_KEYS and isinstance(value, str):
                yield (*path, key), value
            else:
                yield from _refs(value, (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _refs(item, (*path, index))


class JsonSchemaEvaluator(_EvaluatorBase):
    """``output[field]`` is valid against a JSON Schema (YAML key ``schema``)."""

    type: Literal["json_schema"]
    field: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")

    @field_validator("schema_")
    @classmethod
    def _check_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Imported here: jsonschema is slow to import and rarely needed.
        import jsonschema  # type: ignore[import-untyped,unused-ignore]

        for where, number in _non_finite(value):
            # JSON has no NaN or infinity (YAML's .nan, .inf, 1.0e999): compared with
            # NaN every number is neither above nor below, so maximum: .nan validated
            # every output, as maximum: .inf does.
            fail(f"{_yaml_float(number)} is not a JSON number (JSON has no NaN or infinity,"
                 " and a number past 1.8e308 becomes one): a bound such as maximum: .nan or"
                 " maximum: .inf lets every number through", at=where, accepted="a finite number")
        validator = jsonschema.validators.validator_for(value)
        try:
            validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            fail(f"not a valid JSON Schema: {exc.message}", at=tuple(exc.absolute_path))
        keywords = set(validator.VALIDATORS)
        checked = validator.FORMAT_CHECKER.checkers
        for where, name in _formats(value):
            if name not in checked:
                # A format no checker knows checks nothing: every value passes it.
                fail(f"format '{name}' cannot be checked here, so it would let every value"
                     " through (jsonschema checks only the formats it has a checker for:"
                     " date-time, uri and others need jsonschema's extra packages,"
                     " pip install 'jsonschema[format]'); write the check as a pattern",
                     at=where, accepted=", ".join(sorted(checked)))
        for where, word in _unknown_keywords(value, keywords | _SCHEMA_ANNOTATIONS):
            hint = _misspelt(word, keywords)
            if hint is not None:
                # A misspelt keyword is ignored by JSON Schema: `requried: [answer]` made
                # an output without `answer` valid.
                fail(f"'{word}' is not a JSON Schema keyword, so it checks nothing (JSON"
                     f" Schema ignores keywords it does not know); did you mean '{hint}'?",
                     at=where, accepted=f"a keyword such as {hint}")
        if not keywords & set(value):
            # {} (or only a title, or a keyword JSON Schema does not know, which it
            # ignores) validates every output: a rule on the criterion could not fail.
            unknown = sorted(k for k in value if k not in _SCHEMA_ANNOTATIONS)
            said = (f"; JSON Schema ignores keywords it does not know, such as '{unknown[0]}'"
                    if unknown else "")
            fail("the schema holds no keyword that checks anything, so every output is"
                 f" valid and a rule on the criterion could not fail{said}",
                 accepted="a schema with a constraint, such as {type: object, required: [answer]}")
        # Only references inside the schema itself ("#/$defs/x"): anything else
        # would be fetched (a URL, a file) on every case, with no time limit.
        for where, ref in _refs(value):
            if not ref.startswith("#"):
                fail(
                    f"{where[-1]} '{ref}' points outside the schema; Oloproof never fetches "
                    "schemas (no network, no files): copy the referenced schema under "
                    "$defs and refer to it as '#/$defs/name'",
                    at=where,
                )
        return value


#: Keywords whose values are data, not schemas: a key "format" inside them is no keyword.
_SCHEMA_DATA = frozenset({"enum", "const", "default", "examples"})


def _formats(node: Any, at: tuple[str | int, ...] = ()) -> Iterator[
        tuple[tuple[str | int, ...], str]]:
    """Every ``format: NAME`` of a schema, with where it is."""
    if isinstance(node, dict):
        for key, item in node.items():
            if key == "format" and isinstance(item, str):
                yield (*at, key), item
            elif key not in _SCHEMA_DATA:
                yield from _formats(item, (*at, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _formats(item, (*at, index))


def _non_finite(node: Any, at: tuple[str | int, ...] = ()) -> Iterator[
        tuple[tuple[str | int, ...], float]]:
    """Every float in ``node`` that is NaN or an infinity, with where it is."""
    if isinstance(node, float) and not math.isfinite(node):
        yield at, node
    elif isinstance(node, dict):
        for key, item in node.items():
            yield from _non_finite(item, (*at, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _non_finite(item, (*at, index))


def _yaml_float(number: float) -> str:
    """NaN or an infinity as YAML writes it: .nan, .inf, -.inf."""
    return ".nan" if math.isnan(number) else (".inf" if number > 0 else "-.inf")


#: Where a schema holds subschemas: one (``items: {...}``), a list of them (``anyOf``), or
#: a mapping of names to them (``properties``) (:func:`_unknown_keywords`).
_ONE_SCHEMA = frozenset({
    "items", "additionalItems", "additionalProperties", "contains", "not", "if", "then",
    "else", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAPS = frozenset({
    "properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
})


def _unknown_keywords(
    schema: Any, known: set[str] | frozenset[str], at: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every key of a (sub)schema that is not a keyword in ``known``, with where it is;
    values that are data (``enum``, ``const``, ``default``, ``examples``) are not walked."""
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        here = (*at, key)
        if key not in known and key not in ("then", "else"):
            yield here, str(key)
        if key in _ONE_SCHEMA:
            yield from _unknown_keywords(value, known, here)
        if key in _SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from _unknown_keywords(sub, known, (*here, i))
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from _unknown_keywords(sub, known, (*here, name))


def _misspelt(word: str, keywords: set[str]) -> str | None:
    """The JSON Schema keyword ``word`` is a misspelling of, if it is close to one (closer
    than :func:`closest` asks: ``requried``, ``tpye``, ``additionalproperties``); an
    extension named as such (``x-note``) or close to none (``nullable``) is not."""
    if word.startswith(("x-", "$")):
        return None
    import difflib  # only for a schema with a keyword it does not know

    lowered = {k.lower(): k for k in keywords}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.75)
    return lowered[match[0]] if match else None


#: Keywords that describe a schema and check nothing (JsonSchemaEvaluator._check_schema).
_SCHEMA_ANNOTATIONS = frozenset({
    "$schema", "$id", "$comment", "$anchor", "$dynamicAnchor", "$vocabulary", "$defs",
    "definitions", "title", "description", "default", "examples", "deprecated", "readOnly",
    "writeOnly",
})


class AbsoluteErrorEvaluator(_EvaluatorBase):
    """``|output[field] - expected[expected_field or field]|``: a MEAN metric."""

    type: Literal["absolute_error"]
    field: str
    expected_field: str | None = None
    range: tuple[Number, Number] | None = None

    _range = field_validator("range")(_check_range)

class PanelMember(_Model):
    """One judge of a panel: what differs from the ``rubric_judge`` it belongs to.

    Every field is optional and defaults to the panel's own (see
    :meth:`RubricJudgeEvaluator._member` for what a judge of another provider keeps); the
    rubric is always the panel's.
    """

    provider: Literal["anthropic", "openai", "openai_compatible"] | None = None
    model: NonEmpty | None = None
    api_key_env: str | None = None
    base_url: HttpUrl | None = None
    temperature: Number | None = Field(default=None, ge=0)
    max_tokens: Whole | None = Field(default=None, ge=1)
    max_completion_tokens: Whole | None = Field(default=None, ge=1)
    extra_body: dict[str, Any] | None = None
    timeout_s: Number | None = Field(default=None, gt=0)


class RubricJudgeEvaluator(_EvaluatorBase):
    """An LLM judge answering pass or fail against a rubric.

    :attr:`rubric` is the rubric's text: ``rubric_text``, or the content of
    ``rubric_file`` (relative to the project directory), read at load time.
    """

    type: Literal["rubric_judge"]
    provider: Literal["anthropic", "openai", "openai_compatible"]
    model: NonEmpty
    rubric_file: str | None = None
    rubric_text: str | None = None
    api_key_env: str | None = None
    base_url: HttpUrl | None = None
    #: Sent only when set, except where the provider's API expects it (see
    #: :attr:`request_temperature`); ``null`` leaves it out of the request.
    temperature: Number | None = Field(default=None, ge=0)
    max_tokens: Whole | None = Field(default=None, ge=1)
    #: OpenAI's current name for the output limit (reasoning models refuse ``max_tokens``).
    max_completion_tokens: Whole | None = Field(default=None, ge=1)
    #: More fields for the request body (``reasoning_effort``, ``thinking``...), per judge.
    extra_body: dict[str, Any] = Field(default_factory=dict)
    timeout_s: Number = Field(default=60, gt=0)
    #: Several judges on this criterion (at least 2), each inheriting what it does not set.
    panel: list[PanelMember] | None = None
    #: How the panel's verdicts combine: ``majority`` (more than half pass) or ``unanimous``;
    #: a scored panel's scores: ``median`` (its default) or ``mean``.
    panel_rule: Literal["majority", "unanimous", "median", "mean"] = "majority"
    #: ``[low, high]``, two whole numbers: the judge answers a score on that scale instead
    #: of pass or fail, and its criterion is a MEAN metric whose range is the scale.
    scale: tuple[int, int] | None = None

    _rubric: str | None = PrivateAttr(default=None)

    @field_validator("scale", mode="before")
    @classmethod
    def _check_scale(cls, value: Any) -> Any:
        if value is None:
            return None
        if (not isinstance(value, (list, tuple)) or len(value) != 2
                or not all(type(v) is int for v in value)):
            shown = ("[" + ", ".join(describe(v) for v in value) + "]"
                     if isinstance(value, (list, tuple)) else describe(value))
            fail(f"expected two whole numbers [low, high], for example [1, 5], got {shown}",
                 accepted="[1, 5], [0, 10]: whole numbers, low < high, at most "
                          f"{MAX_SCALE_SPAN} apart")
        low, high = value
        if not low < high:
            fail(f"expected [low, high] with low < high, got [{low}, {high}]")
        if high - low > MAX_SCALE_SPAN:
            fail(f"a scale spans at most {MAX_SCALE_SPAN} points above its low, got "
                 f"[{low}, {high}] ({high - low}); a judge's finer grades are noise")
        return (low, high)

    @model_validator(mode="before")
    @classmethod
    def _scored_panel_rule(cls, data: Any) -> Any:
        # A scored panel combines scores; its rule defaults to the median.
        if (isinstance(data, dict) and data.get("scale") is not None
                and data.get("panel") is not None and "panel_rule" not in data):
            return {**data, "panel_rule": "median"}
        return data

    def _member(self, member: PanelMember, rubric: str) -> RubricJudgeEvaluator:
        """A panel judge's config. It inherits what it does not set, except: a judge with
        another provider keeps only the rubric, model and timeout_s (its key, URL and
        request parameters are its own), and a judge that sets one output limit
        (max_tokens or max_completion_tokens) does not inherit the other."""
        own = member.model_dump(exclude_unset=True)
        skip = {"panel", "panel_rule", "rubric_file", "rubric_text"}
        if own.get("provider", self.provider) != self.provider:
            skip |= {"base_url", "api_key_env", "temperature", "max_tokens",
                     "max_completion_tokens", "extra_body"}
        if "max_tokens" in own or "max_completion_tokens" in own:
            skip |= {"max_tokens", "max_completion_tokens"}
        base = self.model_dump(exclude=skip, exclude_unset=True)
        data = {**base, **own, "rubric_text": rubric}
        return RubricJudgeEvaluator.model_validate(data)

    @property
    def rubric(self) -> str:
        """The rubric's text (read from ``rubric_file`` if not read at load time)."""
        if self.rubric_text is not None:
            return self.rubric_text
        if self._rubric is None:
            assert self.rubric_file is not None
            self._rubric = Path(self.rubric_file).read_text(encoding="utf-8-sig")
        return self._rubric

    def members(self) -> list[RubricJudgeEvaluator]:
        """The panel's judges as complete configs (empty without a panel); checked at load."""
        return [self._member(member, self.rubric) for member in self.panel or ()]

    @model_validator(mode="after")
    def _check_panel(self) -> RubricJudgeEvaluator:
        if self.panel is None:
            if "panel_rule" in self.model_fields_set:
                fail("panel_rule needs a panel (a list of at least 2 judges)",
                     at=("panel_rule",))
            return self
        scored = self.scale is not None
        if self.scale is not None and self.panel_rule in ("majority", "unanimous"):
            fail(f"panel_rule {self.panel_rule} combines pass/fail verdicts, and this judge "
                 f"gives scores (scale [{self.scale[0]}, {self.scale[1]}]): write panel_rule: "
                 "median or panel_rule: mean", at=("panel_rule",), accepted="median, mean")
        if not scored and self.panel_rule in ("median", "mean"):
            fail(f"panel_rule {self.panel_rule} combines scores, and this judge answers pass "
                 "or fail (no scale): write panel_rule: majority or unanimous, or give the "
                 "judge a scale", at=("panel_rule",), accepted="majority, unanimous")
        if len(self.panel) < 2:
            fail(f"a panel needs at least 2 judges, got {len(self.panel)}", at=("panel",))
        for index, member in enumerate(self.panel):
            try:
                self._member(member, "(the panel's rubric)")
            except ValidationError as exc:
                error = exc.errors()[0]
                ctx = error.get("ctx") or {}
                message = str(ctx.get("message") or error.get("msg", "invalid"))
                at = (*(str(p) for p in error.get("loc", ())),
                      *(str(p) for p in ctx.get("at", ())))
                fail(message, at=("panel", index, *at))
        return self

    @model_validator(mode="after")
    def _check_request(self) -> RubricJudgeEvaluator:
        if self.provider == "anthropic":
            if "max_tokens" in self.model_fields_set and self.max_tokens is None:
                fail("the anthropic Messages API requires max_tokens; give a number "
                     "(for example max_tokens: 1024)", at=("max_tokens",))
            if self.max_completion_tokens is not None:
                fail("max_completion_tokens is OpenAI's parameter; the anthropic judge "
                     "uses max_tokens", at=("max_completion_tokens",))
        if self.max_completion_tokens is not None and self.max_tokens is not None:
            fail("declare max_tokens or max_completion_tokens, not both (current OpenAI "
                 "models take max_completion_tokens)", at=("max_completion_tokens",))
        owned = {"model", "messages", "system", "temperature", "max_tokens",
                 "max_completion_tokens", "stream"}
        for key in self.extra_body:
            if key in owned:
                own = key in ("temperature", "max_tokens", "max_completion_tokens")
                hint = f"set {key}: in the judge itself" if own else "Oloproof sets it"
                fail(f"extra_body may not set '{key}' ({hint})", at=("extra_body", key))
        return self

    @model_validator(mode="after")
    def _check_rubric(self, info: ValidationInfo) -> RubricJudgeEvaluator:
        if self.rubric_file is not None and self.rubric_text is not None:
            fail("declare rubric_file or rubric_text, not both", at=("rubric_text",))
        if self.rubric_file is None and self.rubric_text is None:
            fail(
                "required field is missing: declare rubric_file (a path to the rubric) "
                "or rubric_text (the rubric itself)",
                at=("rubric_file",),
            )
        if self.rubric_text is not None and not self.rubric_text.strip():
            fail("the rubric is empty", at=("rubric_text",))
        if self.provider == "openai_compatible" and not self.base_url:
            fail(
                "required for provider openai_compatible (the server's URL, for example "
                "http://localhost:8000/v1)",
                at=("base_url",),
            )
        root = _context(info, "root")
        if self.rubric_file is not None and isinstance(root, Path):
            self._rubric = self._read_rubric(root / self.rubric_file)
        return self

    def _read_rubric(self, path: Path) -> str:
        where = ("rubric_file",)
        name = self.rubric_file
        if absent(path):
            fail(f"{missing(path)}: {name} (relative to the project directory)", at=where)
        try:
            # Bounded, and never blocks on a FIFO or a device (see read_bytes).
            data = read_bytes(path, str(name), MAX_CONFIG_BYTES, what="rubric file")
        except ConfigError as exc:
            fail(f"{name}: {exc.detail}", at=where)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            fail(f"{name} is not UTF-8 text", at=where)
        if not text.strip():
            fail(f"the rubric file {name} is empty", at=where)
        return text

class CustomEvaluator(_EvaluatorBase):
    """Your own Python function, ``module:function``, imported from the project directory."""

    type: Literal["custom"]
    function: str
    kind: Literal["binary", "mean"] = "binary"
    range: tuple[Number, Number] | None = None
    # Files the function depends on (helper modules): part of its identity.
    code_paths: list[str] = Field(default_factory=list)
    # Seconds one call may take; limits.evaluator_timeout_s when not set.
    timeout_s: Number | None = Field(default=None, gt=0, le=3600)
    #: Keyword arguments for the function (``params: {timeout_s: 10}``); part of its
    #: identity, so changing one re-checks every case.
    params: dict[str, Any] = Field(default_factory=dict)

    _range = field_validator("range")(_check_range)

    @field_validator("code_paths")
    @classmethod
    def _check_code_paths(cls, value: list[str], info: ValidationInfo) -> list[str]:
        _check_code_paths(value, info)
        return value

    @field_validator("function")
    @classmethod
    def _check_function(cls, value: str) -> str:
        return _check_function(value, "checks:polite")

    @model_validator(mode="after")
    def _check_kind(self) -> CustomEvaluator:
        if self.range is not None and self.kind != "mean":
            fail("range applies to kind: mean only", at=("range",))
        return self

Evaluator = Annotated[
    ExactMatchEvaluator
    | ContainsEvaluator
    | RegexEvaluator
    | JsonSchemaEvaluator
    | AbsoluteErrorEvaluator
    | RubricJudgeEvaluator
    | CustomEvaluator,
    Field(discriminator="type"),
]


# -- oloproof.yaml -----------------------------------------------------------------



class ProjectConfig(_Model):
    """The content of oloproof.yaml."""

    version: Literal[1]
    project: NonEmpty
    dataset: NonEmpty
    system: SystemConfig
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    evaluators: list[Evaluator]
    #: The release policy: a path (relative to the project directory), or
    #: ``none`` to declare that the project has no release rules. When absent,
    #: release.yaml beside oloproof.yaml, which must then exist.
    policy: NonEmpty | None = None
    #: A person's labels on judge criteria (JSON Lines; see project/labels.py).
    human_labels: NonEmpty | None = None
    #: Calls of the system per case (docs/repeated-trials.md); 1 is a run as it always was.
    trials: Whole = Field(default=1, ge=1, le=MAX_TRIALS)
    #: The store: a postgresql:// URL (the team store, docs/team-store.md), or sqlite (the
    #: default). Kept here masked: the URL the run connects with is read again where the
    #: store is opened (store/location.py), so a password never reaches a snapshot.
    store: str | None = None
    #: Where the system's calls and custom evaluators run: ``local`` (this process's threads,
    #: the default) or ``ray`` (Ray workers: the ``ray`` extra; docs/scaling.md). Never part
    #: of an identity: changing it invalidates nothing stored.
    executor: Literal["local", "ray"] = "local"
    ray: RayConfig = Field(default_factory=RayConfig)
    #: Sequential decisions (docs/sequential-decisions.md): ``true``, a block with ``seed``
    #: and ``margin``, or absent / ``false`` (every case runs; the fixed-n intervals decide).
    sequential: SequentialConfig | None = None

    @field_validator("sequential", mode="before")
    @classmethod
    def _check_sequential(cls, value: Any) -> Any:
        if value is True:
            return {}
        if value is False or value is None:
            return None
        return value

    #: Variants of a model system (docs/prompts-and-models.md): ``oloproof run --matrix``.
    matrix: MatrixConfig | None = None

    @model_validator(mode="after")
    def _check_matrix(self) -> ProjectConfig:
        if self.matrix is None:
            return self
        base = self.system.model
        if base is None:
            fail("a matrix varies a model system: declare system.model (provider, model,"
                 " prompt_file) to vary", at=("matrix",))
        for index, variant in enumerate(self.matrix.variants):
            own = {k: v for k, v in variant.model_dump(exclude_unset=True).items() if k != "name"}
            merged = {**base.model_dump(exclude_unset=True), **own}
            try:
                ModelSystemConfig.model_validate(merged)
            except ValidationError as exc:
                error = exc.errors()[0]
                ctx = error.get("ctx") or {}
                message = str(ctx.get("message") or error.get("msg", "invalid"))
                at = (*(str(p) for p in error.get("loc", ())),
                      *(str(p) for p in ctx.get("at", ())))
                fail(f"variant '{variant.name}': {message}",
                     at=("matrix", "variants", index, *at))
        return self

    @field_validator("store", mode="before")
    @classmethod
    def _check_store(cls, value: Any) -> str | None:
        try:
            # store: written with nothing after it is empty, as store: "" is (and policy:).
            url = store_setting("" if value is None else value, "oloproof.yaml")
        except ConfigError as exc:
            fail(exc.detail, accepted=exc.accepted)
        return None if url is None else masked(url)

    @field_validator("human_labels")
    @classmethod
    def _check_labels(cls, value: str | None, info: ValidationInfo) -> str | None:
        root = _context(info, "root")
        problem = not_a_file(root / value) if value is not None and isinstance(
            root, Path) else None
        if problem is not None:
            fail(f"{problem}: {value} (relative to the project directory)")
        return value

    @model_validator(mode="after")
    def _labels_need_a_judge(self) -> ProjectConfig:
        if self.human_labels is not None and not any(
                e.type == "rubric_judge" for e in self.evaluators):
            fail("human labels measure a judge, and the project declares no rubric_judge",
                 at=("human_labels",))
        return self

    @model_validator(mode="before")
    @classmethod
    def _explicit_policy(cls, data: Any) -> Any:
        if isinstance(data, dict) and "policy" in data and data["policy"] is None:
            fail(
                "policy is empty; write policy: none to declare that the project has no "
                "release rules, a path such as policy: release.yaml, or remove the key",
                at=("policy",),
            )
        return data

    @field_validator("dataset")
    @classmethod
    def _check_dataset(cls, value: str, info: ValidationInfo) -> str:
        root = _context(info, "root")
        problem = not_a_file(root / value) if isinstance(root, Path) else None
        if problem is not None:
            fail(f"{problem}: {value} (relative to the project directory)")
        return value

    @field_validator("evaluators")
    @classmethod
    def _check_evaluators(cls, value: list[Evaluator]) -> list[Evaluator]:
        if not value:
            fail("declare at least one evaluator", accepted=", ".join(EVALUATOR_TYPES))
        first: dict[str, int] = {}
        for index, evaluator in enumerate(value):
            seen = first.setdefault(evaluator.criterion, index)
            if seen != index:
                fail(
                    f"duplicate criterion '{evaluator.criterion}' (also declared by "
                    f"evaluators[{seen}]); each criterion is one metric and needs its own name",
                    at=(index, "criterion"),
                )
        return value

# -- release.yaml and compare.yaml ---------------------------------------------


def _check_metric(value: str, info: ValidationInfo) -> str:
    metrics = _context(info, "metrics")
    if metrics is not None and value not in metrics:
        if metrics:
            hint = closest(value, metrics)
            mean = f"; did you mean '{hint}'?" if hint else ""
            known = ", ".join(sorted(metrics))
            fail(f"unknown metric '{value}'{mean} (known metrics: {known})")
        fail(f"unknown metric '{value}' (the project declares no metrics)")
    return value


def _metric_kind(metric: str, info: ValidationInfo) -> MetricKind | None:
    metrics = _context(info, "metrics")
    if isinstance(metrics, dict):
        kind = metrics.get(metric)
        if isinstance(kind, str) and kind in MetricKind.__members__:
            return MetricKind(kind)
    return None


class JudgeValidation(_Model):
    """What a rule on a judge's metric asks of the judge's agreement with human labels.

    A pass/fail judge: ``min_sensitivity`` and ``min_specificity`` (each the floor of its
    Clopper-Pearson lower bound; by default ``min_agreement`` when that is given, else
    0.85), and ``min_agreement`` (kept from earlier policies: a floor on the agreement's
    lower bound as well). A scored judge: ``max_mean_abs_diff`` (a ceiling on the upper
    bound of the mean absolute difference, in points of the scale) and/or
    ``min_weighted_kappa`` (a floor on the quadratic-weighted kappa's lower bound). Which
    keys fit which judge is checked where the policy is loaded with the project's metrics.
    """

    min_labels: Whole = Field(default=30, ge=1)
    min_agreement: Number | None = Field(default=None, gt=0, le=1)
    min_sensitivity: Number | None = Field(default=None, gt=0, le=1)
    min_specificity: Number | None = Field(default=None, gt=0, le=1)
    max_mean_abs_diff: Number | None = Field(default=None, ge=0)
    min_weighted_kappa: Number | None = Field(default=None, gt=-1, le=1)


def _check_judge_metric(rule: Any, info: ValidationInfo, what: str, at: str) -> None:
    judges = _context(info, "judges")
    if isinstance(judges, (list, tuple, set)) and rule.metric not in judges:
        known = ", ".join(judges) or "none"
        fail(f"{what} applies to the metric of a rubric_judge, and '{rule.metric}' is not "
             f"one (judge metrics: {known})", at=(at,))


_BINARY_VALIDATION = ("min_agreement", "min_sensitivity", "min_specificity")
_SCORED_VALIDATION = ("max_mean_abs_diff", "min_weighted_kappa")


def _check_validation_fits(rule: Any, info: ValidationInfo) -> None:
    """A pass/fail judge is validated on sensitivity and specificity, a scored judge on
    the mean absolute difference or the weighted kappa: the keys must fit the judge."""
    kind = _metric_kind(rule.metric, info)
    if kind is None:
        return
    given = rule.judge_validation.model_fields_set
    if kind is MetricKind.MEAN:
        wrong = [k for k in _BINARY_VALIDATION if k in given]
        if wrong:
            fail(f"{wrong[0]} measures a pass/fail judge, and '{rule.metric}' is a scored "
                 "judge: validate it with max_mean_abs_diff (points of the scale) or "
                 "min_weighted_kappa", at=("judge_validation", wrong[0]),
                 accepted="min_labels, max_mean_abs_diff, min_weighted_kappa")
        if not any(k in given for k in _SCORED_VALIDATION):
            fail(f"'{rule.metric}' is a scored judge: say what validates it with "
                 "max_mean_abs_diff (for example 0.5 points), min_weighted_kappa (for "
                 "example 0.6), or both", at=("judge_validation",),
                 accepted="min_labels, max_mean_abs_diff, min_weighted_kappa")
        scales = _context(info, "scales")
        scale = scales.get(rule.metric) if isinstance(scales, dict) else None
        ceiling = rule.judge_validation.max_mean_abs_diff
        if scale is not None and ceiling is not None and ceiling >= scale[1] - scale[0]:
            width = scale[1] - scale[0]
            fail(f"max_mean_abs_diff: {ceiling:g} cannot fail on '{rule.metric}''s scale"
                 f" [{scale[0]}, {scale[1]}]: no two scores on it are more than {width:g}"
                 " points apart, so the bound would validate any judge, even one that always"
                 " gives the opposite end of the scale", at=("judge_validation",
                                                              "max_mean_abs_diff"),
                 accepted=f"a number of points under {width:g}, such as 0.5")
        return
    wrong = [k for k in _SCORED_VALIDATION if k in given]
    if wrong:
        fail(f"{wrong[0]} measures a scored judge, and '{rule.metric}' answers pass or fail:"
             " validate it with min_sensitivity and min_specificity",
             at=("judge_validation", wrong[0]),
             accepted="min_labels, min_sensitivity, min_specificity, min_agreement")


def _check_group(rule: Any) -> Any:
    if rule.group is not None and rule.each_group:
        fail("declare group (one group) or each_group: true (every group), not both",
             at=("each_group",))
    if rule.group is not None and len(rule.group) != 1:
        fail("name exactly one metadata key and its value, e.g. group: {lang: fr}",
             at=("group",))
    return rule


Aggregate = Literal["mean", "pass_at_k", "pass_all_k", "flaky_share"]


def _check_aggregate(rule: Any, info: ValidationInfo, counts: bool) -> None:
    aggregate = getattr(rule, "aggregate", None)
    if aggregate is None:
        return
    if counts and aggregate == "mean":
        fail("an observed_count rule counts failures; aggregate: mean has no failures to"
             " count (use pass_at_k, pass_all_k or flaky_share, or leave aggregate out)",
             at=("aggregate",))
    if aggregate != "mean" and _metric_kind(rule.metric, info) is MetricKind.MEAN:
        fail(f"aggregate: {aggregate} needs a pass or fail per trial, and '{rule.metric}'"
             " is a MEAN metric (use aggregate: mean, or leave it out)", at=("aggregate",))
    if aggregate != "mean" and getattr(rule, "estimate", "judge") == "corrected":
        fail("estimate: corrected applies to the metric itself; it cannot be combined with"
             f" aggregate: {aggregate}", at=("aggregate",))


class IntervalRule(_Model):
    """``min: t`` (a floor on the interval) or ``max: t`` (a ceiling): exactly one.

    On a judge's metric, ``judge_validation`` makes the rule ``MANUAL_REVIEW`` until
    human labels show the judge agrees with a person; ``estimate: corrected`` decides
    on the prediction-powered estimate of the rate a person would give.
    """

    id: NonEmpty
    metric: NonEmpty
    kind: Literal["interval_threshold"] = "interval_threshold"
    min: Number | None = None
    max: Number | None = None
    #: The family whose family-wise error this rule shares (``families:`` in release.yaml).
    family: NonEmpty | None = None
    judge_validation: JudgeValidation | None = None
    estimate: Literal["judge", "corrected"] = "judge"
    #: Over repeated trials: what the rule measures of each case (docs/repeated-trials.md).
    #: None or ``mean``: the mean pass fraction (a BINARY metric) or mean score (MEAN).
    aggregate: Aggregate | None = None


    #: One group of the metric (``group: {lang: fr}``), or every group (``each_group``).
    group: dict[str, str | int | bool] | None = None
    each_group: Flag = False

    _metric = field_validator("metric")(_check_metric)
    _group = model_validator(mode="after")(lambda self: _check_group(self))

    @model_validator(mode="after")
    def _check_judge(self, info: ValidationInfo) -> IntervalRule:
        _check_aggregate(self, info, counts=False)
        if self.judge_validation is not None:
            _check_judge_metric(self, info, "judge_validation", "judge_validation")
            _check_validation_fits(self, info)
        if self.estimate == "corrected":
            _check_judge_metric(self, info, "estimate: corrected", "estimate")
            if _metric_kind(self.metric, info) is MetricKind.MEAN:
                fail(f"estimate: corrected estimates a pass rate, and '{self.metric}' is a "
                     "scored judge (a MEAN metric): remove it, and validate the judge with "
                     "judge_validation instead", at=("estimate",))
            if self.family is not None:
                fail("a rule with estimate: corrected cannot join a family (its interval "
                     "is not adjusted for multiplicity)", at=("family",))
        return self

    @model_validator(mode="after")
    def _check_bound(self, info: ValidationInfo) -> IntervalRule:
        if self.min is not None and self.max is not None:
            fail("declare min or max, not both (write two rules for a band)", at=("max",))
        if self.min is None and self.max is None:
            fail(
                "declare min (the interval must lie above it) or max (below it)",
                at=("min",),
            )
        name, bound = ("min", self.min) if self.min is not None else ("max", self.max)
        assert bound is not None
        if _metric_kind(self.metric, info) is MetricKind.BINARY and not 0 <= bound <= 1:
            fail(
                f"{bound:g} is outside [0, 1]: '{self.metric}' is a BINARY metric, a rate "
                "(write 0.7 for 70%)",
                at=(name,),
            )
        return self


class ObservedCountRule(_Model):
    """At most ``max_failures`` failures, counting missing cases as failures."""

    id: NonEmpty
    metric: NonEmpty
    kind: Literal["observed_count"]
    max_failures: Whole = Field(ge=0)
    group: dict[str, str | int | bool] | None = None
    each_group: Flag = False
    #: Over repeated trials: count cases by this (pass_at_k, pass_all_k, flaky_share);
    #: None counts failed trials.
    aggregate: Aggregate | None = None

    _metric = field_validator("metric")(_check_metric)
    _group = model_validator(mode="after")(lambda self: _check_group(self))

    @model_validator(mode="after")
    def _check_kind(self, info: ValidationInfo) -> ObservedCountRule:
        _check_aggregate(self, info, counts=True)
        if _metric_kind(self.metric, info) is MetricKind.MEAN:
            fail(
                f"an observed_count rule counts failures, and '{self.metric}' is a MEAN "
                "metric (use min or max)",
                at=("kind",),
            )
        return self


ReleaseRule = Annotated[IntervalRule | ObservedCountRule, Field(discriminator="kind")]


#: The lowest confidence level accepted: below it the level is mistaken for alpha.
MIN_CONFIDENCE_LEVEL = 0.5


def _check_confidence(value: float) -> float:
    if not 0 < value < 1:
        fail(f"must lie strictly between 0 and 1 (for example 0.95), got {value:g}")
    if value < MIN_CONFIDENCE_LEVEL:
        fail(f"{value:g} would decide on a {value:.0%} interval: confidence_level is the"
             f" interval's coverage (0.95 for 95%), not the error rate alpha (write"
             f" {1 - value:g}, not {value:g})",
             accepted="a number from 0.5 to below 1, for example 0.95")
    return value


def _check_unique_ids(rules: list[Any]) -> None:
    first: dict[str, int] = {}
    for index, rule in enumerate(rules):
        if not rule.id.strip() or not rule.id.isprintable():
            # A rule id is a JUnit test case's name, an annotation's title and a line of the
            # gate's notes: a newline in it started a line of its own on the terminal (on
            # GitHub Actions, `::stop-commands::…` there turned off the run's annotations).
            fail(
                f"a rule id is a name on one line, of printable characters: got {rule.id!r}",
                at=("rules", index, "id"),
                accepted="a name such as exact-label-floor",
            )
        seen = first.setdefault(rule.id, index)
        if seen != index:
            fail(
                f"duplicate rule id '{rule.id}' (also used by rules[{seen}])",
                at=("rules", index, "id"),
            )
    # each_group names its group rules RULE[KEY=VALUE]: a rule declared with such an id
    # would share it with one of them (and a family's decisions are kept by id).
    grouped = {rule.id: i for i, rule in enumerate(rules) if getattr(rule, "each_group", False)}
    for index, rule in enumerate(rules):
        for base, other in grouped.items():
            if other != index and rule.id.startswith(f"{base}["):
                fail(
                    f"rule id '{rule.id}' has the form each_group gives the group rules of"
                    f" rule '{base}' (rules[{other}]: {base}[KEY=VALUE]), and the two would"
                    " share an id; choose an id that does not start with"
                    f" '{base}['",
                    at=("rules", index, "id"),
                )


Multiplicity = Literal["holm", "bonferroni", "none"]
MULTIPLICITIES: tuple[Multiplicity, ...] = ("holm", "bonferroni", "none")


class RuleFamily(_Model):
    """A family of interval rules whose family-wise error is held at 1 - confidence_level.

    ``holm`` (Holm 1979, step-down) or ``bonferroni`` adjust each member's level; ``none``
    leaves every rule at the policy's level (the default for a rule without a family).
    """

    multiplicity: Multiplicity = "holm"


class ReleasePolicy(_Model):
    """The content of release.yaml: rules on one run."""

    version: Literal[1]
    confidence_level: Number = 0.95
    block_on: list[State] = Field(default_factory=lambda: list(STATES))
    warn_on: list[State] = Field(default_factory=list)
    families: dict[str, RuleFamily] = Field(default_factory=dict)
    rules: list[ReleaseRule] = Field(default_factory=list)
    #: The largest share of a rule's cases (observed or missing) that may be missing; past
    #: it the run's evidence is incomplete (exit 5) whatever ``warn_on`` says.
    max_missing: Number = Field(default=DEFAULT_MAX_MISSING, ge=0, le=1)

    _confidence = field_validator("confidence_level")(_check_confidence)

    @model_validator(mode="before")
    @classmethod
    def _infer_kinds(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
            return data
        rules = []
        for rule in data["rules"]:
            if isinstance(rule, dict) and "kind" not in rule:
                counts = "max_failures" in rule and "min" not in rule and "max" not in rule
                rule = {**rule, "kind": "observed_count" if counts else "interval_threshold"}
            rules.append(rule)
        return {**data, "rules": rules}

    @model_validator(mode="after")
    def _check_ids(self) -> ReleasePolicy:
        _check_unique_ids(self.rules)
        for index, rule in enumerate(self.rules):
            family = getattr(rule, "family", None)
            if family is not None and family not in self.families:
                declared = ", ".join(sorted(self.families)) or "none"
                hint = closest(family, list(self.families))
                mean = f"; did you mean '{hint}'?" if hint else ""
                fail(
                    f"unknown family '{family}'{mean} (declare it under families: with"
                    f" multiplicity: holm, bonferroni or none; declared: {declared})",
                    at=("rules", index, "family"),
                )
        return self


class CompareRule(_Model):
    """A rule on the paired difference candidate - baseline."""

    id: NonEmpty
    kind: Literal["superiority", "non_inferiority", "equivalence"]
    metric: NonEmpty
    margin: Number | None = None

    _metric = field_validator("metric")(_check_metric)

    @model_validator(mode="before")
    @classmethod
    def _default_margin(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind") == "superiority" and "margin" not in data:
            return {**data, "margin": 0.0}
        return data

    @model_validator(mode="after")
    def _check_margin(self, info: ValidationInfo) -> CompareRule:
        if self.margin is None:
            fail(
                f"required for kind {self.kind}: the largest difference that does not "
                "matter (for example margin: 0.05)",
                at=("margin",),
            )
        if self.kind == "superiority":
            if self.margin < 0:
                fail(f"must be 0 or more, got {self.margin:g}", at=("margin",))
        elif self.margin <= 0:
            fail(f"must be greater than 0, got {self.margin:g}", at=("margin",))
        if _metric_kind(self.metric, info) is MetricKind.BINARY and self.margin >= 1:
            fail(
                f"{self.margin:g} is not below 1: '{self.metric}' is a BINARY metric, a rate "
                "(write 0.05 for 5 points)",
                at=("margin",),
            )
        return self


class ComparePolicy(_Model):
    """The content of compare.yaml: rules on a candidate against a baseline."""

    version: Literal[1]
    confidence_level: Number = 0.95
    block_on: list[State] = Field(default_factory=lambda: list(STATES))
    warn_on: list[State] = Field(default_factory=list)
    rules: list[CompareRule] = Field(default_factory=list)
    #: The largest share of a rule's pairs dropped because a case was missing in either
    #: run; past it the comparison is incomplete (exit 5) whatever ``warn_on`` says.
    max_missing: Number = Field(default=DEFAULT_MAX_MISSING, ge=0, le=1)

    _confidence = field_validator("confidence_level")(_check_confidence)

    @model_validator(mode="after")
    def _check_ids(self) -> ComparePolicy:
        _check_unique_ids(self.rules)
        return self


# -- into the records the engine uses ----------------------------------------------------


def to_record(model: _Model) -> Any:
    """The record of project/config.py for a validated model: the same fields, in the same
    order, nested models as records; ``fields_set`` as the model's; a rubric judge's rubric
    as read and its panel's judges as validated. A field the record lacks is a bug, not a
    user's error: :class:`TypeError`."""
    record = RECORDS[type(model).__name__]
    values: dict[str, Any] = {
        name: _converted(getattr(model, name)) for name in type(model).model_fields
    }
    values["fields_set"] = frozenset(model.model_fields_set)
    if isinstance(model, RubricJudgeEvaluator):
        values["rubric_read"] = model._rubric
        values["panel_judges"] = tuple(to_record(m) for m in model.members())
    return record(**values)


def _converted(value: Any) -> Any:
    if isinstance(value, _Model):
        return to_record(value)
    if type(value) is list:
        return [_converted(v) for v in value]
    if type(value) is tuple:
        return tuple(_converted(v) for v in value)
    if type(value) is dict:
        return {k: _converted(v) for k, v in value.items()}
    return value


_R = TypeVar("_R", bound=ConfigRecord)


def validate(record: type[_R], data: Any, context: dict[str, Any] | None = None) -> _R:
    """Validate ``data`` with the model of ``record`` and convert it (see :func:`to_record`);
    pydantic's :class:`ValidationError` when it is not valid."""
    converted: _R = to_record(model_of(record).model_validate(data, context=context))
    return converted


def model_of(record: type[ConfigRecord]) -> type[_Model]:
    """The model that validates into ``record``."""
    return _MODELS[record.__name__]


#: The models by the name of the record each validates into.
_MODELS: dict[str, type[_Model]] = {
    cls.__name__: cls
    for cls in (
        ProjectConfig, SystemConfig, HttpSystemConfig, ModelSystemConfig, MatrixConfig,
        MatrixVariant, ConcurrencyConfig, AdaptiveConfig,
        RetryConfig, RayConfig, SequentialConfig, LimitsConfig, ExactMatchEvaluator,
        ContainsEvaluator,
        RegexEvaluator, JsonSchemaEvaluator, AbsoluteErrorEvaluator, RubricJudgeEvaluator,
        PanelMember, CustomEvaluator, ReleasePolicy, RuleFamily, IntervalRule,
        ObservedCountRule, JudgeValidation, ComparePolicy, CompareRule,
    )
}
