"""The store setting (``store:`` in oloproof.yaml, ``OLOPROOF_STORE``) and its secrets.

A project's store is the embedded SQLite file in ``.oloproof/`` (the default) or a team
store on PostgreSQL, named by a ``postgresql://`` URL (libpq's URI form: any connection
parameter can go in its query string). That URL may hold a password, in its user part
(``postgresql://ana:SECRET@db/evals``) or as a parameter (``?password=SECRET``,
``?sslpassword=SECRET``: any parameter whose name holds ``password``, ``passwd``,
``secret``, ``token`` or ``scram``: libpq's ``scram_client_key`` logs in as a password
does). A password is never stored, printed or put in an event: wherever a store is shown,
it is :func:`masked`, and any text that may quote the URL (an error of the driver) goes
through :func:`scrub`.

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
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Compiled when a URL is first masked (the SQLite path never asks)."""
    import re

    # scheme://user:password@ : libpq ends the user part at the first '@' before any '/',
    # so a password may hold '?', '#' or ':' unencoded (and libpq connects with it); it is
    # everything between the first ':' of the user part and the last '@' before the first
    # '/' (a password may hold '@' when it is not percent-encoded).
    userinfo = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/]*)@")
    # scheme://user:pass/word@host : a '/' that a password holds unencoded ends libpq's
    # host part, which then has no user part; the text is still a password. (Not
    # host:5432/db?user=a@b, whose ':' is a port's.)
    cut = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/@\[:]*):(?!\d+/[^?@]*(?:\?|$))([^@]*)@")
    # password=..., sslpassword=... (any parameter named for a secret, its name written
    # plainly or percent-encoded, as libpq decodes it) in a query string or a key=value
    # connection string.
    parameter = re.compile(
        r"(?<![\w%])((?:\w|%[0-9A-Fa-f]{2})+)(\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)"
    )
    return userinfo, cut, parameter


def _secret_name(name: str) -> bool:
    from urllib.parse import unquote

    lowered = unquote(name).lower()
    return any(word in lowered for word in ("password", "passwd", "secret", "token", "scram"))


def _user_part(url: str) -> tuple[str, str, str] | None:
    """``(scheme://user:, password, @rest)`` of a URL whose user part holds a password."""
    userinfo, cut, _ = _patterns()
    match = userinfo.match(url)
    if match is not None:
        if ":" not in match.group(2):
            return None
        user, secret = match.group(2).split(":", 1)
        return f"{match.group(1)}{user}:", secret, url[match.end() - 1:]
    match = cut.match(url)
    if match is None:
        return None
    return f"{match.group(1)}{match.group(2)}:", match.group(3), url[match.end() - 1:]


def is_postgres(value: str) -> bool:
    return value.startswith(POSTGRES_SCHEMES)


def masked(url: str) -> str:
    """``url`` with its password (user part, and every parameter named for a secret:
    ``password=``, ``sslpassword=``) as ``***``."""
    _, _, parameter = _patterns()
    parts = _user_part(url)
    if parts is not None:
        url = f"{parts[0]}{MASK}{parts[2]}"

    def hide(match: re.Match[str]) -> str:
        if not _secret_name(match.group(1)):
            return match.group(0)
        return match.group(1) + match.group(2) + MASK

    return parameter.sub(hide, url)


def _passwords(url: str) -> list[str]:
    from urllib.parse import unquote

    _, _, parameter = _patterns()
    found: list[str] = []
    parts = _user_part(url)
    if parts is not None:
        found.append(parts[1])
    found += [m.group(3).strip("'") for m in parameter.finditer(url) if _secret_name(m.group(1))]
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
