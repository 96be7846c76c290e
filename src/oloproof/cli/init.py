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
    try:
        _refuse_occupied(target, force=args.force)
    except OSError as exc:
        # A directory that may not be read or searched (mode 000, a parent without x):
        # Path.exists raised PermissionError from its stat, and iterdir from its listing.
        raise UsageError(
            f"cannot read {target}: {exc.strerror or exc}"
            " (give a directory you may write, or one that can be created)"
        ) from None
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
    # A name that starts with "-" is given as ./-name: `cd -name` would read it as options.
    shown = f"./{target}" if str(target).startswith("-") else str(target)
    where = "." if shown == "." else printable(shlex.quote(shown))
    first = "oloproof run --config baseline.yaml" if name == "compare" else "oloproof run"
    readme = " (see README.md)" if (target / "README.md").exists() else ""
    write_text(sys.stdout, (
        f"Created the '{name}' project in {where}.\n"
        f"Next:  cd {where} && {first}{readme}\n"
    ))
    return 0


def _refuse_occupied(target: Path, *, force: bool) -> None:
    """A file in the way, or (without --force) a directory that is not empty: exit 2."""
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a directory")
    if target.exists() and any(target.iterdir()) and not force:
        if (target / "oloproof.yaml").exists():
            raise UsageError(
                f"{target} already holds a project (oloproof.yaml); nothing was changed"
                " (use --force to overwrite its example files)"
            )
        raise UsageError(f"{target} is not empty; nothing was written (use --force to write anyway)")


def _copy(source: Path, target: Path) -> None:
    """The example's files into target; a .gitignore already there keeps its lines.

    The example's own .gitignore lines are added after the user's, each once: copied over it,
    a repository's .gitignore lost everything it held under ``init --force``.
    """
    gitignore = target / ".gitignore"
    # As bytes, and appended to: git reads a .gitignore as bytes, and one in Latin-1 or with
    # CRLF lines is the user's to keep as it is; only the lines the project needs are added.
    existing = gitignore.read_bytes() if gitignore.is_file() else None
    shutil.copytree(
        source, target, dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".oloproof", ".gitignore"),
    )
    shipped = source / ".gitignore"
    wanted = [*(shipped.read_bytes().splitlines() if shipped.is_file() else []), b".oloproof/"]
    have = {line.strip() for line in (existing or b"").splitlines()}
    added = [line for line in dict.fromkeys(wanted) if line and line not in have]
    if existing is None:
        gitignore.write_bytes(b"\n".join(added) + b"\n")
    elif added:
        eol = b"\r\n" if b"\r\n" in existing else b"\n"
        joint = b"" if not existing or existing.endswith((b"\n", b"\r")) else eol
        gitignore.write_bytes(existing + joint + eol.join(added) + eol)
