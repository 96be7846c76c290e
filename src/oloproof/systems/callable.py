"""A Python function as the system under test.

Sync functions run in worker threads (one pool per run, sized to the
concurrency); ``async def`` functions are awaited on the run's loop. One call
is one attempt: the engine wraps it in the retry policy.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from oloproof._context import CaseContext, reset_current_case, set_current_case
from oloproof.engine.retry import PermanentFailure, RetryableFailure
from oloproof.errors import ConfigError, TransientError
from oloproof.systems.base import CallResult
from oloproof.systems.identity import digest, digest_bytes
from oloproof.systems.loading import import_callable, module_source


def _code_paths_digest(root: Path, code_paths: list[str], file: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for i, entry in enumerate(code_paths):
        path = (root / entry).resolve()
        if not path.exists():
            raise ConfigError(
                f"'{entry}' does not exist (looked for {path})",
                file=file, field=f"system.code_paths[{i}]",
                accepted="files or directories relative to the project directory",
            )
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for p in found:
            if "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            try:
                rel = p.relative_to(root.resolve()).as_posix()
            except ValueError:
                rel = p.as_posix()
            files[rel] = digest_bytes(p.read_bytes())
    return files


def _describe(exc: BaseException) -> str:
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(frames[-3:-1]).strip().splitlines()[-2:] if len(frames) > 2 else []
    text = f"{type(exc).__name__}: {exc}"
    if tail:
        text += "\n" + "\n".join(tail)
    return text


class CallableSystem:
    kind = "callable"

    def __init__(
        self, config: Any, root: Path, *, concurrency: int, file: str = "oloproof.yaml"
    ) -> None:
        self.name: str = config.name
        self.timeout_s: float = float(config.timeout_s)
        self.fn, module = import_callable(
            config.callable, root, file=file, field="system.callable"
        )
        declared = getattr(self.fn, "__oloproof_system__", None) or {}
        self.version: str = str(config.version or declared.get("version") or "")
        if not self.version:
            raise ConfigError(
                "a callable system needs a version",
                file=file, field="system.version",
                accepted="system.version in oloproof.yaml or @system(name=..., version=...)",
            )
        self.is_async = inspect.iscoroutinefunction(self.fn)
        self.concurrency = concurrency
        self.identity = digest(
            {
                "kind": "callable",
                "name": self.name,
                "version": self.version,
                "declared": declared,
                "callable": config.callable,
                "module_source": digest_bytes(module_source(module)),
                "code_paths": _code_paths_digest(root, list(config.code_paths or []), file),
            }
        )
        self._pool: ThreadPoolExecutor | None = None

    async def start(self) -> None:
        if not self.is_async:
            # Threads that outlive a timeout keep their slot, so leave some room.
            self._pool = ThreadPoolExecutor(
                max_workers=self.concurrency + 4, thread_name_prefix="oloproof-system"
            )

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def call(self, case_id: str, case_input: Any, attempt: int) -> CallResult:
        ctx = CaseContext(case_id=case_id, input=case_input, attempt=attempt)
        try:
            if self.is_async:
                output = await asyncio.wait_for(self._call_async(ctx), self.timeout_s)
            else:
                loop = asyncio.get_running_loop()
                context = contextvars.copy_context()
                fut = loop.run_in_executor(self._pool, context.run, self._call_sync, ctx)
                output = await asyncio.wait_for(fut, self.timeout_s)
        except TimeoutError:
            raise PermanentFailure(
                f"no answer within timeout_s = {self.timeout_s:g}s", kind="TIMEOUT"
            ) from None
        except TransientError as exc:
            if exc.retryable:
                raise RetryableFailure(_describe(exc)) from None
            raise PermanentFailure(_describe(exc)) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - no system error ever stops the run
            raise PermanentFailure(_describe(exc)) from None
        try:
            json.dumps(output)
        except (TypeError, ValueError) as exc:
            raise PermanentFailure(f"the output is not JSON-serialisable: {exc}") from None
        return CallResult(output, ctx.usage)

    def _call_sync(self, ctx: CaseContext) -> Any:
        token = set_current_case(ctx)
        try:
            return self.fn(ctx.input)
        finally:
            reset_current_case(token)

    async def _call_async(self, ctx: CaseContext) -> Any:
        token = set_current_case(ctx)
        try:
            return await self.fn(ctx.input)
        finally:
            reset_current_case(token)
