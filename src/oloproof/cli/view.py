"""``oloproof view``: a local, read-only web viewer of the project's store, behind a token.

Binds 127.0.0.1 only, on a free port unless ``--port`` names one, prints the address (with
its token) and opens it in a browser unless ``--no-open``. Needs the ``[view]`` extra
(Starlette and uvicorn), imported here and nowhere else, so ``--help`` and ``run`` never
load it.

The token is random (32 bytes from ``secrets``) unless ``OLOPROOF_VIEW_TOKEN`` or
``--token`` sets one. The browser is opened on a private file that forwards to the
address, as Jupyter does, so that the token never appears on a command line another user
could read (``ps``).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
import threading
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.cli._common import project_root, read_project_store
from oloproof.errors import UsageError
from oloproof.store.db import has_table
from oloproof.store.location import locate
from oloproof.store.reader import project_scope

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

__all__ = ["ENV_TOKEN", "choose_token", "command"]

HOST = "127.0.0.1"
ENV_TOKEN = "OLOPROOF_VIEW_TOKEN"
MIN_TOKEN = 16
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~-]+")


def choose_token(given: str | None, environ: Mapping[str, str]) -> str:
    """The viewer's token: ``--token``, else ``OLOPROOF_VIEW_TOKEN``, else a random one.

    A chosen token must be at least 16 characters of ``A-Z a-z 0-9 . _ ~ -`` (it travels in
    an address and a cookie as it is); an empty one is refused, never read as "no token".
    """
    import secrets

    for source, value in (("--token", given), (ENV_TOKEN, environ.get(ENV_TOKEN))):
        if value is None:
            continue
        if len(value) < MIN_TOKEN or not _TOKEN_CHARS.fullmatch(value):
            shown = "empty" if not value else f"{len(value)} characters"
            raise UsageError(
                f"{source}: a viewer token must be at least {MIN_TOKEN} characters of"
                f" A-Z a-z 0-9 . _ ~ - (got {shown}); leave it unset for a random one"
            )
        return value
    return secrets.token_urlsafe(32)


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by every connection accepted on Linux: an answer's head and body are sent
    # at once, not 40 ms apart (Nagle's algorithm waiting on the client's delayed ACK).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {HOST}:{port} ({exc.strerror or exc}); "
                         "pass another --port, or --port 0 for a free one") from None
    sock.listen(128)
    return sock


def _opener(url: str, where: Path) -> Path:
    """A file, readable by its owner only, that sends a browser on to ``url``."""
    import html

    page = where / "open.html"
    target = html.escape(url, quote=True)
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(
            "<!doctype html><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"refresh\" content=\"0;url={target}\">"
            f"<title>Oloproof viewer</title><p><a href=\"{target}\">Open the viewer</a></p>\n"
        )
    return page


def command(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from oloproof.render.html.viewer import ViewerAccess, create_app
    except ImportError as exc:
        raise UsageError(
            f"the viewer needs its extra ({exc.name} is not installed):"
            " pip install 'oloproof[view]'"
        ) from None
    token = choose_token(getattr(args, "token", None), os.environ)
    conn = read_project_store(args.config)  # a missing or foreign store is refused here
    try:
        where, scope = project_scope(conn)
        project = conn.execute(
            f"SELECT project FROM runs WHERE {where} ORDER BY created_at DESC LIMIT 1", scope
        ).fetchone() if has_table(conn, "runs") else None
    finally:
        conn.close()
    root = project_root(args.config)
    name = project[0] if project else os.path.basename(root)
    sock = _bind(args.port)
    port = sock.getsockname()[1]
    base = f"http://{HOST}:{port}/"
    url = f"{base}?token={token}"
    access = ViewerAccess(token, cookie=f"oloproof-view-{port}")
    app = create_app(locate(args.config), name, access, project_root=root,
                     project_config=args.config)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1,
                            access_log=False)
    server = uvicorn.Server(config)
    from oloproof.render.out import write_text
    from oloproof.textsafe import printable

    # Standard output on a full disk or closed: the viewer still serves (a browser opened
    # for it, or a --token the user chose, reaches it); one warning says the line is lost.
    write_text(sys.stdout, (
        f"Viewing {printable(name)} at {url}\n"
        "  (read-only; the token lets only whoever holds this address in; Ctrl-C stops it)\n"
    ))
    with tempfile.TemporaryDirectory(prefix="oloproof-view-") as private:
        if not args.no_open:
            page = _opener(url, Path(private))
            threading.Timer(0.3, webbrowser.open, (page.as_uri(),)).start()
        server.run(sockets=[sock])
    return 0
