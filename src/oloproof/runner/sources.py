"""Where a run's policy and code came from, stored with it (store/schema.py
``run_sources``) for the notes ``gate``, the report and the viewer add when the project
has moved on since (analysis/stored.py ``policy_moved`` and ``code_edited``): they read
the project's files again, and import none of them."""

from __future__ import annotations

import os

from oloproof.project._project import DEFAULT_POLICY_FILE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.runner.build import Prepared

__all__ = ["run_sources"]


def run_sources(prepared: Prepared) -> dict[str, Any]:
    """``{"policy": …, "code": …, "labels": …}`` of a prepared run.

    ``policy``: the path the run showed for its policy (``--policy`` as given, or the
    project's file from where the command ran), whether it was ``--policy`` (``given``),
    that file (``file``), and the file the project itself names (``project``: ``policy:``
    in oloproof.yaml, else release.yaml beside it; None for ``policy: none``), each as
    :func:`_kept` keeps a path. ``code``: the digest of every project file the system and the
    custom evaluators reached, by path from the project directory (``files``), and those
    of them outside their identities (``outside``: an edit to them alone keeps the cache).
    ``labels``, for a run with human labels: the labels file (``file``, :func:`_kept`)."""
    project = prepared.project
    config = project.config
    if config.policy is None:
        own: str | None = os.path.join(project.root, DEFAULT_POLICY_FILE)
    elif config.declares_no_policy:
        own = None
    else:
        own = os.path.join(project.root, config.policy)
    shown = prepared.policy_path
    used = shown if prepared.policy_given else own
    files: dict[str, str] = {}
    outside: set[str] = set()
    for part in (prepared.system, *prepared.inline):
        files.update(getattr(part, "code_files", None) or {})
        outside.update(getattr(part, "outside_identity", None) or ())
    return {
        "policy": {
            "path": shown, "given": prepared.policy_given,
            "file": None if shown is None or used is None else _kept(project.root, used),
            "project": None if own is None else _kept(project.root, own),
        },
        "code": {"files": dict(sorted(files.items())), "outside": sorted(outside & set(files))},
        **({} if config.human_labels is None or prepared.labels is None else {
            "labels": {"file": _kept(project.root, os.path.join(project.root,
                                                                config.human_labels))},
        }),
    }


def _kept(root: str, path: str) -> str:
    """``path`` (from the directory the command runs in) as the run keeps it: from the
    project directory ``root`` when it is in it, so that a store read in a checkout at
    another place (a CI artefact) finds it there; absolute otherwise."""
    # Its directories resolved, not the file itself: a release.yaml that is a link to
    # another file is followed when the gate reads it, as the run did.
    full = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))),
                        os.path.basename(path))
    base = os.path.realpath(root)
    return os.path.relpath(full, base) if full.startswith(base + os.sep) else full
