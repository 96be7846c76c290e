"""``oloproof init``: scaffold a project, or copy one of the shipped examples."""

from __future__ import annotations

import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.errors import UsageError

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
        for name in names:
            print(f"{name.ljust(width)}  {DESCRIPTIONS.get(name, '')}")
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
    shutil.copytree(
        source, target, dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".oloproof"),
    )
    gitignore = target / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.exists() else []
    if ".oloproof/" not in lines:
        gitignore.write_text("\n".join([*lines, ".oloproof/"]) + "\n")
    where = "." if str(target) == "." else str(target)
    first = "oloproof run --config baseline.yaml" if name == "compare" else "oloproof run"
    readme = " (see README.md)" if (target / "README.md").exists() else ""
    sys.stdout.write(
        f"Created the '{name}' project in {where}.\n"
        f"Next:  cd {where} && {first}{readme}\n"
    )
    return 0
