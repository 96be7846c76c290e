"""The ``oloproof`` command line's argparse parser: every command, its help and its arguments.

Arguments are declared in cli/_args.py, not in the command modules, so that ``--help``
never imports a command's dependencies; :func:`build_parser` declares only the arguments
of the command that runs. ``oloproof.cli.main`` uses it for every command line that
cli/_fast.py's :func:`fast_parse` leaves to argparse (any help, any error, anything
unusual), and not for the top-level ``--help`` at the default width (cli/_help.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from oloproof.cli._args import ARGUMENTS, COMMANDS
from oloproof.cli._values import Group

if TYPE_CHECKING:
    from typing import IO


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # The message quotes what was typed (argparse's "unrecognized arguments: ..." and
        # our value types' "got '...'" as it is): an escape sequence in it is shown, not
        # sent to the terminal, as every other error line does (cli/main.py).
        from oloproof.textsafe import printable

        self.print_usage(sys.stderr)
        self._print_message(f"{self.prog}: error: {printable(message)}\n", sys.stderr)
        raise SystemExit(2)

    def _print_message(self, message: str, file: object = None) -> None:
        # Every help, usage and error line argparse prints comes through here: one that
        # cannot be written (a full disk, a stream closed) is lost, not a traceback; the
        # exit code stays argparse's (0 for --help, 2 for a usage error).
        from oloproof.cli.main import write_or_drop

        if message:
            stream: IO[str] = file or sys.stderr  # type: ignore[assignment]
            write_or_drop(stream, message)


class _VersionAction(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        import oloproof
        from oloproof.cli.main import write_or_drop

        write_or_drop(sys.stdout, f"oloproof {oloproof.__version__}\n")
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
        declare(name, cmd)
    return parser


# The width cli/_help.py is kept for: argparse's, with COLUMNS unset and no terminal.
HELP_WIDTH = 78


def declare(name: str, parser: argparse.ArgumentParser) -> None:
    """Give command ``name``'s arguments (:data:`ARGUMENTS`) to an argparse ``parser``."""
    for item in ARGUMENTS[name]:
        if isinstance(item, Group):
            group = parser.add_argument_group(item.title, item.description)
            for flags, options in item.arguments:
                group.add_argument(*flags, **options)
        else:
            parser.add_argument(*item[0], **item[1])


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
