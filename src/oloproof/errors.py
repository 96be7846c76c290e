"""Exceptions of Oloproof.

Errors a user can cause (a bad file, an unknown id, a store written by a newer
version) derive from :class:`OloproofError`. The CLI catches them once, prints
their message and exits with code 2. :class:`TransientError` is the one a
system under test raises to ask for a retry.
"""

from __future__ import annotations


class OloproofError(Exception):
    """An error the user can fix; printed as one message, exit code 2."""

    exit_code = 2


class ConfigError(OloproofError):
    """A project, policy or suite file that cannot be used.

    The message names the file, the field path and the line where they are
    known, and says what is accepted.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        field: str | None = None,
        line: int | None = None,
        accepted: str | None = None,
    ) -> None:
        self.file = file
        self.field = field
        self.line = line
        self.accepted = accepted
        self.detail = message
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        parts = [p for p in (where, self.field) if p]
        head = ": ".join(parts)
        text = f"{head}: {self.detail}" if head else self.detail
        if self.accepted:
            text += f" (accepted: {self.accepted})"
        return text


class UsageError(OloproofError):
    """A command used wrongly: an unknown run id, a missing flag."""


class StoreError(OloproofError):
    """The store cannot be used as it is (for example, a newer schema)."""


class StaleCacheWarning(UserWarning):
    """A run may reuse results that an edit has made stale.

    Issued (once per process and system) when the system's module uses project code that
    is not part of its identity: editing only that code keeps the cached results. Add
    the files to ``system.code_paths`` to make them part of the identity. The same holds
    for a custom evaluator's module and its cached verdicts (its own ``code_paths``)."""


class PatchedCodeWarning(UserWarning):
    """A run from Python calls code that is not what the project's files define.

    Issued by every such run, when a test (or a notebook) has patched the project's code
    in this process (``monkeypatch.setattr(helpers, "lookup", fake)``,
    ``unittest.mock.patch("app.answer")``), the system's or a custom evaluator's: the run
    calls what the patch put there, while the identity is the files' source. So the run
    reads nothing from the cache and stores nothing there that the patch made (a later
    ``oloproof run`` calls the real code), its gate never allows (exit 5 unless a rule
    FAILs), and the stored run names what was patched (``inspect``)."""


class TransientError(Exception):
    """Raised by a system under test for a failure that may pass on retry.

    ``retryable=True`` asks Oloproof to call the system again under its retry
    policy (up to four attempts in all, growing jittered delays). With the
    default ``retryable=False`` the error is recorded on the case, which is then
    missing for every criterion. A subclass may set ``retryable = True`` once, as a
    class attribute, for all its errors; the keyword, when given, wins.
    """

    #: The default of every instance that was not told otherwise: also of a subclass's
    #: instance whose ``__init__`` does not call this one's.
    retryable: bool = False

    def __init__(self, message: str = "", *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable
