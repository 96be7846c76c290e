"""What several commands share: finding the project's store, and opening it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from oloproof.errors import UsageError
from oloproof.store.db import open_store, open_store_readonly
from oloproof.store.location import locate

if TYPE_CHECKING:
    from oloproof.store.dbapi import Connection


def project_root(config: str) -> str:
    from oloproof._fs import absent

    if absent(config):
        from oloproof._fs import missing  # only on the way to an error

        raise UsageError(
            f"{config}: {missing(config, 'no such file')}; run this in a project directory"
            " or pass --config (`oloproof init` creates a project)"
        )
    return os.path.dirname(os.path.realpath(config))


def refuse_store_folder(flag: str, target: str, config: str, example: str) -> None:
    """Refuse an output path in the project's store folder (``.oloproof/``), where a report
    renamed over ``store.sqlite`` (or its ``-wal``) replaced every stored run with it.
    Links are followed: a path that leads there by a symbolic link is refused too."""
    from oloproof.storeurl import STORE_DIR
    from oloproof.textsafe import printable

    root = os.path.realpath(config)
    if not os.path.isdir(root):  # --config names oloproof.yaml, or its project directory
        root = os.path.dirname(root)
    folder = os.path.realpath(os.path.join(root, STORE_DIR))
    where = os.path.realpath(target)
    if where == folder or where.startswith(folder + os.sep):
        raise UsageError(
            f"{flag} {printable(target)}: is in the project's store folder ({STORE_DIR}/),"
            f" which holds the stored runs; give a path outside it, such as {example}"
        )


def open_project_store(config: str) -> Connection:
    """The project's store, for a command that writes to it (``compare``): migrated if needed."""
    project_root(config)
    conn: Connection = open_store(locate(config), create=False)
    return conn


def read_project_store(config: str) -> Connection:
    """The project's store, for a command that only reads it (``runs``, ``gate``, ``inspect``,
    ``plan``): opened read-only, so that a store in a read-only place can be read and no
    reader ever migrates or rewrites it."""
    project_root(config)
    conn: Connection = open_store_readonly(locate(config))
    return conn
