"""A project that makes wide pages: long ids, long unbroken output, long reasons, several
criteria, and case ids a browser may rewrite (``.``, ``..``, ``/``, ``%``, ``?``, ``#``,
letters of any script). For the layout and link tests of the report and the viewer."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_project

ODD_IDS = [
    ".", "..", "/", "a/b", "../../etc/passwd", "%", "%2e%2E", "100%", "?", "?x=1", "#", "#top",
    "+plus+", "sp ace", "é", "日本語", "🙂", "back\\slash", "semi;colon", "amp&er=sand", "~",
]

LONG_ID = "a-very-long-case-identifier-without-any-space-that-keeps-going-" + "x" * 40

APP = '''
from oloproof import system

@system(name="wide-system-with-a-rather-long-name", version="v1-with-a-long-version-string")
def answer(case_input):
    n = case_input["n"]
    label = "ok" if n % 3 else "no"
    return {
        "label": label,
        "answer": "word " * 40 + ("unbroken" * 30 if n % 2 else ""),
        "blob": "https://example.invalid/" + "segment/" * 25,
        "days": n % 7,
    }
'''

CHECKS = '''
from oloproof import Verdict

def polite(output, case):
    if case.input["n"] % 4 == 1:
        return Verdict(passed=False, reason=(
            "The answer does not thank the customer, and it goes on for a long while about "
            "things the question never asked, which a reviewer would want to read in full "
            "before deciding; " + "averyveryverylongwordwithoutanybreakopportunity" * 3))
    return Verdict(passed=True, reason="thanks the customer and answers the question")
'''

EVALUATORS = """
- type: exact_match
  criterion: exact_label_with_a_long_criterion_name
  field: label
- type: contains
  criterion: mentions_word
  field: answer
  expected_field: word
- type: regex
  criterion: no_digits_in_the_answer
  field: answer
  pattern: '[0-9]'
  pass_if: no_match
- type: custom
  criterion: polite
  function: checks:polite
- type: absolute_error
  criterion: days_off
  field: days
  range: [0, 100]
"""

RELEASE = """
version: 1
rules:
  - id: exact-label-floor-with-a-long-rule-identifier
    metric: exact_label_with_a_long_criterion_name
    min: 0.5
  - id: polite-floor
    metric: polite
    min: 0.9
  - id: days-off-budget
    metric: days_off
    max: 40
"""


def wide_project(root: Path, *, odd_ids: bool = True, n: int = 12, version: str = "1") -> Path:
    ids = [*(ODD_IDS if odd_ids else []), LONG_ID]
    ids += [f"case-{i:03d}" for i in range(max(0, n - len(ids)))]
    cases = [
        {"id": case_id, "input": {"n": i, "question": "Where is my order? " * 8},
         "expected": {"label": "ok", "word": "word", "days": 3},
         "metadata": {"lang": "en", "note": "metadata-" * 20}}
        for i, case_id in enumerate(ids)
    ]
    return write_project(root, app=APP, cases=cases, evaluators=EVALUATORS, release=RELEASE,
                         extra_files={"checks.py": CHECKS}, version=version)
