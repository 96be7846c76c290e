"""The rubric judge's prompt, and reading its verdict back.

The judge is asked for exactly one JSON object ``{"pass": true|false,
"reason": "..."}``. :func:`parse_verdict` tolerates code fences and prose
around it, and several objects that agree; it refuses (with
:class:`VerdictError`) a reply with no object, with ``pass`` missing or not a
boolean, or with objects that disagree. A verdict is never guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from oloproof._json import JsonLimitError, reject_duplicate_keys
from oloproof.transport.retry import PermanentFailure

__all__ = [
    "OUTPUT_CLOSE",
    "OUTPUT_OPEN",
    "PROMPT_VERSION",
    "Verdict",
    "VerdictError",
    "build_judge_prompt",
    "parse_verdict",
]

# Part of a judgment's cache key: bump it whenever the prompt's wording or
# layout changes, so judgments made under the old prompt are not reused.
PROMPT_VERSION = "judge-prompt-1"

# The tags around each part of the user prompt. The output comes last, so a
# reader (or the fake provider) finds it between the last OUTPUT_OPEN and the
# final OUTPUT_CLOSE.
OUTPUT_OPEN = "<output>"
OUTPUT_CLOSE = "</output>"

SYSTEM_PROMPT = """\
You are a strict evaluator. You judge one output of an AI system against a rubric.

Read the rubric, the input the system was given, the expected values when they \
are provided, and the system's output. Decide whether the output satisfies the \
rubric.

Answer with exactly one JSON object and nothing else:
{"pass": true, "reason": "<one short sentence>"}
or
{"pass": false, "reason": "<one short sentence>"}

"pass" must be the JSON boolean true or false (not a string). Do not answer \
with more than one object."""


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str


class VerdictError(PermanentFailure):
    """The judge's reply holds no usable verdict; the case is missing for the criterion."""


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def build_judge_prompt(
    rubric: str, case_input: Any, expected: dict[str, Any] | None, output: Any
) -> tuple[str, str]:
    """``(system prompt, user prompt)`` for one case.

    Strings are shown as they are, other values as indented JSON. The expected
    section is left out when the case has no expected values.
    """
    parts = [
        f"<rubric>\n{rubric.strip()}\n</rubric>",
        f"<input>\n{_as_text(case_input)}\n</input>",
    ]
    if expected:
        parts.append(f"<expected>\n{_as_text(expected)}\n</expected>")
    parts.append(f"{OUTPUT_OPEN}\n{_as_text(output)}\n{OUTPUT_CLOSE}")
    parts.append('Answer with one JSON object: {"pass": true|false, "reason": "..."}.')
    return SYSTEM_PROMPT, "\n\n".join(parts)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in ``text``, scanning at each ``{``.

    An object found is skipped over whole, so objects nested inside it are not
    counted again.
    """
    # A key twice in one object ({"pass": true, "pass": false}) is refused, not
    # read as its last value: which one the judge meant cannot be known.
    decoder = json.JSONDecoder(object_pairs_hook=reject_duplicate_keys)
    found: list[dict[str, Any]] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except JsonLimitError as exc:
            raise VerdictError(f"judge reply is ambiguous: {exc}: {_quote(text)}") from None
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        position = text.find("{", end)
    return found


def _quote(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return repr(flat[:limit] + ("…" if len(flat) > limit else ""))


def parse_verdict(text: str) -> Verdict:
    """Read ``{"pass": bool, "reason": str}`` from a judge's reply.

    Raises :class:`VerdictError` when there is no JSON object, when ``pass`` is
    missing or not a boolean, or when two objects disagree on ``pass``.
    """
    objects = _json_objects(text)
    if not objects:
        raise VerdictError(f"judge reply holds no JSON object: {_quote(text)}")
    verdicts = [obj for obj in objects if "pass" in obj]
    if not verdicts:
        raise VerdictError(f'judge reply has no "pass" field: {_quote(text)}')
    for obj in verdicts:
        if not isinstance(obj["pass"], bool):
            raise VerdictError(
                f'judge reply has "pass": {json.dumps(obj["pass"])}, not true or false'
            )
    if len({obj["pass"] for obj in verdicts}) > 1:
        raise VerdictError(
            f"judge reply holds {len(verdicts)} objects that disagree on pass: {_quote(text)}"
        )
    first = verdicts[0]
    reason = first.get("reason", "")
    return Verdict(
        passed=first["pass"], reason=reason if isinstance(reason, str) else _as_text(reason)
    )
