"""One dotted-path rule for evaluators and HTTP systems; json_schema never fetches."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from oloproof.enums import JudgmentStatus, MetricKind
from oloproof.evaluators.base import CaseView, get_field
from oloproof.evaluators.deterministic import JsonSchema, Regex
from oloproof.paths import MISSING, lookup
from oloproof.project.config import JsonSchemaEvaluator, RegexEvaluator
from oloproof.systems import http as http_system

VALUE: dict[str, Any] = {
    "items": [{"label": "first"}, {"label": "middle"}, {"label": "last"}],
    "-1": "a key written like a number",
    "n": None,
    "text": "abc",
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (None, VALUE),
        ("items.0.label", "first"),
        ("items.-1.label", "last"),
        ("items.-3.label", "first"),
        ("items.2.label", "last"),
        ("-1", "a key written like a number"),
        ("n", None),
        ("items.3", MISSING),
        ("items.-4", MISSING),
        ("items.+1", MISSING),
        ("items. 1", MISSING),
        ("items.x", MISSING),
        ("text.0", MISSING),
        ("n.x", MISSING),
        ("absent", MISSING),
        ("", MISSING),
    ],
)
def test_one_rule_for_every_dotted_path(path: str | None, expected: Any) -> None:
    found = lookup(VALUE, path)
    assert found is expected if expected is MISSING or expected is None else found == expected
    # The evaluator's `field` and the HTTP system's `output_path` agree with it.
    assert get_field(VALUE, path) is found
    if path is not None:
        via_http = http_system._follow_path(VALUE, path)
        assert via_http is (http_system._MISSING if found is MISSING else found)


def test_regex_on_a_negative_index_field_uses_the_configured_flags() -> None:
    config = RegexEvaluator(
        type="regex", criterion="last", field="items.-1.label", pattern="^LAST$",
        flags=["IGNORECASE"],
    )
    ev = Regex(config)
    assert ev.metric_kind is MetricKind.BINARY
    out = ev.evaluate(CaseView("c", None, None, None), VALUE)
    assert (out.status, out.passed) == (JudgmentStatus.OK, True)
    assert ev.pattern is config.compiled


class _Counting(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/schema.json"
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_ref_is_never_fetched_even_past_the_load_check(schema_server: str) -> None:
    # The load-time check refuses the schema; a record made directly skips it, to prove
    # that the validator itself has no way to retrieve anything.
    _Counting.hits = 0
    config = JsonSchemaEvaluator(
        type="json_schema", criterion="s", field=None, schema_={"$ref": schema_server}
    )
    ev = JsonSchema(config)
    with pytest.raises(Exception) as info:
        ev.evaluate(CaseView("c", None, None, None), "text")
    assert "Unresolvable" in type(info.value).__name__ or "resolv" in str(info.value).lower()
    assert _Counting.hits == 0


def test_local_refs_validate() -> None:
    config = JsonSchemaEvaluator.validate({
        "type": "json_schema", "criterion": "s",
        "schema": {"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}},
    })
    ev = JsonSchema(config)
    view = CaseView("c", None, None, None)
    assert ev.evaluate(view, [1, 2]).passed is True
    failed = ev.evaluate(view, [1, "x"])
    assert failed.passed is False and "1" in (failed.reason or "")
