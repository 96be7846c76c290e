"""A project whose system answers with markup and script, for the report and viewer tests."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_project

SCRIPT = "<script>window.__pwned=2</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
CLOSE = "</script><script>window.__pwned=3</script>"

APP = f'''
from oloproof import system

ANSWERS = {{
    "q_script": {{"label": {SCRIPT!r}}},
    "q_img": {{"label": {IMG!r}}},
    "q_close": {{"label": {CLOSE!r}}},
}}

@system(name="hostile", version="1")
def answer(case_input):
    if case_input["k"] == "q_error":
        raise RuntimeError({IMG!r})
    return ANSWERS.get(case_input["k"], {{"label": "ok"}})
'''

CASES = [
    {"id": "q_ok_0", "input": {"k": "q_ok_0"}, "expected": {"label": "ok"}},
    {"id": "q_ok_1", "input": {"k": "q_ok_1"}, "expected": {"label": "ok"}},
    {"id": "q_ok_2", "input": {"k": "q_ok_2"}, "expected": {"label": "ok"}},
    {"id": "q_script", "input": {"k": "q_script"}, "expected": {"label": "ok"}},
    {"id": "q_img", "input": {"k": "q_img"}, "expected": {"label": "ok"}},
    {"id": "q_close", "input": {"k": "q_close"}, "expected": {"label": "ok"}},
    {"id": "q_error", "input": {"k": "q_error"}, "expected": {"label": "ok"}},
    {"id": '<b id="boom">case</b>', "input": {"k": "q_ok_3", "note": IMG}, "expected": {"label": "ok"}},
]

RELEASE = """
version: 1
rules:
  - id: label-floor
    metric: exact_label
    min: 0.5
"""


def hostile_project(root: Path) -> Path:
    """The project: 8 cases, 4 passed, 3 failed (markup in the output), 1 missing."""
    return write_project(root, app=APP, cases=CASES, release=RELEASE)
