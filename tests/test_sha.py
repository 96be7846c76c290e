"""oloproof._sha: the same SHA-256 as hashlib's, from CPython's own module for small inputs."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from oloproof._sha import LARGE, sha256


def test_the_same_digests_as_hashlib() -> None:
    for data in (b"", b"abc", "\u00e9t\u00e9".encode(), bytes(range(256)) * 100,
                 b"x" * (LARGE - 1), b"y" * LARGE):
        assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
        assert sha256(data, large=True).hexdigest() == hashlib.sha256(data).hexdigest()
    streamed, whole = sha256(), hashlib.sha256()
    for chunk in (b"a" * 1000, b"b" * 70_000, b""):
        streamed.update(chunk)
        whole.update(chunk)
    assert streamed.hexdigest() == whole.hexdigest()


def test_small_digests_do_not_import_openssl() -> None:
    probe = ("import sys\nfrom oloproof._json import digest\n"
             "digest({'case': 'q1', 'input': {'n': 1}})\nprint('hashlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"
