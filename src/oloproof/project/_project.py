"""A loaded project and the release policy it resolved, without pydantic.

The configuration inside is the records of project/config.py, whether a validation made
them (project/models.py) or a snapshot kept them (project/_snapshot.py).
"""

from __future__ import annotations

import os.path

from oloproof._records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from oloproof.project.config import ProjectConfig, ReleasePolicy
    from oloproof.project.labels import Labels
    from oloproof.project.suite import Suite

__all__ = ["DEFAULT_POLICY_FILE", "NO_RULES_NOTE", "Project", "ResolvedPolicy", "beside"]

#: The release policy read when neither --policy nor ``policy:`` names one.
DEFAULT_POLICY_FILE = "release.yaml"

#: Shown with the gate of a run whose project declares ``policy: none``.
NO_RULES_NOTE = (
    "Gate ALLOW by declaration: this project declares no release rules "
    "(policy: none in oloproof.yaml)."
)


@dataclass(frozen=True)
class ResolvedPolicy:
    """The release policy a run is decided under, and where it came from.

    ``path`` is the file read, as shown to the user (None when the project
    declares ``policy: none``). ``declared_none`` is True only for that explicit
    declaration; ``note`` is then the sentence to show next to the gate.
    """

    policy: ReleasePolicy
    path: str | None
    declared_none: bool = False

    @property
    def note(self) -> str | None:
        return NO_RULES_NOTE if self.declared_none else None


#: Shown with the gate of a run whose project declares ``policy: none``.
NO_RULES_NOTE = (
    "Gate ALLOW by declaration: this project declares no release rules "
    "(policy: none in oloproof.yaml)."
)


@dataclass(frozen=True)
class Project:
    """A loaded oloproof.yaml and where it lives.

    ``root`` is the absolute directory of oloproof.yaml: the dataset, code
    paths, rubric files and a callable's module are found relative to it.
    ``display`` is the config path as the user gave it, for messages.
    """

    root: str
    config_path: str
    config: ProjectConfig
    display: str = "oloproof.yaml"

    @property
    def dataset_path(self) -> str:
        return os.path.join(self.root, self.config.dataset)

    @property
    def dataset_display(self) -> str:
        """The dataset's path as the user can open it (relative to the config's)."""
        parent = os.path.dirname(self.display)
        return os.path.normpath(os.path.join(parent, self.config.dataset))

    def load_suite(self) -> Suite:
        from oloproof.project.suite import load_suite

        return load_suite(self.dataset_path, self.dataset_display)

    def load_labels(self) -> Labels | None:
        """The ``human_labels`` file, checked; None when the project names none."""
        name = self.config.human_labels
        if name is None:
            return None
        parent = os.path.dirname(self.display)
        shown = os.path.normpath(os.path.join(parent, name))
        from oloproof.project.labels import load_labels

        return load_labels(os.path.join(self.root, name), shown, self.config.judge_scales())


def beside(project: Project, name: str) -> str:
    """``name`` (relative to the project directory) as the user can open it."""
    return os.path.normpath(os.path.join(os.path.dirname(project.display), name))
