"""What the engine needs of a system under test."""

from __future__ import annotations

from oloproof._records import dataclass
from oloproof.usage import Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol


@dataclass(slots=True)
class CallResult:
    output: Any
    usage: Usage | None = None
    # The output's canonical JSON (systems/identity.py), when the system made it
    # already; the engine makes it otherwise.
    output_json: str | None = None
    # The call's own time, when the system measured it from when the call really began
    # (its worker thread took it): the engine's own measure would count a wait in the
    # queue, or miss the part before it awaited a call started early.
    latency_ms: float | None = None


# Structural, for the type checker only (typing's Protocol stays off the run path).
if TYPE_CHECKING:

    class SystemRunner(Protocol):
        """One system under test, ready to be called once per case.

        ``call`` makes ONE attempt; it raises
        :class:`oloproof.engine.retry.RetryableFailure` or
        :class:`oloproof.engine.retry.PermanentFailure` on failure, and the engine
        applies the retry policy around it.
        """

        identity: str  # "sha256:..." digest: see systems/identity.py
        kind: str  # "callable" or "http"
        name: str
        #: What a call reaches, for messages: ``callable app:answer``, ``POST http://…``.
        target: str

        async def start(self) -> None: ...

        async def call(self, case_id: str, case_input: Any, attempt: int) -> CallResult: ...

        async def aclose(self) -> None: ...
