"""Joining the shards of a suite into one run, from Python: :func:`merge`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from oloproof.api import _args as args
from oloproof.api._listing import config_file

if TYPE_CHECKING:
    from oloproof.api._results import RunResult
    from oloproof.runner.merge import Merged

__all__ = ["merge", "merge_with_details"]


def merge(
    sources: Sequence[str | os.PathLike[str]] = (), project: str | os.PathLike[str] = ".",
) -> RunResult:
    """Merge the K shard runs of a suite (``run(..., shard="I/K")``, ``oloproof run --shard
    I/K``) found in ``sources`` (project directories, store files, PostgreSQL URLs; none:
    the project's own store) into one run of the whole suite in ``project``'s store,
    decided as a single run of the suite is. Refused with :class:`oloproof.UsageError`
    (each reason on a line) when the shards are not the K slices of one run: different
    suites, systems, evaluators, policies, trials, labels or K, a slice twice or missing.
    The shard runs and their cache entries are copied into the project's store."""
    return merge_with_details(sources, project)[0]


def merge_with_details(
    sources: Sequence[str | os.PathLike[str]] = (), project: str | os.PathLike[str] = ".",
) -> tuple[RunResult, Merged]:
    """:func:`merge`, and what it did (the shard runs, copies, a merge made before)."""
    from oloproof.api._stored import read_run
    from oloproof.runner.merge import merge_shards

    found = args.sources(sources, "merge")  # merge("shards/"): one source, not its letters
    config = config_file(args.path(project, "project", "merge"))
    merged = merge_shards(config, found)
    return read_run(merged.run_id, config), merged
