"""The rubric judge: an LLM asked whether an output passes a rubric, or how well
it meets it on a scale.

The judge sees the rubric, the case input, the expected values where present,
and the output, and must answer one JSON object ``{"pass": ..., "reason":
...}``; a scored judge (``scale: [low, high]``) answers ``{"score": ...,
"reason": ...}`` with a whole number on its scale, and its criterion is a MEAN
metric whose range is the scale. An answer that cannot be parsed (for a score:
not a whole number, or outside the scale) is a judge error: the case is missing
for this criterion, never guessed, rounded or clipped. Provider calls run in the judge pool
(``concurrency.judge``) under the shared retry policy; a verdict that cannot
be parsed is not retried (the same prompt at temperature 0 would most likely
give the same answer, and we would rather record it).

Everything that can be wrong in the configuration (a missing API key
variable, a key that cannot be sent, no model, no ``base_url`` for
``openai_compatible``) is found when the judge is built, before the run is
stored or anything is called.

The API key is read from ``api_key_env`` and kept by the provider. It is never
part of the judge's identity, and every text this module hands back (a
verdict's reason, an error) has it masked, even if a provider echoed it.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from typing import TYPE_CHECKING, Any, cast

import httpx

from oloproof._json import DEFAULT_MAX_JSON_DEPTH, digest
from oloproof.enums import JudgmentStatus, MetricKind
from oloproof.errors import ConfigError
from oloproof.evaluators.base import CaseView, Outcome
from oloproof.evidence import PANEL_AGREED, PANEL_SPLIT
from oloproof.providers.base import (
    JudgeReply,
    Provider,
    UnsupportedParameter,
    resolve_api_key,
)
from oloproof.providers.factory import make_provider
from oloproof.providers.verdict import (
    PROMPT_VERSION,
    SCORE_PROMPT_VERSION,
    build_judge_prompt,
    parse_score,
    parse_verdict,
)
from oloproof.transport.http import DEFAULT_MAX_RESPONSE_BYTES, mask, mask_quoted, shown_url
from oloproof.transport.limiter import AdaptiveLimiter
from oloproof.transport.retry import (
    AttemptFailure,
    RetryableFailure,
    RetryPolicy,
    call_with_retries,
)
from oloproof.usage import Usage

if TYPE_CHECKING:
    from oloproof.project.config import RubricJudgeEvaluator


#: Salts the verdict cache of judges whose replies may hold thinking (RubricJudge).
_THINKING_SALT = "verdict-after-thinking"


class RubricJudge:
    """One ``rubric_judge`` evaluator: asks an LLM whether each output passes a rubric.

    What it guarantees: a configuration that cannot work (no key, bad model,
    no ``base_url``) is refused when the judge is built, before the run is
    stored; each verdict is read strictly (no guessing, no duplicate keys) or
    the case is an ERROR (missing) for this criterion; the API key is in no
    reason, error or identity; a failure that every later call would repeat
    (HTTP 401, 403, 404) is kept in :attr:`fatal`, which the engine reads to
    stop the run early. Replies are read within ``max_response_bytes`` and
    ``max_json_depth`` (``limits:``).
    """

    metric_kind: str = MetricKind.BINARY
    value_range: tuple[float, float] | None = None
    is_judge = True

    def __init__(
        self,
        config: RubricJudgeEvaluator,
        project: Any,
        *,
        field: str,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> None:
        self.config = config
        self.max_response_bytes = max_response_bytes
        self.max_json_depth = max_json_depth
        # The first failure that stops the run (a 401, 403 or 404), if any.
        self.fatal: str | None = None
        self.criterion: str = config.criterion
        self.field = field
        self.rubric: str = config.rubric
        # A scored judge: its scale, and its metric a MEAN over that range.
        self.scale: tuple[int, int] | None = (
            None if config.scale is None else (int(config.scale[0]), int(config.scale[1]))
        )
        if self.scale is not None:
            self.metric_kind = MetricKind.MEAN
            self.value_range = (float(self.scale[0]), float(self.scale[1]))
        path = getattr(project, "config_path", None)
        file = getattr(path, "name", None)
        # The file a refused parameter is to be changed in: the one the run read
        # (--config baseline.yaml), not always oloproof.yaml.
        self._file: str = os.path.basename(path) if isinstance(path, str) else "oloproof.yaml"
        self.retry = RetryPolicy()
        self.concurrency = 4
        # concurrency.adaptive for judges: one limiter for every judge of the run, a
        # slot per provider call (bind_limits()).
        self.limiter: AdaptiveLimiter | None = None
        # Without it, the run's concurrency.judge slots, shared by every judge of the run
        # and taken per provider call (bind_limits()): the engine's judge workers bound
        # the judgments in flight, but a panel makes one call per judge of it at once.
        self.slots: asyncio.Semaphore | None = None
        # One pooled client per judge, sized to concurrency.judge in bind_limits().
        # The engine's judge workers already bound the calls in flight to
        # concurrency.judge across all judges, so the pools never queue.
        self._client: httpx.AsyncClient | None = None
        try:
            # Read the key now, so a missing variable stops the run before its first case.
            self._api_key = resolve_api_key(
                config.provider, config.api_key_env, field=f"{field}.api_key_env"
            )
            # Built here only to check model, base_url and the key's shape (it is
            # given no client); start() builds the one that calls, on the run's client.
            self._provider: Provider = self._make_provider(cast("httpx.AsyncClient", None))
        except ConfigError as exc:
            if exc.file is not None:
                raise
            # Qualified even when the project names no file here: a panel's judges each
            # have their own key, and "evaluators.api_key_env" said not which one.
            raise ConfigError(
                exc.detail, file=file, field=_qualify(exc.field, field), line=exc.line,
                accepted=exc.accepted,
            ) from None
        # The judge's identity: what decides its verdicts. Not the key, not timeouts.
        # A scored judge's holds its scale and its own prompt's version; a pass/fail
        # judge's is what it always was, so its cached verdicts stay valid.
        identity: dict[str, Any] = {
            "kind": "rubric_judge",
            "provider": config.provider,
            "model": config.model,
            "base_url": config.base_url,
            "rubric": self.rubric,
            "temperature": config.request_temperature,
            "max_tokens": config.request_max_tokens,
            "max_completion_tokens": config.max_completion_tokens,
            "extra_body": dict(config.extra_body),
            "prompt_version": PROMPT_VERSION,
        }
        if self.scale is not None:
            identity["scale"] = list(self.scale)
            identity["prompt_version"] = SCORE_PROMPT_VERSION
        self.identity = digest(identity)
        #: What its verdicts are cached under (engine/pipeline.py ``_key_identity``). An
        #: openai_compatible server may write a reasoning model's thinking into the reply's
        #: text, and earlier versions read a draft verdict there as the verdict: those
        #: judges' cached verdicts are judged again, once; the identity that compare and
        #: merge match runs on stays as it was.
        self.cache_identity = digest(
            {"identity": self.identity, "salt": _THINKING_SALT}
        ) if config.provider == "openai_compatible" else self.identity

    def __repr__(self) -> str:
        return (
            f"RubricJudge(criterion={self.criterion!r}, provider={self.config.provider!r}, "
            f"model={self.config.model!r})"
        )

    @property
    def target(self) -> str:
        """What a call reaches, for messages: provider, model, and the URL posted to."""
        url = getattr(self._provider, "url", None)
        where = f" at POST {shown_url(url)}" if url else ""
        return f"{self.config.provider} {self.config.model}{where}"

    def _make_provider(self, client: httpx.AsyncClient) -> Provider:
        config = self.config
        return make_provider(
            str(config.provider),
            str(config.model),
            self._api_key,
            config.base_url,
            config.request_temperature,
            config.request_max_tokens,
            float(config.timeout_s),
            client,
            self.max_response_bytes,
            max_completion_tokens=config.max_completion_tokens,
            extra_body=dict(config.extra_body),
        )

    def bind_limits(
        self, concurrency: int, retry: RetryPolicy, limiter: AdaptiveLimiter | None = None,
        slots: asyncio.Semaphore | None = None,
    ) -> None:
        self.concurrency = concurrency
        self.retry = retry
        self.limiter = limiter
        self.slots = slots

    async def start(self) -> None:
        if self._client is not None:
            return
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        self._client = httpx.AsyncClient(limits=limits, headers={"user-agent": "oloproof"})
        self._provider = self._make_provider(self._client)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _masked(self, text: str, *, error: bool = True) -> str:
        # An error message (a provider's, or one quoting the reply) has the key masked
        # whatever its length. A reason is the judge's words: the key is masked by the
        # rules for them (transport/http.py mask_quoted): 8 characters or more wherever
        # it appears, 4 to 7 where it stands alone; a shorter one (a dummy for a local
        # server) would garble ordinary words of the reason.
        key = self._api_key
        if not key:
            return text
        return mask(text, (key,)) if error else mask_quoted(text, (key,))

    def _refused(self, failure: UnsupportedParameter) -> str:
        """One line: the parameter the provider refused and the config field that sent it."""
        name = failure.parameter
        if name in ("temperature", "max_tokens", "max_completion_tokens"):
            where = f"{self.field}.{name}"
            if name == "max_tokens" and self.config.provider != "anthropic":
                fix = "remove it, or write max_completion_tokens instead"
            elif name == "max_tokens":
                fix = "change it"
            else:
                fix = f"remove it, or write {name}: null to leave it out of the request"
        else:
            where = f"{self.field}.extra_body.{name}"
            fix = "remove it from extra_body"
        return f"{self._file}: {where}: {failure.message}: {fix} ({failure.provider_says})"

    async def evaluate(self, case: CaseView, output: Any) -> Outcome:
        assert self._client is not None, "RubricJudge.start() was not awaited"
        provider = self._provider
        system_prompt, user_prompt = build_judge_prompt(
            self.rubric, case.input, case.expected, output, scale=self.scale
        )
        latency = [0.0]
        limiter = self.limiter
        slots = self.slots

        async def call() -> JudgeReply:
            started = time.perf_counter()
            try:
                return await provider.complete(system_prompt, user_prompt)
            finally:
                latency[0] = (time.perf_counter() - started) * 1000.0

        async def attempt(n: int) -> JudgeReply:
            # A slot per attempt, so a retry's wait holds none, nor does the wait count
            # in the call's latency or against its timeout.
            if limiter is not None:
                return await limiter.run(call, retry=n > 1)
            if slots is None:
                return await call()
            async with slots:
                return await call()

        try:
            done = await call_with_retries(attempt, self.retry)
        except AttemptFailure as failure:
            reason = self._masked(f"judge call failed: {failure.message}")
            if isinstance(failure, UnsupportedParameter):
                reason = self._masked(self._refused(failure))
            if failure.stops_run and self.fatal is None:
                self.fatal = reason
            return Outcome(
                JudgmentStatus.ERROR, reason=reason,
                attempts=failure.attempts, latency_ms=latency[0],
                outage=isinstance(failure, RetryableFailure) or failure.kind == "TIMEOUT",
            )
        reply = done.value
        if reply.cut is not None:
            # A reply the provider stopped before the model ended it may hold a first
            # verdict and lose the one that overrode it: never read a verdict from it.
            limit = "max_tokens" in reply.cut or "length" in reply.cut
            hint = (": raise the output limit (max_tokens, or max_completion_tokens)"
                    if limit else "")
            return Outcome(
                JudgmentStatus.ERROR,
                reason=self._masked(
                    "judge answer not understood: the provider cut the reply short"
                    f" ({reply.cut}), and a verdict is never read from a cut reply{hint}"
                ),
                usage=reply.usage, attempts=done.attempts, latency_ms=latency[0],
            )
        try:
            if self.scale is not None:
                scored = parse_score(reply.text, self.scale)
                return Outcome(
                    JudgmentStatus.OK, score=float(scored.score),
                    reason=self._masked(scored.reason), usage=reply.usage,
                    attempts=done.attempts, latency_ms=latency[0],
                )
            verdict = parse_verdict(reply.text)
        except AttemptFailure as failure:
            return Outcome(
                JudgmentStatus.ERROR, reason=self._masked(f"judge answer not understood: {failure.message}"),
                usage=reply.usage, attempts=done.attempts, latency_ms=latency[0],
            )
        return Outcome(
            JudgmentStatus.OK, passed=verdict.passed, reason=self._masked(verdict.reason, error=False), usage=reply.usage,
            attempts=done.attempts, latency_ms=latency[0],
        )


def _qualify(inner: str | None, field: str) -> str:
    """``evaluators[2].model`` from the providers' generic ``evaluators.model``."""
    if inner is None:
        return field
    if inner.startswith(field):
        return inner
    if inner.startswith("evaluators."):
        return f"{field}.{inner[len('evaluators.'):]}"
    return inner





class PanelJudge:
    """Several judges on one criterion (``panel:`` on a ``rubric_judge``), combined.

    The judges are called together for each case. ``majority``: the case passes when more
    than half of the judges pass it (a tie fails); ``unanimous``: when every judge passes
    it. A scored panel (``scale:``) combines its judges' scores by their ``median`` (the
    default; the mean of the middle two for an even number) or their ``mean``. A judge
    that fails to answer is never guessed: the panel's verdict (or score) stands only if
    it would be the same whatever that judge said (anything on the scale, for a score),
    and is otherwise an ERROR (missing). The reason names every judge's verdict and
    starts with ``split panel`` when they disagreed (a flakiness signal, counted after the
    run) or ``panel agrees``.
    """

    metric_kind: str = MetricKind.BINARY
    value_range: tuple[float, float] | None = None
    is_judge = True

    def __init__(
        self,
        config: RubricJudgeEvaluator,
        project: Any,
        *,
        field: str,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> None:
        self.config = config
        self.criterion: str = config.criterion
        self.rule = config.panel_rule
        self.judges = [
            RubricJudge(member, project, field=f"{field}.panel[{index}]",
                        max_response_bytes=max_response_bytes, max_json_depth=max_json_depth)
            for index, member in enumerate(config.members())
        ]
        names = [f"{j.config.provider}:{j.config.model}" for j in self.judges]
        self.names = [
            name if names.count(name) == 1 else f"{name}#{i + 1}" for i, name in enumerate(names)
        ]
        self.identity = digest({
            "kind": "rubric_judge_panel", "rule": self.rule,
            "judges": [j.identity for j in self.judges],
        })
        self.cache_identity = self.identity if all(
            j.cache_identity == j.identity for j in self.judges
        ) else digest({"identity": self.identity, "salt": _THINKING_SALT})
        self.scale = self.judges[0].scale if self.judges else None
        if self.scale is not None:
            self.metric_kind = MetricKind.MEAN
            self.value_range = (float(self.scale[0]), float(self.scale[1]))

    def __repr__(self) -> str:
        return f"PanelJudge(criterion={self.criterion!r}, rule={self.rule!r}, judges={self.names})"

    @property
    def fatal(self) -> str | None:
        return next((j.fatal for j in self.judges if j.fatal), None)

    @property
    def target(self) -> str:
        """What the panel's calls reach: each judge's :attr:`RubricJudge.target`."""
        return "; ".join(j.target for j in self.judges)

    def bind_limits(
        self, concurrency: int, retry: RetryPolicy, limiter: AdaptiveLimiter | None = None,
        slots: asyncio.Semaphore | None = None,
    ) -> None:
        for judge in self.judges:
            judge.bind_limits(concurrency, retry, limiter, slots)

    async def start(self) -> None:
        for judge in self.judges:
            await judge.start()

    async def aclose(self) -> None:
        for judge in self.judges:
            await judge.aclose()

    def combine(self, verdicts: list[bool | None]) -> bool | None:
        """The panel's verdict, or None when a missing judge could change it."""
        n = len(verdicts)
        passes = sum(v is True for v in verdicts)
        fails = sum(v is False for v in verdicts)
        missing = n - passes - fails
        if self.rule == "unanimous":
            if fails:
                return False
            return True if not missing else None
        needed = n // 2 + 1
        if passes >= needed:
            return True
        if passes + missing < needed:
            return False
        return None

    def combine_scores(self, scores: list[float | None]) -> float | None:
        """The panel's score (``median`` or ``mean``), or None when a missing judge could
        change it: both are monotone in every judge's score, so the score stands only if
        it is the same with every missing score at the scale's low and at its high."""
        assert self.scale is not None
        import statistics

        def combined(fill: float) -> float:
            values = [fill if s is None else s for s in scores]
            if self.rule == "mean":
                return math.fsum(values) / len(values)
            return float(statistics.median(values))

        low, high = combined(float(self.scale[0])), combined(float(self.scale[1]))
        return low if low == high else None

    def _scores_outcome(self, outcomes: list[Outcome]) -> Outcome:
        scores = [o.score if o.status == JudgmentStatus.OK else None for o in outcomes]
        score = self.combine_scores(scores)
        seen = {s for s in scores if s is not None}
        parts = []
        for name, o, v in zip(self.names, outcomes, scores, strict=True):
            said = "ERROR" if v is None else f"{v:g}"
            parts.append(f"{name} {said}" + (f": {o.reason}" if o.reason else ""))
        head = PANEL_SPLIT if len(seen) > 1 else PANEL_AGREED
        result = "unknown" if score is None else f"{score:g}"
        reason = f"{head}, {self.rule} {result} over {len(scores)} judges: " + "; ".join(parts)
        return self._outcome(outcomes, score is not None, reason, score=score,
                             missing_note="a judge's missing score could change the panel's")

    def _outcome(self, outcomes: list[Outcome], stands: bool, reason: str, *,
                 passed: bool | None = None, score: float | None = None,
                 missing_note: str) -> Outcome:
        usage = Usage()
        for o in outcomes:
            usage.add(o.usage)
        latencies = [o.latency_ms for o in outcomes if o.latency_ms is not None]
        return Outcome(
            JudgmentStatus.OK if stands else JudgmentStatus.ERROR,
            passed=passed if stands else None,
            score=score if stands else None,
            reason=reason if stands else f"{reason} ({missing_note})",
            usage=usage if any(o.usage for o in outcomes) else None,
            attempts=max(o.attempts for o in outcomes),
            latency_ms=max(latencies) if latencies else None,
            outage=not stands and any(o.outage for o in outcomes),
        )

    async def evaluate(self, case: CaseView, output: Any) -> Outcome:
        outcomes = await asyncio.gather(*(j.evaluate(case, output) for j in self.judges))
        if self.scale is not None:
            return self._scores_outcome(list(outcomes))
        verdicts = [o.passed if o.status == JudgmentStatus.OK else None for o in outcomes]
        verdict = self.combine(verdicts)
        seen = {v for v in verdicts if v is not None}
        parts = []
        for name, o, v in zip(self.names, outcomes, verdicts, strict=True):
            said = "ERROR" if v is None else ("PASS" if v else "FAIL")
            parts.append(f"{name} {said}" + (f": {o.reason}" if o.reason else ""))
        passes = sum(v is True for v in verdicts)
        head = PANEL_SPLIT if len(seen) > 1 else PANEL_AGREED
        reason = (f"{head}, {passes} of {len(verdicts)} pass ({self.rule}): "
                  + "; ".join(parts))
        return self._outcome(list(outcomes), verdict is not None, reason, passed=verdict,
                             missing_note="a judge's missing verdict could change the panel's")
