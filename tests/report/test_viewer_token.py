"""``oloproof view`` lets in only who holds its token (issue 29): a real ``oloproof view``
process, a real HTTP client. Every route, the event stream and paths it does not have
included, answers 401 without the token and 403 with a wrong one; the token in the
address is exchanged for an HttpOnly, SameSite=Strict cookie and a redirect to the address
without it; every answer forbids framing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.conftest import run_cli
from tests.report._hostile import hostile_project
from tests.report._viewer import Viewer, routes, running_viewer, start_viewer, stop, viewer_env

pytestmark = pytest.mark.slow

TOKEN = "a-chosen-token-0123456789_ABCdef"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = hostile_project(tmp_path_factory.mktemp("token"))
    assert run_cli("run", cwd=root).code == 3
    assert run_cli("run", "--no-cache", cwd=root).code == 3
    ids = [r["id"] for r in json.loads(run_cli("runs", "--json", cwd=root).out)]
    made = run_cli("compare", ids[0], ids[1], "--json", cwd=root)
    return root, ids[0], json.loads(made.out)["comparison_id"]


@pytest.fixture(scope="module")
def viewer(project: tuple[Path, str, str]) -> Iterator[Viewer]:
    v = start_viewer(project[0])
    try:
        yield v
    finally:
        stop(v)


def _framing(response: httpx.Response) -> None:
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["cache-control"] == "no-store"


def _all_paths(project: tuple[Path, str, str]) -> list[str]:
    _, run_id, cmp_id = project
    return list(routes(run_id, cmp_id, "q_ok_0"))


def test_every_route_refuses_a_request_without_the_token(
    project: tuple[Path, str, str], viewer: Viewer,
) -> None:
    with httpx.Client(base_url=viewer.base[:-1]) as client:
        for path in _all_paths(project):
            for method in ("GET", "HEAD", "POST"):
                response = client.request(method, path)
                assert response.status_code == 401, (method, path, response.status_code)
                _framing(response)
                if method == "GET":
                    assert "needs its token" in response.text
                    assert viewer.token not in response.text


def test_a_wrong_token_is_refused_wherever_it_is_shown(
    project: tuple[Path, str, str], viewer: Viewer,
) -> None:
    wrong = viewer.token[:-1] + ("A" if viewer.token[-1] != "A" else "B")
    with httpx.Client(base_url=viewer.base[:-1]) as client:
        for path in _all_paths(project):
            sep = "&" if "?" in path else "?"
            for response in (
                client.get(f"{path}{sep}token={wrong}"),
                client.get(path, headers={"Cookie": f"{viewer.cookie}={wrong}"}),
                client.get(path, headers={"Authorization": f"Bearer {wrong}"}),
                client.get(path, headers={"Cookie": f"{viewer.cookie}="}),
                client.get(f"{path}{sep}token="),
                client.get(f"{path}{sep}token=%FF%FE%00"),  # not even text
            ):
                assert response.status_code == 403, (path, response.request.url)
                _framing(response)
            # The right token under another viewer's cookie name (another port) is nothing.
            other = client.get(path, headers={"Cookie": f"oloproof-view-1={viewer.token}"})
            assert other.status_code == 401


def test_the_token_in_the_address_becomes_a_cookie(viewer: Viewer) -> None:
    with httpx.Client() as client:
        first = client.get(viewer.url)
        assert first.status_code == 303
        assert first.headers["location"] == "/"
        _framing(first)
        cookie = first.headers["set-cookie"]
        parts = [p.strip() for p in cookie.split(";")]
        assert parts[0] == f"{viewer.cookie}={viewer.token}"
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(parts)
        # The client now holds the cookie: the clean address answers.
        page = client.get(viewer.base)
        assert page.status_code == 200
        assert "Runs" in page.text and viewer.token not in page.text
        _framing(page)
        # Other parameters stay; the token leaves the address.
        again = client.get(f"{viewer.base}runs/run_NOPE?a=1&token={viewer.token}&b=%2F")
        assert again.status_code == 303
        assert again.headers["location"] == "/runs/run_NOPE?a=1&b=%2F"
        # A path that looks like another host never becomes one in the redirect.
        for odd_path in ("//evil.example/", "/%5Cevil.example/", "/\\evil.example/"):
            odd = client.get(f"http://127.0.0.1:{viewer.port}{odd_path}?token={viewer.token}")
            location = odd.headers["location"]
            assert location.startswith("/") and location[1:2] not in ("/", "\\"), location
            # And as the page a browser arriving from another site gets.
            page = client.get(f"http://127.0.0.1:{viewer.port}{odd_path}?token={viewer.token}",
                              headers={"Sec-Fetch-Site": "cross-site"})
            assert page.status_code == 200 and 'url=/evil' in page.text.replace("%5C", "")


def test_with_the_token_every_route_answers(
    project: tuple[Path, str, str], viewer: Viewer,
) -> None:
    _, run_id, cmp_id = project
    with httpx.Client(base_url=viewer.base[:-1], cookies={viewer.cookie: viewer.token}) as c:
        for path in ("/", f"/runs/{run_id}", f"/runs/{run_id}/case?id=q_ok_0",
                     f"/runs/{run_id}/cases/q_ok_0", f"/comparisons/{cmp_id}"):
            response = c.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-type"].startswith("text/html")
            _framing(response)
        assert c.get("/favicon.ico").status_code == 404
        # The event stream of a finished run: its last figures, then run_finished, then the end.
        with c.stream("GET", f"/runs/{run_id}/events") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            _framing(stream)
            body = b"".join(stream.iter_bytes()).decode()
        assert "event: provisional_metrics" in body and "event: run_finished" in body
    # A script may send the token as a bearer token instead of the cookie.
    response = httpx.get(f"{viewer.base}runs/{run_id}", headers=viewer.auth())
    assert response.status_code == 200


def test_a_token_can_be_chosen_and_a_weak_one_is_refused(
    project: tuple[Path, str, str],
) -> None:
    root = project[0]
    with running_viewer(root, env={"OLOPROOF_VIEW_TOKEN": TOKEN}) as v:
        assert v.token == TOKEN
        assert httpx.get(v.base, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        # The token of the environment never shows on the command line others can read.
        cmdline = Path(f"/proc/{v.proc.pid}/cmdline").read_bytes()
        assert TOKEN.encode() not in cmdline
    with running_viewer(root, "--token", TOKEN + "x") as v:
        assert v.token == TOKEN + "x"
    for args, env in (
        (["--token", "short"], {}),
        (["--token", ""], {}),
        ([], {"OLOPROOF_VIEW_TOKEN": ""}),
        ([], {"OLOPROOF_VIEW_TOKEN": "has spaces in it, sixteen+"}),
    ):
        result = run_cli("view", "--no-open", *args, cwd=root,
                         env={**viewer_env(), **env})
        assert result.code == 2, (args, env, result.text)
        assert "at least 16 characters" in result.err
        assert "Traceback" not in result.err


def test_each_start_draws_a_new_token(project: tuple[Path, str, str]) -> None:
    with running_viewer(project[0]) as a, running_viewer(project[0]) as b:
        assert a.token != b.token
        assert len(a.token) >= 40
        # One viewer's token opens the other's door no more than any wrong token.
        assert httpx.get(b.base, headers=a.auth()).status_code == 403


