"""The command line stays parse-call-render (docs/design-notes.md, "A command").

A command module parses, calls one function of ``api/`` or ``analysis/`` and prints what
``render/`` describes; what it would compute goes there instead. These hold that shape
where it can be counted: every file of ``cli/`` at most 250 lines, and no function in it
longer than the longest one the design allows (``run``'s, which sets up the stream,
the stop and the sinks around one call).
"""

from __future__ import annotations

import ast
from pathlib import Path

import oloproof.cli

CLI = Path(oloproof.cli.__file__).parent
MAX_LINES = 250
MAX_FUNCTION_LINES = 90


def _files() -> list[Path]:
    files = sorted(CLI.glob("*.py"))
    assert len(files) > 15, files  # the folder was found, with its commands
    return files


def test_every_cli_file_is_at_most_250_lines() -> None:
    long = {p.name: n for p in _files() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"over {MAX_LINES} lines: move the logic to analysis/, api/ or render/"


def test_no_cli_function_is_longer_than_a_screenful() -> None:
    long: dict[str, int] = {}
    for path in _files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.name}:{node.name}"] = n
    assert long == {}


def test_each_command_module_has_its_command() -> None:
    from oloproof.cli._args import COMMANDS

    for name, (module, _help) in COMMANDS.items():
        path = CLI / f"{module.rsplit('.', 1)[1]}.py"
        tree = ast.parse(path.read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "command" in names, (name, path)
