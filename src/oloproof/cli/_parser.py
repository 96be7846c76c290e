"""The ``oloproof`` command line's parser: every command, its help and its arguments.

Arguments are declared here, not in the command modules, so that ``--help`` never
imports a command's dependencies; :func:`build_parser` declares only the arguments
of the command that runs. ``oloproof.cli.main`` imports this module for every
command but the top-level ``--help`` at the default width (cli/_help.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

COMMANDS = {
    "run": ("oloproof.cli.run", "Run the suite against the system, store it, and decide the policy."),
    "gate": ("oloproof.cli.gate", "Re-decide a stored run under a policy, calling nothing."),
    "inspect": ("oloproof.cli.inspect", "Show a stored run, one of its cases, or its failures."),
    "runs": ("oloproof.cli.runs", "List stored runs, newest first."),
    "init": ("oloproof.cli.init", "Create a project, or copy an example project."),
    "plan": ("oloproof.cli.plan", "Size undecided rules: how many more cases would decide them."),
    "compare": ("oloproof.cli.compare", "Compare a candidate run with a baseline, case by case."),
    "label": ("oloproof.cli.label", "Label a random sample of a run's cases by hand, to measure a judge."),
    "report": ("oloproof.cli.report", "Write a stored run or comparison as one self-contained HTML file."),
    "view": ("oloproof.cli.view", "Browse the project's store in a local web viewer (read-only; needs oloproof[view])."),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


class _VersionAction(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        import oloproof

        sys.stdout.write(f"oloproof {oloproof.__version__}\n")
        parser.exit()


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's own formatter, told the width: left to itself it imports shutil (and
    with it bz2 and lzma) to ask the terminal, a tenth of --help's start-up."""
    from oloproof.cli.main import help_width

    return argparse.HelpFormatter(prog, width=help_width())


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``only`` (a command's name), that command is the only one
    declared: the top-level usage names ``COMMAND`` and lists no choices, so every message
    reads the same, and a command does not pay for nine others (argparse asks gettext for
    every word of each, and gettext searches the disk for a catalogue each time)."""
    parser = _Parser(
        prog="oloproof",
        formatter_class=_formatter,
        description=(
            "Is it good enough, and how sure can we be? Run a system over a suite, "
            "put an exact interval behind every metric, and decide release rules."
        ),
        epilog="Exit codes: 0 nothing blocks · 1 FAIL · 2 usage or configuration error · "
        "3 INSUFFICIENT_EVIDENCE · 4 MANUAL_REVIEW · 5 incomplete run.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        if only is not None and only != name:
            continue
        cmd = sub.add_parser(name, help=help_text, description=help_text, formatter_class=_formatter)
        cmd.set_defaults(_module=module)
        _add_arguments(name, cmd)
    return parser


def _add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    # Arguments are declared here (not in the command modules) so that --help
    # never imports a command's dependencies.
    cfg_help = "the project file (default: ./oloproof.yaml)"
    if name == "run":
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--policy", help="the release policy (default: policy: in oloproof.yaml, else release.yaml beside it; required)")
        p.add_argument("--json", action="store_true", help="stream events as JSON lines on stdout; tables go to stderr")
        p.add_argument("--no-cache", action="store_true", help="call everything afresh, and refresh the cache")
        p.add_argument("--junit-xml", metavar="FILE", help="also write the decisions as a JUnit XML report (one test case per rule)")
        p.add_argument("--junit-undecided", choices=("auto", "skipped", "failure"), default="auto", help="INSUFFICIENT_EVIDENCE and MANUAL_REVIEW in the JUnit report: a failure when the rule blocks, else skipped (auto, the default), or always skipped, or always a failure")
        p.add_argument("--github-annotations", action="store_true", help="print ::error / ::warning lines for rules that block or warn (GitHub Actions)")
        p.add_argument("--group-by", action="append", metavar="KEY", help="break every metric down by metadata KEY, each group with its own interval (repeatable)")
        p.add_argument("--trials", type=_trials, metavar="K", help="call the system K times per case (default: trials: in oloproof.yaml, else 1); see docs/repeated-trials.md")
        subset = p.add_argument_group(
            "subsets", "run part of the suite; the run is stored as DECIDED/SUBSET and never allows a release (exit 5 unless a rule FAILs)"
        )
        subset.add_argument("--limit", type=_positive_int, metavar="N", help="the first N cases (after --case and --where)")
        subset.add_argument("--sample", action="store_true", help="with --limit: a random N instead of the first N")
        subset.add_argument("--seed", type=int, metavar="S", help="with --sample: the seed of the random choice (default: a new one each run)")
        subset.add_argument("--case", action="append", metavar="ID", help="this case (repeatable)")
        subset.add_argument("--where", action="append", metavar="EXPR", help="""cases where EXPR holds, e.g. 'metadata.lang == "fr"' (repeatable: all must hold)""")
    elif name == "gate":
        p.add_argument("run_id", metavar="RUN_ID", help="a run id, or 'latest'")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--policy", help="the policy to decide under (default: the one the run was decided under)")
        p.add_argument("--labels", metavar="FILE", help="human labels to measure the judges against (default: the ones stored with the run)")
        p.add_argument("--group-by", action="append", metavar="KEY", help="break every metric down by metadata KEY too (repeatable)")
        p.add_argument("--json", action="store_true", help="print the decisions as one JSON document")
        p.add_argument("--junit-xml", metavar="FILE", help="also write the decisions as a JUnit XML report (one test case per rule)")
        p.add_argument("--junit-undecided", choices=("auto", "skipped", "failure"), default="auto", help="INSUFFICIENT_EVIDENCE and MANUAL_REVIEW in the JUnit report: a failure when the rule blocks, else skipped (auto, the default), or always skipped, or always a failure")
        p.add_argument("--github-annotations", action="store_true", help="print ::error / ::warning lines for rules that block or warn (GitHub Actions)")
    elif name == "inspect":
        p.add_argument("run_id", metavar="RUN_ID", help="a run id, a comparison id, or 'latest'")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--case", metavar="ID", help="show one case: input, expected, output, judgments, attempts, errors")
        p.add_argument("--failures", action="store_true", help="show only cases that failed, erred or went missing")
        p.add_argument("--flaky", action="store_true", help="show the cases whose repeated trials disagree (a run with trials > 1)")
        p.add_argument("--judges", action="store_true", help="show each judge against the human labels stored with the run")
        p.add_argument("--json", action="store_true", help="print one JSON document")
    elif name == "runs":
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--limit", type=int, default=50, help="at most this many runs (default 50)")
        p.add_argument("--json", action="store_true", help="print one JSON document")
    elif name == "init":
        p.add_argument("directory", nargs="?", default=".", metavar="DIR", help="where to create the project (default: .)")
        p.add_argument("--example", metavar="NAME", help="copy an example project; 'list' lists them")
        p.add_argument("--force", action="store_true", help="write into a directory that is not empty")
    elif name == "label":
        p.add_argument("run_id", metavar="RUN_ID", help="a run id, or 'latest'")
        p.add_argument("--criterion", required=True, help="the judge criterion to label")
        p.add_argument("--n", type=int, default=20, help="how many cases to draw (default 20)")
        p.add_argument("--seed", type=int, help="draw the same cases again (default: a new draw, its seed printed)")
        p.add_argument("--output", metavar="FILE", help="the labels file (default: human_labels in oloproof.yaml)")
        p.add_argument("--labeler", help="your name or initials, stored with each label")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
    elif name == "plan":
        p.add_argument("ref", metavar="RUN_ID|CMP_ID", help="a run id (with --run) or a comparison id")
        p.add_argument("--run", action="store_true", help="size the rules of a run (RUN_ID)")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--policy", help="the policy whose rules to size (default: the one stored with the run)")
        p.add_argument("--json", action="store_true", help="print the plan as one JSON document")
        p.add_argument("--assurance", metavar="P", help="also size for deciding with probability P (0 < P < 1) if the true rate (or, for a comparison, the true paired outcomes) is as observed; BINARY rules")
    elif name == "compare":
        p.add_argument("candidate", metavar="CANDIDATE", help="the candidate run id")
        p.add_argument("baseline", metavar="BASELINE", help="the baseline run id")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--policy", help="the comparison policy (default: compare.yaml beside the project, if any)")
        p.add_argument("--json", action="store_true", help="print the comparison as one JSON document")
    elif name == "report":
        p.add_argument("ref", metavar="RUN_ID|CMP_ID", help="a run id, 'latest', or a comparison id")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--output", "-o", metavar="FILE", help="where to write it (default: oloproof-report-<id>.html)")
    elif name == "view":
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
        p.add_argument("--no-open", action="store_true", help="print the address; do not open a browser")


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of cases, 1 or more, got '{value}'")
    return n


def _trials(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= 100:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of trials from 1 to 100, got '{value}'"
        )
    return n


# The width cli/_help.py is kept for: argparse's, with COLUMNS unset and no terminal.
HELP_WIDTH = 78


def help_module() -> str:
    """The source of cli/_help.py: the top-level help as argparse prints it at
    :data:`HELP_WIDTH` (``python -m oloproof.cli._parser > src/oloproof/cli/_help.py``)."""
    parser = build_parser()
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=HELP_WIDTH)
    return (
        '"""The top-level ``oloproof --help``, kept as argparse prints it at the default\n'
        'width, so that printing it imports nothing (generated by cli/_parser.py; a test\n'
        'keeps it the same as argparse\'s)."""\n\n'
        f"WIDTH = {HELP_WIDTH}\n"
        f"TOP_HELP = {parser.format_help()!r}\n"
    )


if __name__ == "__main__":
    sys.stdout.write(help_module())
