"""What each command accepts, declared once: :data:`COMMANDS` (the commands, their modules and
one-line helps) and :data:`ARGUMENTS` (each command's arguments, as argparse's
``add_argument`` takes them).

cli/_parser.py gives the table to argparse (``declare``), which prints every help and
every error; cli/_fast.py reads the same table to parse the usual command line without
argparse. What a value may be (a whole number of cases, of runs...) and argument groups are
cli/_values.py's.
"""

from __future__ import annotations

from oloproof.cli._values import Group, case_cap, given, name, port, positive_int, run_limit, trials

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    #: One argument: its flags (or name) and the options of argparse's ``add_argument``.
    Declared = tuple[tuple[str, ...], dict[str, Any]]

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


def _arg(*flags: str, **options: Any) -> Declared:
    return (flags, options)


_CONFIG = _arg("--config", type=given, default="oloproof.yaml",
               help="the project file (default: ./oloproof.yaml)")
_JSON = _arg("--json", action="store_true", help="print one JSON document")
# The CI report options run and gate share.
_CI = (
    _arg("--junit-xml", type=given, metavar="FILE",
         help="also write the decisions as a JUnit XML report (one test case per rule)"),
    _arg("--junit-undecided", choices=("auto", "skipped", "failure"), default="auto",
         help="INSUFFICIENT_EVIDENCE and MANUAL_REVIEW in the JUnit report: a failure when the"
              " rule blocks, else skipped (auto, the default), or always skipped, or always a"
              " failure"),
    _arg("--github-annotations", action="store_true",
         help="print ::error / ::warning lines for rules that block or warn (GitHub Actions)"),
)

#: Each command's arguments, in the order its help lists them: ``(flags, options)`` as
#: argparse's ``add_argument`` takes them, or a group ``(title, description, arguments)``.
ARGUMENTS: dict[str, tuple[Declared | Group, ...]] = {
    "run": (
        _CONFIG,
        _arg("--policy", type=given,
             help="the release policy (default: policy: in oloproof.yaml, else release.yaml"
                  " beside it; required)"),
        _arg("--json", action="store_true",
             help="stream events as JSON lines on stdout; tables go to stderr"),
        _arg("--no-cache", action="store_true",
             help="call everything afresh, and refresh the cache"),
        *_CI,
        _arg("--group-by", action="append", type=name, metavar="KEY",
             help="break every metric down by metadata KEY, each group with its own interval"
                  " (repeatable)"),
        _arg("--trials", type=trials, metavar="K",
             help="call the system K times per case (default: trials: in oloproof.yaml, else 1);"
                  " see docs/repeated-trials.md"),
        _arg("--matrix", action="store_true",
             help="run every variant of matrix: in oloproof.yaml as its own run, then compare"
                  " each with the baseline under Holm (docs/prompts-and-models.md)"),
        _arg("--variant", action="append", type=name, metavar="NAME",
             help="with --matrix: run only this variant, and the baseline (repeatable)"),
        _arg("--sequential", action="store_true", default=None,
             help="decide every rule by an anytime-valid test, case after case in a seeded"
                  " order, and stop calling once every rule is decided (default: sequential:"
                  " in oloproof.yaml); see docs/sequential-decisions.md"),
        _arg("--baseline", type=name, metavar="RUN",
             help="with --sequential: a stored run to compare with case by case while the run"
                  " goes; the rules of compare.yaml are decided by sequential paired tests in"
                  " the same order, and the run stops once they are decided too"),
        _arg("--compare-policy", type=given, metavar="FILE",
             help="with --baseline: the comparison policy (default: compare.yaml beside"
                  " oloproof.yaml)"),
        _arg("--executor", choices=("local", "ray"),
             help="where the system's calls and custom evaluators run (default: executor: in"
                  " oloproof.yaml, else local); ray needs oloproof[ray], see docs/scaling.md"),
        _arg("--ray-address", type=given, metavar="ADDRESS",
             help="with --executor ray: the Ray cluster to use (default: RAY_ADDRESS, else a"
                  " local Ray instance started for the run)"),
        Group(
            "subsets", "run part of the suite; the run is stored as DECIDED/SUBSET and never"
                       " allows a release (exit 5 unless a rule FAILs)",
            _arg("--limit", type=positive_int, metavar="N",
                 help="the first N cases (after --case and --where)"),
            _arg("--sample", action="store_true",
                 help="with --limit: a random N instead of the first N"),
            _arg("--seed", type=int, metavar="S",
                 help="with --sample: the seed of the random choice (default: a new one each"
                      " run)"),
            _arg("--case", action="append", type=name, metavar="ID", help="this case (repeatable)"),
            _arg("--where", action="append", metavar="EXPR",
                 help="""cases where EXPR holds, e.g. 'metadata.lang == "fr"' (repeatable: all"""
                      " must hold)"),
            _arg("--shard", type=given, metavar="I/K",
                 help="shard I of K (numbered from 1) by a stable hash of the case id;"
                      " `oloproof merge` joins the K shards into one run (docs/scaling.md)"),
        ),
    ),
    "gate": (
        _arg("run_id", type=name, metavar="RUN_ID", help="a run id, or 'latest'"),
        _CONFIG,
        _arg("--policy", type=given,
             help="the policy to decide under (default: the one the run was decided under)"),
        _arg("--labels", type=given, metavar="FILE",
             help="human labels to measure the judges against (default: the ones stored with"
                  " the run)"),
        _arg("--group-by", action="append", type=name, metavar="KEY",
             help="break every metric down by metadata KEY too (repeatable)"),
        _arg("--json", action="store_true", help="print the decisions as one JSON document"),
        *_CI,
    ),
    "inspect": (
        _arg("run_id", type=name, metavar="RUN_ID",
             help="a run id, a comparison id, a matrix id (mx_…), or 'latest'"),
        _CONFIG,
        _arg("--case", type=name, metavar="ID",
             help="show one case: input, expected, output, judgments, attempts, errors"),
        _arg("--failures", action="store_true",
             help="show only cases that failed, erred or went missing"),
        _arg("--flaky", action="store_true",
             help="show the cases whose repeated trials disagree (a run with trials > 1)"),
        _arg("--judges", action="store_true",
             help="show each judge against the human labels stored with the run"),
        _JSON,
    ),
    "runs": (
        _CONFIG,
        _arg("--limit", type=run_limit, default=50, metavar="N",
             help="at most this many runs (default 50)"),
        _JSON,
    ),
    "init": (
        _arg("directory", nargs="?", type=given, default=".", metavar="DIR",
             help="where to create the project (default: .)"),
        _arg("--example", type=given, metavar="NAME",
             help="copy an example project; 'list' lists them"),
        _arg("--force", action="store_true",
             help="write into a directory that is not empty, replacing files of the same"
                  " names (a .gitignore keeps its lines)"),
    ),
    "label": (
        _arg("run_id", type=name, metavar="RUN_ID", help="a run id, or 'latest'"),
        _arg("--criterion", type=name, required=True, help="the judge criterion to label"),
        _arg("--n", type=int, default=20, help="how many cases to draw (default 20)"),
        _arg("--seed", type=int,
             help="draw the same cases again (default: a new draw, its seed printed)"),
        _arg("--output", type=given, metavar="FILE",
             help="the labels file (default: human_labels in oloproof.yaml)"),
        _arg("--labeler", type=name, help="your name or initials, stored with each label"),
        _CONFIG,
    ),
    "plan": (
        _arg("ref", type=name, metavar="RUN_ID|CMP_ID|MX_ID",
             help="a run id (with --run), a comparison id, or a matrix id (mx_…: how many"
                  " more cases would separate its top two variants)"),
        _arg("--run", action="store_true", help="size the rules of a run (RUN_ID)"),
        _CONFIG,
        _arg("--policy", type=given,
             help="the policy whose rules to size (default: the one stored with the run)"),
        _arg("--json", action="store_true", help="print the plan as one JSON document"),
        _arg("--assurance", metavar="P",
             help="also size for deciding with probability P (0 < P < 1) if the true rate (or,"
                  " for a comparison, the true paired outcomes) is as observed; BINARY rules"),
    ),
    "compare": (
        _arg("candidate", type=name, metavar="CANDIDATE", help="the candidate run id"),
        _arg("baseline", type=name, metavar="BASELINE", help="the baseline run id"),
        _CONFIG,
        _arg("--policy", type=given,
             help="the comparison policy (default: compare.yaml beside the project, if any)"),
        _arg("--json", action="store_true", help="print the comparison as one JSON document"),
    ),
    "report": (
        _arg("ref", type=name, metavar="RUN_ID|CMP_ID|MX_ID",
             help="a run id, 'latest', a comparison id or a matrix id"),
        _CONFIG,
        _arg("--output", "-o", type=given, metavar="FILE",
             help="where to write it (default: oloproof-report-<id>.html; '-' for standard"
                  " output)"),
        _arg("--cases", type=case_cap, default="1000", metavar="N|all",
             help="the most cases the file carries, the failed and missing ones first"
                  " (default: 1000; 'all' for every case)"),
    ),
    "view": (
        _CONFIG,
        _arg("--port", type=port, default=0, help="the port on 127.0.0.1 (default: a free one)"),
        _arg("--no-open", action="store_true",
             help="print the address; do not open a browser"),
        _arg("--token", metavar="TOKEN",
             help="the token a browser must show (default: OLOPROOF_VIEW_TOKEN, else a random"
                  " one; prefer the variable: other users can read a command line)"),
    ),
    "store": (
        _arg("action", choices=["push"],
             help="push: copy runs of .oloproof/ to the team store (store: or OLOPROOF_STORE);"
                  " a run already there is left as it is"),
        _arg("runs", nargs="*", type=name, metavar="RUN",
             help="run ids, unique prefixes, latest, or matrix ids (mx_…: the matrix and its"
                  " variants' runs; default: every run of the local store, then every"
                  " matrix)"),
        _CONFIG,
        _arg("--json", action="store_true", help="print what was pushed as JSON"),
    ),
    "merge": (
        _arg("paths", nargs="*", type=given, metavar="PATH",
             help="where the shard runs are: project directories, store files"
                  " (.oloproof/store.sqlite) or postgresql:// URLs (default: this project's"
                  " store)"),
        _CONFIG,
        _arg("--json", action="store_true", help="print the merged run as one JSON document"),
    ),
}
