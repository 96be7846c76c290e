"""docs/python-api.md is executed: every ```python block runs, in order, in one namespace,
beside a copy of the support_bot example, and prints what the ```text block under it shows.

``python tests/api/test_docs_examples.py`` rewrites those text blocks from a fresh run
(then read the diff before committing it).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import sys
from importlib import resources
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"
_BLOCK = re.compile(r"```python\n(?P<code>.*?)```\n\n```text\n(?P<out>.*?)```", re.DOTALL)
_IDS = re.compile(r"\b(run|cmp)_[0-9A-HJKMNP-TV-Z]{26}\b")


def _mask(text: str) -> str:
    return _IDS.sub(lambda m: f"{m.group(1)}_…", text)


def run_blocks(workdir: Path) -> list[tuple[str, str, str]]:
    """(code, output shown in the doc, output now) for each python block, in order."""
    source = Path(str(resources.files("oloproof") / "examples" / "support_bot"))
    shutil.copytree(source, workdir / "support_bot",
                    ignore=shutil.ignore_patterns("__pycache__", ".oloproof"))
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    results = []
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        for m in _BLOCK.finditer(DOC.read_text()):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(m.group("code"), f"{DOC.name} block", "exec"), namespace)  # noqa: S102
            results.append((m.group("code"), m.group("out"), _mask(out.getvalue())))
    finally:
        os.chdir(cwd)
    return results


@pytest.mark.slow  # the documented runs start the regex guard's child processes
def test_python_api_doc_examples_print_what_the_doc_shows(tmp_path: Path) -> None:
    results = run_blocks(tmp_path)
    assert len(results) >= 8
    for code, shown, now in results:
        assert now == shown, f"block:\n{code}\ndoc shows:\n{shown}\nprints now:\n{now}"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        outputs = iter(run_blocks(Path(tmp)))

        def fill(m: re.Match[str]) -> str:
            _, _, now = next(outputs)
            return f"```python\n{m.group('code')}```\n\n```text\n{now}```"

        DOC.write_text(_BLOCK.sub(fill, DOC.read_text()))
    sys.stdout.write(f"rewrote the outputs in {DOC}\n")
