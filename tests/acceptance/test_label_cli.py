"""`oloproof label`: a person labels a random draw of a run's cases, through the real CLI,
against the fake provider over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, run_cli
from tests.fakes.provider import FakeServer

ENV = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _example(tmp_path: Path, srv: FakeServer, labels: str = "") -> Path:
    project = tmp_path / "judged"
    assert run_cli("init", str(project), "--example", "judge", cwd=tmp_path).code == 0
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace("http://127.0.0.1:8787",
                                                 srv.anthropic_base_url))
    (project / "data" / "labels.jsonl").write_text(labels)
    assert run_cli("run", cwd=project, env=ENV).code in (3, 4)
    return project


def _label(project: Path, answers: str, *args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [*OLOPROOF, "label", "latest", "--criterion", "helpful", *args], cwd=project,
        input=answers, capture_output=True, text=True, timeout=120, check=False,
    )
    return done.returncode, done.stdout, done.stderr


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_label_writes_each_answer_at_once_and_shows_the_judge_only_after(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    labels = project / "data" / "labels.jsonl"
    code, out, err = _label(project, "y\nn\ns\nmaybe\ny\nq\n", "--n", "5", "--seed", "3",
                            "--labeler", "ab")
    assert code == 0, err
    assert "drawn at random (seed 3" in out and "of 12 unlabelled cases" in out
    written = _lines(labels)
    assert [w["pass"] for w in written] == [True, False, True]  # the skip wrote nothing
    assert all(w["criterion"] == "helpful" and w["labeler"] == "ab" for w in written)
    assert {w["sample"] for w in written} == {
        f"uniform seed=3 n=5 pool=12 run={json.loads(run_cli('runs', '--json', cwd=project).out)[0]['id']}"
    }
    assert "answer y (pass), n (fail), s (skip) or q (quit)" in out  # "maybe" asked again
    # The judge's verdict is shown only after the person answered, case by case.
    blocks = out.split("\n[")[1:]
    assert len(blocks) == 5  # y, n, skip, (maybe) y, then quit at the fifth prompt
    for block in blocks[:4]:
        prompt = block.index("Does this output pass helpful?")
        said = block.find("the judge said:")
        assert said == -1 or said > prompt
    assert "the judge said" not in blocks[2] and "the judge said" not in blocks[4]
    # The same seed draws the same cases, in the same order, from the same pool.
    drawn = [b.split("\n", 1)[0] for b in blocks]
    labels.write_text("")
    _, again, _ = _label(project, "q\n", "--n", "5", "--seed", "3")
    assert again.split("\n[")[1].split("\n", 1)[0] == drawn[0]


def test_labels_drawn_by_label_check_the_corrected_estimates_assumption(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    code, _, err = _label(project, "y\n" * 8, "--n", "8", "--seed", "1")
    assert code == 0, err
    assert len(_lines(project / "data" / "labels.jsonl")) == 8
    assert run_cli("run", cwd=project, env=ENV).code in (0, 3, 4)  # all from the cache
    [report] = json.loads(
        run_cli("inspect", "latest", "--judges", "--json", cwd=project).out)["judges"]
    assert report["labels"] == 8 and report["corrected"]["unlabelled"] == 4
    assert report["corrected"]["assumption"].startswith("checked:")

    # Labels written by hand (no recorded draw) leave it unchecked.
    by_hand = "".join(
        json.dumps({"id": f"q{i:02d}", "criterion": "helpful", "pass": True}) + "\n"
        for i in range(1, 9)
    )
    (project / "data" / "labels.jsonl").write_text(by_hand)
    assert run_cli("run", cwd=project, env=ENV).code in (0, 3, 4)
    [report] = json.loads(
        run_cli("inspect", "latest", "--judges", "--json", cwd=project).out)["judges"]
    assert report["corrected"]["assumption"].startswith("not checked:")

    # Once every case with an output is labelled, there is nothing left to draw: said.
    code, _, err = _label(project, "y\n" * 12, "--n", "12")
    assert code == 0, err
    code, out, _ = _label(project, "")
    assert code == 0 and "Nothing to label" in out


def test_label_refusals(tmp_path: Path, srv: FakeServer) -> None:
    project = _example(tmp_path, srv)
    bad = run_cli("label", "latest", "--criterion", "nope", cwd=project)
    assert bad.code == 2 and "not a judge criterion" in bad.err and "helpful" in bad.err
    zero = run_cli("label", "latest", "--criterion", "helpful", "--n", "0", cwd=project)
    assert zero.code == 2 and "--n 0" in zero.err
    config = project / "oloproof.yaml"
    config.write_text("\n".join(line for line in config.read_text().splitlines()
                                if not line.startswith("human_labels")) + "\n")
    none = run_cli("label", "latest", "--criterion", "helpful", cwd=project)
    assert none.code == 2 and "human_labels" in none.err and "--output" in none.err
    for result in (bad, zero, none):
        assert "Traceback" not in result.text


def test_two_sessions_labelling_one_case_write_one_label(
    tmp_path: Path, srv: FakeServer
) -> None:
    """Two people label the same run at once and draw the same case: the second answer is
    not written (a second label of a case made every later run refuse the file, exit 2)."""
    import os

    project = _example(tmp_path, srv)
    labels = project / "data" / "labels.jsonl"
    first = subprocess.Popen(
        [*OLOPROOF, "label", "latest", "--criterion", "helpful", "--n", "1", "--seed", "5"],
        cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert first.stdout is not None and first.stdin is not None
    shown = b""
    while b"Does this output pass helpful?" not in shown:  # its case is drawn and shown
        chunk = os.read(first.stdout.fileno(), 4096)
        assert chunk, first.stderr.read() if first.stderr else ""
        shown += chunk
    code, out, err = _label(project, "y\n", "--n", "1", "--seed", "5")  # the same case
    assert code == 0 and "1 label written" in out, out + err
    rest, err = first.communicate(b"n\n", timeout=120)
    assert first.returncode == 0, err
    assert b"was labelled for helpful meanwhile" in rest, rest
    assert b"0 labels written" in rest, rest
    written = _lines(labels)
    assert len(written) == 1 and written[0]["pass"] is True
    assert run_cli("run", cwd=project, env=ENV).code in (3, 4)  # the file is still read


def test_label_with_standard_input_closed_or_standard_output_full_says_so(
    tmp_path: Path, srv: FakeServer
) -> None:
    """Started with `<&-` label ended as an internal error (exit 70, AttributeError on
    None.readline); with standard output on a full disk, as one too (OSError). Both are
    one clear line, exit 2."""
    project = _example(tmp_path, srv)
    cmd = " ".join(f"'{w}'" for w in OLOPROOF)
    closed = subprocess.run(f"{cmd} label latest --criterion helpful <&-", shell=True,
                            cwd=project, capture_output=True, text=True, timeout=120,
                            check=False)
    assert closed.returncode == 2, closed.stderr
    assert "standard input is closed, and label reads your answers there" in closed.stderr
    if not Path("/dev/full").exists():
        return
    with open("/dev/full", "w") as full:
        done = subprocess.run([*OLOPROOF, "label", "latest", "--criterion", "helpful"],
                              cwd=project, input="y\ny\n", stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "standard output cannot be written (No space left on device)" in done.stderr
    assert "internal error" not in done.stderr


def test_a_labels_file_named_with_an_escape_sequence_is_shown_escaped(
    tmp_path: Path, srv: FakeServer
) -> None:
    """human_labels in a cloned project's oloproof.yaml (or --output) was echoed raw in
    label's 'Labels go to ...' and closing lines: OSC 0 retitled the terminal."""
    project = _example(tmp_path, srv)
    name = "data/l\x1b]0;PWNED\x07\x1b[2J.jsonl"
    (project / name).write_text("")
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace(
        "human_labels: data/labels.jsonl", 'human_labels: "data/l\\e]0;PWNED\\a\\e[2J.jsonl"'))
    for args in ((), ("--output", str(project / name))):
        code, out, err = _label(project, "q\n", *args)
        assert code == 0, err
        assert "\x1b" not in out + err and "\x07" not in out + err
        assert "l\\x1b]0;PWNED\\x07\\x1b[2J.jsonl" in out


def test_init_shows_a_typed_escape_sequence_escaped(tmp_path: Path) -> None:
    done = run_cli("init", str(tmp_path / "p\x1b]0;PWNED\x07"), "--example", "starter",
                   cwd=tmp_path)
    assert done.code == 0, done.err
    assert "\x1b" not in done.out and "p\\x1b]0;PWNED\\x07" in done.out


def test_an_answer_the_input_encoding_cannot_read_is_asked_again(
    tmp_path: Path, srv: FakeServer
) -> None:
    """Under PYTHONIOENCODING=ascii an accented key ('é') raised UnicodeDecodeError reading
    the answer: internal error, exit 70. It is a wrong answer, asked again."""
    project = _example(tmp_path, srv)
    done = subprocess.run(
        [*OLOPROOF, "label", "latest", "--criterion", "helpful"], cwd=project,
        input="é\ny\nq\n".encode(), capture_output=True, timeout=120, check=False,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
    )
    assert done.returncode == 0, done.stderr
    assert b"answer y (pass), n (fail), s (skip) or q (quit)" in done.stdout
    assert len(_lines(project / "data" / "labels.jsonl")) == 1


def test_a_labeler_name_of_bytes_that_are_not_utf8_is_refused_before_a_label_is_written(
    tmp_path: Path, srv: FakeServer
) -> None:
    """``--labeler "$(whoami)"`` in a Latin-1 terminal (``Jos\\xe9``: a lone surrogate to
    Python): the session drew the cases and asked, then the first answer could not be
    written: "internal error: UnicodeEncodeError", exit 70. It is refused first, exit 2."""
    project = _example(tmp_path, srv)
    labels = project / "data" / "labels.jsonl"
    code, out, err = _label(project, "y\nq\n", "--n", "1", "--labeler", "Jos\udce9")
    assert code == 2, (out, err)
    assert "argument --labeler: expected text" in err and "Traceback" not in err
    assert labels.read_text() == ""
    assert run_cli("run", cwd=project, env=ENV).code in (3, 4)
