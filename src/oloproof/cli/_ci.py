"""Writing the CI outputs of ``run`` and ``gate``: ``--junit-xml``, annotations, step summary.

- ``--junit-xml FILE``: its folder must exist before anything runs (exit 2 otherwise); the
  file is written whole or not at all (a temporary file renamed over it). A path that is a
  pipe, a terminal or a device (``/dev/stdout``) is written into, never replaced. If it cannot be
  written after the run, the error is one line and a run that would exit 0 exits 2 instead
  (a CI job asked for a report it did not get); a blocking exit code is kept as it is.
- ``--github-annotations``: workflow command lines (``::error``/``::warning``), on standard
  output, or on standard error under ``--json`` (standard output holds only events then).
- ``$GITHUB_STEP_SUMMARY`` (set by GitHub Actions): a Markdown summary is appended to the
  file it names. A failure to append is reported on standard error and changes nothing else.
"""

from __future__ import annotations

import contextlib
import os
import sys

from oloproof.errors import UsageError
from oloproof.render.out import write_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    from oloproof.api import RunResult
    from oloproof.render.ci import CiRun

__all__ = ["check_outputs", "ci_run", "write_matrix_outputs", "write_outputs"]


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before anything runs, a ``--junit-xml`` path that cannot be written."""
    target = getattr(args, "junit_xml", None)
    if target is None:
        return
    if os.path.isdir(target):
        raise UsageError(f"--junit-xml {target}: is a folder; give a file name such as report.xml")
    config = getattr(args, "config", None)
    if config is not None:
        from oloproof.cli._common import refuse_store_folder

        refuse_store_folder("--junit-xml", target, config, "report.xml")
    if os.path.exists(target) and not os.path.isfile(target):
        return  # a pipe or a device, written into: its folder is not written
    parent = os.path.dirname(target) or "."
    if not os.path.isdir(parent):
        raise UsageError(f"--junit-xml {target}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--junit-xml {target}: the folder {parent} is not writable")


def _write_junit(target: str, text: str, command: str) -> bool:
    """Write the JUnit report whole; ``False`` (said on stderr) when it cannot be."""
    try:
        _write_whole(target, text)
    except OSError as exc:
        sys.stderr.write(
            f"oloproof {command}: error: cannot write the JUnit report {target}:"
            f" {exc.strerror or exc}\n"
        )
        return False
    return True


def _append_summary(texts: Iterable[str], command: str) -> None:
    """Append to the file GITHUB_STEP_SUMMARY names, when it names one (a warning if not)."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        return
    try:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.writelines(texts)
    except OSError as exc:
        sys.stderr.write(
            f"oloproof {command}: warning: cannot append to GITHUB_STEP_SUMMARY"
            f" ({summary}): {exc.strerror or exc}\n"
        )


def _write_whole(path: str, text: str) -> None:
    import stat
    import tempfile

    try:
        mode = os.stat(path).st_mode  # follows a link
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        # A pipe, a terminal, a device (/dev/stdout): written into, as `cat > PATH` would
        # and as `report -o` does; a rename would put a file in its place (in /dev, as root).
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return

    fd, tmp = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path) or "."
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def wants_outputs(args: argparse.Namespace) -> bool:
    """Whether any CI output is asked for (a command builds its ``CiRun`` only then)."""
    return (getattr(args, "junit_xml", None) is not None
            or bool(getattr(args, "github_annotations", False))
            or bool(os.environ.get("GITHUB_STEP_SUMMARY")))


def ci_run(result: RunResult, duration_s: float | None = None) -> CiRun:
    """What the CI outputs need of a run's result (render/ci.py)."""
    from oloproof.render.ci import CiRun
    from oloproof.render.tables import subset_notes

    return CiRun(
        run_id=result.run_id, project=result.project, status=result.status,
        completeness=result.completeness, gate=result.gate, exit_code=result.exit_code,
        decisions=result.decisions, summaries=list(result.metrics.values()),
        rule_ids=result.rule_ids, stop_reason=result.stop_reason, duration_s=duration_s,
        # What the terminal shows beside the gate, where a CI user reads it.
        notes=[*subset_notes(result), *result.gate_notes,
               *([result.declaration] if result.declaration else [])],
    )


def write_outputs(run: CiRun, args: argparse.Namespace, command: str) -> int:
    """Write what was asked for; the exit code to leave with (``run.exit_code`` unless a
    requested report could not be written)."""
    from oloproof.render.ci import github_annotations, github_summary, junit_xml

    code = run.exit_code
    target = getattr(args, "junit_xml", None)
    if target is not None and not _write_junit(
        target, junit_xml(run, undecided=args.junit_undecided), command
    ):
        code = code or 2
    if getattr(args, "github_annotations", False):
        stream = sys.stderr if getattr(args, "json", False) else sys.stdout
        write_text(stream, "".join(line + "\n" for line in github_annotations(run)))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        _append_summary([github_summary(run)], command)
    return code


def write_matrix_outputs(
    variants: Sequence[tuple[str, CiRun]], doc: Mapping[str, Any], args: argparse.Namespace,
    duration_s: float | None,
) -> int:
    """``run --matrix``'s CI outputs: one JUnit suite per variant and one of the comparisons
    (render/ci.py ``junit_xml_matrix``), each variant's annotations with the variant in
    their title, and each variant's step summary. The exit code: the matrix's, unless a
    requested report could not be written (as :func:`write_outputs`)."""
    from oloproof.render.ci import github_annotations, github_summary, junit_xml_matrix

    code = int(doc["exit_code"])
    target = getattr(args, "junit_xml", None)
    if target is not None:
        text = junit_xml_matrix(
            variants, doc["comparisons"], matrix_id=str(doc["matrix_id"]),
            project=str(doc["project"]), baseline=str(doc["baseline"]),
            undecided=args.junit_undecided, duration_s=duration_s,
        )
        if not _write_junit(target, text, "run"):
            code = code or 2
    if getattr(args, "github_annotations", False):
        stream = sys.stderr if getattr(args, "json", False) else sys.stdout
        write_text(stream, "".join(line + "\n" for name, run in variants
                                   for line in github_annotations(run, variant=name)))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        _append_summary((github_summary(run, variant=name) for name, run in variants), "run")
    return code
