"""The JSONL suite: cases, digest, and one clear error per bad line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from project_helpers import Writer, check, config_error
from tests.conftest import run_cli

from oloproof.project import Case, load_suite

SUITE = "data/support.jsonl"


def _bad(write: Writer, text: str) -> str:
    write(SUITE, text)
    err = config_error(lambda: load_suite(Path(SUITE)))
    return str(err)


def test_cases_in_file_order(write: Writer) -> None:
    write(
        SUITE,
        '{"id": "b", "input": {"q": "x"}, "expected": {"label": "l"}, "metadata": {"lang": "en"}}\n'
        "\n"
        '{"id": "a", "input": null}\r\n'
        "   \n",
    )
    suite = load_suite(Path(SUITE))
    assert suite.path == str(SUITE)
    assert len(suite) == 2
    first, second = suite.cases
    assert first == Case("b", {"q": "x"}, {"label": "l"}, {"lang": "en"}, 1)
    assert second == Case("a", None, None, None, 3)
    assert [c.id for c in suite] == ["b", "a"]
    assert second.to_json() == {"id": "a", "input": None}


def test_digest_matches_a_hand_computation(write: Writer) -> None:
    write(
        SUITE,
        '{"input": {"q": "Rückerstattung?", "n": 1}, "id": "r0", "expected": {"label": "refund"}}\n'
        '{"id": "r1",   "input": "plain", "metadata": {"z": 1, "a": [1, 2]}}\n',
    )
    canonical = (
        '[{"expected":{"label":"refund"},"id":"r0","input":{"n":1,"q":"Rückerstattung?"}},'
        '{"id":"r1","input":"plain","metadata":{"a":[1,2],"z":1}}]'
    )
    expected = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert load_suite(Path(SUITE)).digest == expected


def test_digest_ignores_layout_but_not_content_or_order(write: Writer) -> None:
    a = '{"id": "a", "input": 1}\n{"id": "b", "input": 2}\n'
    digest = load_suite(write(SUITE, a)).digest
    assert load_suite(write(SUITE, '{"input":1,"id":"a"}\n\n{"id":"b","input":2}')).digest == digest
    assert (
        load_suite(write(SUITE, '{"id": "b", "input": 2}\n{"id": "a", "input": 1}\n')).digest
        != digest
    )
    assert (
        load_suite(write(SUITE, '{"id": "a", "input": 1}\n{"id": "b", "input": 3}\n')).digest
        != digest
    )


def test_suite_file_missing(project_dir: Path) -> None:
    err = config_error(lambda: load_suite(Path("data/nope.jsonl")))
    check(err, file="data/nope.jsonl", field=None, line=None, contains=("file not found",))


def test_display_name_is_used(write: Writer) -> None:
    write(SUITE, "[]\n")
    err = config_error(lambda: load_suite(Path(SUITE).absolute(), display="shown.jsonl"))
    assert str(err).startswith("shown.jsonl:1: ")


def test_line_not_json(write: Writer) -> None:
    line = '{"id": "r3", "input": {"q": 1} "expected": {}}'
    json_error = pytest.raises(json.JSONDecodeError, json.loads, line).value
    text = '{"id": "r0", "input": 1}\n{"id": "r1", "input": 1}\n\n' + line + "\n"
    message = _bad(write, text)
    accepted = (' (accepted: JSON Lines, one object per line such as {"id": "case_1", "input":'
                ' ...}; not CSV, not a JSON array)')
    assert message == (
        f"data/support.jsonl:4: not valid JSON: {json_error.msg} at column {json_error.colno}"
        + accepted
    )
    assert message == (
        "data/support.jsonl:4: not valid JSON: Expecting ',' delimiter at column 32" + accepted)


@pytest.mark.parametrize(("text", "says"), [
    ("id,input,expected\nr1,hello,refund\n", "not valid JSON: Expecting value at column 1"),
    ('[\n  {\n    "id": "r1",\n    "input": 1\n  }\n]\n',
     ("not valid JSON: Expecting value at column 2; the file looks like one JSON document"
     " written over several lines (a pretty-printed array or object)")),
    ('[{"id": "r1", "input": 1}]\n', "expected a JSON object, got an array"),
])
def test_a_csv_or_a_json_array_is_told_what_a_suite_is(write: Writer, text: str, says: str) -> None:
    message = _bad(write, text)
    assert message == (
        f"data/support.jsonl:1: {says} (accepted: JSON Lines, one object per line such as"
        ' {"id": "case_1", "input": ...}; not CSV, not a JSON array)')


def test_nan_is_not_json(write: Writer) -> None:
    message = _bad(write, '{"id": "a", "input": NaN}\n')
    assert message.startswith("data/support.jsonl:1: not valid JSON: NaN")


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5e309"])
def test_a_float_that_overflows_is_not_read_as_infinity(write: Writer, number: str) -> None:
    line = '{"id": "b", "input": ' + number + "}"
    message = _bad(write, '{"id": "a", "input": 1}\n' + line + "\n")
    assert message == (
        f"data/support.jsonl:2: not valid JSON: {number} is too large for a number"
        " (write it as a string)"
    )


def test_line_not_an_object(write: Writer) -> None:
    message = _bad(write, '{"id": "a", "input": 1}\n["b", 2]\n')
    assert message.startswith("data/support.jsonl:2: expected a JSON object")
    assert "got an array" in message


def test_unknown_key(write: Writer) -> None:
    message = _bad(write, '{"id": "a", "input": 1, "expect": {"label": "x"}}\n')
    assert message == (
        "data/support.jsonl:1: expect: unknown key 'expect' "
        "(accepted: id, input, expected, metadata; did you mean 'expected'?)"
    )


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"input": 1}', "required field is missing"),
        ('{"id": "", "input": 1}', "expected a non-empty string, got an empty one"),
        ('{"id": "  ", "input": 1}', "expected a non-empty string, got an empty one"),
        ('{"id": 7, "input": 1}', "expected a non-empty string, got a number"),
        ('{"id": null, "input": 1}', "expected a non-empty string, got null"),
    ],
)
def test_bad_id(write: Writer, line: str, says: str) -> None:
    message = _bad(write, '{"id": "ok", "input": 1}\n' + line + "\n")
    assert message.startswith("data/support.jsonl:2: id: " + says), message


def test_duplicate_id_names_both_lines(write: Writer) -> None:
    text = '{"id": "a", "input": 1}\n{"id": "b", "input": 1}\n{"id": "a", "input": 2}\n'
    message = _bad(write, text)
    assert message.startswith("data/support.jsonl:3: id: duplicate id 'a' on lines 1 and 3")


@pytest.mark.parametrize(
    ("line", "field", "key"),
    [
        # The attack: the second "expected" silently replaced the first.
        (('{"id": "r0", "input": {"q": "refund?"}, "expected": {"label": "refund"}, '
         '"expected": {"label": "billing"}}'), "expected", "expected"),
        ('{"id": "x1", "id": "x2", "input": {}}', "id", "id"),
        ('{"id": "a", "input": 1, "expected": {"label": "x", "label": "y"}}',
         "expected.label", "label"),
        ('{"id": "a", "input": {"m": [{"role": "u"}, {"role": "a", "role": "b"}]}}',
         "input.m[1].role", "role"),
        ('{"id": "a", "input": 1, "metadata": {"two words": {"k": 1, "k": 2}}}',
         "metadata['two words'].k", "k"),
        # The same key with different spellings is the same key once read.
        ('{"id": "a", "input": {"k": 1, "\\u006b": 2}}', "input.k", "k"),
        # A colon written as an escape cannot hide one.
        ('{"id": "a", "input": {"\\u003a": 1, "q": 2, "q": 3}}', "input.q", "q"),
        # The object holding one was itself dropped by a repeated key: the outer one.
        ('{"id": "a", "input": {"o": {"k": 1, "k": 2}, "o": 3}}', "input.o", "o"),
    ],
)
def test_a_key_written_twice_is_refused_at_every_level(
    write: Writer, line: str, field: str, key: str
) -> None:
    write(SUITE, '{"id": "ok", "input": 1}\n' + line + "\n")
    err = config_error(lambda: load_suite(Path(SUITE)))
    check(err, file=SUITE, field=field, line=2,
          contains=(f"the key '{key}' appears twice in one object", "write each key once"))


def test_a_key_written_twice_stops_run_of_the_example(tmp_path: Path) -> None:
    root = tmp_path / "bot"
    assert run_cli("init", str(root), "--example", "support_bot", cwd=tmp_path).code == 0
    suite = root / SUITE
    lines = suite.read_text().splitlines(keepends=True)
    lines[0] = ('{"id": "refund_00", "input": {"question": "Can I get a refund for my order?"}, '
                '"expected": {"label": "refund"}, "expected": {"label": "billing"}}\n')
    suite.write_text("".join(lines))
    result = run_cli("run", cwd=root)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "oloproof run: error: data/support.jsonl:1: expected: the key 'expected' appears twice"
        " in one object (a JSON reader keeps only one of the values, silently); write each"
        " key once\n"
    )
    assert not (root / ".oloproof").exists()


@pytest.mark.parametrize(
    "line",
    [
        '{"id": "a:b", "input": {"url": "http://x:80", "k": "\\u003a"}}',
        '{"id": "a", "input": {"\\u003a": 1, "::": 2}}',
        '{"id": "a", "input": "\\u003A:", "expected": {"a": {"a": {"a": 1}}}}',
    ],
)
def test_colons_and_escaped_colons_without_a_repeated_key_load(write: Writer, line: str) -> None:
    write(SUITE, line + "\n")
    (case,) = load_suite(Path(SUITE)).cases
    assert case.to_json() == json.loads(line)


def test_input_missing(write: Writer) -> None:
    message = _bad(write, '{"id": "a", "expected": {"label": "x"}}\n')
    assert message.startswith("data/support.jsonl:1: input: required field is missing")


@pytest.mark.parametrize("key", ["expected", "metadata"])
@pytest.mark.parametrize(
    ("value", "kind"), [('"refund"', "a string"), ("null", "null"), ("[]", "an array")]
)
def test_expected_and_metadata_must_be_objects(
    write: Writer, key: str, value: str, kind: str
) -> None:
    message = _bad(write, f'{{"id": "a", "input": 1, "{key}": {value}}}\n')
    assert message.startswith(f"data/support.jsonl:1: {key}: expected an object, got {kind}")


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_suite(write: Writer, text: str) -> None:
    message = _bad(write, text)
    assert message.startswith("data/support.jsonl: the suite has no cases")


def test_not_utf8(project_dir: Path) -> None:
    (project_dir / SUITE).parent.mkdir(exist_ok=True)
    (project_dir / SUITE).write_bytes(b'{"id": "a", "input": 1}\n{"id": "\xff", "input": 1}\n')
    err = config_error(lambda: load_suite(Path(SUITE)))
    check(err, file=SUITE, field=None, line=2, contains=("not valid UTF-8",))


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["no BOM", "BOM"])
def test_not_utf8_points_at_the_byte_with_or_without_a_byte_order_mark(
    project_dir: Path, bom: bytes
) -> None:
    (project_dir / SUITE).parent.mkdir(exist_ok=True)
    # Line 2, and the bad byte is its 9th: the byte order mark does not move either.
    (project_dir / SUITE).write_bytes(bom + b'{"id": "a", "input": 1}\n{"id": "\xff", "input": 1}\n')
    err = config_error(lambda: load_suite(Path(SUITE)))
    check(err, file=SUITE, field=None, line=2, contains=("byte 9 of the line",))


def test_a_byte_order_mark_is_read_as_utf_8_sig_reads_it(project_dir: Path) -> None:
    (project_dir / SUITE).parent.mkdir(exist_ok=True)
    (project_dir / SUITE).write_bytes(b'\xef\xbb\xbf{"id": "\xc3\xa9", "input": 1}\n')
    (case,) = load_suite(Path(SUITE)).cases
    assert case.id == "\u00e9"


@pytest.mark.slow  # measured: 5.4 s in-process on the shared machine (issue 31 tiers)
def test_a_100k_case_suite_loads(project_dir: Path) -> None:
    path = project_dir / "big.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(100_000):
            out.write(
                json.dumps(
                    {
                        "id": f"case_{i:06d}",
                        "input": {"question": f"question number {i}?"},
                        "expected": {"label": "refund" if i % 2 else "other"},
                    }
                )
                + "\n"
            )
    suite = load_suite(path)
    assert len(suite.cases) == 100_000
    assert suite.cases[-1].id == "case_099999" and suite.cases[-1].line == 100_000
    assert suite.digest.startswith("sha256:") and len(suite.digest) == 7 + 64


def test_a_config_file_not_utf8_after_a_byte_order_mark_names_its_line(tmp_path: Path) -> None:
    from oloproof.errors import ConfigError
    from oloproof.project._files import read_text

    path = tmp_path / "oloproof.yaml"
    path.write_bytes(b"\xef\xbb\xbfversion: 1\nproject: \xff\n")
    with pytest.raises(ConfigError) as got:
        read_text(path, "oloproof.yaml")
    assert got.value.line == 2 and "byte 24" in str(got.value)  # of the file, mark included
