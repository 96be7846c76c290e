"""The `prompts` example's matrix through LiteLLM's proxy in front of the fake provider.

LiteLLM is not a dependency of Oloproof, nor of its tests: its proxy brings some hundred
packages. The test runs where a `litellm` command is named by ``OLOPROOF_TEST_LITELLM``
(for example a separate virtualenv: ``python -m venv /tmp/litellm && /tmp/litellm/bin/pip
install 'litellm[proxy]'``, then ``OLOPROOF_TEST_LITELLM=/tmp/litellm/bin/litellm``), and
is skipped elsewhere, saying so. docs/prompts-and-models.md has the same recipe by hand.
The proxy runs offline: ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps it from fetching its price
list, and it only ever talks to the fake on 127.0.0.1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer

LITELLM = os.environ.get("OLOPROOF_TEST_LITELLM")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not LITELLM or not Path(LITELLM).exists(),
        reason="set OLOPROOF_TEST_LITELLM to a litellm command (pip install 'litellm[proxy]'"
               " in a virtualenv of its own) to run the prompts matrix through its proxy",
    ),
]

MASTER_KEY = "sk-litellm-test-master-key-0123456789"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_prompts_matrix_through_litellm_gives_the_fakes_figures(tmp_path: Path) -> None:
    assert LITELLM is not None
    with FakeServer() as fake:
        direct = tmp_path / "direct"
        proxied = tmp_path / "proxied"
        for root in (direct, proxied):
            assert run_cli("init", str(root), "--example", "prompts", cwd=tmp_path).code == 0
        _point(direct, fake.openai_base_url, "FAKE_PROVIDER_KEY")
        port = _free_port()
        (tmp_path / "litellm.yaml").write_text("model_list:\n" + "".join(
            f"  - model_name: {m}\n    litellm_params:\n      model: openai/{m}\n"
            f"      api_base: {fake.openai_base_url}\n"
            "      api_key: os.environ/FAKE_PROVIDER_KEY\n"
            for m in ("fake-small", "fake-large")))
        env = {**os.environ, "LITELLM_MASTER_KEY": MASTER_KEY, "FAKE_PROVIDER_KEY": "k-fake",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_DOCS": "True"}
        proxy = subprocess.Popen(
            [LITELLM, "--config", str(tmp_path / "litellm.yaml"), "--host", "127.0.0.1",
             "--port", str(port), "--telemetry", "False"],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            _wait_until_up(f"http://127.0.0.1:{port}/health/liveliness", proxy)
            _point(proxied, f"http://127.0.0.1:{port}/v1", "LITELLM_MASTER_KEY")
            through = run_cli("run", "--matrix", cwd=proxied,
                              env={"LITELLM_MASTER_KEY": MASTER_KEY}, timeout=600)
            straight = run_cli("run", "--matrix", cwd=direct,
                               env={"FAKE_PROVIDER_KEY": "k-fake"}, timeout=600)
        finally:
            proxy.terminate()
            proxy.wait(timeout=60)
    assert through.code == 0 and straight.code == 0, (through.text, straight.text)
    # The same answers, so the same table and the same decided comparisons.
    assert _table(through.out) == _table(straight.out)
    assert any(row.endswith("better │") for row in _table(through.out))


def _point(root: Path, base_url: str, key_env: str) -> None:
    config = root / "oloproof.yaml"
    text = config.read_text().replace("http://127.0.0.1:8787/v1", base_url)
    config.write_text(text.replace("api_key_env: FAKE_PROVIDER_KEY", f"api_key_env: {key_env}"))


def _wait_until_up(url: str, proxy: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 240  # the proxy takes tens of seconds to start
    while time.monotonic() < deadline:
        if proxy.poll() is not None:
            raise AssertionError(f"litellm exited with {proxy.returncode}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise AssertionError("the LiteLLM proxy did not answer within 240 s")


def _table(out: str) -> list[str]:
    """The rows of the two tables, without the run and matrix ids."""
    return [" ".join(w for w in line.split() if not w.startswith(("run_", "mx_")))
            for line in out.splitlines() if line.startswith("│")]
