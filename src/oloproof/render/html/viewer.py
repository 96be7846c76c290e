"""``oloproof view``: the project's store in a browser, read-only, on 127.0.0.1, behind a token.

A small Starlette app (the ``[view]`` extra) drawing the same templates as the report
file. Every request opens the store read-only and closes it, so the viewer never writes,
never migrates, and reads safely beside a run that is writing (SQLite's WAL, or
PostgreSQL's snapshots for a team store: a reader sees the last committed state).

**The token.** The store is its owner's alone (0600); the viewer must not hand it to the
other users of the machine, who can all reach 127.0.0.1. As Jupyter does, every request
must carry the viewer's token: in the address (``?token=…``, exchanged on first visit for
an ``HttpOnly; SameSite=Strict`` cookie, then a redirect to the address without it), in
that cookie, or as ``Authorization: Bearer …``. Without it every route answers 401, with
a wrong one 403, the event streams included; tokens are compared in constant time.
Every answer also forbids framing (``X-Frame-Options: DENY``, CSP ``frame-ancestors
'none'``) and caching.

**Cost.** A run page reads each case's outcome (no input, output or reason) and only the
rows of the page of cases it shows (:class:`~oloproof.analysis.report.CasePage`); a case
page reads one case, by key.

**A run in progress** is followed live with server-sent events in the form ``--json``
streams (``case_executed``, ``case_judged``, ``provisional_metrics``, ``run_finished``),
plus ``progress`` (counts for the page's header). One poller per run
(:class:`_Follower`), shared by every client that follows it, looks at the store a few
times a second and reads only what is new since its last look; each look's events go to
every client as one chunk. Their timestamps are when the viewer saw the rows; the
provisional interval is the engine's (Wilson at 95%, over finished cases).
"""

from __future__ import annotations

import asyncio
import hmac
import html
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote_to_bytes

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from oloproof.analysis.report import (
    OUTCOMES,
    CasePage,
    RunSummary,
    case_page_document,
    comparison_report_document,
    run_document,
    stored_gate,
    summarize_run,
)
from oloproof.enums import CaseStatus, MetricKind, RunStatus
from oloproof.errors import OloproofError
from oloproof.events import (
    CaseExecuted,
    CaseJudged,
    ProvisionalMetric,
    ProvisionalMetrics,
    RunFinished,
    utc_timestamp,
)
from oloproof.evidence import CriterionEvidence
from oloproof.render.html import (
    READ_CHARS,
    render_case_page,
    render_comparison,
    render_index,
    render_matrix,
    render_run,
    warm_templates,
)
from oloproof.stats.intervals import wilson
from oloproof.store.comparisons import list_comparisons
from oloproof.store.db import has_table, open_store_readonly
from oloproof.store.location import StoreLocation
from oloproof.store.reader import RunRecord, get_run, list_runs, load_decisions
from oloproof.textsafe import dumps

if TYPE_CHECKING:
    from oloproof.store.dbapi import Connection

__all__ = ["PAGE_SIZE", "POLL_S", "ViewerAccess", "create_app"]

POLL_S = 0.25
PAGE_SIZE = 100
#: Discordant cases per metric on a comparison's page.
DISCORDANT_SHOWN = 500
_HEARTBEAT_S = 10.0
#: Chunks waiting for one client: a client that lets more pile up is dropped (its
#: browser reconnects and starts again from the latest figures).
_CLIENT_BACKLOG = 256
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_ALLOWED_HOSTS = ("127.0.0.1", "localhost")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ViewerAccess:
    """Who may read: the token, and the name of the cookie that carries it (one per port,
    so that two viewers on one machine do not overwrite each other's)."""

    def __init__(self, token: str, cookie: str) -> None:
        self.token = token.encode()
        self.cookie = cookie

    def matches(self, candidate: bytes) -> bool:
        """Constant-time comparison (``hmac.compare_digest``), whatever ``candidate`` holds."""
        return hmac.compare_digest(candidate, self.token)


def _header(scope: Scope, name: bytes) -> list[bytes]:
    return [v for k, v in scope.get("headers", ()) if k.lower() == name]


def _host_allowed(scope: Scope) -> bool:
    hosts = _header(scope, b"host")
    if len(hosts) != 1:
        return False
    host = hosts[0].decode("latin-1").lower()
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host
    return name in _ALLOWED_HOSTS


def _cookie_values(scope: Scope, name: str) -> list[bytes]:
    out = []
    for header in _header(scope, b"cookie"):
        for part in header.split(b";"):
            key, sep, value = part.strip().partition(b"=")
            if sep and key == name.encode():
                out.append(value.strip())
    return out


def _without_token(query: bytes) -> bytes:
    """The query string with every ``token`` parameter taken out, the rest as sent."""
    kept = [
        part for part in query.split(b"&")
        if part and unquote_to_bytes(part.partition(b"=")[0].replace(b"+", b" ")) != b"token"
    ]
    return b"&".join(kept)


class _Guard:
    """Every request: the security headers on its answer, a Host of ours, and the token."""

    def __init__(self, app: ASGIApp, access: ViewerAccess) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *[(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()
                      if k.lower().encode() not in present],
                ]
            await send(message)

        if not _host_allowed(scope):
            # A page of another site cannot reach the viewer through a name it controls.
            await _plain(400, "Invalid host header")(scope, receive, send_with_headers)
            return
        query = scope.get("query_string", b"")
        offered = [
            v.encode() for k, v in parse_qsl(query.decode("latin-1"), keep_blank_values=True,
                                             encoding="utf-8", errors="replace")
            if k == "token"
        ]
        if offered:
            if not any(self.access.matches(v) for v in offered):
                await _refused(403)(scope, receive, send_with_headers)
                return
            await self._exchange(scope, receive, send_with_headers, query)
            return
        credentials = _cookie_values(scope, self.access.cookie)
        for auth in _header(scope, b"authorization"):
            scheme, _, value = auth.partition(b" ")
            if scheme.lower() == b"bearer":
                credentials.append(value.strip())
        if not credentials:
            await _refused(401)(scope, receive, send_with_headers)
            return
        if not any(self.access.matches(c) for c in credentials):
            await _refused(403)(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    async def _exchange(self, scope: Scope, receive: Receive, send: Send, query: bytes) -> None:
        """The token in the address, exchanged for the cookie, then the address without it."""
        path = scope.get("raw_path") or scope["path"].encode()
        # One leading slash: "//host/" (or "/\\host/", which browsers read alike) in a
        # Location would leave the viewer.
        target = b"/" + path.lstrip(b"/\\")
        rest = _without_token(query)
        location = (target + (b"?" + rest if rest else b"")).decode("latin-1")
        cookie = (f"{self.access.cookie}={self.access.token.decode()}; HttpOnly;"
                  " SameSite=Strict; Path=/")
        fetch_site = b"".join(_header(scope, b"sec-fetch-site"))
        if fetch_site in (b"", b"none", b"same-origin"):
            response: Response = RedirectResponse(location, status_code=303)
        else:
            # Arriving from elsewhere (the file `oloproof view` opens in a browser): the
            # SameSite=Strict cookie would not be sent on a redirect that started on
            # another site, so this page of ours moves on to the address itself.
            target_attr = html.escape(location, quote=True)
            response = HTMLResponse(
                f'<!doctype html><meta http-equiv="refresh" content="0;url={target_attr}">'
                f'<title>Oloproof</title><a href="{target_attr}">Continue</a>'
            )
        response.headers.append("Set-Cookie", cookie)
        await response(scope, receive, send)


def _plain(status: int, text: str) -> Response:
    return PlainTextResponse(text, status_code=status)


def _refused(status: int) -> Response:
    what = "needs its token" if status == 401 else "refused this token"
    return _plain(
        status,
        f"This Oloproof viewer {what}. Open the address `oloproof view` printed"
        " (it ends with ?token=...), or send the token as 'Authorization: Bearer TOKEN'.\n",
    )


def _html(text: str) -> HTMLResponse:
    return HTMLResponse(text)


class _Summaries:
    """The summaries of the runs last shown (:class:`RunSummary`): a finished run never
    changes, so paging through its cases reads only the page's rows."""

    KEEP = 4

    def __init__(self, root: str | None, config: str | None = None) -> None:
        self.root = root
        self.config = config
        self._kept: OrderedDict[str, RunSummary] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conn: Connection, ref: str) -> RunSummary:
        run = get_run(conn, ref)
        with self._lock:
            kept = self._kept.get(run.id)
            if kept is not None and kept.same_run(run):
                self._kept.move_to_end(run.id)
                return kept
        summary = summarize_run(conn, run.id, self.root, self.config)
        if summary.finished:
            with self._lock:
                self._kept[run.id] = summary
                while len(self._kept) > self.KEEP:
                    self._kept.popitem(last=False)
        return summary


class _Gates:
    """The gate ``oloproof gate RUN`` exits on, per run the index lists (:func:`stored_gate`),
    kept for a finished run (whose evidence and stored policy never change): the index
    decides each run once, not at every visit."""

    KEEP = 5000

    def __init__(self, root: str | None) -> None:
        self.root = root
        self._kept: OrderedDict[tuple[str, str, str | None], tuple[str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conn: Connection, run: RunRecord) -> tuple[str, int]:
        key = (run.id, str(run.status), run.finished_at)
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None:
            return kept
        found = stored_gate(conn, run, self.root)
        if run.status != RunStatus.RUNNING and run.finished_at is not None:
            with self._lock:
                self._kept[key] = found
                while len(self._kept) > self.KEEP:
                    self._kept.popitem(last=False)
        return found


def _case_page_query(request: Request, criteria: list[str]) -> CasePage:
    q = request.query_params
    try:
        page = int(q.get("page", "1"))
    except ValueError:
        page = 1
    criterion = q.get("criterion") or None
    outcome = q.get("outcome") or None
    return CasePage(
        page=page, size=PAGE_SIZE,
        criterion=criterion if criterion in criteria else None,
        outcome=outcome if outcome in OUTCOMES else None,
        query=(q.get("q") or "").strip()[:200],
    )


def create_app(
    store: StoreLocation, project: str, access: ViewerAccess, *,
    project_root: str | None = None, project_config: str | None = None,
) -> Starlette:
    """The viewer of the store at ``store`` (``.oloproof/store.sqlite``, or a team store:
    then the runs of the project its location names), for whoever holds ``access``'s
    token. ``project_root`` and ``project_config``: the project's directory and its
    oloproof.yaml, whose files a run page compares with what the run read (``gate``'s
    notes)."""
    followers = Followers(store)
    summaries = _Summaries(project_root, project_config)
    gates = _Gates(project_root)
    warm_templates()  # compiled now, not on the first request

    def read(fn: Callable[[Connection], Any]) -> Any:
        conn = open_store_readonly(store)
        try:
            return fn(conn)
        finally:
            conn.close()

    def index(request: Request) -> Response:
        def load(conn: Connection) -> str:
            runs = []
            for r in list_runs(conn, 200):
                # The gate `oloproof gate RUN` exits on, as the run's page shows it; and
                # what the run recorded, when that differs.
                label, code = gates.get(conn, r)
                recorded = (None if r.gate is None or (str(r.gate), r.exit_code) == (label, code)
                            else {"gate": r.gate, "exit_code": r.exit_code})
                runs.append({"id": r.id, "created_at": r.created_at, "system": r.system,
                             "status": r.status, "state": r.state, "cases_total": r.cases_total,
                             "cases_stored": r.cases_stored,
                             "gate": label if r.gate is not None else None,
                             "exit_code": code if r.gate is not None else r.exit_code,
                             "recorded": recorded})
            comparisons = [
                {"id": c.id, "created_at": c.created_at, "candidate_run": c.candidate_run,
                 "baseline_run": c.baseline_run, "gate": c.gate, "exit_code": c.exit_code}
                for c in (list_comparisons(conn, 200) if has_table(conn, "comparisons") else [])
            ]
            from oloproof.store.matrices import list_matrices

            matrices = [
                {"id": x.id, "created_at": x.created_at,
                 "variants": len(x.document.get("variants", [])),
                 "baseline": x.document.get("baseline"), "exit_code": x.document.get("exit_code")}
                for x in list_matrices(conn, 200)
            ]
            return render_index(project, runs, comparisons, matrices)

        return _html(read(load))

    def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]

        def load(conn: Connection) -> str:
            summary = summaries.get(conn, run_id)
            page = _case_page_query(request, list(summary.kinds))
            # Its case table writes the start of each output and reason: read no more of
            # them (a page of 100 outputs of 4.4 MB took 1.1 GB and 12 s).
            doc = run_document(conn, summary.run.id, page=page, summary=summary,
                               head=READ_CHARS)
            doc["loaded_at"] = utc_timestamp()
            return render_run(doc, mode="viewer", project_root=project_root)

        return _html(read(load))

    def case_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        case_id = request.path_params.get("case_id")
        if case_id is None:
            case_id = request.query_params.get("id")
        if case_id is None:
            return _plain(404, "name the case: /runs/RUN_ID/case?id=CASE_ID\n")

        def load(conn: Connection) -> Response:
            doc = case_page_document(conn, run_id, case_id)
            if doc is None:
                return _plain(404, f"run {run_id} has no case {case_id!r}\n")
            return _html(render_case_page(doc))

        result: Response = read(load)
        return result

    def comparison_page(request: Request) -> Response:
        cmp_id = request.path_params["cmp_id"]
        return _html(read(lambda conn: render_comparison(
            comparison_report_document(conn, cmp_id, limit=DISCORDANT_SHOWN), mode="viewer",
            project_root=project_root,
        )))

    def matrix_page(request: Request) -> Response:
        from oloproof.store.matrices import get_matrix

        mx_id = request.path_params["mx_id"]
        return _html(read(lambda conn: render_matrix(
            get_matrix(conn, mx_id).document, mode="viewer")))

    async def events(request: Request) -> Response:
        run_id = read(lambda conn: get_run(conn, request.path_params["run_id"]).id)
        return _EventStream(followers, run_id)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _plain(404, f"{exc}\n")

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/runs/{run_id}", run_page),
            Route("/runs/{run_id}/events", events),
            Route("/runs/{run_id}/case", case_page),
            # The address of earlier versions: a case id as the last segments of the path
            # (a browser cannot follow it for ids such as "." or "..").
            Route("/runs/{run_id}/cases/{case_id:path}", case_page),
            Route("/comparisons/{cmp_id}", comparison_page),
            Route("/matrices/{mx_id}", matrix_page),
        ],
        # Before any route: the Host, the token, and the headers of every answer.
        middleware=[Middleware(_Guard, access=access)],
        exception_handlers={OloproofError: not_found},
    )
    app.state.followers = followers
    return app


# -- live runs --------------------------------------------------------------------------


class _EventStream(Response):
    """A server-sent event stream of one run, fed by its :class:`_Follower`. Ends when the
    run ends, or when the client goes away (noticed at once: the stream also waits on the
    connection)."""

    def __init__(self, followers: Followers, run_id: str) -> None:
        # Not Response.__init__: it would announce an empty body (content-length: 0).
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"x-accel-buffering", b"no"),
        ]
        self.followers = followers
        self.run_id = run_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        follower, queue = self.followers.join(self.run_id)
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            if follower.snapshot:
                await send({"type": "http.response.body", "body": follower.snapshot,
                            "more_body": True})
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, gone}, timeout=_HEARTBEAT_S,
                                             return_when=asyncio.FIRST_COMPLETED)
                if gone in done:
                    getter.cancel()
                    return
                if getter not in done:
                    getter.cancel()
                    chunk: bytes | None = b": still running\n\n"
                else:
                    chunk = getter.result()
                if chunk is None:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return  # the client went away while we wrote
        finally:
            gone.cancel()
            follower.leave(queue)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class Followers:
    """The pollers of the runs being followed: at most one per run."""

    def __init__(self, store: StoreLocation) -> None:
        self.store = store
        self.running: dict[str, _Follower] = {}
        #: How many pollers were ever started (a test reads it).
        self.started = 0

    def join(self, run_id: str) -> tuple[_Follower, asyncio.Queue[bytes | None]]:
        follower = self.running.get(run_id)
        if follower is None or follower.ended:
            follower = _Follower(self, run_id)
            self.running[run_id] = follower
            self.started += 1
        return follower, follower.add()

    def forget(self, follower: _Follower) -> None:
        if self.running.get(follower.run_id) is follower:
            del self.running[follower.run_id]


class _Follower:
    """One run's poller: reads what is new in the store every :data:`POLL_S` and hands each
    look's events, as one chunk, to every client; stops when the run ends or its last
    client leaves."""

    def __init__(self, followers: Followers, run_id: str) -> None:
        self.followers = followers
        self.run_id = run_id
        self.clients: set[asyncio.Queue[bytes | None]] = set()
        #: The latest figures (``progress`` and ``provisional_metrics``), for who joins.
        self.snapshot = b""
        self.ended = False
        self.polls = 0
        self._state = _RunState(run_id)
        self._task = asyncio.ensure_future(self._loop())

    def add(self) -> asyncio.Queue[bytes | None]:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(_CLIENT_BACKLOG)
        self.clients.add(queue)
        return queue

    def leave(self, queue: asyncio.Queue[bytes | None]) -> None:
        self.clients.discard(queue)

    def _send(self, chunk: bytes | None) -> None:
        for queue in list(self.clients):
            try:
                queue.put_nowait(chunk)
            except asyncio.QueueFull:
                # A client that does not read: end its stream (it reconnects afresh).
                self.clients.discard(queue)
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(None)

    async def _loop(self) -> None:
        try:
            while self.clients or self.polls == 0:
                chunk, snapshot, done = await asyncio.to_thread(self._look)
                self.polls += 1
                if snapshot:
                    self.snapshot = snapshot
                if chunk:
                    self._send(chunk)
                if done:
                    self.ended = True
                    self._send(None)
                    return
                await asyncio.sleep(POLL_S)
        except OloproofError as exc:  # the run or the store became unreadable
            self._send(_sse({"type": "viewer_error", "message": str(exc)}))
            self._send(None)
        finally:
            self.ended = True
            self.followers.forget(self)

    def _look(self) -> tuple[bytes, bytes, bool]:
        conn = open_store_readonly(self.followers.store)
        try:
            # One read transaction: the counts, the rows and the run's status of one moment.
            conn.execute("BEGIN")
            try:
                return self._state.look(conn)
            finally:
                conn.execute("COMMIT")
        finally:
            conn.close()


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {dumps(event, indent=None)}\n\n".encode()


class _RunState:
    """What one follower has seen of a run, and the counts the provisional figures need.

    Reads only what is new: the counts of the run's case and judgment rows first (SQLite
    counts them without handing a row to Python), then, when they grew, the cases
    finished since the last look (``finished_at`` at or after the newest seen) and the
    judgments of the cases still being judged. Should a count still disagree (a row
    committed with an earlier time than one already seen), every key is read once more,
    so nothing is ever skipped.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.first = True
        self.cases: dict[str, str] = {}  # case id -> status
        self.cached = 0
        self.errored = 0
        self.newest = ""
        self.judged: dict[str, set[str]] = {}  # case id -> criteria judged
        self.judgments = 0
        self.tallies: dict[str, CriterionEvidence] = {}
        self.kinds: dict[str, str] = {}
        #: Queries made by the last look (a test reads it).
        self.queries = 0

    def _q(self, conn: Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
        self.queries += 1
        rows: list[Any] = conn.execute(sql, params).fetchall()
        return rows

    def look(self, conn: Connection) -> tuple[bytes, bytes, bool]:
        self.queries = 0
        run = get_run(conn, self.run_id)
        if self.first:
            self.kinds = {m["criterion"]: m["kind"] for m in run.metrics}
            self.tallies = {c: CriterionEvidence(c, MetricKind(k)) for c, k in self.kinds.items()}
        (n_cases,), = self._q(conn, "SELECT count(*) FROM run_cases WHERE run_id = ?",
                              (run.id,))
        (n_judged,), = self._q(conn, "SELECT count(*) FROM run_judgments WHERE run_id = ?",
                               (run.id,))
        out: list[bytes] = []
        new_cases = self._new_cases(conn, run, n_cases)
        for c in new_cases:
            if not self.first:
                out.append(_sse(CaseExecuted(
                    run.id, scenario_id=c[0], status=c[1], from_cache=bool(c[2]),
                    latency_ms=c[3], attempts=max(1, c[4]), error=c[5],
                ).to_json()))
        new_judgments = self._new_judgments(conn, run, n_judged, [c[0] for c in new_cases])
        for case_id, criterion, status, passed, score, from_cache in new_judgments:
            if not self.first:
                out.append(_sse(CaseJudged(
                    run.id, scenario_id=case_id, criterion=criterion, status=status,
                    passed=None if passed is None else bool(passed), score=score,
                    from_cache=bool(from_cache),
                ).to_json()))
        snapshot = b""
        # Every stream starts with the figures, even before a case has finished (0 done).
        if self.first or new_cases or new_judgments:
            snapshot = self._figures(run)
            out.append(snapshot)
        done = run.status != RunStatus.RUNNING
        if done:
            decisions = load_decisions(conn, run.id)
            out.append(_sse(RunFinished(
                run.id, status=run.status, completeness=run.completeness,
                exit_code=int(run.exit_code if run.exit_code is not None else 5),
                decisions=decisions,
            ).to_json()))
        self.first = False
        return b"".join(out), snapshot, done

    def _new_cases(self, conn: Connection, run: RunRecord, count: int) -> list[Any]:
        if count <= len(self.cases):
            return []
        columns = ("SELECT case_id, status, from_cache, latency_ms, attempts, error, finished_at"
                   " FROM run_cases WHERE run_id = ?")
        rows = self._q(conn, columns + " AND finished_at >= ? ORDER BY finished_at",
                       (run.id, self.newest))
        fresh = [r for r in rows if r[0] not in self.cases]
        if len(self.cases) + len(fresh) < count:
            rows = self._q(conn, columns + " ORDER BY finished_at", (run.id,))
            fresh = [r for r in rows if r[0] not in self.cases]
        for r in fresh:
            self.cases[r[0]] = r[1]
            self.cached += bool(r[2])
            self.errored += r[1] != CaseStatus.OK
            self.newest = max(self.newest, r[6] or "")
            self.judged.setdefault(r[0], set())
        return fresh

    def _new_judgments(
        self, conn: Connection, run: RunRecord, count: int, new_cases: list[str]
    ) -> list[Any]:
        if count <= self.judgments:
            return []
        columns = ("SELECT case_id, criterion, status, passed, score, from_cache"
                   " FROM run_judgments WHERE run_id = ?")
        open_cases = [c for c, seen in self.judged.items() if len(seen) < len(self.kinds)]
        rows: list[Any] = []
        if self.first:
            rows = self._q(conn, columns, (run.id,))
        else:
            for start in range(0, len(open_cases), 500):
                chunk = open_cases[start:start + 500]
                rows += self._q(
                    conn, columns + f" AND case_id IN ({', '.join('?' * len(chunk))})",
                    (run.id, *chunk),
                )
        fresh = self._keep(rows)
        if self.judgments < count:
            fresh += self._keep(self._q(conn, columns, (run.id,)))
        return fresh

    def _keep(self, rows: list[Any]) -> list[Any]:
        """The rows of cases already seen whose judgment was not, now counted as seen."""
        fresh = []
        for row in rows:
            case_id, criterion, status, passed, score, _ = row
            seen = self.judged.get(case_id)
            if seen is None or criterion in seen:
                continue  # a case not seen yet has its judgments read with it
            seen.add(criterion)
            self.judgments += 1
            tally = self.tallies.get(criterion)
            if tally is not None:
                tally.add(status, None if passed is None else bool(passed), score)
            fresh.append(row)
        return fresh

    def _figures(self, run: RunRecord) -> bytes:
        metrics = []
        for name, t in self.tallies.items():
            if t.kind != MetricKind.BINARY:
                continue
            n = t.passed + t.failed
            iv = wilson(t.passed, n) if n else None
            metrics.append(ProvisionalMetric(
                name, t.passed / n if n else None, iv.lower if iv else None,
                iv.upper if iv else None, n, t.missing,
            ))
        progress = {
            "type": "progress", "run_id": run.id, "cases_done": len(self.cases),
            "cases_total": run.cases_total, "cases_errored": self.errored,
            "cases_cached": self.cached,
        }
        provisional = ProvisionalMetrics(
            run.id, cases_done=len(self.cases), cases_total=run.cases_total, metrics=metrics,
        )
        return _sse(progress) + _sse(provisional.to_json())
