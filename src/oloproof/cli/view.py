"""``oloproof view``: a local, read-only web viewer of the project's store.

Binds 127.0.0.1 only, on a free port unless ``--port`` names one, prints the address and
opens it in a browser unless ``--no-open``. Needs the ``[view]`` extra (Starlette and
uvicorn), imported here and nowhere else, so ``--help`` and ``run`` never load it.
"""

from __future__ import annotations

import socket
import sys
import threading
import webbrowser
from typing import TYPE_CHECKING

from oloproof.cli._common import project_root, read_project_store
from oloproof.errors import UsageError
from oloproof.store.db import has_table
from oloproof.store.location import locate
from oloproof.store.reader import project_scope

if TYPE_CHECKING:
    import argparse

__all__ = ["command"]

HOST = "127.0.0.1"


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {HOST}:{port} ({exc.strerror or exc}); "
                         "pass another --port, or --port 0 for a free one") from None
    sock.listen(128)
    return sock


def command(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from oloproof.render.html.viewer import create_app
    except ImportError as exc:
        raise UsageError(
            f"the viewer needs its extra ({exc.name} is not installed):"
            " pip install 'oloproof[view]'"
        ) from None
    conn = read_project_store(args.config)  # a missing or foreign store is refused here
    try:
        where, scope = project_scope(conn)
        project = conn.execute(
            f"SELECT project FROM runs WHERE {where} ORDER BY created_at DESC LIMIT 1", scope
        ).fetchone() if has_table(conn, "runs") else None
    finally:
        conn.close()
    root = project_root(args.config)
    name = project[0] if project else root.name
    sock = _bind(args.port)
    url = f"http://{HOST}:{sock.getsockname()[1]}/"
    app = create_app(locate(args.config), name)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1,
                            access_log=False)
    server = uvicorn.Server(config)
    sys.stdout.write(f"Viewing {name} at {url}  (read-only; Ctrl-C stops it)\n")
    sys.stdout.flush()
    if not args.no_open:
        threading.Timer(0.3, webbrowser.open, (url,)).start()
    server.run(sockets=[sock])
    return 0
