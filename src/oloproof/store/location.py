"""Where a project's store is: the SQLite file in ``.oloproof/``, or a team store.

``OLOPROOF_STORE`` wins over ``store:`` in oloproof.yaml (so that CI can pass the URL as a
secret); without either, the store is ``.oloproof/store.sqlite`` beside oloproof.yaml, as
it always was. Finding out costs a read of oloproof.yaml and a look for the word
``store`` in it, so the commands that never validate the configuration (``runs``,
``gate``) stay as fast as they were. Where the word is there, the value of a top-level
``store:`` (and of ``project:``, the key of a team store) written as a plain one-line
value is read off its line; anything else (quotes, flow style, several documents, a key
written twice) is parsed with PyYAML, as the validation would.

A team store holds the runs of several projects; a project's runs are those stored under
its *project key*, the ``project:`` name of oloproof.yaml (docs/team-store.md says why,
and what happens when two projects share a name).
"""

from __future__ import annotations

import os

from oloproof.errors import ConfigError
from oloproof.storeurl import STORE_DIR, masked, store_setting

__all__ = [
    "ENV", "STORE_DIR", "PostgresLocation", "StoreLocation", "describe", "locate", "project_key",
    "store_path",
]

ENV = "OLOPROOF_STORE"
STORE_FILE = "store.sqlite"


class PostgresLocation:
    """A team store on PostgreSQL, for one project. ``url`` holds the password, if any:
    never show it; ``str()`` and ``repr()`` are masked. (A plain class and not a record:
    its ``repr`` is its own.)"""

    __slots__ = ("project", "url")

    def __init__(self, url: str, project: str) -> None:
        self.url = url
        self.project = project

    @property
    def display(self) -> str:
        return masked(self.url)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PostgresLocation):
            return NotImplemented
        return (self.url, self.project) == (other.url, other.project)

    def __hash__(self) -> int:
        return hash((self.url, self.project))

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"PostgresLocation({self.display!r}, project={self.project!r})"


#: A store's place: the path of the SQLite file, or a PostgreSQL store.
StoreLocation = str | PostgresLocation


def store_path(project_root: str | os.PathLike[str]) -> str:
    return os.path.join(project_root, STORE_DIR, STORE_FILE)


def describe(location: StoreLocation) -> str:
    """The store as a person may be shown it (a password never is)."""
    return str(location)


def _yaml(config: str, data: bytes) -> object:
    import yaml

    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        if isinstance(exc, yaml.reader.ReaderError) and isinstance(exc.character, int):
            # A character YAML does not accept: its position counts the decoded text.
            text = data.decode("utf-8", "replace")
            line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(
            f"cannot be read to find its store ({str(exc).splitlines()[0]}; `oloproof run`"
            " says more)", file=str(config), line=line,
        ) from None


_PLAIN_SPECIAL = frozenset({"", "~", "null", "true", "false", "yes", "no", "on", "off"})


def _plain(data: bytes, key: str) -> str | None:
    """The value of top-level ``key:`` when the file holds it once, on one line, as a plain
    value YAML reads as that same text; ``None`` when only PyYAML can say."""
    if b"\n---" in data or b"\n..." in data or data.startswith((b"---", b"%")):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith(key + ":")]
    if len(found) != 1:
        return None
    after = lines[found[0] + 1 :]
    for line in after:  # an indented line after it may continue the value
        if line.strip() and not line.lstrip().startswith("#"):
            if line[0] in " \t":
                return None
            break
    value = lines[found[0]][len(key) + 1 :].replace("\t#", " #")
    if " #" in value:
        value = value[: value.index(" #")]
    value = value.strip(" \t")  # YAML's white space (str.strip would take more)
    if (
        value.lower() in _PLAIN_SPECIAL
        # PyYAML reads a plain value as something else than text only by a resolver chosen
        # by its first character: a number, a date, a sexagesimal (``1:20`` is 80), ``0x1F``,
        # ``=`` and ``<<`` start with one of these; ``.nan``, ``.inf`` and ``.5`` with a dot.
        or value[0] in "!&*'\"{}[]|>%@`,?:-#+0123456789<="
        or (value[0] == "." and (value.lower() in (".nan", ".inf") or value[1:2] in _DIGIT_))
        or ": " in value
        or "\t" in value
    ):
        return None
    return value


_DIGIT_ = frozenset("0123456789_")


def _project_key(config: str, doc: object) -> str:
    name = doc.get("project") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            "a team store keeps each project's runs under its name, and this file names none",
            file=str(config), field="project",
        )
    return name


def project_key(config: str | os.PathLike[str]) -> str:
    """The ``project:`` name of oloproof.yaml (a team store keeps each project's runs under
    it), read as :func:`locate` reads it."""
    config = os.fspath(config)
    try:
        data = _read(config)
    except OSError:
        raise ConfigError("cannot be read to find the project's name", file=str(config)) from None
    name = _plain(data, "project")
    return name if name is not None else _project_key(config, _yaml(config, data))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def locate(config: str | os.PathLike[str]) -> StoreLocation:
    """The store of the project whose oloproof.yaml is ``config``."""
    config = os.fspath(config)
    root = os.path.dirname(os.path.realpath(config))
    env = os.environ.get(ENV)
    data: bytes | None
    try:
        data = _read(config)
    except OSError:
        data = None  # the command that needs the file says so
    doc: object = None
    url: str | None
    if env is not None and env.strip():
        url = store_setting(env, ENV)
    elif data is None or b"store" not in data:
        return store_path(root)
    else:
        setting: object = _plain(data, "store")
        if setting is None:
            doc = _yaml(config, data)
            setting = doc.get("store") if isinstance(doc, dict) else None
        url = store_setting(setting, str(config))
    if url is None:
        return store_path(root)
    if data is None:
        raise ConfigError("cannot be read to find the project's name", file=str(config))
    name = _plain(data, "project") if doc is None else None
    if name is None:
        name = _project_key(config, _yaml(config, data) if doc is None else doc)
    return PostgresLocation(url, name)
