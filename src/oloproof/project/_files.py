"""Reading project files safely: bounded, never blocking on a FIFO or a device.

No YAML here (project/_yaml.py parses), so that readers of JSON files (the suite, the
labels) and the configuration snapshot (project/_snapshot.py) do not import PyYAML.
"""

from __future__ import annotations

import os
import stat

from oloproof.errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "read_bytes", "read_text"]

#: The largest oloproof.yaml, release.yaml, compare.yaml or rubric file read.
MAX_CONFIG_BYTES = 1 << 20


def read_bytes(path: str | os.PathLike[str], display: str, limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, or a ConfigError.

    The file is opened without blocking and checked with ``fstat`` before a
    byte is read: a FIFO, a device (``/dev/zero``) or a socket is refused
    instead of hanging or filling memory, and the read stops one byte past
    ``limit`` whatever the file claims its size is.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise ConfigError("is a directory, expected a file", file=display) from None
    except OSError as exc:
        from oloproof._fs import missing, not_there  # only on the way to an error

        if not_there(exc):
            raise ConfigError(missing(path), file=display) from None
        raise ConfigError(f"cannot be read: {exc.strerror or exc}", file=display) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError("is a directory, expected a file", file=display)
        if not stat.S_ISREG(mode):
            raise ConfigError(
                "is not a regular file (a device, a pipe or a socket); "
                f"expected a {what} saved on disk",
                file=display,
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror or exc}", file=display) from None
    finally:
        os.close(fd)
    if size > limit:
        raise ConfigError(
            f"is larger than the limit of {_size(limit)} for a {what}", file=display
        )
    return b"".join(chunks)


def _size(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} bytes"


def read_text(
    path: str | os.PathLike[str], display: str, limit: int = MAX_CONFIG_BYTES, what: str = "file"
) -> str:
    """Read a UTF-8 text file (see :func:`read_bytes`), every failure a ConfigError."""
    data = read_bytes(path, display, limit, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        at = exc.start + utf8_bom(data)  # the codec counts from after the mark
        line = data.count(b"\n", 0, at) + 1
        raise ConfigError(
            f"not valid UTF-8 text (byte {at + 1}); save the file as UTF-8",
            file=display,
            line=line,
        ) from None


def utf8_bom(data: bytes) -> int:
    """The length of the UTF-8 byte order mark ``data`` starts with (3), or 0: what the
    "utf-8-sig" codec skips before it counts the positions of its errors."""
    return 3 if data.startswith(b"\xef\xbb\xbf") else 0
