"""``oloproof run``: execute the suite, store every result, decide the policy.

Where things go (SPEC §6):

- standard error a terminal: a live view on it, redrawn a few times a second,
  replaced by the final tables when they go to the same terminal;
- ``--json``: events on standard output, one line each, and the tables on
  standard error. Nothing else can reach the stream: for the whole command,
  file descriptor 1 is made a copy of standard error (``dup2``) and the events
  are written to a saved copy of the original standard output, so a system's
  ``print``, its logging, a subprocess it starts and a raw ``os.write(1, ...)``
  all land on standard error;
- otherwise the tables, once, at the end, on standard output.

Stopping (SPEC §3): Ctrl-C, SIGTERM or a closed standard output stop the run,
which is stored as RUN_ERROR/PARTIAL (exit 5); a second signal exits at once.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from oloproof.api import PreparedRun, execute, load
from oloproof.cli import _process
from oloproof.cli._ci import check_outputs, ci_run, wants_outputs, write_outputs
from oloproof.errors import UsageError
from oloproof.events import Event
from oloproof.render.console import is_terminal, make_console, print_to
from oloproof.render.tables import preload, result_report, run_note
from oloproof.runner import StopRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import IO

    from oloproof.render.live import LiveView
    from oloproof.render.ndjson import NdjsonWriter

_SHOW_CURSOR = b"\x1b[?25h"


def _same_terminal(a: int, b: int) -> bool:
    try:
        return os.isatty(a) and os.isatty(b) and os.ttyname(a) == os.ttyname(b)
    except OSError:
        return False


def _live_view(prepared: PreparedRun, *, json_mode: bool, events_out: IO[str]) -> LiveView | None:
    """A live view on standard error, when it is a terminal that can redraw.

    ``events_out`` is the real standard output (in ``--json`` mode fd 1 itself
    is a copy of standard error by now, so it cannot tell)."""
    if not is_terminal(sys.stderr) or os.environ.get("OLOPROOF_NO_LIVE") == "1":
        return None
    if os.environ.get("TERM") == "dumb":
        return None
    stdout_tty = is_terminal(events_out)
    if json_mode and stdout_tty:
        # Event lines on the very terminal the frame is redrawn on would tear
        # it apart; the stream is the progress then.
        return None
    from oloproof.render.live import LiveView

    binary = prepared.binary_metrics
    tables_to_stderr = json_mode or _same_terminal(events_out.fileno(), 2)
    return LiveView(
        make_console(sys.stderr),
        binary,
        prepared.cases_total,
        transient=tables_to_stderr,
        redirect_stdout=stdout_tty or json_mode,
    )


def command(args: argparse.Namespace) -> int:
    """``oloproof run``: the exit code of the run (SPEC §5), or a ConfigError (exit 2)."""
    if not args.json:
        return _command(args, sys.stdout)
    # From here on fd 1 is standard error for everyone (user code, subprocesses,
    # logging handlers bound to sys.stdout); the events go to a saved copy.
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    events_out = open(saved, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    try:
        return _command(args, events_out)
    finally:
        try:
            events_out.flush()
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 1)
        os.close(saved)


def _command(args: argparse.Namespace, events_out: IO[str]) -> int:
    if getattr(args, "matrix", False):
        if args.baseline or args.compare_policy:
            raise UsageError("--matrix compares its variants with its own baseline variant:"
                             " --baseline and --compare-policy compare one run with a stored"
                             " run")
        from oloproof.cli._matrix import matrix_command

        return matrix_command(args, events_out)
    if getattr(args, "variant", None):
        raise UsageError("--variant chooses variants of a matrix: use it with --matrix")
    check_outputs(args)  # a --junit-xml that cannot be written is refused before anything runs
    started = time.monotonic()
    # Loaded inside the redirect: a module that prints at import cannot reach the stream.
    prepared = load(
        args.config, policy=args.policy, limit=args.limit, sample=args.sample, seed=args.seed,
        cases=args.case, where=args.where, group_by=args.group_by, trials=args.trials,
        shard=args.shard, executor=args.executor, ray_address=args.ray_address,
        sequential=args.sequential, baseline=args.baseline,
        compare_policy=args.compare_policy,
    )
    stale = prepared.identity_warning
    if stale is not None:
        from oloproof.textsafe import printable

        sys.stderr.write(f"oloproof run: warning: {printable(stale)}\n")
    table_stream = sys.stderr if args.json else sys.stdout
    if is_terminal(table_stream):
        # rich draws the final report in a terminal: it loads while the first calls are in
        # flight. Elsewhere render/plain.py writes the report without importing rich.
        preload()
    stop, sinks, writer = stop_and_sinks(args.json, events_out)
    live = _live_view(prepared, json_mode=args.json, events_out=events_out)
    if live is not None:
        sinks.append(live)

    stop.on_second = hard_stop(stop, live)
    with stop.signals(keep_after_stop=True):
        try:
            result = execute(prepared, use_cache=not args.no_cache, sinks=sinks, stop=stop)
        finally:
            if writer is not None:
                writer.flush()
            if live is not None:
                live.stop()
        note = run_note(result, prepared.executor_note)
        print_to(table_stream, result_report(result, note, policy_arg=args.policy,
                                                  config_arg=args.config))
        exit_code = result.exit_code
        if wants_outputs(args):
            exit_code = write_outputs(
                ci_run(result, duration_s=time.monotonic() - started), args, "run"
            )
    if _process.OURS and (stop.count or _process.threads_left()):
        # A call that was cancelled or timed out may still run in a worker
        # thread (a sync system stuck in time.sleep): it must not hold the
        # process open, and the interpreter would wait for it at exit. Only
        # the console script's own process ends this way: main() called in a
        # process of someone else's (a test, a notebook) returns, whatever
        # threads are still finishing.
        # A run a signal stopped ends here too: the interpreter's teardown puts the
        # default handlers back first, and a second Ctrl-C arriving then killed the
        # process by SIGINT instead of exiting 5.
        _process.exit_now(exit_code)
    return exit_code


def stop_and_sinks(
    json_mode: bool, events_out: IO[str],
) -> tuple[StopRequest, list[Callable[[Event], None]], NdjsonWriter | None]:
    """The run's stop request and its event sinks: with ``--json``, the NDJSON writer (a
    closed pipe stops the run)."""
    stop = StopRequest()
    sinks: list[Callable[[Event], None]] = []
    writer: NdjsonWriter | None = None
    if json_mode:
        from oloproof.render.ndjson import NdjsonWriter

        writer = NdjsonWriter(events_out, on_closed=stop,
                              stopping=lambda: stop.count > 0)
        sinks.append(writer)
    return stop, sinks, writer


def hard_stop(stop: StopRequest, live: LiveView | None = None) -> Callable[[], None]:
    """What a second signal does: exit 5 at once, from the signal handler. Only raw writes
    there: the interrupted code may hold a stream's or rich's lock. What finished is
    already committed (SPEC §3)."""

    def exit_at_once() -> None:
        message = (
            f"oloproof run: stopped at once ({stop.reason}, then a second signal);"
            " finished cases are stored\n"
        ).encode()
        if live is not None and live.started:
            message = _SHOW_CURSOR + b"\n" + message
        try:
            os.write(2, message)
        except OSError:
            pass
        _process.real_exit(5)  # not the guard user code meets (cli/_process.py)

    return exit_at_once
