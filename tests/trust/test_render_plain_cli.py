"""Issue 16, through the real CLI: with standard output a pipe, ``oloproof run`` (an
unchanged rerun), ``oloproof gate`` and ``oloproof runs`` never import rich, and print
the very bytes they printed through rich. The reference is printed in the same test by
the same command with render/plain.py switched off (every report goes through rich's
plain console then, as before issue 16), on real runs: the examples (a decided run, a
subset, trials, judges against human labels, a comparison) and projects whose rule ids
and system names hold markup, escapes, CJK and combining characters; and, in-process,
every table of those runs with hostile text put in."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project
from tests.fakes.provider import FakeServer

from oloproof.api import list_comparisons, list_runs, read_run
from oloproof.render import plain
from oloproof.render.console import make_console
from oloproof.render.doc import Blocks, Line, Table
from oloproof.render.tables import decisions_table, judges_table, metrics_table, run_report

# The CLI in a process that reports, when it exits, the module that imported rich first
# and the rich modules it imported; with "rich" as its second argument it prints every
# report through rich, as before.
WRAPPER = """
import sys
report, writer = sys.argv[1], sys.argv[2]
sys.argv = ["oloproof", *sys.argv[3:]]
importer = ["-"]

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "rich" and importer == ["-"]:
            frame = sys._getframe(1)
            while frame is not None and frame.f_globals.get("__name__", "").startswith(
                    ("importlib", "_frozen_importlib")):
                frame = frame.f_back
            importer[0] = frame.f_globals.get("__name__") if frame is not None else "?"
        return None

sys.meta_path.insert(0, Watch())
if writer == "rich":
    import oloproof.render.plain
    oloproof.render.plain.render = lambda *args, **kwargs: None
import atexit

def _report():
    with open(report, "w") as f:
        f.write(" ".join([importer[0], *sorted(m for m in sys.modules if m.split(".")[0] == "rich")]))

# At exit, not in a finally: entry() ends the process with SystemExit.
atexit.register(_report)
from oloproof.cli.main import entry
entry()
"""

ENV = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}
RUN_ID = re.compile(r"run_[0-9A-HJKMNP-TV-Z]{26}")

APP = """
from oloproof import system

@system(name="bot [bold]日本[/] e\\u0301", version="v1 \\u001b[31m")
def answer(case_input):
    n = case_input["n"]
    if n == 0:
        raise ValueError("[/err] boom \\u001b[8mhidden 中文")
    return {"label": "ok" if n % 3 else "no"}
"""

# Rule ids: markup, an escape sequence, CJK, a combining mark, a bidi override.
RELEASE = """\
version: 1
rules:
  - id: "[/rule] [bold red]r1 規則"
    metric: exact_label
    min: 0.9
  - id: "e\\u0301te\\u0301 \\u001b]0;PWNED\\u0007 bidi\\u202etxt"
    kind: observed_count
    metric: exact_label
    max_failures: 1
"""

# Rule ids rich has to draw (an emoji, a tab): the bytes are the same, through rich.
RELEASE_FOR_RICH = """\
version: 1
rules:
  - id: "ship it 🚀"
    metric: exact_label
    min: 0.5
  - id: "tab\\there"
    metric: exact_label
    min: 0.1
"""


@dataclasses.dataclass
class Printed:
    code: int
    out: bytes
    importer: str  # the module that imported rich first, "-" for none
    rich: list[str]

    @property
    def rich_by_us(self) -> bool:
        """rich imported, other than by httpx's command-line client: ``import httpx``
        imports it (and so rich) when click is installed, as in the development venv
        (uvicorn, the view extra, needs click); not in one built as ``make demo`` builds it."""
        return bool(self.rich) and self.importer != "httpx._main"


def _cli(root: Path, writer: str, *args: str) -> Printed:
    report = root / f".rich-modules-{writer}"
    report.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    env.update(ENV, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(report), writer, *args], cwd=root, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
        check=False,
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    importer, *modules = report.read_text().split()  # written at exit: not cut short
    return Printed(proc.returncode, proc.stdout, importer, modules)


def _same(root: Path, *args: str, rich_needed: bool = False) -> Printed:
    """``args`` printed without rich (when nothing needs it) and with: the same bytes."""
    ours, before = _cli(root, "plain", *args), _cli(root, "rich", *args)
    assert before.rich, "the reference did not go through rich"
    assert ours.rich_by_us is rich_needed, (args, ours.importer, ours.rich[:5])
    assert (ours.importer == "-") is (ours.rich == [])
    out = ours.out
    if args[0] == "run":  # two runs: two run ids, of the same length
        [mine] = set(RUN_ID.findall(ours.out.decode()))
        [theirs] = set(RUN_ID.findall(before.out.decode()))
        out = out.replace(mine.encode(), theirs.encode())
    assert out == before.out, (args, out.decode(), before.out.decode())
    assert ours.code == before.code, args
    return ours


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory, server: FakeServer) -> dict[str, Path]:
    """Real projects with stored runs, each one's runs made once for the module."""
    base = tmp_path_factory.mktemp("plain")
    made: dict[str, Path] = {}

    def example(name: str) -> Path:
        root = base / name
        assert run_cli("init", str(root), "--example", name, cwd=base).code == 0
        return root

    sb = example("support_bot")
    for args in (["run"], ["run", "--trials", "3"], ["run", "--limit", "5"]):
        assert run_cli(*args, cwd=sb).code in (0, 3, 5)
    made["support_bot"] = sb

    judged = example("judge")
    config = judged / "oloproof.yaml"
    config.write_text(config.read_text().replace("http://127.0.0.1:8787",
                                                 server.anthropic_base_url))
    assert run_cli("run", cwd=judged, env=ENV).code == 4
    made["judge"] = judged

    compared = example("compare")
    assert run_cli("run", "--config", "baseline.yaml", cwd=compared).code == 3
    baseline = json.loads(run_cli("runs", "--json", cwd=compared).out)[0]["id"]
    assert run_cli("run", cwd=compared).code == 0
    assert run_cli("compare", "latest", baseline, cwd=compared).code == 3
    made["compare"] = compared

    cases = [{"id": f"c{i}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(9)]
    for name, release in (("hostile", RELEASE), ("hostile_for_rich", RELEASE_FOR_RICH)):
        root = write_project(base / name, app=APP, cases=cases, release=release)
        assert run_cli("run", cwd=root).code in (0, 1, 3)
        made[name] = root
    return made


@pytest.mark.parametrize("name", ["support_bot", "judge", "compare", "hostile"])
def test_run_gate_and_runs_print_the_same_bytes_without_rich(
    projects: dict[str, Path], name: str
) -> None:
    root = projects[name]
    rerun = _same(root, "run")  # unchanged: from the cache (but a failed call, made again)
    misses = b" 1 misses   judgments " if name == "hostile" else b" 0 misses   judgments "
    assert misses in rerun.out
    assert rerun.out.startswith(b"Run run_") and b"\x1b" not in rerun.out
    runs = _same(root, "runs")
    assert runs.out.startswith(b"Runs\n\xe2\x94\x8f")  # "Runs", then the table's top: ┏
    if name == "compare":
        assert b"\nComparisons\n" in runs.out
    for run in json.loads(run_cli("runs", "--json", cwd=root).out):
        _same(root, "gate", run["id"])
    gate = _same(root, "gate", "latest")
    if name == "judge":
        assert b"Judges against human labels" in gate.out and b"MANUAL_REVIEW" in gate.out
    if name == "hostile":
        assert "規則".encode() in gate.out and b"\\x1b]0;PWNED\\x07" in gate.out


def test_what_rich_draws_is_still_the_same(projects: dict[str, Path]) -> None:
    """An emoji or a tab in a rule id: rich draws the report, in the same bytes."""
    root = projects["hostile_for_rich"]
    _same(root, "run", rich_needed=True)
    _same(root, "gate", "latest", rich_needed=True)
    _same(root, "runs")  # no rule id in it


HOSTILE = ["[bold]x[/]", "[/x]", "\x1b[31mred", "a\tb", "line1\nline2", "😀", "日本語",
           "e\u0301", "x" * 2000, "", "  ", "\u2028"]


def _rich(item: Line | Table | Blocks) -> str:
    out = io.StringIO()
    make_console(out, terminal=False).print(item)
    return out.getvalue()


def _tables(root: Path) -> Iterator[Line | Table | Blocks]:
    """Every table of every stored run of ``root``, as stored and with hostile text in."""
    for info in list_runs(root):
        result = read_run(info.run_id, root)
        summaries = list(result.metrics.values())
        for text in [None, *HOSTILE]:
            decisions, metrics, judges = result.decisions, summaries, result.judges
            if text is not None:
                decisions = [dataclasses.replace(d, rule=text + d.rule, metric=text,
                                                 detail=d.detail + text) for d in decisions]
                metrics = [dataclasses.replace(s, metric=s.metric + text) for s in summaries]
                judges = [dataclasses.replace(j, criterion=text) for j in judges]
            if decisions:
                yield decisions_table(decisions)
            if metrics:
                yield metrics_table(metrics)
            if judges:
                yield judges_table(judges)
            yield run_report(
                run_id=result.run_id, status=result.status, completeness=result.completeness,
                decisions=decisions, summaries=metrics, cache=result.cache, gate=result.gate,
                exit_code=result.exit_code, note=text, judges=judges,
            )


def test_every_table_of_real_runs_with_hostile_text(projects: dict[str, Path]) -> None:
    drawn = 0
    for root in projects.values():
        for item in _tables(root):
            ours = plain.render(item)
            if ours is not None:
                drawn += 1
                assert ours == _rich(item)
    assert drawn > 100
    assert list_comparisons(projects["compare"])  # the comparisons table was drawn above
