"""Deciding a stored run (the one path for ``run``, ``gate``, ``inspect`` and ``plan``).

Kept here until the single copy in ``oloproof.analysis.stored`` replaces it.
"""

from __future__ import annotations

import sqlite3

from oloproof.policy.decide import Decision, MetricSummary, decide_run
from oloproof.project.loader import default_release_policy
from oloproof.project.models import ReleasePolicy
from oloproof.store.reader import RunRecord, get_run, load_evidence


def stored_policy(run: RunRecord) -> ReleasePolicy:
    """The release policy a run was decided under, as stored with it."""
    if run.policy is None:
        return default_release_policy()
    return ReleasePolicy.model_validate(run.policy)


def decide_stored(
    conn: sqlite3.Connection, run_id: str, policy: ReleasePolicy
) -> tuple[list[Decision], dict[str, MetricSummary]]:
    """Decide a run from what its store holds (the one path for run and gate)."""
    record = get_run(conn, run_id)
    return decide_run(load_evidence(conn, record), policy)
