"""The case being run, as seen from inside a system under test."""

from __future__ import annotations

import contextvars

from oloproof._records import dataclass, field
from oloproof.usage import Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass
class CaseContext:
    """The case a system is answering; ``record_usage`` reports what it spent."""

    case_id: str
    input: Any
    attempt: int = 1
    usage: Usage | None = field(default=None)

    def record_usage(
        self, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0
    ) -> None:
        """Add tokens and cost to this case's usage (may be called several times).

        Counts are whole numbers from 0 to 2**53 and the cost a finite amount from 0 up;
        anything else raises ``ValueError`` naming the argument (the case's error).
        """
        usage = Usage.from_report(
            {"input_tokens": input_tokens, "output_tokens": output_tokens, "cost_usd": cost_usd})
        if usage is None:
            raise ValueError(
                "record_usage: token counts must be whole numbers from 0 to 2**53 and the cost"
                f" a finite amount from 0 (got input_tokens={input_tokens!r},"
                f" output_tokens={output_tokens!r}, cost_usd={cost_usd!r})"
            )
        if self.usage is None:
            self.usage = Usage()
        self.usage.add(usage)


_current: contextvars.ContextVar[CaseContext | None] = contextvars.ContextVar(
    "oloproof_current_case", default=None
)


def current_case() -> CaseContext:
    """The case being run. Only valid inside a system called by Oloproof."""
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("current_case() is only available inside a system run by Oloproof")
    return ctx


def set_current_case(ctx: CaseContext | None) -> contextvars.Token[CaseContext | None]:
    return _current.set(ctx)


def reset_current_case(token: contextvars.Token[CaseContext | None]) -> None:
    try:
        _current.reset(token)
    except ValueError:
        # The coroutine is being closed from another context (its loop gone, the
        # interpreter ending): there is no case to put back there.
        pass
