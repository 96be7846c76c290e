"""The rubric judge: an LLM asked whether an output passes a rubric.

The judge sees the rubric, the case input, the expected values where present,
and the output, and must answer one JSON object ``{"pass": ..., "reason":
...}``. An answer that cannot be parsed is a judge error: the case is missing
for this criterion, never guessed. Provider calls run in the judge pool
(``concurrency.judge``) under the shared retry policy; a verdict that cannot
be parsed is not retried (the same prompt at temperature 0 would most likely
give the same answer, and we would rather record it).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from oloproof.engine.retry import AttemptFailure, RetryPolicy, call_with_retries
from oloproof.evaluators.base import CaseView, Outcome
from oloproof.providers.base import JudgeReply, Provider, make_provider_from_config, resolve_api_key
from oloproof.providers.verdict import PROMPT_VERSION, build_judge_prompt, parse_verdict
from oloproof.systems.identity import digest


class RubricJudge:
    metric_kind = "BINARY"
    value_range: tuple[float, float] | None = None
    is_judge = True

    def __init__(self, config: Any, project: Any, *, field: str) -> None:
        self.config = config
        self.criterion: str = config.criterion
        self.field = field
        self.rubric: str = config.rubric
        # Read the key now, so a missing variable stops the run before its first case.
        resolve_api_key(config.provider, config.api_key_env, field=f"{field}.api_key_env")
        # The judge's identity: what decides its verdicts. Not the key, not timeouts.
        self.identity = digest(
            {
                "kind": "rubric_judge",
                "provider": config.provider,
                "model": config.model,
                "base_url": config.base_url,
                "rubric": self.rubric,
                "temperature": config.temperature,
                "max_tokens": config.max_tokens,
                "prompt_version": PROMPT_VERSION,
            }
        )
        self.retry = RetryPolicy()
        self.concurrency = 4
        self._client: httpx.AsyncClient | None = None
        self._provider: Provider | None = None

    def bind_limits(self, concurrency: int, retry: RetryPolicy) -> None:
        self.concurrency = concurrency
        self.retry = retry

    async def start(self) -> None:
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        self._client = httpx.AsyncClient(limits=limits, headers={"user-agent": "oloproof"})
        self._provider = make_provider_from_config(
            self.config, self._client, field_prefix=self.field
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def evaluate(self, case: CaseView, output: Any) -> Outcome:
        provider = self._provider
        assert provider is not None, "RubricJudge.start() was not awaited"
        system_prompt, user_prompt = build_judge_prompt(
            self.rubric, case.input, case.expected, output
        )
        latency = [0.0]

        async def attempt(_: int) -> JudgeReply:
            started = time.perf_counter()
            try:
                return await provider.complete(system_prompt, user_prompt)
            finally:
                latency[0] = (time.perf_counter() - started) * 1000.0

        try:
            done = await call_with_retries(attempt, self.retry)
        except AttemptFailure as failure:
            return Outcome(
                "ERROR", reason=f"judge call failed: {failure.message}",
                attempts=failure.attempts, latency_ms=latency[0],
            )
        reply = done.value
        try:
            verdict = parse_verdict(reply.text)
        except AttemptFailure as failure:
            return Outcome(
                "ERROR", reason=f"judge answer not understood: {failure.message}",
                usage=reply.usage, attempts=done.attempts, latency_ms=latency[0],
            )
        return Outcome(
            "OK", passed=verdict.passed, reason=verdict.reason, usage=reply.usage,
            attempts=done.attempts, latency_ms=latency[0],
        )
