"""``oloproof view``: the project's store in a browser, read-only, on 127.0.0.1.

A small Starlette app (the ``[view]`` extra) drawing the same templates as the report
file. Every request opens the store read-only and closes it, so the viewer never writes,
never migrates, and reads safely beside a run that is writing (SQLite's WAL, or
PostgreSQL's snapshots for a team store: a reader sees the last committed state).

A run in progress is followed live with server-sent events in the form ``--json``
streams (``case_executed``, ``case_judged``, ``provisional_metrics``, ``run_finished``):
the viewer polls the store a few times a second and emits, for what was committed since
its last look, the events the run emitted. Their timestamps are when the viewer saw the
rows; the provisional interval is the engine's (Wilson at 95%, over finished cases).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from oloproof.analysis.report import comparison_report_document, run_document
from oloproof.enums import MetricKind, RunStatus
from oloproof.errors import OloproofError
from oloproof.events import (
    CaseExecuted,
    CaseJudged,
    ProvisionalMetric,
    ProvisionalMetrics,
    RunFinished,
)
from oloproof.evidence import CriterionEvidence
from oloproof.render.html import render_case_page, render_comparison, render_index, render_run
from oloproof.stats.intervals import wilson
from oloproof.store.comparisons import list_comparisons
from oloproof.store.db import has_table, open_store_readonly
from oloproof.store.dbapi import Connection
from oloproof.store.location import StoreLocation
from oloproof.store.reader import get_run, list_runs, load_cases, load_decisions
from oloproof.textsafe import dumps

__all__ = ["POLL_S", "create_app"]

POLL_S = 0.25
_HEARTBEAT_S = 10.0
_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store"}


def _html(text: str) -> HTMLResponse:
    return HTMLResponse(text, headers=_HEADERS)


def create_app(store: StoreLocation, project: str) -> Starlette:
    """The viewer of the store at ``store`` (``.oloproof/store.sqlite``, or a team store:
    then the runs of the project its location names)."""

    def read(fn: Callable[[Connection], Any]) -> Any:
        conn = open_store_readonly(store)
        try:
            return fn(conn)
        finally:
            conn.close()

    def index(request: Request) -> Response:
        def load(conn: Connection) -> str:
            runs = [
                {"id": r.id, "created_at": r.created_at, "system": r.system, "status": r.status,
                 "state": r.state, "cases_total": r.cases_total, "gate": r.gate,
                 "exit_code": r.exit_code}
                for r in list_runs(conn, 200)
            ]
            comparisons = [
                {"id": c.id, "created_at": c.created_at, "candidate_run": c.candidate_run,
                 "baseline_run": c.baseline_run, "gate": c.gate, "exit_code": c.exit_code}
                for c in (list_comparisons(conn, 200) if has_table(conn, "comparisons") else [])
            ]
            return render_index(project, runs, comparisons)

        return _html(read(load))

    def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return _html(read(lambda conn: render_run(run_document(conn, run_id), mode="viewer")))

    def case_page(request: Request) -> Response:
        run_id, case_id = request.path_params["run_id"], request.path_params["case_id"]

        def load(conn: Connection) -> Response:
            doc = run_document(conn, run_id)
            for case in doc["cases"]:
                if case["id"] == case_id:
                    return _html(render_case_page(doc, case))
            return PlainTextResponse(f"run {doc['run']['id']} has no case {case_id!r}", 404)

        result: Response = read(load)
        return result

    def comparison_page(request: Request) -> Response:
        cmp_id = request.path_params["cmp_id"]
        return _html(
            read(lambda conn: render_comparison(comparison_report_document(conn, cmp_id),
                                                mode="viewer"))
        )

    async def events(request: Request) -> Response:
        run_id = read(lambda conn: get_run(conn, request.path_params["run_id"]).id)
        return StreamingResponse(
            _follow(read, run_id), media_type="text/event-stream",
            headers={**_HEADERS, "X-Accel-Buffering": "no"},
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(str(exc), status_code=404)

    return Starlette(
        routes=[
            Route("/", index),
            Route("/runs/{run_id}", run_page),
            Route("/runs/{run_id}/events", events),
            Route("/runs/{run_id}/cases/{case_id:path}", case_page),
            Route("/comparisons/{cmp_id}", comparison_page),
        ],
        middleware=[
            # A page of another site cannot reach the viewer through a name it controls.
            Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost"]),
        ],
        exception_handlers={OloproofError: not_found},
    )


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {dumps(event, indent=None)}\n\n".encode()


def _provisional(run_id: str, total: int, cases: list[Any], kinds: dict[str, str]) -> ProvisionalMetrics:
    tallies = {c: CriterionEvidence(c, MetricKind(k)) for c, k in kinds.items()}
    for case in cases:
        for name, j in case.judgments.items():
            if name in tallies:
                tallies[name].add(j.status, j.passed, j.score)
    metrics = []
    for name, t in tallies.items():
        if t.kind != MetricKind.BINARY:
            continue
        n = t.passed + t.failed
        iv = wilson(t.passed, n) if n else None
        metrics.append(ProvisionalMetric(
            name, t.passed / n if n else None, iv.lower if iv else None,
            iv.upper if iv else None, n, t.missing,
        ))
    return ProvisionalMetrics(run_id, cases_done=len(cases), cases_total=total, metrics=metrics)


# Runs a function on a fresh read-only connection to the store, and closes it.
Reader = Callable[[Callable[[Connection], Any]], Any]


async def _follow(read: Reader, run_id: str) -> AsyncIterator[bytes]:
    """The events of a run as its rows reach the store, until it ends."""
    seen: set[str] = set()
    first = True
    quiet = 0.0
    while True:
        def look(conn: Connection) -> tuple[Any, list[Any], list[dict[str, Any]]]:
            run = get_run(conn, run_id)
            cases = load_cases(conn, run.id)
            decisions = load_decisions(conn, run.id) if run.status != RunStatus.RUNNING else []
            return run, cases, decisions

        run, cases, decisions = await asyncio.to_thread(read, look)
        kinds = {m["criterion"]: m["kind"] for m in run.metrics}
        new = [c for c in cases if c.case_id not in seen]
        out: list[bytes] = []
        if not first:
            for c in new:
                out.append(_sse(CaseExecuted(
                    run.id, scenario_id=c.case_id, status=c.status, from_cache=c.from_cache,
                    latency_ms=c.latency_ms, attempts=max(1, c.attempts), error=c.error,
                ).to_json()))
                for j in c.judgments.values():
                    out.append(_sse(CaseJudged(
                        run.id, scenario_id=c.case_id, criterion=j.criterion, status=j.status,
                        passed=j.passed, score=j.score, from_cache=j.from_cache,
                    ).to_json()))
        seen.update(c.case_id for c in new)
        if (first or new) and cases:
            out.append(_sse(_provisional(run.id, run.cases_total, cases, kinds).to_json()))
        if run.status != RunStatus.RUNNING:
            out.append(_sse(RunFinished(
                run.id, status=run.status, completeness=run.completeness,
                exit_code=int(run.exit_code if run.exit_code is not None else 5),
                decisions=decisions,
            ).to_json()))
            for chunk in out:
                yield chunk
            return
        first = False
        if out:
            quiet = 0.0
            for chunk in out:
                yield chunk
        else:
            quiet += POLL_S
            if quiet >= _HEARTBEAT_S:
                quiet = 0.0
                yield b": still running\n\n"
        await asyncio.sleep(POLL_S)
