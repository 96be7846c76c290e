"""Issue 29: ``oloproof view`` attacked from the same machine, without and with its token.

A real viewer process on a real store, real HTTP clients:

- another local user (``nobody``) reads nothing, on any route, without the token (the
  store is 0600; before the token, curl as nobody read a whole run page);
- the token does not leak: not on the viewer's command line, in a page, a header, an error
  or a redirect; the file that opens a browser is its owner's alone;
- hostile requests, generated (hypothesis, derandomized), never reach a page without the
  token and never break the viewer with it (no 500; the viewer keeps answering);
- the checks that held before the token still hold with it: Host names, framing, CORS,
  traversal, the store left untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.conftest import run_cli
from tests.report._hostile import hostile_project
from tests.report._viewer import Viewer, routes, start_viewer, stop

pytestmark = pytest.mark.slow

SETTINGS = settings(
    max_examples=150, deadline=None, derandomize=True, database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Viewer, str, str]]:
    root = hostile_project(tmp_path_factory.mktemp("attack") / "p")
    assert run_cli("run", cwd=root).code == 3
    assert run_cli("run", "--no-cache", cwd=root).code == 3
    ids = [r["id"] for r in json.loads(run_cli("runs", "--json", cwd=root).out)]
    cmp_id = json.loads(run_cli("compare", ids[0], ids[1], "--json", cwd=root).out)[
        "comparison_id"]
    viewer = start_viewer(root)
    try:
        yield root, viewer, ids[0], cmp_id
    finally:
        stop(viewer)


CURL = Path("/usr/bin/curl")


@pytest.mark.skipif(os.geteuid() != 0 or not CURL.exists(),
                    reason="acting as another user needs root, and curl")
def test_another_user_of_the_machine_reads_nothing(target: tuple[Path, Viewer, str, str]) -> None:
    """What the attack round did: curl as ``nobody``, on every route."""
    _, viewer, run_id, cmp_id = target
    nobody = 65534

    def become_nobody() -> None:
        os.setgid(nobody)
        os.setuid(nobody)

    for path in routes(run_id, cmp_id, "q_ok_0"):
        done = subprocess.run(
            [str(CURL), "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "30",
             viewer.base[:-1] + path],
            capture_output=True, text=True, timeout=60, preexec_fn=become_nobody, check=False,
            env={"PATH": "/usr/bin:/bin"},
        )
        assert done.stdout == "401", (path, done.stdout, done.stderr)


def test_the_token_does_not_leak(target: tuple[Path, Viewer, str, str]) -> None:
    _, viewer, run_id, cmp_id = target
    token = viewer.token
    # The printed address is the one place it is shown; the command line never holds it.
    assert token.encode() not in Path(f"/proc/{viewer.proc.pid}/cmdline").read_bytes()
    with httpx.Client(base_url=viewer.base[:-1]) as client:
        refused = client.get(f"/runs/{run_id}")
        assert token not in refused.text and token not in str(refused.headers)
        exchanged = client.get(f"/runs/{run_id}?token={token}&x=1")
        assert exchanged.status_code == 303
        assert token not in exchanged.headers["location"]
        assert exchanged.headers["referrer-policy"] == "no-referrer"
        for path in routes(run_id, cmp_id, "q_ok_0"):
            if path.endswith("/events"):
                continue
            response = client.get(path)  # with the cookie, now
            assert token not in response.text, path
            headers = {k: v for k, v in response.headers.items() if k != "set-cookie"}
            assert token not in str(headers), path


def test_framing_cors_and_hosts_on_every_answer(target: tuple[Path, Viewer, str, str]) -> None:
    root, viewer, run_id, _ = target
    store = root / ".oloproof" / "store.sqlite"
    before = store.stat().st_mtime_ns
    auth = viewer.auth()
    answers = {
        "ok": httpx.get(f"{viewer.base}runs/{run_id}", headers=auth),
        "redirect": httpx.get(f"{viewer.url}"),
        "no token": httpx.get(viewer.base),
        "wrong token": httpx.get(viewer.base, headers={"Authorization": "Bearer nope"}),
        "not found": httpx.get(f"{viewer.base}runs/run_NOPE", headers=auth),
        "method": httpx.post(viewer.base, headers=auth),
        "rebinding": httpx.get(viewer.base, headers={**auth, "Host": "attacker.example"}),
        "rebinding, with the token in the address": httpx.get(
            viewer.url, headers={"Host": "attacker.example:1234"}),
        "cross-site": httpx.get(viewer.base, headers={**auth, "Origin": "https://evil.example"}),
    }
    codes = {name: r.status_code for name, r in answers.items()}
    assert codes == {
        "ok": 200, "redirect": 303, "no token": 401, "wrong token": 403, "not found": 404,
        "method": 405, "rebinding": 400, "rebinding, with the token in the address": 400,
        "cross-site": 200,
    }
    for name, r in answers.items():
        assert r.headers["x-frame-options"] == "DENY", name
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], name
        assert "access-control-allow-origin" not in r.headers, name
    assert "set-cookie" not in answers["rebinding, with the token in the address"].headers
    # Traversal reaches no file, with the token or without.
    for path in ("/runs/../../../../etc/passwd", "/runs/%2e%2e/%2e%2e/etc/passwd",
                 f"/runs/{run_id}/case?id=../../../../etc/passwd",
                 f"/runs/{run_id}/cases/..%2F..%2Fetc%2Fpasswd"):
        for headers in ({}, auth):
            r = httpx.get(viewer.base[:-1] + path, headers=headers)
            assert "root:" not in r.text and r.status_code in (401, 404), (path, r.status_code)
    assert store.stat().st_mtime_ns == before


PATHS = st.one_of(
    st.sampled_from(["/", "/runs/", "/runs/latest", "/runs/latest/events", "/comparisons/x",
                     "/runs/latest/case", "/runs/latest/cases/", "//", "/%2e%2e", "/.."]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30).map(
        lambda s: "/" + quote(s, safe="/?=&%#")),
)
QUERIES = st.lists(
    st.tuples(st.sampled_from(["token", "id", "page", "q", "outcome", "criterion", "x"]),
              st.text(max_size=20)),
    max_size=4,
)
# What a client can put in a Cookie header: printable ASCII (with the viewer's cookie
# name among the guesses).
COOKIES = st.one_of(
    st.none(),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=60).map(
        lambda v: f"oloproof-view-PORT={v}"),
)


@SETTINGS
@given(path=PATHS, query=QUERIES, cookie=COOKIES)
def test_generated_requests_without_the_token_reach_nothing(
    target: tuple[Path, Viewer, str, str], path: str, query: list[tuple[str, str]],
    cookie: str | None,
) -> None:
    _, viewer, _, _ = target
    headers = {"Cookie": cookie.replace("PORT", str(viewer.port))} if cookie else {}
    r = httpx.get(viewer.base[:-1] + path, params=query, headers=headers, timeout=30)
    assert r.status_code in (400, 401, 403), (path, query, cookie, r.status_code)
    assert r.headers["x-frame-options"] == "DENY"


@SETTINGS
@given(path=PATHS, query=QUERIES)
def test_generated_requests_with_the_token_never_break_the_viewer(
    target: tuple[Path, Viewer, str, str], path: str, query: list[tuple[str, str]],
) -> None:
    _, viewer, run_id, _ = target
    path = path.replace("latest", run_id) if not path.endswith("/events") else path
    query = [(k, v) for k, v in query if k != "token"]
    r = httpx.get(viewer.base[:-1] + path, params=query, headers=viewer.auth(), timeout=30)
    assert r.status_code in (200, 400, 404, 405), (path, query, r.status_code, r.text[:300])
    assert viewer.proc.poll() is None
