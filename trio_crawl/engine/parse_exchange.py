"""The crawl's end of the parse child's socket: pages out, answers back.

``engine/parse_process.py`` explains the co-process; ``parse_child.py`` has
the protocol. This module keeps the one piece of state both directions
share, the pages sent and not answered yet (their tasks, when each went and
its body's size), so that every answer finds its page, a cancelled page
forgets its answer, and a dead or hung child sends every waiting page back
to the crawl at once.

It is the per-page path: a page costs one frame written (or queued behind
what the socket has not taken), one entry here, and one reschedule when its
answer comes; nothing else. A page's wait has no cancel scope of its own:
``AnswerWatch`` times every page with one task and one deadline (a scope
per page cost the crawl's process ~4.5 us a page).
"""

from __future__ import annotations

import marshal
import socket
from collections.abc import Callable
from typing import Final

import outcome
import trio

from .parse_child import HEAD, READY, frame

_READ_SIZE: Final = 1 << 20


class Broken(Exception):
    """The child is gone or talks nonsense (the message says which)."""


class PageExchange:
    """Pages sent to the child and waiting for their answers.

    ``ready``: the child has said so (pages may go); ``broken``: it is gone,
    hung or talks nonsense (no page goes any more). ``freed`` is called each
    time an answer, or a cancelled page, frees a place in the child's queue
    (``ChildPlaces.freed``, set once both exist).
    """

    def __init__(self) -> None:
        self.freed: Callable[[], None] = _nothing
        self.ready = False
        self.broken = False
        self.sock: socket.socket | None = None
        #: page number -> the task waiting for its answer, oldest first
        self.waiting: dict[int, trio.lowlevel.Task] = {}
        #: for each page of ``waiting``: when it went, and its body's size
        self.sent: dict[int, tuple[float, int]] = {}
        #: the sum of those sizes
        self.bytes = 0
        self.watching = trio.Event()  # set while a page waits for its answer
        self._next = 1
        self._out = bytearray()
        self._writer = trio.lowlevel.ParkingLot()

    async def ask(self, body: bytes, url: str, content_type: str | None) -> list[str] | None:
        """Send the page; its links, or None (the child failed on it, or is
        gone). A checkpoint; cancelling it forgets the page."""
        number = self._next
        self._next += 1
        self._send(frame((number, url, content_type, body)))
        self.waiting[number] = trio.lowlevel.current_task()
        self.sent[number] = (trio.current_time(), len(body))
        self.bytes += len(body)
        if not self.watching.is_set():
            self.watching.set()

        def abort(_: object) -> trio.lowlevel.Abort:
            if self.waiting.pop(number, None) is not None:
                self.bytes -= self.sent.pop(number)[1]
                self.freed()
            return trio.lowlevel.Abort.SUCCEEDED

        links: list[str] | None = await trio.lowlevel.wait_task_rescheduled(abort)
        return links

    def answer_waiting(self) -> bool:
        """Whether the child has written something the reader has not taken
        yet (an answer on its way to a page, or its end): one ``recv`` that
        peeks, asked only when the crawl is about to parse a page itself."""
        if self.sock is None:
            return False
        try:
            self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except OSError:
            pass  # the reader sees it too
        return True

    def _send(self, data: bytes) -> None:
        """Queue ``data`` behind what waits; write what the socket takes now."""
        if self._out:
            self._out += data
            return
        assert self.sock is not None
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            return  # the child is gone: the reader sees end-of-file
        if sent < len(data):
            self._out += data[sent:]
            self._writer.unpark_all()

    async def write(self) -> None:
        """Write out what ``_send`` could not, as the socket takes it."""
        assert self.sock is not None
        while True:
            while not self._out:
                await self._writer.park()
            await trio.lowlevel.wait_writable(self.sock)
            try:
                sent = self.sock.send(self._out)
            except BlockingIOError:
                continue
            except OSError:
                return  # the reader sees end-of-file
            del self._out[:sent]

    async def read(self) -> str:
        """Hand each answer to its page; return why the child stopped."""
        assert self.sock is not None
        sock = self.sock
        buffer = b""
        while True:
            await trio.lowlevel.wait_readable(sock)
            try:
                chunk = sock.recv(_READ_SIZE)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                return "the parse process ended"
            buffer = buffer + chunk if buffer else chunk
            start = 0
            try:
                while len(buffer) - start >= HEAD.size:
                    (length,) = HEAD.unpack_from(buffer, start)
                    end = start + HEAD.size + length
                    if end > len(buffer):
                        break
                    self._answer(marshal.loads(buffer[start + HEAD.size : end]))
                    start = end
            except (Broken, ValueError, EOFError, TypeError) as exc:
                return f"the parse process sent something that is not an answer ({exc})"
            buffer = buffer[start:]

    def _answer(self, message: object) -> None:
        if not (isinstance(message, tuple) and len(message) == 2):
            raise Broken(f"{type(message).__name__}")
        number, links = message
        if message == READY and not self.ready:
            self.ready = True
            return
        if not isinstance(number, int) or not 0 < number < self._next:
            raise Broken(f"unknown number {number!r}")
        if isinstance(links, str):
            links = None  # the child raised: the caller parses the page again
        elif not isinstance(links, list):
            raise Broken(f"{type(links).__name__} for links")
        task = self.waiting.pop(number, None)
        if task is not None:  # None: that page was cancelled (its place is given)
            self.bytes -= self.sent.pop(number)[1]
            trio.lowlevel.reschedule(task, outcome.Value(links))
        self.freed()

    def wake_all(self) -> None:
        """Every waiting page parses itself: the child is gone."""
        self.ready = False
        self.broken = True
        waiting, self.waiting = self.waiting, {}
        self.sent.clear()
        self.bytes = 0
        for task in waiting.values():
            trio.lowlevel.reschedule(task, outcome.Value(None))


def _nothing() -> None:
    pass


class AnswerWatch:
    """The watchdog: once a page has waited ``answer_wait`` seconds for its
    answer, ``hung`` is called (the child is killed, every page parses
    itself). One task and one deadline for every page: the oldest page
    waiting is the first to run out of time."""

    def __init__(self, exchange: PageExchange, answer_wait: float, hung: Callable[[], None]):
        self._exchange = exchange
        self._answer_wait = answer_wait
        self._hung = hung

    async def run(self) -> None:
        exchange = self._exchange
        while True:
            if not exchange.waiting:
                exchange.watching = trio.Event()
                await exchange.watching.wait()
                continue
            oldest = next(iter(exchange.waiting))
            await trio.sleep_until(exchange.sent[oldest][0] + self._answer_wait)
            if oldest in exchange.waiting:
                self._hung()
                return
