"""The store setting (``store:`` in oloproof.yaml, ``OLOPROOF_STORE``) and its secrets.

A project's store is the embedded SQLite file in ``.oloproof/`` (the default) or a team
store on PostgreSQL, named by a ``postgresql://`` URL (libpq's URI form: any connection
parameter can go in its query string). That URL may hold a password, in its user part
(``postgresql://ana:SECRET@db/evals``) or as a parameter (``?password=SECRET``,
``?sslpassword=SECRET``: any parameter whose name holds ``password``, ``passwd``,
``secret`` or ``token``). A password is never stored, printed or put in an event:
wherever a store is shown, it is :func:`masked`, and any text that may quote the URL (an
error of the driver) goes through :func:`scrub`.

This module is a bottom layer: it imports nothing of Oloproof's but its errors.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from oloproof.errors import ConfigError

if TYPE_CHECKING:
    import re

__all__ = [
    "MASK", "POSTGRES_SCHEMES", "STORE_DIR", "is_postgres", "masked", "scrub", "store_setting",
]

MASK = "***"
#: The directory of a project's own store (and of its snapshots), in the project directory.
STORE_DIR = ".oloproof"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
ACCEPTED = "a postgresql:// URL (the team store), or sqlite (the default store in .oloproof/)"



@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Compiled when a URL is first masked (the SQLite path never asks)."""
    import re

    # scheme://user:password@ : the password is everything between the first ':' of the
    # user part and the last '@' before the host (a password may hold '@' when it is not
    # percent-encoded; libpq splits on the last one too).
    userinfo = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)@")
    # password=..., sslpassword=... (any parameter named for a secret) in a query string
    # or a key=value connection string.
    parameter = re.compile(
        r"(?i)(\b\w*(?:password|passwd|secret|token)\w*\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s#]*)"
    )
    return userinfo, parameter


def is_postgres(value: str) -> bool:
    return value.startswith(POSTGRES_SCHEMES)


def masked(url: str) -> str:
    """``url`` with its password (user part, and every parameter named for a secret:
    ``password=``, ``sslpassword=``) as ``***``."""
    _USERINFO, _PARAMETER = _patterns()

    def user(match: re.Match[str]) -> str:
        info = match.group(2)
        if ":" not in info:
            return match.group(0)
        return f"{match.group(1)}{info.split(':', 1)[0]}:{MASK}@"

    return _PARAMETER.sub(lambda m: m.group(1) + MASK, _USERINFO.sub(user, url, count=1))


def _passwords(url: str) -> list[str]:
    from urllib.parse import unquote

    _USERINFO, _PARAMETER = _patterns()
    found: list[str] = []
    match = _USERINFO.match(url)
    if match and ":" in match.group(2):
        found.append(match.group(2).split(":", 1)[1])
    found += [m.group(2).strip("'") for m in _PARAMETER.finditer(url)]
    out: list[str] = []
    for secret in found:
        for form in (secret, unquote(secret)):
            if form and form not in out:
                out.append(form)
    # The longest first: a password that contains another is replaced whole.
    return sorted(out, key=len, reverse=True)


def scrub(text: str, url: str | None) -> str:
    """``text`` with ``url`` masked and every form of its password (as written, and
    percent-decoded) replaced by ``***``: for messages a driver wrote, which may quote
    part of a connection string."""
    if not url:
        return text
    text = text.replace(url, masked(url))
    for secret in _passwords(url):
        text = text.replace(secret, MASK)
    return text


def store_setting(value: object, origin: str) -> str | None:
    """The PostgreSQL URL a setting names, or ``None`` for the default SQLite store.

    ``origin`` names where the value came from (``OLOPROOF_STORE``, ``oloproof.yaml``) for
    the error. Accepted: a ``postgresql://`` (or ``postgres://``) URL; ``sqlite``, or
    ``None`` (no setting), for the default. Anything else, the empty text included (as
    ``policy: ""`` is, it is a mistake, not a choice), is a :class:`ConfigError` that shows
    the value masked, never its password."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(
            f"expected text, got {type(value).__name__}", file=origin, field="store",
            accepted=ACCEPTED,
        )
    text = value.strip()
    if not text:
        raise ConfigError(
            "the store is empty: write store: sqlite for the store in .oloproof/, a"
            " postgresql:// URL, or remove the key", file=origin, field="store",
            accepted=ACCEPTED,
        )
    if text.lower() == "sqlite":
        return None
    if is_postgres(text):
        return text
    raise ConfigError(
        f"'{masked(text)}' is not a store Oloproof can use", file=origin, field="store",
        accepted=ACCEPTED,
    )
