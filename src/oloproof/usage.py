"""What a call spent: tokens and money, as reported by the system or provider."""

from __future__ import annotations

from oloproof._records import dataclass

TYPE_CHECKING = False
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

        A report that is not one is not recorded (None): a count that is not a whole
        number from 0 to 2**53 (negative, a flag, 3.5, 400 digits long), or a cost that
        is negative or not finite. Kept, a count of -1000000 priced more cases at minus
        32 million tokens, and one of 400 digits made ``plan`` fail on it.
        """
        if not isinstance(data, dict):
            return None
        inp = data.get("input_tokens", data.get("prompt_tokens"))
        out = data.get("output_tokens", data.get("completion_tokens"))
        cost = data.get("cost_usd")
        if inp is None and out is None and cost is None:
            return None
        try:
            usage = cls(int(inp or 0), int(out or 0), float(cost or 0.0))
        except (TypeError, ValueError, OverflowError):
            return None
        plausible = (
            all(_count(v) for v in (inp, out))
            and not isinstance(cost, bool)
            and 0.0 <= usage.cost_usd <= MAX_COST_USD
        )
        return usage if plausible else None


#: The largest token count taken from a report: every count up to it is exact as a float,
#: so sums, means and prices of them are too.
MAX_TOKENS = 2**53
#: The largest cost of one call taken from a report.
MAX_COST_USD = 1e9


def _count(value: Any) -> bool:
    """Whether ``value`` is a token count a report may hold (None: not reported)."""
    if value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return value.is_integer() and 0 <= value <= MAX_TOKENS
    if isinstance(value, str):
        value = value.strip()
        return value.isdigit() and len(value) <= 16 and int(value) <= MAX_TOKENS
    import operator  # here: usage is read only once a call reported some

    try:
        count = operator.index(value)  # an int, or an integer of numpy's
    except TypeError:
        return False
    return 0 <= count <= MAX_TOKENS
