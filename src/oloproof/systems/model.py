"""A model behind a provider's API as the system under test (``system.model``).

No code to write: the prompt is a Jinja2 template, rendered per case in a sandbox
(:class:`jinja2.sandbox.SandboxedEnvironment`) with ``StrictUndefined``, and sent through
the same providers (wire formats, retries, size limits, secret masking) as the judges'.

What a template sees: ``input`` (the case's input), and, when the input is an object,
each of its top-level fields by name (``{{ question }}`` as promptfoo writes it, the same
as ``{{ input.question }}``). Never ``expected``: the system under test must not see the
answer. A name the case does not have is a per-case error naming it (the case is
missing, never sent with a blank); a template that does not parse is refused when the
system is built, with its file and line (exit 2).

Thinking a reasoning model wrote into the reply's text (``<think>…</think>``, or the
closing tag alone after a chat template that opened it; also ``<thinking>``,
``<reasoning>``, ``[THINK]``) is set aside, as a judge's is (providers/verdict.py
``split_thinking``): the output is what follows it, and thinking that never ends is an error
of the case (missing). Kept, it made a ``contains`` find a word only the thinking held.
Outputs cached by earlier versions kept it, so a system that may be served with it (an
``openai_compatible`` one, or any with a ``base_url``) has ``thinking`` in its identity.

``output: text`` keeps the reply's text; ``output: json`` parses it as JSON. A reply that
is not JSON is a per-case error (missing), never guessed. One code fence around the whole
reply (```` ```json ... ``` ````, which chat models add unasked) is taken off first; prose
around it, or two values, are refused: unlike a judge's verdict, an output is evaluated
as a whole, and picking one object out of prose would be a guess about what it meant.

The identity (the cache key of every execution) is a digest of the provider, model,
base_url, the templates' source, the output mode and every request parameter
(temperature, max_tokens, max_completion_tokens, extra_body), and the system's name and
version; never the API key, the timeout or the concurrency. Usage (tokens) is the one the
provider reports with each reply.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from oloproof._json import (
    DEFAULT_MAX_JSON_DEPTH,
    JsonLimitError,
    check_depth,
    digest,
    digest_bytes,
)
from oloproof._records import replace
from oloproof.errors import ConfigError
from oloproof.providers.base import (
    JudgeReply,
    Provider,
    UnsupportedParameter,
    resolve_api_key,
)
from oloproof.providers.factory import make_provider
from oloproof.providers.verdict import split_thinking
from oloproof.systems.base import CallResult
from oloproof.transport.http import DEFAULT_MAX_RESPONSE_BYTES, mask, mask_quoted, shown_url
from oloproof.transport.retry import PermanentFailure

if TYPE_CHECKING:
    from jinja2 import Template

__all__ = ["ModelSystem", "parse_json_output", "render_error", "unanswered"]

#: A template file larger than this is refused (a prompt, not a data set).
MAX_TEMPLATE_BYTES = 1 << 20
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```\Z", re.DOTALL)


def _environment() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    # Prompts are text, not HTML: no escaping; a trailing newline is the author's. Immutable:
    # the case's input is the one the run stores and keys its caches by, and a template
    # that changed it ({{ input.pop("question") }}, input.setdefault(...)) stored {} as the
    # input and made every judgment miss the cache on the next run.
    return ImmutableSandboxedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
    )


def _read_template(root: str | Path, name: str, field: str, file: str | None) -> str:
    from oloproof._fs import absent
    from oloproof.project._files import read_bytes

    path = Path(root, name)
    if absent(path):
        from oloproof._fs import missing  # only on the way to an error

        raise ConfigError(
            f"{missing(path)}: {name} (relative to the project directory)", file=file,
            field=field,
        )
    try:
        data = read_bytes(path, name, MAX_TEMPLATE_BYTES, what="prompt file")
        text = data.decode("utf-8-sig")
    except ConfigError as exc:
        raise ConfigError(exc.detail, file=file, field=field) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name} is not UTF-8 text", file=file, field=field) from None
    if not text.strip():
        raise ConfigError(f"the prompt file {name} is empty", file=file, field=field)
    return text


def _file_digests(root: str | Path, names: list[str]) -> dict[str, str]:
    """The digest of each file of ``names`` (relative to the project directory ``root``),
    by its path from there (``../`` beside it: the store may be read in a checkout at
    another place); one that cannot be read is left out (it was read a moment ago)."""
    base = os.path.realpath(root)
    out: dict[str, str] = {}
    for name in names:
        path = os.path.realpath(os.path.join(base, name))
        key = os.path.relpath(path, base)
        try:
            with open(path, "rb") as fh:
                out[key] = digest_bytes(fh.read())
        except OSError:
            continue
    return out


def _compile(env: Any, source: str, name: str, field: str) -> Template:
    from jinja2 import TemplateSyntaxError, nodes

    try:
        tree = env.parse(source)
    except TemplateSyntaxError as exc:
        raise ConfigError(
            f"the template does not parse: {exc.message}", file=name, line=exc.lineno,
            field=field, accepted="a Jinja2 template: {{ input.question }}, {% if ... %}",
        ) from None
    # Another file's text would be part of the prompt but not of the system's identity (a
    # cached answer would outlive an edit to it), so a template is self-contained.
    for node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        raise ConfigError(
            f"a prompt template cannot {type(node).__name__.lower()} another file: its text"
            " would not be part of the system's identity; write it into this file",
            file=name, line=node.lineno, field=field,
        )
    return env.from_string(tree)  # type: ignore[no-any-return]


_UNDEFINED = (
    re.compile(r"has no attribute '(?P<name>[^']*)'"),
    re.compile(r"'(?P<name>[^']*)' is undefined"),
    re.compile(r"no element (?P<name>.*)$"),
)


def render_error(exc: Exception, template: str) -> str:
    """One sentence for a template that could not be rendered for a case."""
    from jinja2 import UndefinedError
    from jinja2.exceptions import SecurityError

    if isinstance(exc, UndefinedError):
        text = str(exc.message or exc)
        for pattern in _UNDEFINED:
            match = pattern.search(text)
            if match:
                return (
                    f"{template}: the case has no field '{match.group('name')}' that the"
                    f" template uses ({text})"
                )
        return f"{template}: the template uses a value the case does not have ({text})"
    if isinstance(exc, SecurityError):
        return f"{template}: the sandbox refused the template: {str(exc).rstrip('.')}"
    return f"{template}: the template failed on this case: {type(exc).__name__}: {exc}"


def parse_json_output(text: str, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> Any:
    """The reply as JSON (``output: json``), one whole-reply code fence taken off; a
    :class:`PermanentFailure` for anything else (see the module's docstring)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced is not None:
        body = fenced.group("body").strip()
    if not body:
        raise PermanentFailure("output: json, and the reply is empty")
    try:
        value = json.loads(body)
        check_depth(value, max_depth=max_depth, text=body)
    except JsonLimitError as exc:
        raise PermanentFailure(f"output: json, and the reply is too deep: {exc}") from None
    except (ValueError, RecursionError) as exc:
        excerpt = " ".join(text.split())[:160]
        raise PermanentFailure(
            f"output: json, and the reply is not JSON ({exc}): {excerpt!r}"
        ) from None
    return value


#: The stop reasons of a model that ended its answer itself (OpenAI, Anthropic); a
#: provider that names none is taken at its word too.
_ENDED = (None, "stop", "end_turn", "stop_sequence")
#: The stop reasons of a reply cut at the request's token limit.
_CUT = ("length", "max_tokens")
#: The stop reasons of a reply the model did not end with its answer, whatever text it
#: holds: a refusal or a content filter midway, a tool call (the text before it is a
#: preamble), a server's error or abort (OpenRouter's ``error``, vLLM's ``abort``), a
#: paused turn. Any other stop (TGI's ``eos_token``...) ends an answer.
_NOT_ENDED = {
    "refusal": "the model refused midway",
    "content_filter": "the provider stopped the reply before the model ended it",
    "tool_calls": "the model asked to call a tool instead of answering",
    "function_call": "the model asked to call a tool instead of answering",
    "tool_use": "the model asked to call a tool instead of answering",
    "pause_turn": "the provider paused the turn before the model ended it",
    "error": "the provider stopped the reply with an error",
    "abort": "the server aborted the reply",
}


def unanswered(reply: JudgeReply, stop_field: str = "finish_reason") -> str | None:
    """Why a model's reply is no answer to evaluate, or None when it is one.

    A reply the model did not end with its answer is one too, whatever text it holds (a
    refusal or a content filter midway, a tool call after a line of preamble: ``_NOT_ENDED``):
    its partial text passed a no-PII check. A reply cut at the token limit after some text
    is kept: the limit is part of the system.

    A reply with no text is an error of its case (missing), not an empty output: a
    refusal, a reply cut at the token limit before any text (a reasoning model can spend
    the whole limit thinking), a content filter or a tool call. Evaluated as the output
    "", it would pass every check that looks for something absent (a ``regex`` with
    ``pass_if: no_match``) and be cached. An empty text the model ended itself
    (``finish_reason: stop``) is its answer, and kept. ``stop_field`` is the provider's
    name for the stop reason, for the message.
    """
    if reply.text.strip():
        if reply.stop in _NOT_ENDED:
            return (f"{_NOT_ENDED[reply.stop]} ({stop_field}: {reply.stop}); its text is no"
                    f" answer to evaluate: {_excerpt(reply.text)}")
        return None
    if reply.refusal is not None:
        return f"the model refused instead of answering: {reply.refusal!r}"
    if reply.stop == "refusal":
        return f"the model refused instead of answering ({stop_field}: refusal)"
    if reply.stop in _CUT:
        return (
            f"the reply has no text: the model stopped at the token limit"
            f" ({stop_field}: {reply.stop}) before writing any (a reasoning model can"
            " spend it all thinking); raise max_tokens or max_completion_tokens"
        )
    if reply.textless or reply.stop not in _ENDED:
        why = f" ({stop_field}: {reply.stop})" if reply.stop else ""
        return f"the reply has no text content{why}"
    return None


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat[:120] + ("…" if len(flat) > 120 else ""))


class ModelSystem:
    """``system.model``: one chat call per case, the prompt rendered from templates."""

    kind = "model"

    def __init__(
        self,
        *,
        name: str,
        config: Mapping[str, Any],
        root: str | Path,
        version: str | None = None,
        variant: str | None = None,
        concurrency: int = 8,
        file: str | None = None,
        field: str = "system.model",
        environ: Mapping[str, str] | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> None:
        if concurrency < 1:
            raise ConfigError("must be at least 1", field="concurrency.system")
        self.name = name
        self.variant = variant
        self.version = version
        self.config = dict(config)
        self.provider_name = str(self.config["provider"])
        self.model = str(self.config["model"])
        self.output_mode = str(self.config.get("output") or "text")
        self.timeout_s = float(self.config.get("timeout_s") or 60.0)
        self.concurrency = int(concurrency)
        self.max_response_bytes = int(max_response_bytes)
        self.max_json_depth = int(max_json_depth)
        self.prompt_file = str(self.config["prompt_file"])
        self.system_prompt_file = self.config.get("system_prompt_file")
        env = _environment()
        self._prompt_source = _read_template(root, self.prompt_file, f"{field}.prompt_file", file)
        self._prompt = _compile(env, self._prompt_source, self.prompt_file, f"{field}.prompt_file")
        self._system_source: str | None = None
        self._system: Template | None = None
        if self.system_prompt_file:
            self._system_source = _read_template(
                root, str(self.system_prompt_file), f"{field}.system_prompt_file", file
            )
            self._system = _compile(
                env, self._system_source, str(self.system_prompt_file),
                f"{field}.system_prompt_file",
            )
        self._api_key = resolve_api_key(
            self.provider_name, self.config.get("api_key_env"),
            os.environ if environ is None else environ, field=f"{field}.api_key_env",
            who="model",
        )
        self._what = f"system {name} ({self.provider_name} {self.model})"
        # Built now to check the key's shape, model and base_url; start() builds the one
        # that calls, on the run's client.
        self._provider: Provider = self._make_provider(None, file, field)
        self.identity = digest({
            "kind": "model",
            "name": name,
            "version": version,
            "provider": self.provider_name,
            "model": self.model,
            "base_url": self.config.get("base_url"),
            "prompt": self._prompt_source,
            "system_prompt": self._system_source,
            "output": self.output_mode,
            "temperature": self.config.get("temperature"),
            "max_tokens": self.config.get("max_tokens"),
            "max_completion_tokens": self.config.get("max_completion_tokens"),
            "extra_body": dict(self.config.get("extra_body") or {}),
            # A server other than the provider's own may write thinking into the text,
            # which earlier versions kept in the output: their cached outputs are not
            # this system's (module docstring).
            **({"thinking": "set aside"} if self.provider_name == "openai_compatible"
               or self.config.get("base_url") else {}),
        })
        #: The prompt files' digests, by path: what ``gate`` hashes again (runner/sources.py).
        self.code_files: dict[str, str] = _file_digests(
            root, [self.prompt_file, *([str(self.system_prompt_file)]
                                       if self.system_prompt_file else [])])
        url = getattr(self._provider, "url", None)
        #: What a call reaches, for messages (never a key).
        self.target = f"{self.provider_name} {self.model} at POST {shown_url(url)}" if url else (
            f"{self.provider_name} {self.model}")
        self._client: httpx.AsyncClient | None = None
        self._file = file
        self._field = field

    def _make_provider(
        self, client: httpx.AsyncClient | None, file: str | None, field: str
    ) -> Provider:
        cfg = self.config
        try:
            return make_provider(
                self.provider_name, self.model, self._api_key, cfg.get("base_url"),
                cfg.get("temperature"), cfg.get("max_tokens"), self.timeout_s,
                client,  # type: ignore[arg-type]
                self.max_response_bytes,
                max_completion_tokens=cfg.get("max_completion_tokens"),
                extra_body=dict(cfg.get("extra_body") or {}), what=self._what,
            )
        except ConfigError as exc:
            inner = exc.field or ""
            where = field + inner[len("evaluators"):] if inner.startswith("evaluators") else (
                inner or field)
            raise ConfigError(exc.detail, file=file, field=where, accepted=exc.accepted) from None

    def describe(self) -> dict[str, Any]:
        """What ``runs``, ``inspect`` and the reports show of this system (no key)."""
        shown: dict[str, Any] = {"kind": "model", "name": self.name}
        if self.version is not None:
            shown["version"] = self.version
        if self.variant is not None:
            shown["variant"] = self.variant
        return {
            **shown, "provider": self.provider_name, "model": self.model,
            # As messages show it: never the user info or a query string (either may hold
            # a secret); the identity keeps the whole URL, as a digest.
            "base_url": shown_url(self.config["base_url"]) if self.config.get("base_url")
            else None,
            "prompt_file": self.prompt_file,
            "system_prompt_file": self.system_prompt_file, "output": self.output_mode,
            "parameters": {
                k: self.config.get(k) for k in (
                    "temperature", "max_tokens", "max_completion_tokens", "extra_body")
                if self.config.get(k) not in (None, {})
            },
        }

    def __repr__(self) -> str:
        return (f"ModelSystem(name={self.name!r}, provider={self.provider_name!r}, "
                f"model={self.model!r}, prompt_file={self.prompt_file!r})")

    async def start(self) -> None:
        if self._client is not None:
            return
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        self._client = httpx.AsyncClient(limits=limits, headers={"user-agent": "oloproof"})
        self._provider = self._make_provider(self._client, self._file, self._field)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def render(self, case_input: Any) -> tuple[str, str]:
        """The (system prompt, user prompt) for one case; a PermanentFailure naming the
        field a template uses that the case does not have."""
        context: dict[str, Any] = {}
        if isinstance(case_input, dict):
            context.update({str(k): v for k, v in case_input.items()})
        context["input"] = case_input
        try:
            user = self._prompt.render(context)
        except Exception as exc:  # noqa: BLE001 - any template failure is this case's
            raise PermanentFailure(render_error(exc, self.prompt_file)) from None
        system = ""
        if self._system is not None:
            try:
                system = self._system.render(context)
            except Exception as exc:  # noqa: BLE001
                raise PermanentFailure(
                    render_error(exc, str(self.system_prompt_file))
                ) from None
        return system, user

    async def call(self, case_id: str, case_input: Any, attempt: int) -> CallResult:
        if self._client is None:
            await self.start()
        system, user = self.render(case_input)
        try:
            reply = await self._provider.complete(system, user)
        except UnsupportedParameter as failure:
            name = failure.parameter
            where = (f"{self._field}.{name}" if name in (
                "temperature", "max_tokens", "max_completion_tokens")
                else f"{self._field}.extra_body.{name}")
            raise PermanentFailure(
                self._masked(f"{where}: {failure.message} ({failure.provider_says})"),
                stops_run=True,
            ) from None
        stop_field = "stop_reason" if self.provider_name == "anthropic" else "finish_reason"
        # Thinking written into the text is set aside, as a judge's is (module docstring).
        answer, thought, unclosed = split_thinking(reply.text)
        if unclosed is not None:
            cut = (f"; the model stopped at the token limit ({stop_field}: {reply.stop})"
                   " while thinking: raise max_tokens or max_completion_tokens"
                   if reply.stop in _CUT else "")
            raise PermanentFailure(self._masked(
                f"{self._what}: the reply is thinking that never ended ({unclosed} without"
                f" its closing tag), and no answer follows it{cut}"))
        if thought:
            reply = replace(reply, text=answer.lstrip())
        no_answer = unanswered(reply, stop_field)
        if no_answer is not None:
            raise PermanentFailure(self._masked(f"{self._what}: {no_answer}"))
        # The reply is the model's words: masked as an output is (transport/http.py).
        text = mask_quoted(reply.text, (self._api_key,)) if self._api_key else reply.text
        if self.output_mode == "json":
            try:
                output = parse_json_output(text, self.max_json_depth)
            except PermanentFailure as failure:
                if reply.stop not in _CUT:
                    raise
                raise PermanentFailure(
                    f"{failure}; the reply was cut at the token limit ({stop_field}:"
                    f" {reply.stop}): raise max_tokens or max_completion_tokens"
                ) from None
        else:
            output = text
        return CallResult(output=output, usage=reply.usage)

    def _masked(self, text: str) -> str:
        return mask(text, (self._api_key,)) if self._api_key else text
