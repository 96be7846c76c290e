"""Helpers for the progress tests: the event schema, projects, the store, terminals."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")

INSTANT = """
from oloproof import system

@system(name="instant", version="1")
def answer(case_input):
    return {"label": "ok" if case_input.get("pass", True) else "no"}
"""

SLOW = """
import time
from oloproof import system

@system(name="slow", version="1")
def answer(case_input):
    time.sleep(float(case_input.get("sleep", 0.05)))
    return {"label": "ok"}
"""


@cache
def validator() -> Draft202012Validator:
    text = resources.files("oloproof").joinpath("schemas/events.schema.json").read_text()
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def checked_events(out: str) -> list[dict[str, Any]]:
    """Every line of ``out`` as an event, each validated against the shipped schema."""
    found = []
    for n, line in enumerate(out.splitlines(), 1):
        event = json.loads(line)
        errors = sorted(validator().iter_errors(event), key=str)
        assert not errors, f"line {n} does not match the schema: {errors[0].message}\n{line}"
        assert TIMESTAMP.match(event["timestamp"]), event["timestamp"]
        found.append(event)
    return found


def stored_cases(project: Path) -> int:
    """Cases stored so far, in the project's store (the team store when OLOPROOF_STORE
    names one: tests/conftest.py `backend`)."""
    url = os.environ.get("OLOPROOF_STORE", "")
    if url.startswith("postgres"):
        import psycopg

        try:
            with psycopg.connect(url, autocommit=True) as pg:
                return int(pg.execute("SELECT count(*) FROM run_cases").fetchone()[0])  # type: ignore[index]
        except psycopg.Error:  # no store yet
            return 0
    db = project / ".oloproof" / "store.sqlite"
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(db, timeout=5)
        try:
            return int(conn.execute("SELECT count(*) FROM run_cases").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def wait_for_cases(project: Path, at_least: int, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while (n := stored_cases(project)) < at_least:
        assert time.monotonic() < deadline, f"only {n} cases stored after {timeout}s"
        time.sleep(0.05)
    return n


def execution_hits(report: str) -> int:
    match = re.search(r"executions (\d+) hits", report)
    assert match, report
    return int(match.group(1))


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def plain(text: str) -> str:
    return ESCAPE.sub("", text)


NOISE = ("Traceback", "BrokenPipeError", "Exception ignored", "KeyboardInterrupt")


def assert_quiet(stderr: str) -> None:
    for word in NOISE:
        assert word not in stderr, stderr
