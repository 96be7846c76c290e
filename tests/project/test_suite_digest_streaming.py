"""The suite digest is hashed a group of cases at a time: the same digest as
hashing ``json.dumps`` of the whole list at once, whatever the number of cases."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from oloproof.project.suite import load_suite


def _whole_list_digest(objects: list[dict[str, object]]) -> str:
    text = json.dumps(objects, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@pytest.mark.parametrize("n", [1, 2, 999, 1000, 1001, 2000, 2001])
def test_digest_at_group_boundaries(tmp_path: Path, n: int) -> None:
    objects: list[dict[str, object]] = [
        {"id": f"case_{i}", "input": {"q": f"question {i} é", "k": [i, None]}} for i in range(n)
    ]
    objects[0]["expected"] = {"label": "ok"}
    path = tmp_path / "suite.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    assert load_suite(path).digest == _whole_list_digest(objects)
