"""``oloproof label RUN --criterion C``: a person labels a random sample of a run's cases.

For each case drawn it shows the input, the expected value and the system's output, asks
whether the output passes the criterion, and only then shows what the judge said (so the
judge cannot sway the person). Each answer is appended to the labels file at once (one
JSON line, flushed to disk), so stopping at any point loses nothing.

The sample is drawn uniformly at random (``random.Random(seed).sample``) from the run's
cases that have an output and no label yet for the criterion, sorted by id first so that a
seed reproduces a draw. ``--seed`` fixes it; without one a seed is chosen and printed. Every
label written records the draw (``"sample": "uniform seed=… n=… pool=… run=…"``), which is
what lets the corrected estimate say its assumption was checked.

Answers: ``y``/``pass``, ``n``/``fail``, ``s``/``skip`` (nothing written), ``q``/``quit``.
Answers may come from a pipe (one per line); the end of input stops like ``q``.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.cli._common import project_root, read_project_store
from oloproof.enums import CaseStatus, JudgmentStatus
from oloproof.errors import UsageError
from oloproof.project import load_project
from oloproof.project.labels import UNIFORM, load_labels
from oloproof.store.reader import CaseRow, get_run, load_cases
from oloproof.textsafe import printable

if TYPE_CHECKING:
    import argparse

_YES = frozenset({"y", "yes", "p", "pass"})
_NO = frozenset({"n", "no", "f", "fail"})
_SKIP = frozenset({"s", "skip"})
_QUIT = frozenset({"q", "quit"})
_SHOWN = 2000  # characters of a value shown; the rest is one `inspect --case` away


def _labels_path(args: argparse.Namespace) -> tuple[Path, str, bool]:
    """The labels file, how to show it, and whether oloproof.yaml names it."""
    if args.output:
        return Path(args.output), args.output, False
    project = load_project(args.config)
    name = project.config.human_labels
    if name is None:
        raise UsageError(
            "no labels file: write human_labels: data/labels.jsonl in oloproof.yaml (runs"
            " then measure the judge against it), or pass --output FILE"
        )
    shown = os.path.normpath(os.path.join(os.path.dirname(args.config), name))
    return project.root / name, shown, True


def _show(value: object) -> str:
    if value == "":
        return "(an empty string)"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
    text = printable(text) if "\n" not in text else "\n".join(
        printable(line) for line in text.split("\n")
    )
    if len(text) > _SHOWN:
        return text[:_SHOWN] + f"\n  … ({len(text) - _SHOWN} more characters)"
    return text


def _ask(prompt: str) -> str | None:
    while True:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            sys.stdout.write("\n")
            return None
        answer = line.strip().lower()
        if answer in _YES | _NO | _SKIP | _QUIT:
            return answer
        sys.stdout.write("  answer y (pass), n (fail), s (skip) or q (quit)\n")


def _append(path: Path, line: str) -> None:
    needs_newline = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(("\n" if needs_newline else "") + line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def command(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise UsageError(f"--n {args.n}: expected a whole number of cases of at least 1")
    project_root(args.config)
    conn = read_project_store(args.config)
    run = get_run(conn, args.run_id)
    judges = [m["criterion"] for m in run.metrics if m.get("judge")]
    if args.criterion not in judges:
        known = ", ".join(judges) or "none: this run has no rubric_judge"
        raise UsageError(
            f"--criterion {args.criterion}: not a judge criterion of run {run.id}"
            f" (judge criteria: {known})"
        )
    path, shown, configured = _labels_path(args)
    if not path.parent.is_dir():
        raise UsageError(f"{shown}: the folder {path.parent} does not exist")
    existing = load_labels(path, shown, judges) if path.exists() else None
    done = set(existing.for_criterion(args.criterion)) if existing else set()

    cases = load_cases(conn, run.id)
    pool = sorted(
        (c for c in cases if c.status == CaseStatus.OK and c.case_id not in done),
        key=lambda c: c.case_id,
    )
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**9)
    chosen: list[CaseRow] = random.Random(seed).sample(pool, min(args.n, len(pool)))
    if not chosen:
        sys.stdout.write(
            f"Nothing to label: every case of {run.id} with an output already has a label for"
            f" {args.criterion} in {shown}.\n"
        )
        return 0
    sample = f"{UNIFORM}seed={seed} n={args.n} pool={len(pool)} run={run.id}"
    sys.stdout.write(
        f"Labelling {args.criterion} on {len(chosen)} of {len(pool)} unlabelled cases of"
        f" {run.id}, drawn at random (seed {seed}; --seed {seed} draws them again).\n"
        f"Labels go to {shown}. Answer y (passes), n (fails), s (skip) or q (quit).\n"
    )
    written = 0
    for number, case in enumerate(chosen, 1):
        judgment = case.judgments.get(args.criterion)
        sys.stdout.write(f"\n[{number}/{len(chosen)}] case {printable(case.case_id)}\n")
        sys.stdout.write(f"input:\n{_show(case.input)}\n")
        if case.expected is not None:
            sys.stdout.write(f"expected:\n{_show(case.expected)}\n")
        sys.stdout.write(f"output:\n{_show(case.output)}\n")
        answer = _ask(f"Does this output pass {args.criterion}? [y/n/s/q] ")
        if answer is None or answer in _QUIT:
            break
        if answer in _SKIP:
            continue
        passed = answer in _YES
        label: dict[str, object] = {"id": case.case_id, "criterion": args.criterion,
                                    "pass": passed}
        if args.labeler:
            label["labeler"] = args.labeler
        label["sample"] = sample
        _append(path, json.dumps(label, ensure_ascii=False))
        written += 1
        if judgment is None or judgment.status != JudgmentStatus.OK or judgment.passed is None:
            verdict = "no verdict (the judge failed on this case)"
        else:
            agrees = "agrees" if judgment.passed == passed else "DISAGREES"
            verdict = f"{'PASS' if judgment.passed else 'FAIL'} ({agrees})"
            if judgment.reason:
                verdict += f": {printable(judgment.reason)}"
        sys.stdout.write(f"the judge said: {verdict}\n")
    hint = "" if configured else (
        f" Add human_labels: {shown} to oloproof.yaml so that runs measure the judge against"
        " them."
    )
    sys.stdout.write(
        f"\n{written} label{'' if written == 1 else 's'} written to {shown}. Rerun (all from the"
        f" cache) or `oloproof gate {run.id} --labels {shown}` to measure the judge.{hint}\n"
    )
    return 0
