"""``oloproof run``: execute the suite, store every result, decide the policy."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable

from oloproof.events import Event
from oloproof.render.console import is_terminal, make_console
from oloproof.render.tables import run_report
from oloproof.runner import StopRequest, execute, prepare


def command(args: argparse.Namespace) -> int:
    prepared = prepare(args.config, args.policy)
    stop = StopRequest()
    sinks: list[Callable[[Event], None]] = []
    if args.json:
        from oloproof.render.ndjson import NdjsonWriter

        sinks.append(NdjsonWriter(sys.stdout, on_closed=stop))
    table_stream = sys.stderr if args.json else sys.stdout
    live = None
    if is_terminal(sys.stderr) and os.environ.get("OLOPROOF_NO_LIVE") != "1":
        from oloproof.render.live import LiveView

        binary = [m["criterion"] for m in prepared.metrics if m["kind"] == "BINARY"]
        live = LiveView(make_console(sys.stderr), binary, len(prepared.cases))
        sinks.append(live)

    def hard_stop() -> None:
        # A second Ctrl-C: stop at once. What finished is already committed.
        if live is not None:
            live.stop()
        sys.stderr.write("oloproof run: stopped at once (second interrupt)\n")
        sys.stderr.flush()
        os._exit(5)

    stop.on_second = hard_stop
    try:
        result = execute(prepared, use_cache=not args.no_cache, sinks=sinks, stop=stop)
    finally:
        if live is not None:
            live.stop()
    note = None
    if result.stop_reason:
        note = f"Stopped: {result.stop_reason}. Finished cases are stored; the next run takes them from the cache."
    console = make_console(table_stream)
    console.print(
        run_report(
            run_id=result.run_id,
            status=result.status,
            completeness=result.completeness,
            decisions=result.decisions,
            summaries=result.summaries,
            cache=result.totals.cache_json(),
            gate=result.gate,
            exit_code=result.exit_code,
            note=note,
            policy_arg=args.policy,
        )
    )
    if threading.active_count() > 1:
        # A system call that timed out may still be running in a worker thread;
        # it must not hold the process open.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(result.exit_code)
    return result.exit_code
