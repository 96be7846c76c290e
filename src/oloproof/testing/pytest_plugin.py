"""A pytest plugin: keep release gates beside the unit tests (docs/python-api.md).

Installed with Oloproof (entry point ``pytest11``), it offers two fixtures.

``oloproof_rule``: one test item per rule of the release policy, so that pytest's own
report says which rule blocked::

    import pytest

    @pytest.mark.oloproof("../support_bot")
    def test_support_bot(oloproof_rule):
        oloproof_rule.assert_allowed()

collects ``test_support_bot[exact-label-floor]``, ``test_support_bot[valid-format]``, ...
The policy's rule ids are read when the tests are collected (the project and its policy
are loaded, nothing is run); the project runs once, when the first of its items runs, and
every item of that project and those keywords reads the same run. An item fails when its
rule blocks the release, and every item fails when the run as a whole cannot allow it
(stopped, a subset, too many cases missing), so all items pass only when
``oloproof run`` would exit 0. The marker takes :func:`oloproof.run`'s keywords
(``policy=``, ``use_cache=``, ``limit=``, ...); relative ``project``, ``policy`` and
``compare_policy`` paths are found from the test file's directory. A project that
declares ``policy: none`` has one item, ``gate``.

``oloproof_run``: the whole suite as one test: ``oloproof_run("path").assert_allowed()``
(:func:`oloproof.run`, with a relative project, ``policy`` and ``compare_policy`` found from
the test file's directory).

Runs go to the project's store like any other (``oloproof runs`` lists them), and use its
cache: a system's identity is its module's source plus ``code_paths``, so code the module
imports from elsewhere in the project is not part of it, and editing only that code keeps
the cached results (Oloproof warns when it sees such imports; list them in ``code_paths``).

This module imports nothing of Oloproof's until one of its fixtures is used, so installing
Oloproof costs other projects' test sessions nothing.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from oloproof.api import RunResult
    from oloproof.policy.decide import Decision

__all__ = ["RuleOutcome", "oloproof_rule", "oloproof_run"]

#: The item of a project that declares ``policy: none`` (no rules: the gate is the test).
GATE_ITEM = "gate"
_RUNS = pytest.StashKey[dict[tuple[str, str], Any]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "oloproof(project='.', **run_keywords): the Oloproof project whose release rules"
        " the oloproof_rule fixture makes one test item each",
    )


def _config(run: RunResult) -> str:
    """`` --config FILE`` (quoted for a shell) when the run's project is not the directory
    pytest runs in: the command a failure suggests must find the run's store as printed."""
    path = run.config_path or os.path.join(run.project_dir, "oloproof.yaml")
    if os.path.realpath(path) == os.path.realpath("oloproof.yaml"):
        return ""
    return f" --config {shlex.quote(path)}"


@pytest.fixture
def oloproof_run(request: pytest.FixtureRequest) -> Callable[..., RunResult]:
    """Run an Oloproof project from a test: ``oloproof_run("path").assert_allowed()``."""
    base = Path(str(request.path)).parent

    def run(project: str | os.PathLike[str] = ".", **kwargs: Any) -> RunResult:
        from oloproof.api import RunResult as Result
        from oloproof.api import run as api_run

        result = api_run(_rebase(base, project), **_rebased(base, kwargs))
        if not isinstance(result, Result):  # matrix=True: a MatrixResult
            raise TypeError("oloproof_run runs one project; for a matrix call"
                            " oloproof.run(..., matrix=True) directly")
        return result

    return run


def _rebase(base: Path, path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path if path.is_absolute() else Path(os.path.normpath(base / path))


#: The run keywords that name files: a relative one is found from the test file's directory,
#: as the project is (from the directory pytest was started in, it named another file, or
#: none, depending on where pytest ran).
_PATHS = ("policy", "compare_policy")


def _rebased(base: Path, kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    for name in _PATHS:
        value = out.get(name)
        if isinstance(value, str | os.PathLike):
            out[name] = _rebase(base, value)
    return out


def _target(definition: Any, path: Path) -> tuple[Path, dict[str, Any]]:
    """The project and the run keywords of a test's ``oloproof`` marker."""
    marker = definition.get_closest_marker("oloproof")
    if marker is None:
        raise pytest.UsageError(
            f"{definition.nodeid}: the oloproof_rule fixture needs the project: decorate the"
            " test with @pytest.mark.oloproof('path/to/project')"
        )
    if len(marker.args) > 1:
        raise pytest.UsageError(
            f"{definition.nodeid}: @pytest.mark.oloproof takes one project path, then"
            " oloproof.run()'s keywords"
        )
    base = path.parent
    kwargs = dict(marker.kwargs)
    project = marker.args[0] if marker.args else kwargs.pop("project", ".")
    return _rebase(base, project), _rebased(base, kwargs)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One item per rule of the policy, for a test that asks for ``oloproof_rule``."""
    if "oloproof_rule" not in metafunc.fixturenames:
        return  # nothing of Oloproof's is imported for anyone else's tests
    project, kwargs = _target(metafunc.definition, Path(str(metafunc.definition.path)))
    from oloproof.errors import OloproofError

    try:
        ids = _rule_ids(project, kwargs.get("policy"))
    except OloproofError as exc:
        # One item that fails with the message: a collection error would hide the file.
        metafunc.parametrize("oloproof_rule", [exc], ids=["configuration"], indirect=True)
        return
    metafunc.parametrize("oloproof_rule", ids, ids=ids, indirect=True)


def _rule_ids(project: Path, policy: Path | None) -> list[str]:
    """The ids of the release policy's rules, as ``oloproof run`` would resolve it."""
    from oloproof.api._listing import config_file
    from oloproof.project.loader import load_project, resolve_release_policy

    loaded = load_project(config_file(project))
    resolved = resolve_release_policy(loaded, None if policy is None else str(policy))
    ids = [rule.id for rule in resolved.policy.rules]
    return ids or [GATE_ITEM]


def _of_rule(decided: str, rule: str) -> bool:
    """Whether a decision's rule id is ``rule``'s, or one of its groups' (``rule[lang=fr]``)."""
    return decided == rule or decided.startswith(rule + "[")


def _line(d: Decision) -> str:
    return f"  {d.rule} ({d.metric}): {d.state} [{d.action}]: {d.detail}"


class RuleOutcome:
    """One rule of a run, as the ``oloproof_rule`` fixture gives it to a test item.

    ``decisions`` are the rule's (several for ``each_group: true``: one per group);
    ``run`` is the whole :class:`oloproof.RunResult`."""

    def __init__(self, rule: str, run: RunResult) -> None:
        self.rule = rule
        self.run = run
        self.decisions: list[Decision] = [d for d in run.decisions if _of_rule(d.rule, rule)]

    def problems(self) -> list[str]:
        """Why this item may not pass (empty when it may)."""
        from oloproof.enums import Completeness, GateAction, RunStatus

        run = self.run
        blocking = [d for d in run.decisions if d.action == GateAction.BLOCK]
        # Only the release rules have items: a decision of another rule that blocks (a
        # comparison rule of a run with a baseline) blocks the run as a whole.
        whole = [d for d in blocking if any(_of_rule(d.rule, r) for r in run.rule_ids)]
        lines = [_line(d) for d in self.decisions if d.action == GateAction.BLOCK]
        if run.status != RunStatus.DECIDED or run.completeness not in (
            Completeness.COMPLETE, Completeness.SEQUENTIAL
        ):
            lines.insert(0, "  the run cannot allow a release: "
                         + (run.stop_reason or f"it is {run.status}/{run.completeness}"))
        elif not run.allowed and not whole:
            # Failed calls, and the gate's notes (patched code, incomplete evidence): both,
            # the notice alone hid a patched-code note behind "3 calls failed".
            why = " ".join(filter(None, [run.notice, *run.gate_notes]))
            lines[:0] = [f"  the gate blocks for the run as a whole: {why}".rstrip(),
                         *(_line(d) for d in blocking if d not in self.decisions)]
        elif self.rule == GATE_ITEM and not self.decisions and not run.allowed:
            lines.insert(0, "  the gate blocks")
        return lines

    def assert_allowed(self) -> RuleOutcome:
        """Raise :class:`oloproof.GateNotAllowed` if this rule blocks the release (or the
        run as a whole cannot allow it); return self otherwise."""
        __tracebackhide__ = True  # pytest shows the test's line, not this one
        from oloproof.api import GateNotAllowed

        problems = self.problems()
        if problems:
            run = self.run
            head = (f"rule {self.rule} of run {run.run_id} [{run.status}/{run.completeness}]:"
                    f" gate {run.gate} (exit {run.exit_code})")
            tail = []
            if any(d.state == "INSUFFICIENT_EVIDENCE" for d in self.decisions):
                tail = [f"  size it with: oloproof plan {run.run_id} --run{_config(run)}"]
            raise GateNotAllowed("\n".join([head, *problems, *tail]))
        return self

    def __repr__(self) -> str:
        states = ", ".join(f"{d.rule}: {d.state} [{d.action}]" for d in self.decisions)
        return f"<RuleOutcome {self.rule} of {self.run.run_id}: {states or self.run.gate}>"



@pytest.fixture
def oloproof_rule(request: pytest.FixtureRequest) -> RuleOutcome:
    """One rule of the project named by the test's ``@pytest.mark.oloproof`` marker."""
    param = getattr(request, "param", None)
    if param is None:
        raise pytest.UsageError(
            f"{request.node.nodeid}: oloproof_rule is made by @pytest.mark.oloproof('project')"
        )
    if isinstance(param, BaseException):
        pytest.fail(str(param), pytrace=False)
    project, kwargs = _target(request.node, Path(str(request.path)))
    runs = request.config.stash.setdefault(_RUNS, {})
    key = (str(project.resolve()), repr(sorted(kwargs.items())))
    if key not in runs:
        from oloproof.api import run as api_run
        from oloproof.errors import OloproofError

        try:
            runs[key] = api_run(project, **kwargs)
        except OloproofError as exc:
            runs[key] = exc
    outcome = runs[key]
    if isinstance(outcome, BaseException):
        pytest.fail(str(outcome), pytrace=False)
    return RuleOutcome(str(param), outcome)
