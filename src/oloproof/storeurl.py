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

The URL is read once, as libpq reads it (:func:`url_options`): by the setting's check,
which refuses (exit 2, before anything connects) a URL libpq would refuse or read otherwise
than as written, and by the reading commands' own client (store/pgwire.py).

This module is a bottom layer: it imports nothing of Oloproof's but its errors.
"""

from __future__ import annotations

import os
from functools import cache

from oloproof.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

__all__ = [
    "ENVIRONMENT", "KEYWORDS", "MASK", "POSTGRES_SCHEMES", "STORE_DIR", "MalformedURL",
    "check_options",
    "is_postgres", "masked", "scrub", "store_setting", "url_options",
]

MASK = "***"
#: The directory of a project's own store (and of its snapshots), in the project directory.
STORE_DIR = ".oloproof"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
ACCEPTED = "a postgresql:// URL (the team store), or sqlite (the default store in .oloproof/)"

#: The connection parameters libpq knows (version 18): a URL's query string may set any of
#: them and no other (libpq refuses the URL: "invalid URI query parameter").
KEYWORDS = frozenset({
    "application_name", "channel_binding", "client_encoding", "connect_timeout", "dbname",
    "fallback_application_name", "gssdelegation", "gssencmode", "gsslib", "host", "hostaddr",
    "keepalives", "keepalives_count", "keepalives_idle", "keepalives_interval", "krbsrvname",
    "load_balance_hosts", "max_protocol_version", "min_protocol_version", "oauth_client_id",
    "oauth_client_secret", "oauth_issuer", "oauth_scope", "options", "passfile", "password",
    "port", "replication", "require_auth", "requirepeer", "scram_client_key",
    "scram_server_key", "service", "ssl_max_protocol_version", "ssl_min_protocol_version",
    "sslcert", "sslcertmode", "sslcompression", "sslcrl", "sslcrldir", "sslkey",
    "sslkeylogfile", "sslmode", "sslnegotiation", "sslpassword", "sslrootcert", "sslsni",
    "target_session_attrs", "tcp_user_timeout", "user",
})
#: The values libpq accepts for the parameters it checks before it connects (a value
#: outside them fails the connection: "invalid sslmode value").
CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "sslcertmode": ("disable", "allow", "require"),
    "sslnegotiation": ("postgres", "direct"),
    "target_session_attrs": (
        "any", "read-write", "read-only", "primary", "standby", "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
    "min_protocol_version": ("3.0", "3.2", "latest"),
    "max_protocol_version": ("3.0", "3.2", "latest"),
}
#: TLS versions (any case; empty: libpq's default).
VERSIONS = {
    "ssl_min_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "ssl_max_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
}
AUTH_METHODS = ("password", "md5", "gss", "sspi", "scram-sha-256", "oauth", "none")
#: Parameters whose value libpq reads as an integer.
INTEGERS = ("connect_timeout", "keepalives", "keepalives_count", "keepalives_idle",
            "keepalives_interval", "tcp_user_timeout")


#: The environment variables libpq reads for a parameter the URL does not set, among those
#: :func:`check_options` checks.
ENVIRONMENT = {
    "PGHOST": "host", "PGHOSTADDR": "hostaddr", "PGPORT": "port", "PGSSLMODE": "sslmode",
    "PGGSSENCMODE": "gssencmode", "PGCHANNELBINDING": "channel_binding",
    "PGSSLCERTMODE": "sslcertmode", "PGSSLNEGOTIATION": "sslnegotiation",
    "PGTARGETSESSIONATTRS": "target_session_attrs", "PGLOADBALANCEHOSTS": "load_balance_hosts",
    "PGMINPROTOCOLVERSION": "min_protocol_version",
    "PGMAXPROTOCOLVERSION": "max_protocol_version",
    "PGSSLMINPROTOCOLVERSION": "ssl_min_protocol_version",
    "PGSSLMAXPROTOCOLVERSION": "ssl_max_protocol_version", "PGREQUIREAUTH": "require_auth",
    "PGCONNECT_TIMEOUT": "connect_timeout",
}


class MalformedURL(ValueError):
    """A ``postgresql://`` URL libpq would refuse, or read otherwise than as written; the
    message names the part (``the password``, ``the port``) and never holds a password."""

    def __init__(self, part: str, problem: str, option: str | None = None) -> None:
        self.part = part
        #: The connection parameter at fault, where :func:`check_options` knows it.
        self.option = option
        super().__init__(f"{part} {problem}")


def _shown(text: str) -> str:
    return "'" + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text) + "'"


def _decoded(raw: str, part: str) -> str:
    """``raw`` percent-decoded as libpq decodes a URL's part (conninfo_uri_decode).

    Refused besides what libpq refuses: a space or a control character written as it is.
    libpq 17 and later refuse a space inside a part and drop those at its ends, which
    earlier versions kept; Oloproof's own reading client kept them all. Written
    percent-encoded (``%20``), every reader reads the same password."""
    for ch in raw:
        if ch == "\x00":
            raise MalformedURL(part, "holds a NUL character, which libpq refuses")
        if ch <= " " or ch == "\x7f":
            what = "a space" if ch == " " else "a control character"
            code = f"%{ord(ch):02X}"
            raise MalformedURL(part, f"holds {what}: write it percent-encoded ({code})")
        if "\ud800" <= ch <= "\udfff":
            raise MalformedURL(part, "is not UTF-8")
    if "%" not in raw:
        return raw
    out = bytearray()
    i = 0
    data = raw.encode("utf-8")
    hexdigits = b"0123456789abcdefABCDEF"
    while i < len(data):
        if data[i] != 0x25:  # '%'
            out.append(data[i])
            i += 1
            continue
        pair = data[i + 1:i + 3]
        if len(pair) < 2 or pair[0] not in hexdigits or pair[1] not in hexdigits:
            raise MalformedURL(
                part, "holds a '%' that is not followed by two hexadecimal digits (write a"
                " '%' itself as %25)")
        if pair == b"00":
            raise MalformedURL(part, "holds %00 (a NUL character, which libpq refuses)")
        out.append(int(pair, 16))
        i += 3
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:  # psycopg cannot read it either
        raise MalformedURL(part, "is not UTF-8 once percent-decoded") from None


def url_options(url: str) -> dict[str, str]:
    """The connection parameters of a ``postgresql://`` URL as libpq reads them
    (conninfo_uri_parse_options), in the order it sets them (a later value of a parameter
    replaces an earlier one); :class:`MalformedURL` for a URL libpq refuses, or one that
    holds a space or a control character unencoded (see :func:`_decoded`). Parameters are
    not checked here: see :func:`check_options`."""
    for scheme in POSTGRES_SCHEMES:
        if url.startswith(scheme):
            rest = url[len(scheme):]
            break
    else:
        raise MalformedURL("the scheme", "is not postgresql:// (nor postgres://)")
    out: dict[str, str] = {}
    n = len(rest)
    # The user part: up to the first '@' before any '/'; the password from the first ':'.
    p = 0
    while p < n and rest[p] not in "@/":
        p += 1
    if p < n and rest[p] == "@":
        user, colon, password = rest[:p].partition(":")
        if user:
            out["user"] = _decoded(user, "the user name")
        if colon and password:
            out["password"] = _decoded(password, "the password")
        p += 1
    else:
        p = 0
    # host[:port], several separated by ','.
    hosts: list[str] = []
    ports: list[str] = []
    after = ""
    while True:
        if p < n and rest[p] == "[":
            close = rest.find("]", p + 1)
            if close < 0:
                raise MalformedURL("the host", "is an IPv6 address without its closing ']'")
            if close == p + 1:
                raise MalformedURL("the host", "is an empty IPv6 address ([])")
            hosts.append(rest[p + 1:close])
            p = close + 1
            if p < n and rest[p] not in ":/?,":
                raise MalformedURL(
                    "the host", f"is followed by {_shown(rest[p])} after its IPv6 address"
                    " (expected ':', '/' or '?')")
        else:
            start = p
            while p < n and rest[p] not in ":/?,":
                p += 1
            if "@" in rest[start:p]:
                # libpq ends the user part at its first '@': the rest of a password that
                # holds another is read as the host (and shown in its errors).
                raise MalformedURL(
                    "the host", "holds an '@' written as it is (an '@' in a password is"
                    " written %40)")
            hosts.append(rest[start:p])
        after = rest[p] if p < n else ""
        if after == ":":
            start = p + 1
            p = start
            while p < n and rest[p] not in "/?,":
                p += 1
            ports.append(rest[start:p])
            after = rest[p] if p < n else ""
        else:
            ports.append("")
        if after != ",":
            break
        p += 1
    if ",".join(hosts):
        out["host"] = _decoded(",".join(hosts), "the host")
    if ",".join(ports):
        out["port"] = _decoded(",".join(ports), "the port")
    query = ""
    if after == "/":
        dbname, mark, query = rest[p + 1:].partition("?")
        if "@" in dbname:
            # user:pass/word@host/db: libpq ends the host part at the password's '/' and
            # reads what comes before it as host and port (and shows them in its errors).
            raise MalformedURL(
                "the database name", "holds an '@' written as it is (write it %40); if the"
                " URL's user and password come before it, a '/' in the password is written"
                " %2F (libpq reads the password as the host's port otherwise)")
        if dbname:
            out["dbname"] = _decoded(dbname, "the database name")
        after = mark
    elif after == "?":
        query = rest[p + 1:]
    if after != "?":
        return out
    pairs = query.split("&") if query else []
    if len(pairs) > 1 and not pairs[-1]:
        pairs.pop()  # libpq takes a '&' that ends the URL for nothing
    after_secret = False  # a text after a password's '&' may be the rest of the password
    for number, pair in enumerate(pairs, 1):
        key, eq, value = pair.partition("=")
        # Named by its place, not its name, where the name may be part of a password.
        label = f"the query string's parameter {number}" if after_secret or not eq else (
            f"the parameter {_shown(key)}")
        hint = " (an '&' in a value is written %26)" if after_secret or not eq else ""
        if not eq:
            raise MalformedURL(label, f"has no '='{hint}")
        if "=" in value:
            raise MalformedURL(label, f"holds a second '=' (write it %3D in a value){hint}")
        name = _decoded(key, f"{label}'s name" if after_secret else "a parameter's name")
        value = _decoded(value, label)
        if name == "ssl" and value == "true":  # libpq's JDBC spelling
            name, value = "sslmode", "require"
        if name not in KEYWORDS:
            raise MalformedURL(label, f"is not a connection parameter libpq knows{hint}")
        after_secret = _secret_name(name)
        out[name] = value
    return out


def check_options(options: dict[str, str]) -> None:
    """:class:`MalformedURL` for a parameter libpq refuses when it starts to connect: a
    port that is not a number from 1 to 65535, more ports than hosts, a value outside
    those libpq accepts (``sslmode=requir``), an integer that is not one."""
    def integer(text: str) -> int | None:
        text = text.strip(" \t\n\r\f\v")
        digits = text[1:] if text[:1] in "+-" else text
        return int(text) if digits.isascii() and digits.isdigit() else None

    ports = options.get("port", "").split(",") if options.get("port") else []
    for port in ports:
        if port == "":
            continue  # libpq's default, 5432
        number = integer(port)
        if number is None or not 0 < number < 65536:
            # Shown when it is a number: other text there may be a password's (user:pa/ss@).
            shown = f" {_shown(port)}" if number is not None else ""
            raise MalformedURL(f"the port{shown}", "is not a number from 1 to 65535", "port")
    names = options.get("host", "").split(",") if options.get("host") else []
    addresses = options.get("hostaddr", "").split(",") if options.get("hostaddr") else []
    if names and addresses and len(names) != len(addresses):
        raise MalformedURL(
            "the parameter hostaddr", f"gives {len(addresses)} addresses for {len(names)}"
            " hosts (libpq takes one for each)", "hostaddr")
    hosts = max(len(names), len(addresses), 1)
    if len(ports) > 1 and len(ports) != hosts:
        raise MalformedURL(
            "the port", f"gives {len(ports)} ports for {hosts} host{'s' * (hosts > 1)} (libpq"
            " takes one port for all hosts, or one for each)", "port")
    for name, accepted in CHOICES.items():
        value = options.get(name)
        if value is not None and value not in accepted:
            raise MalformedURL(
                f"the parameter {name}", f"is {_shown(value)}, which libpq does not accept"
                f" (accepted: {', '.join(accepted)})", name)
    for name in INTEGERS:
        value = options.get(name)
        if value and integer(value) is None:
            raise MalformedURL(
                f"the parameter {name}", f"is {_shown(value)}, not a whole number", name)
    for name, accepted in VERSIONS.items():
        value = options.get(name)
        if value and value.lower() not in (a.lower() for a in accepted):
            raise MalformedURL(
                f"the parameter {name}", f"is {_shown(value)}, which libpq does not accept"
                f" (accepted: {', '.join(accepted)})", name)
    methods = options.get("require_auth")
    if methods:
        items = methods.split(",")
        negated = {item.startswith("!") for item in items}
        if len(negated) > 1 or any(item.lstrip("!") not in AUTH_METHODS for item in items):
            raise MalformedURL(
                "the parameter require_auth", f"is {_shown(methods)}, which libpq does not"
                f" accept (accepted: methods among {', '.join(AUTH_METHODS)}, separated by"
                " ',', each with '!' in front or none)", "require_auth")


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
    # A value runs to the next '&', or to the next white space followed by name=: a space
    # in it (written as it is, or escaped with '\\' as libpq's key=value form allows) is
    # still the password's, and what follows it was shown.
    parameter = re.compile(
        r"(?<![\w%])((?:\w|%[0-9A-Fa-f]{2})+)(\s*=\s*)"
        r"('(?:[^'\\]|\\.)*'|(?:\\.|[^&\s\\]|\s+(?!(?:\w|%[0-9A-Fa-f]{2})+\s*=))*)"
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
    if is_postgres(url):
        try:  # and every secret as libpq reads it (decoded, to the first '@')
            found += [v for k, v in url_options(url).items() if _secret_name(k)]
        except MalformedURL:
            pass
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


def _check_environment(options: dict[str, str]) -> None:
    """A :class:`ConfigError` naming the variable for a ``PG*`` variable libpq would read
    for the team store (the URL does not set its parameter) and refuse when it connects
    (``PGSSLMODE=requir``, ``PGPORT=54x``): a mistake to fix (exit 2), not a store that
    cannot be reached."""
    given = {opt: os.environ[var] for var, opt in ENVIRONMENT.items()
             if os.environ.get(var) and opt not in options}
    if not given:
        return
    try:
        check_options({**given, **options})
    except MalformedURL as exc:
        names = [var for var, opt in ENVIRONMENT.items() if opt in given and (
            opt == exc.option or exc.option is None)]
        raise ConfigError(
            f"{exc} (libpq reads this variable for the team store, whose URL does not set"
            " it); nothing was connected to", file=" ".join(names) or "PG* variables",
        ) from None


def store_setting(value: object, origin: str) -> str | None:
    """The PostgreSQL URL a setting names, or ``None`` for the default SQLite store.

    ``origin`` names where the value came from (``OLOPROOF_STORE``, ``oloproof.yaml``) for
    the error. Accepted: a ``postgresql://`` (or ``postgres://``) URL; ``sqlite``, or
    ``None`` (no setting), for the default. Anything else, the empty text included (as
    ``policy: ""`` is, it is a mistake, not a choice), is a :class:`ConfigError` that shows
    the value masked, never its password; so is a URL libpq would refuse, or read otherwise
    than as written (:func:`url_options`, :func:`check_options`), naming its part: it is
    refused here, before anything connects, and not by the driver (a store error, exit 5)."""
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
        try:
            options = url_options(text)
            check_options(options)
        except MalformedURL as exc:
            raise ConfigError(
                f"the postgresql:// URL cannot be used: {exc}; nothing was connected to",
                file=origin, field="store",
            ) from None
        _check_environment(options)
        return text
    raise ConfigError(
        f"'{masked(text)}' is not a store Oloproof can use", file=origin, field="store",
        accepted=ACCEPTED,
    )
