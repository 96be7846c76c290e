"""cli/_fast.py's parser against argparse: whenever it answers, it answers as argparse
does, and it answers for the command lines CI and users type most."""

from __future__ import annotations

import contextlib
import io
import random

import pytest

from oloproof.cli import _values
from oloproof.cli._args import COMMANDS
from oloproof.cli._fast import arguments, fast_parse
from oloproof.cli._parser import build_parser


def _argparse(words: list[str]) -> dict[str, object] | None:
    """argparse's namespace for ``words``, or None when it exits (an error or a help)."""
    first = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(first if first in COMMANDS else None)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return vars(parser.parse_args(words))
    except SystemExit:
        return None


def _tokens(name: str) -> list[str]:
    pool = [
        "latest",
        "run-123",
        "x",
        "",
        "3",
        "0",
        "-1",
        "2.5",
        "auto",
        "failure",
        "nope",
        "-h",
        "--help",
        "--",
        "--version",
        "-o",
        "--con",
        "--json=1",
        "--unknown",
        "metadata.lang == 'fr'",
        "-x y",
        "run",
        # Bytes of argv that are not UTF-8 (a lone surrogate to Python), and an empty value.
        "run_\udcff",
        "\udce9t\u00e9",
        "",
    ]
    for arg in arguments(name):
        pool += list(arg.flags) * 3
        pool += list(arg.choices or ())
    return pool


def _plausible(name: str, rng: random.Random) -> list[str]:
    """A command line made from the declaration: each option at most twice, with a value
    of the kind it takes (now and then a wrong one), the positionals in between."""
    words = [name]
    for arg in arguments(name):
        if not arg.flags[0].startswith("-"):
            if arg.nargs is None or rng.random() < 0.5:
                words.insert(rng.randint(1, len(words)), _text(rng, ["latest", "r1", "a b"]))
            continue
        for _ in range(rng.choice([0, 0, 1, 2]) if not arg.required else 1):
            words.append(rng.choice(arg.flags))
            if arg.action == "store_true":
                continue
            if arg.choices:
                words.append(rng.choice([*arg.choices, "other"]))
            elif arg.type in (None, _values.given, _values.name):
                words.append(_text(rng, ["f.yaml", "lang", "a=b"]))
            else:
                words.append(rng.choice(["1", "7", "100", "101", "0", "x", "65536"]))
    return words


def _text(rng: random.Random, usual: list[str]) -> str:
    """One of ``usual``, or now and then a value that is empty, a dash, or holds bytes of
    argv that are not UTF-8 (lone surrogates to Python)."""
    return rng.choice(usual) if rng.random() < 0.8 else rng.choice(["", "-", "k\udcff"])


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_whenever_the_fast_parser_answers_it_answers_as_argparse(name: str) -> None:
    rng = random.Random(f"fast-args-{name}")
    pool = _tokens(name)
    answered = 0
    # 2,000 lines: run's options (--shard, --executor, --ray-address among them) make a random
    # line invalid more often, and the threshold below must still be reached.
    for i in range(2000):
        words = _plausible(name, rng) if i % 2 else [name, *rng.choices(pool, k=rng.randint(0, 6))]
        fast = fast_parse(words)
        if fast is None:
            continue
        answered += 1
        assert _argparse(words) == vars(fast), words
    # The comparison means something only if the fast parser answered often enough.
    # init, store and merge take a variable number of positionals, which fast_parse leaves to
    # argparse.
    assert answered >= (0 if name in ("init", "store", "merge") else 200), answered


@pytest.mark.parametrize(
    "words",
    [
        ["run"],
        ["run", "--json"],
        ["run", "--no-cache", "--trials", "3", "--group-by", "lang"],
        [
            "run",
            "--config",
            "sub/oloproof.yaml",
            "--policy",
            "release.yaml",
            "--junit-xml",
            "out.xml",
            "--junit-undecided",
            "failure",
            "--github-annotations",
        ],
        ["run", "--limit", "10", "--sample", "--seed", "7", "--case", "a", "--case", "b"],
        ["gate", "latest"],
        ["gate", "--json", "latest", "--policy", "p.yaml"],
        ["runs"],
        ["runs", "--limit", "5", "--json"],
        ["inspect", "latest", "--failures"],
        ["compare", "a", "b", "--json"],
        ["plan", "latest", "--run"],
        ["label", "latest", "--criterion", "c", "--n", "5"],
        ["report", "latest"],
    ],
)
def test_the_usual_command_lines_need_no_argparse(words: list[str]) -> None:
    fast = fast_parse(words)
    assert fast is not None
    assert vars(fast) == _argparse(words)


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["--help"],
        ["run", "-h"],
        ["run", "--trials", "0"],
        ["run", "--tri", "3"],
        ["run", "--junit-undecided", "never"],
        ["gate"],
        ["gate", "a", "b"],
        ["run", "--where", "-x"],
        ["run", "--json=1"],
        ["label", "latest"],
        ["init"],
        ["runs", "--limit", "ten"],
        ["--version"],
        ["run", "--"],
        ["nope"],
    ],
)
def test_helps_errors_and_the_unusual_are_left_to_argparse(words: list[str]) -> None:
    assert fast_parse(words) is None
