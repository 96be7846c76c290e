"""What a call spent: tokens and money, as reported by the system or provider."""

from __future__ import annotations

from math import inf
from typing import TYPE_CHECKING

from oloproof._records import dataclass

if TYPE_CHECKING:
    from typing import Any


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage | None) -> None:
        if other is None:
            return
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Usage | None:
        if not data:
            return None
        return cls(
            int(data.get("input_tokens", 0) or 0),
            int(data.get("output_tokens", 0) or 0),
            float(data.get("cost_usd", 0.0) or 0.0),
        )

    @classmethod
    def from_report(cls, data: Any) -> Usage | None:
        """Read OpenAI-style (prompt/completion) or Anthropic-style (input/output) usage.

        None when there is none, or when it cannot be read as what was spent: a figure
        that is a boolean, negative, NaN or infinite (a server's ``"cost_usd": "nan"``
        summed into every total and priced the plan at ``$nan``)."""
        if not isinstance(data, dict):
            return None
        inp = data.get("input_tokens", data.get("prompt_tokens"))
        out = data.get("output_tokens", data.get("completion_tokens"))
        cost = data.get("cost_usd")
        if inp is None and out is None and cost is None:
            return None
        if any(isinstance(v, bool) for v in (inp, out, cost)):
            return None
        try:
            usage = cls(int(inp or 0), int(out or 0), float(cost or 0.0))
        except (TypeError, ValueError, OverflowError):
            return None
        if min(usage.input_tokens, usage.output_tokens) < 0 or not 0.0 <= usage.cost_usd < inf:
            return None
        return usage
