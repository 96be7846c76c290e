"""The ``oloproof`` command: parse, dispatch, and turn our errors into exit 2.

Each command lives in its own module and is imported only when it runs, so
``oloproof --help`` starts fast: at the default width, the top-level help is the
text argparse would print, kept in cli/_help.py (a test keeps the two the same),
and nothing but ``os`` and ``sys`` is imported to print it.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's own import is a third of --help's start-up
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import IO

# Exit codes used here (oloproof.enums.ExitCode, not imported for --help).
_EXIT_USAGE = 2
_EXIT_INCOMPLETE = 5
_EXIT_INTERRUPTED = 130
_EXIT_INTERNAL = 70

# Commands that only read the store (they open it read-only).
_READERS = frozenset({"runs", "inspect", "gate", "plan", "label", "report", "view"})


def help_width() -> int:
    """The width argparse is told (cli/_parser.py): COLUMNS, else the terminal's, else 80."""
    try:
        width = int(os.environ.get("COLUMNS", "")) or os.get_terminal_size(sys.stdout.fileno()).columns
    except (ValueError, OSError):
        width = 80
    return max(width, 40) - 2


def _top_help(words: list[str]) -> str | None:
    """The top-level help without argparse, when it is asked for at the width it was
    kept for; ``None`` otherwise (argparse then prints it)."""
    if words not in ([], ["--help"], ["-h"]):
        return None
    from oloproof.cli._help import TOP_HELP, WIDTH

    return TOP_HELP if help_width() == WIDTH else None


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    # Started with standard output closed (`oloproof run >&-`): Python made sys.stdout
    # None, and every print would fail. What is printed there is discarded instead.
    # Standard error closed too (`2>&-`): what it would say is discarded; the exit code
    # still says how the command ended.
    if sys.stderr is None and not _output_to_devnull(2):
        return _EXIT_INTERNAL
    closed = sys.stdout is None
    if closed and not _output_to_devnull(1):
        return _EXIT_INTERNAL
    if not (_utf8(sys.stdout) and _utf8(sys.stderr)):
        # PYTHONIOENCODING=ascii, a non-UTF-8 locale: a character the stream cannot write
        # ('·' in a table, an accented case id) is escaped, never an exception mid-report.
        from oloproof.render.out import escape_unencodable

        escape_unencodable(sys.stdout)
        escape_unencodable(sys.stderr)
    kept = _top_help(words)
    if kept is not None:
        write_or_drop(sys.stdout, kept)
        return 0 if words else _EXIT_USAGE
    import importlib

    from oloproof.cli._args import COMMANDS
    from oloproof.cli._fast import fast_parse

    args = fast_parse(words)
    if args is None:  # a help, an error, anything unusual: argparse reads it
        from oloproof.cli._parser import build_parser

        # The command is the first word that is not an option of the top level (there
        # are only --help and --version, which take no value).
        first = next((w for w in words if not w.startswith("-")), None)
        parser = build_parser(first if first in COMMANDS else None)
        args = parser.parse_args(words)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
    debug = os.environ.get("OLOPROOF_DEBUG") == "1"
    from oloproof.cli import _process
    from oloproof.errors import OloproofError

    if closed:
        if args.command == "run" and getattr(args, "json", False):
            _error_line(args.command, "error: standard output is closed, and --json writes"
                        " the run's events there; nothing was run")
            return _EXIT_USAGE
        _error_line(args.command, "warning: standard output is closed: nothing is printed"
                    " there; the exit code is the command's as always")
    try:
        module = importlib.import_module(args._module)
        if _process.OURS:
            _after_imports()
        code: int = module.command(args)
    except OloproofError as exc:
        if debug:
            raise
        _error_line(args.command, f"error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if debug:
            raise
        # A command that knows what it did and did not store says it ("nothing was merged").
        said = f"; {exc}" if str(exc) else ""
        sys.stderr.write(f"oloproof {args.command}: interrupted{said}\n")
        return _EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return _EXIT_INCOMPLETE
    except Exception as exc:
        if debug:
            raise
        from oloproof.store.dbapi import DATABASE_ERRORS

        if isinstance(exc, DATABASE_ERRORS):
            # The store failed under a command (a damaged page, a file that went
            # away): its evidence cannot be read, which the contract calls exit 5.
            verb = "read" if args.command in _READERS else "used"
            _error_line(args.command, f"error: the store cannot be {verb}: {exc}")
            return _EXIT_INCOMPLETE
        _error_line(
            args.command,
            f"internal error: {type(exc).__name__}: {exc}\n"
            "  (set OLOPROOF_DEBUG=1 to see the traceback, and please report it)",
        )
        return _EXIT_INTERNAL
    return code


def write_or_drop(stream: IO[str], text: str) -> None:
    """Write ``text`` (a help, a version) to ``stream``; a stream that cannot take it (a
    full disk, with PYTHONUNBUFFERED set as many images do: the write itself fails) is
    sent to /dev/null instead of ending the command with a traceback (exit 1)."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


def _error_line(command: str, message: str) -> None:
    """Write one error to standard error; what a user or a model put in it is escaped,
    so a message quoting a hostile id or output cannot drive the terminal."""
    from oloproof.textsafe import inert_commands, printable

    try:
        sys.stderr.write(f"oloproof {command}: {inert_commands(printable(message))}\n")
    except (OSError, ValueError):
        pass  # standard error is gone: the exit code still says it


def _utf8(stream: object) -> bool:
    """Whether ``stream`` writes UTF-8 (the usual case, told without importing codecs)."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return encoding.lower().replace("_", "-") in ("utf-8", "utf8")


def _output_to_devnull(target: int) -> bool:
    """Give a process started with descriptor ``target`` (1: standard output, 2: standard
    error) closed a stream there that discards what is written."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)
        stream = open(target, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    except OSError:
        return False
    if target == 1:
        sys.stdout = stream
    else:
        sys.stderr = stream
    return True


def _silence_stdout() -> None:
    """After the reader of stdout went away, make sure exit does not complain."""
    _silence(sys.stdout)


def _silence(stream: IO[str]) -> None:
    """Point ``stream``'s descriptor at /dev/null, so that nothing written or left there
    fails again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError):
        pass


def _after_imports() -> None:
    """Start-up made tens of thousands of long-lived objects (modules, pydantic's
    validators). Move them out of the collector's sight, then let it run: it
    then never walks them again, during the run or at exit (the final collections
    of the interpreter's teardown: about 10 ms for a run's modules).

    Called before any user code is imported: the user's objects stay collected as
    usual, so their finalizers run at exit as they would without us."""
    import gc

    gc.freeze()
    gc.enable()


def entry() -> None:
    from oloproof.cli import _process

    _process.OURS = True
    _process.guard_exit()
    import gc

    # No cyclic collection while importing: almost nothing made then is garbage.
    gc.disable()
    try:
        code = main()
    finally:
        gc.enable()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            # A full disk or a reader gone: what is left in the buffer would fail again
            # at the interpreter's exit, which then exits 120 whatever the gate said.
            _silence(stream)
        except AttributeError:
            pass  # no such stream to flush
    raise SystemExit(code)


if __name__ == "__main__":
    entry()
