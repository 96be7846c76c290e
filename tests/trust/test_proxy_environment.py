"""A proxy setting in the environment that no HTTP client can start with is bad input:
one line naming the variable, exit 2, before a run is stored (it was an internal error,
exit 70, after the run's row was written)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.trust._support import SMALL_RELEASE, no_traceback, project

HAS_SOCKSIO = importlib.util.find_spec("socksio") is not None

HTTP_SYSTEM = (
    "  http:\n    url: http://127.0.0.1:9/extract\n    version: v1\n"
)
JUDGE = (
    "  - type: rubric_judge\n    criterion: exact_label\n    provider: openai_compatible\n"
    "    model: m\n    base_url: http://127.0.0.1:9/v1\n    rubric_text: Is it ok?\n"
)


def _stored_runs(root: Path) -> int:
    if not (root / ".oloproof").exists():
        return 0
    result = run_cli("runs", "--json", cwd=root)
    assert result.code == 0, result.text
    return len(json.loads(result.out))


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        pytest.param("ALL_PROXY", "socks5://127.0.0.1:1080",
                     "names a SOCKS proxy, and the socksio package it needs is not installed",
                     marks=pytest.mark.skipif(HAS_SOCKSIO, reason="socksio is installed")),
        ("HTTP_PROXY", "proxy.example::::",
         "does not name a proxy that can be used (Invalid port: ':::')"),
        ("https_proxy", "ftp://proxy.example",
         "does not name a proxy that can be used (Unknown scheme)"),
    ],
)
@pytest.mark.parametrize("kind", ["http system", "judge"])
def test_a_proxy_no_client_can_use_is_refused_before_the_run(
    tmp_path: Path, variable: str, value: str, said: str, kind: str
) -> None:
    if kind == "judge":
        root = project(tmp_path / "p", "def answer(inp):\n    return {'label': 'ok'}\n",
                       n=18, evaluators=JUDGE, release=SMALL_RELEASE)
    else:
        root = project(tmp_path / "p", "", n=18, system=HTTP_SYSTEM, release=SMALL_RELEASE)
    result = run_cli("run", cwd=root, env={variable: value})
    no_traceback(result)
    assert result.code == 2, result.text
    assert "internal error" not in result.text
    assert f"oloproof run: error: environment variable {variable} {said}" in result.err
    assert "(accepted: " in result.err
    assert _stored_runs(root) == 0


def test_no_proxy_star_turns_every_proxy_off(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "def answer(inp):\n    return {'label': 'ok'}\n",
                   n=18, evaluators=JUDGE, release=SMALL_RELEASE)
    result = run_cli("run", cwd=root, env={"HTTP_PROXY": "proxy.example::::", "NO_PROXY": "*"})
    no_traceback(result)
    # Past the check: the judge's calls fail (nothing listens on port 9), not the load.
    assert result.code == 5, result.text
    assert "could not connect" in result.out


def test_a_callable_without_judges_never_reads_the_proxy(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "def answer(inp):\n    return {'label': 'ok'}\n", n=18,
                   release=SMALL_RELEASE)
    result = run_cli("run", cwd=root, env={"HTTP_PROXY": "proxy.example::::"})
    assert result.code == 0, result.text
