"""``oloproof init``: scaffold a project, or copy one of the shipped examples."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.errors import UsageError
from oloproof.render.out import write_text
from oloproof.textsafe import printable

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

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
    except _Kept as exc:
        raise UsageError(f"cannot write the project into {target}: {exc}") from None
    except OSError as exc:
        # shutil.Error carries one (source, destination, reason) per file; the first one says it
        reason: str | None = exc.strerror
        if isinstance(exc, _NotWritten):
            reason = str(exc)
        elif isinstance(exc, shutil.Error) and exc.args[0]:
            reason = exc.args[0][0][2]
        raise UsageError(
            f"cannot write the project into {target}: {reason or exc}; nothing was changed"
            " (give a directory you may write, or one that can be created)"
        ) from None
    # Escaped: a typed escape sequence in the name must not drive the terminal.
    # A name that starts with "-" is given as ./-name: `cd -name` would read it as options.
    shown = f"./{target}" if str(target).startswith("-") else str(target)
    where = "." if shown == "." else printable(shlex.quote(shown))
    first = "oloproof run --config baseline.yaml" if name == "compare" else "oloproof run"
    readme = " (see README.md)" if (target / "README.md").exists() else ""
    here = where == "."  # `init .`: "in .." and "cd . &&" read as typos
    write_text(sys.stdout, (
        f"Created the '{name}' project in {'the current directory' if here else where}.\n"
        f"Next:  {'' if here else f'cd {where} && '}{first}{readme}\n"
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
    """The example's files into target, all or nothing; a .gitignore already there keeps
    its lines (and stays a link if it is one), the example's added after them, each once.

    The files are first copied into a folder of their own inside target (the same file
    system), then each is moved into place, the file it replaces moved aside; whatever
    fails on the way (a read-only folder, a folder where the example has a file), every
    file is put back as it was and :class:`_NotWritten` says why. Copied straight in, the
    example was half written over the user's files, and a folder named like one of its
    files (``release.yaml/``) took the file inside it: ``Created``, exit 0, and a broken
    project."""
    created = _make_dirs(target)
    try:
        staged = Path(tempfile.mkdtemp(prefix=".oloproof-init-", dir=target))
    except OSError:
        _remove_made(created)
        raise
    linked = False  # written through first: put back as it was if the rest fails
    try:
        shutil.copytree(
            source, staged, dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".oloproof", ".gitignore"),
        )
        gitignore = target / ".gitignore"
        # As bytes, and appended to: git reads a .gitignore as bytes, and one in Latin-1 or
        # with CRLF lines is the user's to keep as it is; only the lines needed are added.
        existing = gitignore.read_bytes() if gitignore.is_file() else None
        shipped = source / ".gitignore"
        wanted = [*(shipped.read_bytes().splitlines() if shipped.is_file() else []),
                  b".oloproof/"]
        have = {line.strip() for line in (existing or b"").splitlines()}
        added = [line for line in dict.fromkeys(wanted) if line and line not in have]
        content = None if existing is not None else b"\n".join(added) + b"\n"
        if existing is not None and added:
            eol = b"\r\n" if b"\r\n" in existing else b"\n"
            joint = b"" if not existing or existing.endswith((b"\n", b"\r")) else eol
            content = existing + joint + eol.join(added) + eol
        if content is not None:  # the user's link (dotfiles) is kept, and written through
            linked = gitignore.is_symlink() and existing is not None
            (gitignore if linked else staged / ".gitignore").write_bytes(content)
        _refuse_in_the_way(staged, target)
        _move_in(staged, target)
    except BaseException as exc:
        if linked and existing is not None:
            gitignore.write_bytes(existing)
        if not isinstance(exc, _Kept):
            shutil.rmtree(staged, ignore_errors=True)
            _remove_made(created)
        raise
    shutil.rmtree(staged, ignore_errors=True)


class _NotWritten(OSError):
    """Why the example could not be written; nothing of it was."""


def _make_dirs(target: Path) -> list[Path]:
    """Create target and its missing parents; the ones created, deepest first."""
    missing = []
    for path in (target, *target.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    target.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_made(created: list[Path]) -> None:
    for path in created:
        with contextlib.suppress(OSError):
            path.rmdir()


def _refuse_in_the_way(staged: Path, target: Path) -> None:
    """A folder of the user's where the example has a file, or a file (or a link) where it
    has a folder: nothing is written, and the path is named."""
    for here, dirs, files in os.walk(staged):
        rel = Path(here).relative_to(staged)
        for name in dirs:
            dst = target / rel / name
            if os.path.lexists(dst) and not dst.is_dir():
                raise _NotWritten(f"{dst} is in the way: the example has a folder there")
        for name in files:
            dst = target / rel / name
            if dst.is_dir() and not dst.is_symlink():
                raise _NotWritten(f"{dst} is a folder, and the example has a file there")


def _move_in(staged: Path, target: Path) -> None:
    """Each staged file moved into place, the one it replaces moved aside (into staged's
    ``.replaced``); if a move fails, every file is put back as it was."""
    aside = staged / ".replaced"
    aside.mkdir()
    moved: list[tuple[Path, Path | None]] = []  # (placed, the user's file moved aside)
    made: list[Path] = []
    try:
        for here, dirs, files in os.walk(staged):
            if Path(here) == aside:
                dirs[:] = []
                continue
            rel = Path(here).relative_to(staged)
            dirs.sort()
            for name in dirs:
                dst = target / rel / name
                if Path(here) / name != aside and not dst.is_dir():
                    _step(dst, dst.mkdir)
                    made.append(dst)
            for name in sorted(files):
                dst = target / rel / name
                old = None
                if os.path.lexists(dst):
                    old = aside / str(len(moved))
                    _step(dst, os.replace, dst, old)
                moved.append((dst, old))
                _step(dst, os.replace, Path(here) / name, dst)
    except BaseException:  # an interrupt too: the user's files must not stay aside, deleted
        lost = []
        for dst, old in reversed(moved):
            try:
                if old is None:
                    dst.unlink(missing_ok=True)
                elif os.path.lexists(old):
                    os.replace(old, dst)
            except OSError:
                lost.append(dst)
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.rmdir()
        if lost:  # never deleted: the files that could not be put back are kept
            raise _Kept(f"{len(lost)} of your files could not be put back ({lost[0]} …);"
                        f" they are kept in {aside}") from None
        raise


class _Kept(_NotWritten):
    """Files of the user's that could not be put back, kept where the message says."""


def _step(dst: Path, do: Callable[..., object], *args: Path) -> None:
    """One move or folder, failing as :class:`_NotWritten` naming its destination."""
    try:
        do(*args)
    except OSError as exc:
        raise _NotWritten(f"{dst}: {exc.strerror or exc}") from None
