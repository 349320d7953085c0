"""A small Chrome DevTools Protocol client over the browser's pipe.

Chromium started with ``--remote-debugging-pipe`` reads commands from its
fd 3 and writes answers and events to its fd 4: JSON messages, each ended by
a NUL byte. No TCP port is opened, so no other local user can drive the
browser. This module speaks that framing over two trio streams; it knows
nothing of pages or crawls.

Why our own client: the protocol over a pipe is a few dozen lines (ids,
NUL framing, flat sessions), every Python CDP library we know of runs on
asyncio or opens a WebSocket port, and a client we own keeps the trio rules
(the caller owns deadlines, one reader task with a visible owner).

Rules:

1. One reader task (``CdpConnection.serve``, started by ``open_cdp``) reads
   messages and routes them: an answer wakes the command that waits for its
   id; an event goes to the subscriber of its session (flat sessions:
   ``Target.attachToTarget(flatten=True)``, messages carry ``sessionId``).
2. ``send`` is a checkpoint; cancelling it abandons the answer (a late answer
   is dropped). A protocol error answer raises ``CdpError``.
3. When the pipe closes (the browser died or exited) every waiting command
   and every subscriber ends with ``BrowserClosed``; no further command is
   sent.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import trio

__all__ = ["BrowserClosed", "CdpConnection", "CdpError", "CdpEvent", "open_cdp", "split_frames"]

#: A message larger than this is a protocol violation (a 5 MB DOM fits).
MAX_MESSAGE = 256 * 1024 * 1024


class CdpError(Exception):
    """The browser answered a command with an error."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.method = method
        self.code = error.get("code")
        super().__init__(f"{method}: {error.get('message', error)}")


class BrowserClosed(Exception):
    """The pipe to the browser closed (it exited, crashed or was killed)."""


@dataclass(frozen=True, slots=True)
class CdpEvent:
    """One event: its method, params and the flat session it came from."""

    method: str
    params: dict[str, Any]
    session_id: str | None = None


def split_frames(buffer: bytearray) -> list[bytes]:
    """Cut every complete NUL-ended message off the front of ``buffer``
    (in place) and return them; a partial message stays. Pure."""
    frames: list[bytes] = []
    start = 0
    while True:
        end = buffer.find(b"\0", start)
        if end < 0:
            break
        frames.append(bytes(buffer[start:end]))
        start = end + 1
    del buffer[:start]
    return frames


@dataclass(slots=True)
class _Pending:
    done: trio.Event = field(default_factory=trio.Event)
    message: dict[str, Any] | None = None


class CdpConnection:
    """Commands and events over the browser's pipe. Create with ``open_cdp``."""

    def __init__(self, send_stream: trio.abc.SendStream, receive_stream: trio.abc.ReceiveStream):
        self._out = send_stream
        self._in = receive_stream
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._subscribers: dict[str | None, trio.MemorySendChannel[CdpEvent]] = {}
        self._send_lock = trio.Lock()
        self.closed = False
        self.closed_event = trio.Event()

    def subscribe(self, session_id: str | None) -> trio.MemoryReceiveChannel[CdpEvent]:
        """Events of one session (``None``: the browser's own) from now on.
        The channel is unbounded: the reader never waits for a slow tab."""
        send, receive = trio.open_memory_channel[CdpEvent](float("inf"))
        if self.closed:
            send.close()
        else:
            self._subscribers[session_id] = send
        return receive

    def unsubscribe(self, session_id: str | None) -> None:
        channel = self._subscribers.pop(session_id, None)
        if channel is not None:
            channel.close()

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """Run one command and return its result. Checkpoint.

        Raises ``CdpError`` on an error answer, ``BrowserClosed`` if the pipe
        closes first."""
        if self.closed:
            raise BrowserClosed("the browser is gone")
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        pending = self._pending[ident] = _Pending()
        try:
            data = json.dumps(message, separators=(",", ":")).encode() + b"\0"
            async with self._send_lock:
                try:
                    await self._out.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    self._close()
                    raise BrowserClosed("the pipe to the browser closed") from None
            await pending.done.wait()
        finally:
            self._pending.pop(ident, None)
        answer = pending.message
        if answer is None:
            raise BrowserClosed("the browser is gone")
        if "error" in answer:
            raise CdpError(method, answer["error"])
        result: dict[str, Any] = answer.get("result", {})
        return result

    def send_nowait_ignored(
        self,
        nursery: trio.Nursery,
        method: str,
        params: dict[str, Any],
        session_id: str | None = None,
    ) -> None:
        """Fire a command in ``nursery`` whose answer nobody needs (the
        browser may be gone or the request finished already)."""

        async def run() -> None:
            with suppress(CdpError, BrowserClosed):
                await self.send(method, params, session_id)

        nursery.start_soon(run)

    async def serve(self) -> None:
        """Read and route messages until the pipe closes."""
        buffer = bytearray()
        try:
            while True:
                try:
                    chunk = await self._in.receive_some(1 << 20)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    chunk = b""
                if not chunk:
                    return
                buffer += chunk
                if len(buffer) > MAX_MESSAGE:
                    return
                for frame in split_frames(buffer):
                    self._route(json.loads(frame))
        finally:
            self._close()

    def _route(self, message: dict[str, Any]) -> None:
        if "id" in message:
            pending = self._pending.get(message["id"])
            if pending is not None:
                pending.message = message
                pending.done.set()
            return
        channel = self._subscribers.get(message.get("sessionId"))
        if channel is not None:
            event = CdpEvent(
                message["method"], message.get("params", {}), message.get("sessionId")
            )
            with suppress(trio.ClosedResourceError):
                channel.send_nowait(event)

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for pending in self._pending.values():
            pending.done.set()
        for channel in self._subscribers.values():
            channel.close()
        self._subscribers.clear()
        self.closed_event.set()


@asynccontextmanager
async def open_cdp(
    send_stream: trio.abc.SendStream, receive_stream: trio.abc.ReceiveStream
) -> AsyncIterator[CdpConnection]:
    """A connection whose reader runs while the block does."""
    connection = CdpConnection(send_stream, receive_stream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection.serve)
        try:
            yield connection
        finally:
            nursery.cancel_scope.cancel()
