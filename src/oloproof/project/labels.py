"""Human labels: a person's pass or fail (or score) on a judge's criterion, one per line.

``human_labels: data/labels.jsonl`` in oloproof.yaml names the file. A line is one JSON
object with these keys, and no others:

- ``id``: the case id (a non-empty string);
- ``criterion``: a ``rubric_judge`` criterion of the project;
- ``pass``: ``true`` or ``false``, for a pass/fail judge's criterion; or
- ``score``: for a scored judge's criterion (``scale: [low, high]``), a whole number from
  low to high (``4``; ``4.0`` is read as 4; ``3.5``, ``"4"`` or ``7`` on [1, 5] are
  refused, never rounded or clipped). A line carries the one its criterion takes;
- ``labeler`` and ``note``: optional strings;
- ``sample``: optional; how the case was chosen for labelling. ``oloproof label`` writes
  ``uniform seed=S n=N pool=P run=RUN`` (a uniform random draw from the run's unlabelled
  cases), which is what the corrected estimate assumes; labels without it (written by
  hand, or chosen by a person) leave that assumption unchecked;
- ``seen``: optional; ``sha256:`` + 64 hex digits, the digest of what the person was
  shown (:func:`seen_digest` of the case's input, expected value and output).
  ``oloproof label`` writes it. A label whose ``seen`` differs from the digest of a run's
  case is about another output (the system, or the case, changed since) and is not used
  for that run: a person's verdict on one output says nothing of the judge's verdict on
  another. A label without it applies to whatever the case's output is.

Blank lines are skipped. One label per case and criterion: a second one is an error
naming both lines (two people disagreeing is worth knowing, but which one the judge
is measured against must be chosen by a person), unless both carry ``seen`` and the two
differ (labels of two outputs of the case). Labels on ids the suite does not hold
are kept, and counted apart when a run is measured.

**Labels digest.** ``sha256:`` + the hex SHA-256 of the canonical JSON of the list of
labels in file order; it is stored with each run beside the labels themselves.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING

from oloproof._json import MAX_JSON_DEPTH, JsonLimitError, digest, loads_strict, unseen_at
from oloproof._records import dataclass
from oloproof.errors import ConfigError
from oloproof.project._files import read_bytes
from oloproof.project._words import closest

if TYPE_CHECKING:
    from typing import Any

__all__ = ["LABEL_KEYS", "MAX_LABELS_BYTES", "Label", "Labels", "RunLabels", "labels_from_json",
           "load_labels", "scales_of_run", "seen_digest"]

LABEL_KEYS = ("id", "criterion", "pass", "score", "labeler", "note", "sample", "seen")
UNIFORM = "uniform "
_SEEN = re.compile(r"sha256:[0-9a-f]{64}")
MAX_LABELS_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Label:
    """One person's label: ``passed`` for a pass/fail judge's criterion, ``score`` (and
    ``passed`` None) for a scored judge's."""

    id: str
    criterion: str
    passed: bool | None
    labeler: str | None = None
    note: str | None = None
    sample: str | None = None
    score: int | None = None
    seen: str | None = None  # the digest of the input, expected value and output shown

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "criterion": self.criterion}
        if self.score is not None:
            data["score"] = self.score
        else:
            data["pass"] = self.passed
        if self.labeler is not None:
            data["labeler"] = self.labeler
        if self.note is not None:
            data["note"] = self.note
        if self.sample is not None:
            data["sample"] = self.sample
        if self.seen is not None:
            data["seen"] = self.seen
        return data


def seen_digest(case_input: Any, expected: Any, output: Any) -> str:
    """The digest of what a person labelling a case is shown: its input, expected value
    and output (``sha256:`` of their canonical JSON)."""
    return digest({"input": case_input, "expected": expected, "output": output})


@dataclass(frozen=True)
class RunLabels:
    """The labels of one criterion that apply to a run's cases.

    ``applied``: case id -> its label, for the run's cases whose label is about the output
    the run holds (or says nothing of it); ``elsewhere``: case ids labelled that the run
    does not hold; ``stale``: the run's cases whose every label is about another output;
    ``drawn_uniformly``: every applied label records a uniform draw.
    """

    applied: dict[str, Label]
    elsewhere: int
    stale: int
    drawn_uniformly: bool


@dataclass(frozen=True)
class Labels:
    """The labels of a file, its digest, and the path it was read from (as shown)."""

    labels: tuple[Label, ...]
    digest: str
    path: str

    def for_criterion(self, criterion: str) -> dict[str, bool]:
        """Case id -> the person's pass, for a pass/fail judge's criterion."""
        return {lab.id: lab.passed for lab in self.labels
                if lab.criterion == criterion and lab.passed is not None}

    def scores_for(self, criterion: str) -> dict[str, float]:
        """Case id -> the person's score, for a scored judge's criterion."""
        return {lab.id: float(lab.score) for lab in self.labels
                if lab.criterion == criterion and lab.score is not None}

    def labelled(self, criterion: str) -> set[str]:
        """The case ids with a label (of either kind) for ``criterion``."""
        return {lab.id for lab in self.labels if lab.criterion == criterion}

    def seen_ids(self, criterion: str) -> set[str]:
        """The case ids with a label of ``criterion`` that records what was seen."""
        return {lab.id for lab in self.labels if lab.criterion == criterion and lab.seen}

    def for_run(self, criterion: str, run_ids: Collection[str],
                seen_of: Mapping[str, str]) -> RunLabels:
        """The labels of ``criterion`` that apply to a run holding ``run_ids``, whose cases'
        :func:`seen_digest` are ``seen_of`` (needed for the ids of :meth:`seen_ids`)."""
        applied: dict[str, Label] = {}
        elsewhere: set[str] = set()
        other: set[str] = set()
        for lab in self.labels:
            if lab.criterion != criterion:
                continue
            if lab.id not in run_ids:
                elsewhere.add(lab.id)
            elif lab.seen is None or lab.seen == seen_of.get(lab.id):
                applied[lab.id] = lab
            else:
                other.add(lab.id)
        chosen = list(applied.values())
        return RunLabels(
            applied, len(elsewhere), len(other - set(applied)),
            bool(chosen) and all((lab.sample or "").startswith(UNIFORM) for lab in chosen),
        )


def _digest(labels: list[Label]) -> str:
    return digest([lab.to_json() for lab in labels])


def labels_from_json(items: list[dict[str, Any]], path: str) -> Labels:
    """Labels as stored with a run (already checked when they were read)."""
    labels = [
        Label(str(i["id"]), str(i["criterion"]),
              None if "score" in i else bool(i["pass"]), i.get("labeler"),
              i.get("note"), i.get("sample"),
              int(i["score"]) if "score" in i else None, i.get("seen"))
        for i in items
    ]
    return Labels(tuple(labels), _digest(labels), path)


def _lone_surrogate(item: Any) -> str | None:
    """The first key of a labels line whose key or value holds a lone surrogate, if any."""
    if not isinstance(item, dict):
        return None
    for key, value in item.items():
        try:
            json.dumps([key, value], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return str(key).encode("utf-8", "replace").decode("utf-8")
    return None


Scales = Mapping[str, "tuple[int, int] | None"]


def scales_of_run(metrics: list[dict[str, Any]]) -> dict[str, tuple[int, int] | None]:
    """Judge criterion -> its scale (None: pass/fail), from a stored run's metrics."""
    out: dict[str, tuple[int, int] | None] = {}
    for m in metrics:
        if not m.get("judge"):
            continue
        rng = m.get("range")
        if m.get("kind") == "MEAN" and isinstance(rng, list) and len(rng) == 2:
            out[str(m["criterion"])] = (int(rng[0]), int(rng[1]))
        else:
            out[str(m["criterion"])] = None
    return out


def _score_of(value: Any, scale: tuple[int, int]) -> str | int:
    """The whole number a label's ``score`` holds on ``scale``, or why it is refused."""
    low, high = scale
    shown = json.dumps(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        return f"expected a whole number from {low} to {high}, got {shown}"
    if value != int(value):
        return (f"{shown} is not a whole number: the scale [{low}, {high}] has whole points"
                " only (not rounded)")
    if not low <= value <= high:
        return f"{shown} is outside the scale [{low}, {high}] (not clipped)"
    return int(value)


#: A line of ASCII whitespace only (what ``bytes.strip`` takes away), skipped.
_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*")


def _lines(data: bytes) -> Iterator[memoryview]:
    """The lines of ``data`` one at a time, as views into it: ``split`` copied the whole
    file into a list of lines before the first was read (a 200 MB line took 636 MB to be
    refused); each line is now decoded straight from the file's bytes."""
    view = memoryview(data)
    start = 0
    while True:
        end = data.find(b"\n", start)
        if end == -1:
            yield view[start:]
            return
        yield view[start:end]
        start = end + 1


def load_labels(path: str | os.PathLike[str], display: str, judges: Collection[str] | Scales) -> Labels:
    """Read and check a labels file. ``judges``: the project's judge criteria, each with
    its scale (a mapping; None for a pass/fail judge), or only their names (every judge
    pass/fail)."""
    scales: dict[str, tuple[int, int] | None] = (
        dict(judges) if isinstance(judges, Mapping) else dict.fromkeys(judges)
    )
    data = read_bytes(path, display, MAX_LABELS_BYTES, what="labels file")
    labels: list[Label] = []
    seen: dict[tuple[str, str], list[tuple[str | None, int]]] = {}
    for number, raw in enumerate(_lines(data), start=1):
        if _BLANK.fullmatch(raw):
            continue

        def bad(message: str, field: str | None = None, accepted: str | None = None,
                number: int = number) -> ConfigError:
            return ConfigError(message, file=display, line=number, field=field,
                               accepted=accepted)

        try:
            # Strict: a key written twice ("pass": true, ..., "pass": false), NaN, and
            # nesting past the one depth limit are refused, not read one way or another.
            item = loads_strict(str(raw, "utf-8-sig" if number == 1 else "utf-8"),
                                max_depth=MAX_JSON_DEPTH)
        except UnicodeDecodeError:
            raise bad("the line is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise bad(f"not a JSON object: {exc.msg.removesuffix(' at')} at column {exc.colno}"
                      f"{unseen_at(exc.doc, exc.pos)}",
                      accepted='{"id": "case id", "criterion": "helpful", "pass": true}'
                      ) from None
        except JsonLimitError as exc:
            raise bad(str(exc)) from None
        surrogate = _lone_surrogate(item)
        if surrogate is not None:
            raise bad("holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape that is not"
                      " half of a pair): it is not a character and cannot be stored; write"
                      " the character itself, or a valid pair of escapes", field=surrogate)
        if not isinstance(item, dict):
            raise bad("not a JSON object",
                      accepted='{"id": "case id", "criterion": "helpful", "pass": true}')
        for key in item:
            if key not in LABEL_KEYS:
                hint = closest(key, LABEL_KEYS)
                mean = f"; did you mean '{hint}'?" if hint else ""
                raise bad(f"unknown key '{key}'{mean}", field=key,
                          accepted=", ".join(LABEL_KEYS))
        for key in ("id", "criterion"):
            if key not in item:
                raise bad("required field is missing", field=key)
        case_id, criterion = item["id"], item["criterion"]
        if not isinstance(case_id, str) or not case_id:
            raise bad(f"expected a non-empty string, got {json.dumps(case_id)}", field="id")
        if not isinstance(criterion, str) or criterion not in scales:
            known = ", ".join(sorted(scales)) or "none: the project declares no rubric_judge"
            hint = closest(criterion, scales) if isinstance(criterion, str) else None
            mean = f"; did you mean '{hint}'?" if hint else ""
            raise bad(f"{json.dumps(criterion)} is not a judge criterion of the project{mean}",
                      field="criterion", accepted=known)
        scale = scales[criterion]
        passed: bool | None = None
        score: int | None = None
        if scale is None:
            if "score" in item:
                raise bad(f"'{criterion}' is a pass/fail judge: its labels say pass, not score",
                          field="score", accepted='"pass": true or "pass": false')
            if "pass" not in item:
                raise bad("required field is missing", field="pass")
            passed = item["pass"]
            if not isinstance(passed, bool):
                raise bad(f"expected true or false, got {json.dumps(passed)}", field="pass")
        else:
            low, high = scale
            if "pass" in item:
                raise bad(f"'{criterion}' is a scored judge (scale [{low}, {high}]): its "
                          "labels give a score, not pass", field="pass",
                          accepted=f'"score": a whole number from {low} to {high}')
            if "score" not in item:
                raise bad(f"required field is missing ('{criterion}' is a scored judge, scale"
                          f" [{low}, {high}])", field="score")
            read = _score_of(item["score"], scale)
            if isinstance(read, str):
                raise bad(read, field="score",
                          accepted=f"a whole number from {low} to {high}")
            score = read
        for key in ("labeler", "note", "sample"):
            if key in item and item[key] is not None and not isinstance(item[key], str):
                raise bad(f"expected a string, got {json.dumps(item[key])}", field=key)
        saw = item.get("seen")
        if saw is not None and (not isinstance(saw, str) or not _SEEN.fullmatch(saw)):
            raise bad(f"expected a digest, got {json.dumps(saw)}", field="seen",
                      accepted="sha256: and 64 lower-case hex digits, as oloproof label"
                      " writes it")
        earlier = seen.setdefault((case_id, criterion), [])
        clash = next(((other, line) for other, line in earlier
                      if other is None or saw is None or other == saw), None)
        if clash is not None:
            same = " of the same output" if clash[0] is not None and saw is not None else ""
            raise bad(f"a second label{same} for case '{case_id}' and criterion '{criterion}'"
                      f" (the first is on line {clash[1]}); keep one", field="id")
        earlier.append((saw, number))
        labels.append(Label(case_id, criterion, passed, item.get("labeler"), item.get("note"),
                            item.get("sample"), score, saw))
    return Labels(tuple(labels), _digest(labels), display)
