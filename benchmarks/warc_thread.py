"""``BackgroundWarcWriter``: the WARC writer on a worker thread, as ``bench_warc.py`` measures it.

Not in the package: measured in a crawl, a thread costs more than it saves
(the GIL hand-offs), so the command line and the library's ``warc=`` run
``WarcWriter`` in a child process instead (``trio_crawl/outputs/warc_process.py``).
It stays here so that the benchmark can keep showing why.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self

from trio_crawl.core.models import FetchResult
from trio_crawl.outputs.warc import TRUNCATED_REASONS, WarcWriter


class BackgroundWarcWriter:
    """Hands ``write_exchange`` calls to one worker thread that owns a
    ``WarcWriter``. SHA-1 and deflate release the GIL, so the crawler's thread
    pays only for putting the call on a queue (about 8 µs); the worker needs
    the GIL for about 14 µs of Python per exchange (``benchmarks/bench_warc.py``).

    ``write_exchange`` queues and returns at once. With ``max_pending``
    exchanges waiting it blocks (short sleeps) until the worker catches up,
    so memory stays bounded; an async caller can look at ``pending`` first and
    wait on its own event loop instead. A write error in the worker sticks: it
    is raised by every later call, ``close`` included (after the file is
    closed), and nothing queued after the failed call is run.

    Ordering: what is queued is written in order, and ``submit(fn, *args)``
    runs any callable in that order too. Submit the page's JSON Lines write
    after its exchange and, after a kill, no line in the output names a page
    that is missing from the WARC, as with the inline writer. Written
    directly, a line may outrun up to ``max_pending`` queued exchanges.
    """

    def __init__(self, writer: WarcWriter, *, max_pending: int = 1024) -> None:
        self.writer = writer
        self.max_pending = max_pending
        self._queue: queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._submitted = 0  # only the caller's thread writes this
        self._done = 0  # only the worker writes this
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="warc-writer", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Calls queued or being run."""
        return self._submitted - self._done

    def write_exchange(
        self,
        *,
        url: str,
        result: FetchResult,
        request_headers: Mapping[str, str] | None = None,
        method: str = "GET",
        truncated: str | None = None,
        ip: str | None = None,
        protocol: str | None = None,
        metadata: Mapping[str, object] | None = None,
        date: float | None = None,
    ) -> None:
        """``WarcWriter.write_exchange``, queued. ``date`` defaults to the time
        of this call minus ``result.elapsed``, not to the time of the write.
        ``truncated`` is checked here, so a bad value raises at the call."""
        if truncated is not None and truncated not in TRUNCATED_REASONS:
            raise ValueError(f"WARC-Truncated must be one of {sorted(TRUNCATED_REASONS)}")
        if date is None:
            date = time.time() - result.elapsed
        args = (url, result, request_headers, method, truncated, ip, protocol, metadata, date)
        self._put(self._write_exchange, args)

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` in the worker after everything queued before it."""
        self._put(fn, args)

    def flush(self) -> None:
        """Wait until everything queued is written."""
        self._wait_below(1)
        self._raise_error()

    def close(self) -> None:
        """Write what is queued, stop the worker, close the file, and raise the
        worker's error if it had one."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
            self.writer.close()
        self._raise_error()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _put(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        if self._error is not None:
            self._raise_error()
        if self._closed:
            raise ValueError("write to a closed BackgroundWarcWriter")
        if self._submitted - self._done >= self.max_pending:
            self._wait_below(self.max_pending)
        self._submitted += 1
        self._queue.put((fn, args))

    def _wait_below(self, limit: int) -> None:
        while self._submitted - self._done >= limit and self._thread.is_alive():
            time.sleep(0.0005)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _write_exchange(
        self,
        url: str,
        result: FetchResult,
        request_headers: Mapping[str, str] | None,
        method: str,
        truncated: str | None,
        ip: str | None,
        protocol: str | None,
        metadata: Mapping[str, object] | None,
        date: float,
    ) -> None:
        self.writer.write_exchange(
            url=url,
            result=result,
            request_headers=request_headers,
            method=method,
            truncated=truncated,
            ip=ip,
            protocol=protocol,
            metadata=metadata,
            date=date,
        )

    def _run(self) -> None:
        failed = False
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                if not failed:
                    fn, args = item
                    fn(*args)
            except BaseException as exc:  # handed to the caller's thread
                failed = True
                self._error = exc
            finally:
                self._done += 1
