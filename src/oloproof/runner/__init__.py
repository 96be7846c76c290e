"""One run, start to finish, in three jobs (one module each):

- :mod:`.build`: load and check the project, build the system and evaluators
  (:func:`prepare`); every configuration error is found here, before anything
  is stored or called;
- :mod:`.orchestrate`: store the run, drive the engine, decide (:func:`execute`);
- :mod:`.stop`: signals and other stops (:class:`StopRequest`).

Deciding a run from what its store holds has one home, shared with ``gate``,
``inspect`` and ``plan``: :mod:`oloproof.analysis.stored` (re-exported here).
"""

from __future__ import annotations

from oloproof.analysis.stored import decide_stored, stored_policy
from oloproof.runner.build import (
    Prepared,
    build_evaluators,
    build_system,
    describe_system,
    identity_warning,
    load_configuration,
    policy_json,
    prepare,
)
from oloproof.runner.orchestrate import RunResult, StoreUnwritable, execute
from oloproof.runner.stop import SIGNALS, StopRequest, UntilStopped

__all__ = [
    "SIGNALS",
    "Prepared",
    "RunResult",
    "StopRequest",
    "StoreUnwritable",
    "UntilStopped",
    "build_evaluators",
    "build_system",
    "decide_stored",
    "describe_system",
    "execute",
    "identity_warning",
    "load_configuration",
    "policy_json",
    "prepare",
    "stored_policy",
]
