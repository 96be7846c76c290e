"""What each command accepts, declared once, and a parser for the usual command line that
does not need argparse.

:func:`declare` states a command's arguments; cli/_parser.py gives them to argparse, which
prints every help and every error. Importing argparse, building a command's parser and
parsing (argparse asks gettext, which looks for a catalogue on disk, for every word it may
print) is about 4 ms of a 12 ms interpreter start; an unchanged rerun or a ``gate`` takes
few arguments and no help. :func:`fast_parse` reads ``COMMAND`` followed by exact long
options and plain values and returns the same namespace argparse would; anything else (a
help, a short or abbreviated option, ``--opt=value``, ``--``, a value that starts with a
dash or that a type or the choices refuse, a missing or extra argument) returns ``None``
and argparse parses it, so every message stays argparse's own. tests/cli/test_fast_args.py
holds the two parsers equal over thousands of command lines.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Callable, Sequence
    from typing import Any

COMMANDS = {
    "run": (
        "oloproof.cli.run",
        "Run the suite against the system, store it, and decide the policy.",
    ),
    "gate": ("oloproof.cli.gate", "Re-decide a stored run under a policy, calling nothing."),
    "inspect": ("oloproof.cli.inspect", "Show a stored run, one of its cases, or its failures."),
    "runs": ("oloproof.cli.runs", "List stored runs, newest first."),
    "init": ("oloproof.cli.init", "Create a project, or copy an example project."),
    "plan": ("oloproof.cli.plan", "Size undecided rules: how many more cases would decide them."),
    "compare": ("oloproof.cli.compare", "Compare a candidate run with a baseline, case by case."),
    "label": (
        "oloproof.cli.label",
        "Label a random sample of a run's cases by hand, to measure a judge.",
    ),
    "report": (
        "oloproof.cli.report",
        "Write a stored run or comparison as one self-contained HTML file.",
    ),
    "view": (
        "oloproof.cli.view",
        "Browse the project's store in a local web viewer (read-only; needs oloproof[view]).",
    ),
    "store": (
        "oloproof.cli.store",
        "push: copy runs of the local store to the team store (needs oloproof[postgres]).",
    ),
    "merge": (
        "oloproof.cli.merge",
        "Join the shards of a suite (run --shard I/K) into one run, and decide it.",
    ),
}


def declare(name: str, p: Any) -> None:
    """Declare command ``name``'s arguments on ``p``: an argparse parser, or a
    :class:`_Spec` that only records them."""
    cfg_help = "the project file (default: ./oloproof.yaml)"
    if name == "run":
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--policy",
            help="the release policy (default: policy: in oloproof.yaml, else release.yaml beside it; required)",
        )
        p.add_argument(
            "--json",
            action="store_true",
            help="stream events as JSON lines on stdout; tables go to stderr",
        )
        p.add_argument(
            "--no-cache", action="store_true", help="call everything afresh, and refresh the cache"
        )
        _ci_options(p)
        p.add_argument(
            "--group-by",
            action="append",
            metavar="KEY",
            help="break every metric down by metadata KEY, each group with its own interval (repeatable)",
        )
        p.add_argument(
            "--trials",
            type=_trials,
            metavar="K",
            help="call the system K times per case (default: trials: in oloproof.yaml, else 1); see docs/repeated-trials.md",
        )
        p.add_argument(
            "--executor",
            choices=("local", "ray"),
            help="where the system's calls and custom evaluators run (default: executor: in oloproof.yaml, else local); ray needs oloproof[ray], see docs/scaling.md",
        )
        p.add_argument(
            "--ray-address",
            metavar="ADDRESS",
            help="with --executor ray: the Ray cluster to use (default: RAY_ADDRESS, else a local Ray instance started for the run)",
        )
        subset = p.add_argument_group(
            "subsets",
            "run part of the suite; the run is stored as DECIDED/SUBSET and never allows a release (exit 5 unless a rule FAILs)",
        )
        subset.add_argument(
            "--limit",
            type=_positive_int,
            metavar="N",
            help="the first N cases (after --case and --where)",
        )
        subset.add_argument(
            "--sample", action="store_true", help="with --limit: a random N instead of the first N"
        )
        subset.add_argument(
            "--seed",
            type=int,
            metavar="S",
            help="with --sample: the seed of the random choice (default: a new one each run)",
        )
        subset.add_argument("--case", action="append", metavar="ID", help="this case (repeatable)")
        subset.add_argument(
            "--where",
            action="append",
            metavar="EXPR",
            help="""cases where EXPR holds, e.g. 'metadata.lang == "fr"' (repeatable: all must hold)""",
        )
        subset.add_argument(
            "--shard",
            metavar="I/K",
            help="shard I of K (numbered from 1) by a stable hash of the case id; `oloproof merge` joins the K shards into one run (docs/scaling.md)",
        )
    elif name == "gate":
        p.add_argument("run_id", metavar="RUN_ID", help="a run id, or 'latest'")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--policy",
            help="the policy to decide under (default: the one the run was decided under)",
        )
        p.add_argument(
            "--labels",
            metavar="FILE",
            help="human labels to measure the judges against (default: the ones stored with the run)",
        )
        p.add_argument(
            "--group-by",
            action="append",
            metavar="KEY",
            help="break every metric down by metadata KEY too (repeatable)",
        )
        p.add_argument(
            "--json", action="store_true", help="print the decisions as one JSON document"
        )
        _ci_options(p)
    elif name == "inspect":
        p.add_argument("run_id", metavar="RUN_ID", help="a run id, a comparison id, or 'latest'")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--case",
            metavar="ID",
            help="show one case: input, expected, output, judgments, attempts, errors",
        )
        p.add_argument(
            "--failures",
            action="store_true",
            help="show only cases that failed, erred or went missing",
        )
        p.add_argument(
            "--flaky",
            action="store_true",
            help="show the cases whose repeated trials disagree (a run with trials > 1)",
        )
        p.add_argument(
            "--judges",
            action="store_true",
            help="show each judge against the human labels stored with the run",
        )
        p.add_argument("--json", action="store_true", help="print one JSON document")
    elif name == "runs":
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--limit", type=_run_limit, default=50, metavar="N",
            help="at most this many runs (default 50)",
        )
        p.add_argument("--json", action="store_true", help="print one JSON document")
    elif name == "init":
        p.add_argument(
            "directory",
            nargs="?",
            default=".",
            metavar="DIR",
            help="where to create the project (default: .)",
        )
        p.add_argument(
            "--example", metavar="NAME", help="copy an example project; 'list' lists them"
        )
        p.add_argument(
            "--force", action="store_true", help="write into a directory that is not empty"
        )
    elif name == "label":
        p.add_argument("run_id", metavar="RUN_ID", help="a run id, or 'latest'")
        p.add_argument("--criterion", required=True, help="the judge criterion to label")
        p.add_argument("--n", type=int, default=20, help="how many cases to draw (default 20)")
        p.add_argument(
            "--seed",
            type=int,
            help="draw the same cases again (default: a new draw, its seed printed)",
        )
        p.add_argument(
            "--output",
            metavar="FILE",
            help="the labels file (default: human_labels in oloproof.yaml)",
        )
        p.add_argument("--labeler", help="your name or initials, stored with each label")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
    elif name == "plan":
        p.add_argument(
            "ref", metavar="RUN_ID|CMP_ID", help="a run id (with --run) or a comparison id"
        )
        p.add_argument("--run", action="store_true", help="size the rules of a run (RUN_ID)")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--policy", help="the policy whose rules to size (default: the one stored with the run)"
        )
        p.add_argument("--json", action="store_true", help="print the plan as one JSON document")
        p.add_argument(
            "--assurance",
            metavar="P",
            help="also size for deciding with probability P (0 < P < 1) if the true rate (or, for a comparison, the true paired outcomes) is as observed; BINARY rules",
        )
    elif name == "compare":
        p.add_argument("candidate", metavar="CANDIDATE", help="the candidate run id")
        p.add_argument("baseline", metavar="BASELINE", help="the baseline run id")
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--policy",
            help="the comparison policy (default: compare.yaml beside the project, if any)",
        )
        p.add_argument(
            "--json", action="store_true", help="print the comparison as one JSON document"
        )
    elif name == "report":
        p.add_argument(
            "ref", metavar="RUN_ID|CMP_ID", help="a run id, 'latest', or a comparison id"
        )
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--output",
            "-o",
            metavar="FILE",
            help="where to write it (default: oloproof-report-<id>.html; '-' for standard output)",
        )
        p.add_argument(
            "--cases",
            type=_case_cap,
            default="1000",
            metavar="N|all",
            help="the most cases the file carries, the failed and missing ones first (default: 1000; 'all' for every case)",
        )
    elif name == "view":
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)"
        )
        p.add_argument(
            "--no-open", action="store_true", help="print the address; do not open a browser"
        )
        p.add_argument(
            "--token",
            metavar="TOKEN",
            help="the token a browser must show (default: OLOPROOF_VIEW_TOKEN, else a random one; prefer the variable: other users can read a command line)",
        )
    elif name == "store":
        p.add_argument(
            "action", choices=["push"],
            help="push: copy runs of .oloproof/ to the team store (store: or OLOPROOF_STORE);"
            " a run already there is left as it is",
        )
        p.add_argument(
            "runs", nargs="*", metavar="RUN",
            help="run ids, unique prefixes or latest (default: every run of the local store)",
        )
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument("--json", action="store_true", help="print what was pushed as JSON")


    elif name == "merge":
        p.add_argument(
            "paths", nargs="*", metavar="PATH",
            help="where the shard runs are: project directories, store files"
            " (.oloproof/store.sqlite) or postgresql:// URLs (default: this project's store)",
        )
        p.add_argument("--config", default="oloproof.yaml", help=cfg_help)
        p.add_argument(
            "--json", action="store_true", help="print the merged run as one JSON document"
        )


def _ci_options(p: Any) -> None:
    """The CI report options ``run`` and ``gate`` share."""
    p.add_argument(
        "--junit-xml",
        metavar="FILE",
        help="also write the decisions as a JUnit XML report (one test case per rule)",
    )
    p.add_argument(
        "--junit-undecided",
        choices=("auto", "skipped", "failure"),
        default="auto",
        help="INSUFFICIENT_EVIDENCE and MANUAL_REVIEW in the JUnit report: a failure when the rule blocks, else skipped (auto, the default), or always skipped, or always a failure",
    )
    p.add_argument(
        "--github-annotations",
        action="store_true",
        help="print ::error / ::warning lines for rules that block or warn (GitHub Actions)",
    )


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise _type_error(f"expected a whole number of cases, 1 or more, got '{value}'")
    return n


#: The largest ``runs --limit``: more runs than any store holds.
MAX_RUNS_LIMIT = 1_000_000_000


def _run_limit(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_RUNS_LIMIT:
        raise _type_error(
            f"expected a whole number of runs from 1 to {MAX_RUNS_LIMIT}, got '{value}'"
        )
    return n


def _case_cap(value: str) -> int | None:
    """``--cases``: a whole number of cases, 1 or more, or ``all`` (None: no cap)."""
    if value == "all":
        return None
    try:
        return _positive_int(value)
    except Exception:  # noqa: BLE001 - the same refusal, naming what is accepted
        raise _type_error(f"expected a whole number of cases, 1 or more, or 'all', got '{value}'") from None


def _trials(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= 100:
        raise _type_error(f"expected a whole number of trials from 1 to 100, got '{value}'")
    return n


def _type_error(message: str) -> Exception:
    import argparse

    return argparse.ArgumentTypeError(message)


class _Argument:
    __slots__ = ("action", "choices", "default", "dest", "flags", "nargs", "required", "type")

    def __init__(self, flags: tuple[str, ...], kw: dict[str, Any]) -> None:
        self.flags = flags
        self.action: str | None = kw.get("action")
        self.choices: Sequence[str] | None = kw.get("choices")
        self.nargs: str | None = kw.get("nargs")
        self.required: bool = kw.get("required", False)
        self.type: Callable[[str], Any] | None = kw.get("type")
        self.default: Any = kw.get("default", False if self.action == "store_true" else None)
        if "dest" in kw:
            self.dest: str = kw["dest"]
        elif flags[0].startswith("-"):
            long = next((f for f in flags if f.startswith("--")), flags[0])
            self.dest = long.lstrip("-").replace("-", "_")
        else:
            self.dest = flags[0]


class _Spec:
    """Records what :func:`declare` declares (the part of argparse's interface it uses)."""

    def __init__(self) -> None:
        self.arguments: list[_Argument] = []

    def add_argument(self, *flags: str, **kw: Any) -> None:
        self.arguments.append(_Argument(flags, kw))

    def add_argument_group(self, *args: str) -> _Spec:
        return self


def fast_parse(words: Sequence[str]) -> Namespace | None:
    """``words`` parsed as argparse would parse them, or ``None`` when this is a command
    line only argparse should read (see the module's docstring)."""
    if not words or words[0] not in COMMANDS:
        return None
    name = words[0]
    spec = _Spec()
    declare(name, spec)
    values: dict[str, Any] = {"version": None, "command": name, "_module": COMMANDS[name][0]}
    options: dict[str, _Argument] = {}
    positionals: list[_Argument] = []
    for declared in spec.arguments:
        if declared.flags[0].startswith("-"):
            options.update(dict.fromkeys(declared.flags, declared))
        elif declared.nargs is not None:
            return None  # init (DIR may be left out) is not worth a second set of rules
        else:
            positionals.append(declared)
        values[declared.dest] = declared.default
    seen: set[str] = set()
    filled = 0
    i = 1
    while i < len(words):
        word = words[i]
        if not word.startswith("-"):
            if filled == len(positionals):
                return None
            values[positionals[filled].dest] = word
            filled += 1
            i += 1
            continue
        arg = options.get(word)
        if arg is None:
            return None
        seen.add(arg.dest)
        if arg.action == "store_true":
            values[arg.dest] = True
            i += 1
            continue
        if i + 1 == len(words) or words[i + 1].startswith("-"):
            return None
        text = words[i + 1]
        if arg.choices is not None and text not in arg.choices:
            return None
        value: Any = text
        if arg.type is not None:
            try:
                value = arg.type(text)
            except Exception:  # noqa: BLE001 - argparse reports what the type refused
                return None
        if arg.action == "append":
            values[arg.dest] = [*(values[arg.dest] or ()), value]
        else:
            values[arg.dest] = value
        i += 2
    if filled < len(positionals) or any(a.required and a.dest not in seen for a in spec.arguments):
        return None
    for arg in spec.arguments:  # argparse converts a string default that was not replaced
        if arg.dest not in seen and isinstance(arg.default, str) and arg.type is not None:
            values[arg.dest] = arg.type(arg.default)
    return SimpleNamespace(**values)  # type: ignore[return-value]  # reads as argparse's
