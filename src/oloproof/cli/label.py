"""``oloproof label RUN --criterion C``: a person labels a random sample of a run's cases.

For each case drawn it shows the input, the expected value and the system's output, asks
whether the output passes the criterion, and only then shows what the judge said (so the
judge cannot sway the person). Each answer is appended to the labels file at once (one
JSON line, flushed to disk), so stopping at any point loses nothing.

The sample is drawn uniformly at random (``random.Random(seed).sample``) from the run's
cases that have an output and no label yet for the criterion, sorted by id first so that a
seed reproduces a draw. ``--seed`` fixes it; without one a seed is chosen and printed. Every
label written records the draw (``"sample": "uniform seed=… n=… pool=… run=…"``), which is
what lets the corrected estimate say its assumption was checked, and what the person saw
(``"seen"``: the digest of the input, expected value and output), so that a run whose
output for the case differs does not use the label. A case whose labels are all about
another output is drawn again.

Answers: ``y``/``pass``, ``n``/``fail``, ``s``/``skip`` (nothing written), ``q``/``quit``.
For a scored judge's criterion (``scale: [low, high]``) the answer is a whole number on the
scale instead of ``y``/``n``, and the label written carries ``"score"``. Answers may come
from a pipe (one per line); the end of input stops like ``q``.
"""

from __future__ import annotations

import contextlib
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
from oloproof.project.labels import UNIFORM, load_labels, scales_of_run, seen_digest
from oloproof.store.reader import CaseRow, get_run, load_cases
from oloproof.textsafe import one_line, printable

if TYPE_CHECKING:
    import argparse

from oloproof.cli._dialogue import QUIT, SKIP, YES, CannotShow, ask, out, show


def _labels_path(args: argparse.Namespace) -> tuple[Path, str, bool]:
    """The labels file, how to show it (escaped: a name in a cloned project's oloproof.yaml
    may hold an escape sequence), and whether oloproof.yaml names it."""
    if args.output:
        return Path(args.output), printable(args.output), False
    project = load_project(args.config)
    name = project.config.human_labels
    if name is None:
        raise UsageError(
            "no labels file: write human_labels: data/labels.jsonl in oloproof.yaml (runs"
            " then measure the judge against it), or pass --output FILE"
        )
    shown = os.path.normpath(os.path.join(os.path.dirname(args.config), name))
    return Path(project.root, name), printable(shown), True


def _judge_said(judgment: object, scale: tuple[int, int] | None, answer: str) -> str:
    """What the judge said about the case, beside the person's answer."""
    status = getattr(judgment, "status", None)
    if scale is not None:
        score = getattr(judgment, "score", None)
        if judgment is None or status != JudgmentStatus.OK or score is None:
            return "no score (the judge failed on this case)"
        gap = abs(float(score) - int(answer))
        agrees = "agrees" if gap == 0 else f"DIFFERS by {gap:g}"
        said = f"{float(score):g} ({agrees})"
    else:
        passed = getattr(judgment, "passed", None)
        if judgment is None or status != JudgmentStatus.OK or passed is None:
            return "no verdict (the judge failed on this case)"
        agrees = "agrees" if passed == (answer in YES) else "DISAGREES"
        said = f"{'PASS' if passed else 'FAIL'} ({agrees})"
    reason = getattr(judgment, "reason", None)
    return said + (f": {printable(reason)}" if reason else "")


def _append(path: Path, label: dict[str, object]) -> bool:
    """Append ``label`` to the labels file, unless a label of the same case and criterion
    about the same output (or about any: no ``seen``) is there already: another session
    labelling the same run (two people at once) wrote it since this one drew its cases,
    and a second label of a case is refused by every later run. The check and the append
    hold the file's lock (POSIX), so two sessions cannot both pass it. False: not written."""
    import contextlib

    with path.open("a+b") as fh:
        with contextlib.suppress(ImportError, OSError):
            import fcntl  # POSIX; elsewhere the check still narrows the window

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        fh.seek(0)
        text = fh.read()
        if any(_same_label(line, label) for line in text.splitlines()):
            return False
        needs_newline = bool(text) and not text.endswith(b"\n")
        line = json.dumps(label, ensure_ascii=False)
        fh.write((("\n" if needs_newline else "") + line + "\n").encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())
    return True


def _same_label(line: bytes, label: dict[str, object]) -> bool:
    """Whether the labels file's ``line`` labels ``label``'s case and criterion about the
    same output (a line that cannot be read is left to the loader to refuse)."""
    try:
        other = json.loads(line)
    except ValueError:
        return False
    return (
        isinstance(other, dict) and other.get("id") == label["id"]
        and other.get("criterion") == label["criterion"]
        and other.get("seen", label["seen"]) == label["seen"]
    )


def command(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise UsageError(f"--n {args.n}: expected a whole number of cases of at least 1")
    if sys.stdin is None:  # started with `<&-`: Python has no stream to read the answers from
        raise UsageError("standard input is closed, and label reads your answers there: run"
                         " it in a terminal, or pipe the answers in (one a line)")
    with contextlib.suppress(AttributeError, ValueError):
        # An answer its encoding cannot read (an accented key under PYTHONIOENCODING=ascii)
        # is a wrong answer, asked again, not UnicodeDecodeError (exit 70).
        sys.stdin.reconfigure(errors="replace")  # type: ignore[union-attr]
    project_root(args.config)
    conn = read_project_store(args.config)
    run = get_run(conn, args.run_id)
    scales = scales_of_run(run.metrics)
    judges = list(scales)
    if args.criterion not in judges:
        known = ", ".join(judges) or "none: this run has no rubric_judge"
        raise UsageError(
            f"--criterion {args.criterion}: not a judge criterion of run {run.id}"
            f" (judge criteria: {known})"
        )
    path, shown, configured = _labels_path(args)
    if not path.parent.is_dir():
        raise UsageError(f"{shown}: the folder {path.parent} does not exist")
    existing = load_labels(path, shown, scales) if path.exists() else None
    scale = scales[args.criterion]

    cases = load_cases(conn, run.id)
    # A case is done when a label of it applies to this run: one about another output
    # (the system or the case changed since) does not, and the case may be drawn again.
    done = set(existing.for_run(
        args.criterion, {c.case_id for c in cases},
        {c.case_id: seen_digest(c.input, c.expected, c.output) for c in cases},
    ).applied) if existing else set()
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
    try:
        written = _session(args, run.id, chosen, len(pool), seed, sample, path, shown, scale)
    except CannotShow as exc:  # so no case can be asked about
        raise UsageError(
            f"standard output cannot be written ({exc}), and label shows each case there;"
            f" the labels answered before it failed are in {shown}"
        ) from None
    hint = "" if configured else (
        f" Add human_labels: {shown} to oloproof.yaml so that runs measure the judge against"
        " them."
    )
    sys.stdout.write(
        f"\n{written} label{'' if written == 1 else 's'} written to {shown}. Rerun (all from the"
        f" cache) or `oloproof gate {run.id} --labels {shown}` to measure the judge.{hint}\n"
    )
    return 0


def _session(
    args: argparse.Namespace, run_id: str, chosen: list[CaseRow], pool: int, seed: int,
    sample: str, path: Path, shown: str, scale: tuple[int, int] | None,
) -> int:
    """Show each chosen case, ask for its label and append it: the labels written."""
    how = ("y (passes), n (fails)" if scale is None
           else f"a whole number from {scale[0]} (worst) to {scale[1]} (best)")
    out(
        f"Labelling {args.criterion} on {len(chosen)} of {pool} unlabelled cases of"
        f" {run_id}, drawn at random (seed {seed}; --seed {seed} draws them again).\n"
        f"Labels go to {shown}. Answer {how}, s (skip) or q (quit).\n"
    )
    written = 0
    for number, case in enumerate(chosen, 1):
        judgment = case.judgments.get(args.criterion)
        out(f"\n[{number}/{len(chosen)}] case {one_line(case.case_id)}\n")
        out(f"input:\n{show(case.input)}\n")
        if case.expected is not None:
            out(f"expected:\n{show(case.expected)}\n")
        out(f"output:\n{show(case.output)}\n")
        if scale is None:
            answer = ask(f"Does this output pass {args.criterion}? [y/n/s/q] ")
        else:
            answer = ask(f"Score this output for {args.criterion} from {scale[0]} to"
                          f" {scale[1]} [{scale[0]}-{scale[1]}/s/q] ", scale)
        if answer is None or answer in QUIT:
            break
        if answer in SKIP:
            continue
        label: dict[str, object] = {"id": case.case_id, "criterion": args.criterion}
        if scale is None:
            label["pass"] = answer in YES
        else:
            label["score"] = int(answer)
        if args.labeler:
            label["labeler"] = args.labeler
        label["sample"] = sample
        label["seen"] = seen_digest(case.input, case.expected, case.output)
        if not _append(path, label):
            out(
                f"case {one_line(case.case_id)} was labelled for {args.criterion} meanwhile"
                f" (another session on {shown}): this label is not written\n"
            )
            continue
        written += 1
        out(f"the judge said: {_judge_said(judgment, scale, answer)}\n")
    return written
