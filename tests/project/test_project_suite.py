"""The JSONL suite: cases, digest, and one clear error per bad line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from project_helpers import Writer, check, config_error

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
    assert message == (
        f"data/support.jsonl:4: not valid JSON: {json_error.msg} at column {json_error.colno}"
    )
    assert message == "data/support.jsonl:4: not valid JSON: Expecting ',' delimiter at column 32"


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
