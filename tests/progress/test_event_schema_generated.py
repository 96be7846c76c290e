"""The event schema is generated from the event classes (issue 9 §6); the committed
copies must be exactly what the classes generate, and every event's JSON form must
match its part of the schema, field for field."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

from jsonschema import Draft202012Validator

from oloproof.events import (
    EVENT_TYPES,
    CaseExecuted,
    CaseJudged,
    ConcurrencyChanged,
    Event,
    ProvisionalMetric,
    ProvisionalMetrics,
    RuleDecided,
    RunFinished,
    RunPhaseChanged,
    RunStarted,
    event_schema,
    event_schema_text,
)
from oloproof.render.ndjson import encode_line

REPO = Path(__file__).resolve().parents[2]
RUN_ID = "run_01J00000000000000000000000"
DIGEST = "sha256:" + "0" * 64


#: A value of each optional field, as a run that has it streams it.
_OPTIONAL_SAMPLES: dict[str, object] = {
    "trial": 2,
    "gate_notes": ["Incomplete evidence: floor (10% missing): more than max_missing 5% …"],
}


def _examples() -> list[Event]:
    return [
        RunStarted(RUN_ID, suite_digest=DIGEST, cases=3),
        RunPhaseChanged(RUN_ID, phase="EXECUTING"),
        CaseExecuted(RUN_ID, scenario_id="q1", status="OK", from_cache=False, latency_ms=1.5,
                     attempts=1, error=None),
        CaseJudged(RUN_ID, scenario_id="q1", criterion="exact", status="OK", passed=True,
                   score=None, from_cache=False),
        ProvisionalMetrics(RUN_ID, cases_done=1, cases_total=3,
                           metrics=[ProvisionalMetric("exact", 1.0, 0.2, 1.0, 1, 0)]),
        ConcurrencyChanged(RUN_ID, limit_name="system", previous=8, limit=4, ceiling=32,
                           reason="rate_limited"),
        RuleDecided(RUN_ID, rule="floor", metric="exact_label", state="PASS", n=57, n_scope=57,
                    cases_total=2000, e_value=41.75, e_threshold=40.0,
                    method="beta-binomial mixture e-process"),
        RunFinished(RUN_ID, status="DECIDED", completeness="COMPLETE", exit_code=0, decisions=[]),
    ]


def test_committed_schemas_are_the_generated_one() -> None:
    generated = event_schema_text()
    shipped = resources.files("oloproof").joinpath("schemas/events.schema.json").read_text()
    assert shipped == generated, "regenerate: python -m oloproof.events --schema"
    assert (REPO / "docs" / "events.schema.json").read_text() == generated
    Draft202012Validator.check_schema(event_schema())


def test_the_module_prints_the_schema() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "oloproof.events", "--schema"], capture_output=True, text=True,
        check=True,
    )
    assert proc.stdout == event_schema_text()


def test_every_event_matches_its_schema_field_for_field() -> None:
    examples = _examples()
    assert {type(e) for e in examples} == set(EVENT_TYPES)
    validator = Draft202012Validator(event_schema())
    variants = {v["title"]: v for v in event_schema()["oneOf"]}
    for event in examples:
        data = event.to_json()
        # A run of one trial, and without gate notes, streams exactly the required fields;
        # ``trial`` is streamed only by a run with trials > 1, ``gate_notes`` only when the
        # gate has a note.
        assert set(data) == set(variants[event.type]["required"]), event.type
        assert not list(validator.iter_errors(data)), event.type
        optional = set(variants[event.type]["properties"]) - set(variants[event.type]["required"])
        assert optional == (set(type(event).optional_schema)), event.type
        if optional:
            unset = {name: getattr(event, name) for name in optional}
            for name in optional:
                setattr(event, name, _OPTIONAL_SAMPLES[name])
            with_optional = event.to_json()
            assert set(with_optional) == set(variants[event.type]["properties"]), event.type
            assert not list(validator.iter_errors(with_optional)), event.type
            for name, value in unset.items():
                setattr(event, name, value)


def test_stream_lines_are_strict_json_whatever_the_event_holds() -> None:
    """NaN, infinities and lone surrogates (from a model or an error message) never
    make an invalid or unencodable line."""
    events: list[Event] = [
        CaseExecuted(RUN_ID, scenario_id="q\udcff", status="ERROR", from_cache=False,
                     latency_ms=float("nan"), attempts=1, error="bad \ud800 bytes"),
        CaseJudged(RUN_ID, scenario_id="q1", criterion="tone", status="OK", passed=None,
                   score=float("inf"), from_cache=False),
    ]
    validator = Draft202012Validator(event_schema())
    for event in events:
        line = encode_line(event.to_json())
        assert line.endswith("\n") and line.count("\n") == 1
        line.encode("utf-8")
        data = json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        assert not list(validator.iter_errors(data))
    assert json.loads(encode_line(events[0].to_json()))["latency_ms"] is None
    assert json.loads(encode_line(events[0].to_json()))["error"] == "bad \ufffd bytes"
