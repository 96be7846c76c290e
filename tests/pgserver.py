"""A real PostgreSQL server for the tests: initdb and pg_ctl in a temporary directory.

Each pytest process (each xdist worker) starts one server of its own on first use, on a
Unix socket in its directory and on a free port of 127.0.0.1, and stops it when the
session ends. PostgreSQL refuses to run as root: run as root, the server is started as
the ``postgres`` system user (Debian's ``postgresql`` package makes it; .ci/run installs
the package when it is missing), in a directory given to that user, after checking that
the user can use it.

``OLOPROOF_TEST_POSTGRES=required`` (set by .ci/run) makes a server that cannot be
started a failure of every PostgreSQL test; without it, those tests are skipped with the
reason.

A server never outlives the process that started it. pg_ctl's server is a daemon of its
own, which a killed pytest (SIGKILL, a CI job's timeout) used to leave running with its
data directory; so each server has a *watchdog*: a small Python process, in a session of
its own (a signal to pytest's process group does not reach it), that holds the read end of
a pipe whose only write end is this process's. When this process ends, however it ends,
the kernel closes that end, the watchdog's read returns, and it stops the server
(``pg_ctl stop -m immediate``) and removes its directory. :meth:`Server.stop` stops the
server itself, then closes its end, and the watchdog finds nothing left to do. (A child
forked without exec inherits the write end and keeps the server up until it ends too.)
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

REQUIRED_ENV = "OLOPROOF_TEST_POSTGRES"
RUN_AS = "postgres"
# A role that logs in over TCP with a password: the tests that check it is never shown.
SECRET_USER = "olo_secret"
SECRET_PASSWORD = "Pw-x7Qz%4a:b@c/9"


class Unavailable(Exception):
    """PostgreSQL cannot be started here (the message says why)."""


def required() -> bool:
    return os.environ.get(REQUIRED_ENV, "").lower() in ("1", "required", "true", "yes")


def _binaries() -> Path:
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if not versions:
        raise Unavailable(
            "PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)"
        )
    return Path(versions[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The watchdog's program: argv = lifeline fd, pg_ctl, data directory, directory to remove,
# user to run pg_ctl as ('' for its own). Blocks until the lifeline's write end is closed.
_WATCHDOG = r"""
import os, shutil, subprocess, sys
fd, pg_ctl, data, base, user = int(sys.argv[1]), *sys.argv[2:6]
try:
    while os.read(fd, 64):
        pass
except OSError:
    pass
if os.path.exists(os.path.join(data, "postmaster.pid")):
    subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "-t", "60", "stop"],
                   user=user or None, cwd="/", stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
shutil.rmtree(base, ignore_errors=True)
"""


@dataclass
class Server:
    directory: Path
    port: int
    bin: Path
    user: str | None  # the system user it runs as (None: this process's own)
    # The watchdog that stops the server if this process dies first, and the write end of
    # its lifeline (module docstring).
    watchdog: subprocess.Popen[bytes] | None = None
    lifeline: int | None = None

    @property
    def socket_dir(self) -> str:
        return str(self.directory)

    def url(self, database: str = "postgres", *, user: str = "postgres") -> str:
        """A URL over the Unix socket (trusted: no password)."""
        return f"postgresql://{user}@/{database}?host={quote(self.socket_dir, safe='')}&port={self.port}"

    def tcp_url(self, database: str) -> str:
        """A URL over TCP with the secret role's password in it."""
        return (
            f"postgresql://{SECRET_USER}:{quote(SECRET_PASSWORD, safe='')}"
            f"@127.0.0.1:{self.port}/{database}"
        )

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), capture_output=True, text=True, check=False, timeout=timeout,
            user=self.user, cwd=self.directory, stdin=subprocess.DEVNULL,
        )

    def sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(statement)

    def create_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.sql(f'CREATE DATABASE "{name}" TEMPLATE template0')
        self.sql(f'GRANT ALL ON DATABASE "{name}" TO {SECRET_USER}')
        self.sql(f"GRANT ALL ON SCHEMA public TO {SECRET_USER}", name)
        return name

    def drop_database(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.directory / "data"), "-m",
                  "immediate", "stop", timeout=60)
        shutil.rmtree(self.directory, ignore_errors=True)
        self._release_watchdog()

    def guard(self) -> None:
        """Start the watchdog that stops this server when this process ends without
        calling :meth:`stop` (module docstring)."""
        read_end, write_end = os.pipe()  # neither end is inherited by other children
        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG, str(read_end), str(self.bin / "pg_ctl"),
                 str(self.directory / "data"), str(self.directory), self.user or ""],
                pass_fds=(read_end,), start_new_session=True, cwd="/",
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self.lifeline = write_end

    def _release_watchdog(self) -> None:
        if self.lifeline is not None:
            os.close(self.lifeline)
            self.lifeline = None
        if self.watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.watchdog.wait(timeout=60)
            self.watchdog = None


def _usable_by(user: str, directory: Path) -> None:
    """Fail with the reason unless ``user`` can create files in ``directory`` (and reach it)."""
    probe = subprocess.run(
        ["sh", "-c", 'test -d "$0" && test -w "$0" && test -x "$0" && touch "$0/.probe"',
         str(directory)],
        user=user, capture_output=True, text=True, check=False, timeout=30,
    )
    if probe.returncode != 0:
        raise Unavailable(
            f"the {user} user cannot use {directory} (a parent directory it cannot enter?):"
            f" {probe.stderr.strip() or 'not writable'}"
        )


def start(*, durable: bool = False) -> Server:
    """Start a server; :class:`Unavailable` with the reason when it cannot be. ``durable``:
    PostgreSQL's own settings for writing to disk (the benchmarks); otherwise a test
    server that syncs nothing."""
    bindir = _binaries()
    user: str | None = None
    base = Path(tempfile.mkdtemp(prefix="oloproof-pg-"))
    if os.geteuid() == 0:
        try:
            entry = pwd.getpwnam(RUN_AS)
        except KeyError:
            shutil.rmtree(base, ignore_errors=True)
            raise Unavailable(
                f"running as root, PostgreSQL needs an unprivileged user, and there is no"
                f" '{RUN_AS}' user (Debian's postgresql package makes it)"
            ) from None
        user = RUN_AS
        os.chown(base, entry.pw_uid, entry.pw_gid)
        base.chmod(0o700)
        _usable_by(user, base)
    server = Server(base, _free_port(), bindir, user)
    # Before anything that a killed process could leave behind: from here on, the watchdog
    # removes the directory and stops whatever server runs in it.
    server.guard()
    init = server._run(
        str(bindir / "initdb"), "-D", str(base / "data"), "-U", "postgres", "-E", "UTF8",
        "--locale=C.UTF-8", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync",
    )
    if init.returncode != 0:
        server.stop()
        raise Unavailable(f"initdb failed: {(init.stderr or init.stdout).strip()[-800:]}")
    settings = [f"-p {server.port}", f"-k {base}", "-c listen_addresses=127.0.0.1",
                "-c max_connections=200"]
    if not durable:
        # A test server: nothing in it must survive a crash of the machine.
        settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off",
                     "-c shared_buffers=32MB"]
    options = " ".join(settings)
    started = server._run(
        str(bindir / "pg_ctl"), "-D", str(base / "data"), "-l", str(base / "server.log"),
        "-o", options, "-w", "-t", "60", "start",
    )
    if started.returncode != 0:
        log = (base / "server.log").read_text(errors="replace")[-800:] if (
            base / "server.log").exists() else ""
        server.stop()
        raise Unavailable(f"pg_ctl start failed: {started.stderr.strip()} {log}".strip())
    deadline = time.monotonic() + 30
    while True:
        try:
            server.sql(
                f"CREATE ROLE {SECRET_USER} LOGIN PASSWORD '{SECRET_PASSWORD}'"
            )
            break
        except Exception as exc:  # noqa: BLE001 - the server may still be starting
            if time.monotonic() > deadline:
                server.stop()
                raise Unavailable(f"the server does not answer: {exc}") from None
            time.sleep(0.2)
    return server


@contextlib.contextmanager
def running() -> Iterator[Server]:
    server = start()
    try:
        yield server
    finally:
        server.stop()
