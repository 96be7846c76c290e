"""``oloproof init``: scaffold a project, or copy one of the shipped examples."""

from __future__ import annotations

import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.errors import UsageError
from oloproof.render.out import write_text
from oloproof.textsafe import printable

if TYPE_CHECKING:
    import argparse

DESCRIPTIONS = {
    "starter": "a minimal project to fill in: one callable, one criterion, one rule",
    "support_bot": "18 labelled support questions; keyword rules get 13 right",
    "sequential": "2,000 cases decided sequentially: stops calling once the rule is decided",
    "http": "a tiny local HTTP service and the project that evaluates it",
    "judge": "a rubric judge pointed at a local fake provider, so it runs offline",
    "compare": "a candidate support_bot that fixes some misses, with compare.yaml",
    "code": "generated code run against its tests in a limited child process (custom evaluator)",
    "prompts": "a model as the system (no code): 3 prompts x 2 models, run --matrix, offline",
}


def examples_root() -> Path:
    return Path(str(resources.files("oloproof") / "examples"))


def available() -> list[str]:
    root = examples_root()
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "oloproof.yaml").exists())


def command(args: argparse.Namespace) -> int:
    names = available()
    if args.example == "list":
        width = max(len(n) for n in names)
        write_text(sys.stdout, "".join(f"{name.ljust(width)}  {DESCRIPTIONS.get(name, '')}\n"
                                       for name in names))
        return 0
    name = args.example or "starter"
    if name not in names:
        raise UsageError(f"unknown example '{name}' (accepted: {', '.join(names)})")
    target = Path(args.directory)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a directory")
    if target.exists() and any(target.iterdir()) and not args.force:
        if (target / "oloproof.yaml").exists():
            raise UsageError(
                f"{target} already holds a project (oloproof.yaml); nothing was changed"
                " (use --force to overwrite its example files)"
            )
        raise UsageError(f"{target} is not empty; nothing was written (use --force to write anyway)")
    source = examples_root() / name
    try:
        _copy(source, target)
    except OSError as exc:
        # shutil.Error carries one (source, destination, reason) per file; the first one says it
        reason = exc.args[0][0][2] if isinstance(exc, shutil.Error) and exc.args[0] else exc.strerror
        raise UsageError(
            f"cannot write the project into {target}: {reason or exc}"
            " (give a directory you may write, or one that can be created)"
        ) from None
    # Escaped: a typed escape sequence in the name must not drive the terminal.
    where = "." if str(target) == "." else printable(shlex.quote(str(target)))
    first = "oloproof run --config baseline.yaml" if name == "compare" else "oloproof run"
    readme = " (see README.md)" if (target / "README.md").exists() else ""
    write_text(sys.stdout, (
        f"Created the '{name}' project in {where}.\n"
        f"Next:  cd {where} && {first}{readme}\n"
    ))
    return 0


def _copy(source: Path, target: Path) -> None:
    """The example's files into target; a .gitignore already there keeps its lines.

    The example's own .gitignore lines are added after the user's, each once: copied over it,
    a repository's .gitignore lost everything it held under ``init --force``.
    """
    gitignore = target / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.is_file() else []
    shutil.copytree(
        source, target, dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".oloproof", ".gitignore"),
    )
    shipped = source / ".gitignore"
    wanted = [*(shipped.read_text().splitlines() if shipped.is_file() else []), ".oloproof/"]
    added = [line for line in dict.fromkeys(wanted) if line and line not in lines]
    if added or not gitignore.exists():
        gitignore.write_text("\n".join([*lines, *added]) + "\n")
