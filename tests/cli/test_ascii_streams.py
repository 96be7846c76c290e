"""Standard streams that cannot write every character (PYTHONIOENCODING=ascii, a locale
without UTF-8): a CI runner or an old terminal.

Our own tables hold '·' and '–', and ids and outputs hold whatever a user wrote. Written
to an ASCII stream, the first such character raised UnicodeEncodeError in the middle of
the report: 'gate latest --json' and 'run' in a terminal ended as an internal error
(exit 70) for a run whose gate was 1, 'gate latest' dropped its whole report, and
'store --help' died with a traceback (exit 1). A character the stream cannot write is
now written as a \\uXXXX escape: measured as such in the tables, so columns line up, and
exact inside a --json document, where every parser reads the same value.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pexpect
import pytest
from tests.conftest import OLOPROOF, RELEASE_FLOOR, write_project

# Latin-1, a wide CJK id, an astral (above U+FFFF) one: three kinds of escape.
IDS = ["café", "日本語", "rocket\U0001f680", *(f"q{i:02d}" for i in range(27))]
ENCODINGS = ["ascii", "latin-1"]


def _project(root: Path) -> Path:
    """30 cases all answered wrong: the gate is 1."""
    cases = [{"id": cid, "input": {"n": i}, "expected": {"label": "ok"}}
             for i, cid in enumerate(IDS)]
    return write_project(root, app="def answer(case_input):\n    return {'label': 'no'}\n",
                         cases=cases, release=RELEASE_FLOOR)


def _env(encoding: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    if encoding is not None:
        env["PYTHONIOENCODING"] = encoding
    return env


def _run(args: list[str], root: Path, encoding: str | None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*OLOPROOF, *args], cwd=root, env=_env(encoding), capture_output=True,
                          check=False, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _project(tmp_path_factory.mktemp("ascii") / "p")
    assert _run(["run"], root, None).returncode == 1
    return root


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_json_documents_keep_the_exit_code_and_the_same_values(root: Path, encoding: str) -> None:
    for args in (["gate", "latest", "--json"], ["inspect", "latest", "--json"],
                 ["runs", "--json"], ["plan", "latest", "--run", "--json"]):
        utf8 = _run(args, root, "utf-8")
        narrow = _run(args, root, encoding)
        assert narrow.returncode == utf8.returncode, (args, narrow.stderr)
        assert b"internal error" not in narrow.stderr, (args, narrow.stderr)
        narrow.stdout.decode(encoding)  # the stream's own encoding
        assert json.loads(narrow.stdout.decode(encoding)) == json.loads(utf8.stdout), args
    assert _run(["gate", "latest", "--json"], root, encoding).returncode == 1


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_reports_are_printed_whole_with_their_columns_lined_up(root: Path, encoding: str) -> None:
    for args in (["gate", "latest"], ["inspect", "latest"], ["runs"], ["plan", "latest", "--run"],
                 ["store", "--help"], ["--help"], ["inspect", "latest", "--case", "café"],
                 ["inspect", "latest", "--failures"]):
        proc = _run(args, root, encoding)
        assert proc.returncode == _run(args, root, "utf-8").returncode, (args, proc.stderr)
        assert proc.stderr == b"", (args, proc.stderr)
        text = proc.stdout.decode(encoding)
        assert text, args
    gate = _run(["gate", "latest"], root, encoding).stdout.decode(encoding)
    assert "Gate      BLOCK   exit code 1" in gate
    table = [line for line in gate.splitlines() if line.startswith(("+", "|"))]
    assert table and len({len(line) for line in table[:5]}) == 1, gate  # the decisions table
    cases = _run(["inspect", "latest", "--failures"], root, encoding).stdout.decode(encoding)
    if encoding == "ascii":
        assert "caf\\u00e9" in cases and "\\u65e5\\u672c\\u8a9e" in cases
        assert "rocket\\ud83d\\ude80" in cases
    else:
        assert "café" in cases and "\\u65e5\\u672c\\u8a9e" in cases


def test_a_terminal_that_writes_ascii_keeps_the_exit_code(root: Path) -> None:
    env = _env("ascii") | {"TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"}
    for args in (["gate", "latest"], ["run"]):
        child = pexpect.spawn(OLOPROOF[0], [*OLOPROOF[1:], *args], cwd=str(root),
                              dimensions=(40, 200), encoding="ascii", codec_errors="replace",
                              timeout=90, env=env)
        child.expect(pexpect.EOF)
        transcript = child.before or ""
        child.close()
        assert child.exitstatus == 1, (args, transcript)
        assert "internal error" not in transcript, transcript
