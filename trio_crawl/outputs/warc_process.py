"""The WARC writer in a child process: the crawl's ``--warc`` without its CPU.

Why a process
-------------
Writing an exchange costs about 200 µs of CPU in the crawl (two SHA-1s, one
deflate per record, the write), half as much again as fetching and parsing
the page: inline, ``--warc`` cost 36% of pages/s on the 20k-page benchmark.
A thread does not help (SHA-1 and deflate release the GIL, but every record
also needs Python code, and the GIL hand-offs cost more than they save,
``benchmarks/warc_thread.py``). A child process runs all of it on another core; the
crawl only copies each exchange into a pipe (about 10 µs).

The guarantee stays the one of the inline writer: a page's JSON Lines record
is written only after its exchange is in the WARC file. The child answers
every batch it has written with an *ack*, the number of exchanges written so
far, and the crawl waits for the ack of its exchange before the record
(``ArchiveLink`` in ``outputs/archive.py`` does the waiting with trio). If the
crawl is killed, the child still writes what is in the pipe (it reads to
end-of-file, and it runs in its own session, so a terminal's Ctrl-C reaches
only the crawl); if the child is killed, nothing it did not ack is listed.

Protocol
--------
* crawl -> child (the child's stdin): one frame per exchange, a 12-byte
  header (meta length, body length, little-endian) then ``marshal`` of
  ``(url, status, header pairs, body_skipped, date, protocol, via,
  record id, revisit, request header pairs)`` then the body. The record
  id is made by the crawl, which keeps it (``ArchiveTicket.stored``).
  ``marshal`` is the fastest serializer for builtins, and both ends are the
  same interpreter.
* child -> crawl (stdout): 8 bytes, the count of exchanges written, after
  each batch (one ``os.write`` of 8 bytes: atomic on a pipe, so a read never
  sees half an ack).
* A failure (disk full...) ends the child with exit status 3 and one line on
  stderr, ``errno reason``; the crawl reports it as its own write error.

The WARC file is opened, repaired and given its ``warcinfo`` record by the
crawl (``WarcWriter.open``, so a bad path fails before anything starts); the
child inherits the descriptor. This module never imports trio.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import marshal
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Mapping
from typing import Final

from ..core.models import FetchResult
from .warc import DEFAULT_COMPRESSLEVEL, RevisitOf, WarcWriter, check_revisit

_FRAME: Final = struct.Struct("<IQ")
_ACK: Final = struct.Struct("<Q")
#: Bytes the child reads at once; a batch of exchanges is acked together.
_READ_SIZE: Final = 1 << 20
#: Pipe buffer asked for (Linux ``F_SETPIPE_SZ``; 1 MiB is the default cap):
#: the crawl's writes then almost never find the pipe full.
_PIPE_SIZE: Final = 1 << 20
#: The child's exit status when it cannot write the file.
EXIT_WRITE_FAILED: Final = 3


class WarcProcess:
    """The crawl's end of a WARC writer process. Never blocks.

    ``submit`` queues an exchange and returns its sequence number (1, 2, ...);
    the exchange is on disk once ``acked`` has reached it. Bytes the pipe
    would not take wait in ``pending`` until ``flush`` (call it when the pipe
    is writable). ``read_acks`` reads what the child said (call it when the
    ack descriptor is readable).
    """

    def __init__(self, proc: subprocess.Popen[bytes], path: str) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._path = path
        self.send_fd = proc.stdin.fileno()
        self.ack_fd = proc.stdout.fileno()
        os.set_blocking(self.send_fd, False)
        os.set_blocking(self.ack_fd, False)
        with_pipe_size(self.send_fd)
        self._pending = bytearray()
        self.submitted = 0
        self.acked = 0
        #: Why the child stopped before ``close``, once it has.
        self.error: OSError | None = None

    @classmethod
    def start(
        cls,
        path: str,
        *,
        info: Mapping[str, object] | None = None,
        request_headers: Mapping[str, str] | None = None,
        append: bool = True,
        compresslevel: int = DEFAULT_COMPRESSLEVEL,
        dedup: bool = False,
        defer_start: bool = False,
    ) -> WarcProcess:
        """Open ``path`` as ``WarcWriter.open`` does (repair, warcinfo: its
        errors come from here), then hand the file to a new writer process."""
        writer = WarcWriter.open(
            path,
            info=info,
            request_headers=request_headers,
            append=append,
            compresslevel=compresslevel,
            dedup=dedup,
            defer_start=defer_start,
        )
        settings = {
            "fd": writer.fileno(),
            "path": path,
            "request_headers": dict(request_headers or {}),
            "warcinfo_id": writer.warcinfo_id,
            "fresh_start": writer.pending_start,
            "compresslevel": compresslevel,
            "dedup": dedup,
        }
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", __name__, json.dumps(settings)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(writer.fileno(),),
                start_new_session=True,  # Ctrl-C is for the crawl; the child drains
            )
        finally:
            writer.close()  # the child has its own descriptor now
        return cls(proc, path)

    @property
    def pid(self) -> int:
        """The writer process's id."""
        return self._proc.pid

    @property
    def pending(self) -> int:
        """Bytes submitted that the pipe has not taken yet."""
        return len(self._pending)

    def submit(
        self,
        url: str,
        result: FetchResult,
        *,
        date: float,
        via: str | None = None,
        record_id: str | None = None,
        revisit_of: RevisitOf | None = None,
        request_headers: Mapping[str, str] | None = None,
    ) -> int:
        """Queue one exchange; returns its number, for ``acked``. ``via``: the
        page whose browser asked for it (``--render``), kept in a ``metadata``
        record. ``record_id``, ``revisit_of``, ``request_headers``: as
        ``WarcWriter.write_capture`` takes them (checked here, so that a bad
        ``revisit_of`` is the caller's ``ValueError``, not the child's end)."""
        if revisit_of is not None:
            check_revisit(revisit_of, result)
        meta = marshal.dumps(
            (
                url,
                result.status,
                tuple(result.headers.items()),
                result.body_skipped,
                date,
                result.http_version,
                via,
                record_id,
                None if revisit_of is None else revisit_of.as_tuple(),
                None if not request_headers else tuple(request_headers.items()),
            )
        )
        body = result.body if result.network_body is None else result.network_body
        header = _FRAME.pack(len(meta), len(body))
        self.submitted += 1
        if self.error is not None:  # nobody reads any more: the caller is told
            return self.submitted
        if self._pending:  # behind what waits already, to keep the order
            self._pending += header + meta + body
            return self.submitted
        total = len(header) + len(meta) + len(body)
        try:
            written = os.writev(self.send_fd, (header, meta, body))
        except BlockingIOError:
            written = 0
        except OSError as exc:  # BrokenPipeError: the child is gone
            self._failed(exc)
            return self.submitted
        if written < total:
            self._pending += (header + meta + body)[written:]
        return self.submitted

    def flush(self) -> bool:
        """Write what the pipe takes of ``pending``; True when none is left."""
        if self.error is not None:
            self._pending.clear()
            return True
        while self._pending:
            try:
                written = os.write(self.send_fd, self._pending)
            except BlockingIOError:
                return False
            except OSError as exc:
                self._failed(exc)
                self._pending.clear()
                return True
            del self._pending[:written]
        return True

    def read_acks(self) -> bool:
        """Take in the child's acks; False once the child has ended."""
        try:
            data = os.read(self.ack_fd, 1 << 16)
        except BlockingIOError:
            return True
        if not data:
            if self.error is None:
                self._failed(None)
            return False
        whole = len(data) - len(data) % _ACK.size
        if whole:
            (self.acked,) = _ACK.unpack_from(data, whole - _ACK.size)
        return True

    def close(self) -> None:
        """End the child after it has written everything it was sent; then
        ``error`` says whether it failed. Whatever is still in ``pending`` is
        dropped: nothing waits for it any more."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._pending.clear()
            os.set_blocking(self.send_fd, True)
            self._proc.stdin.close()
        status = self._proc.wait()
        if self.error is None and status != 0:
            self._failed(None)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()

    def _failed(self, exc: OSError | None) -> None:
        """Record why the child stopped: the error it reported on stderr
        (``errno reason``), else what the crawl saw."""
        status = self._proc.wait()
        said = self._proc.stderr.read() if self._proc.stderr is not None else b""
        lines = (said or b"").decode("utf-8", "replace").strip().splitlines()
        number, _, reason = lines[-1].partition(" ") if lines else ("", "", "")
        if number.isdigit() and reason:
            self.error = OSError(int(number), reason)
        else:
            why = str(exc) if exc is not None else _describe_exit(status)
            self.error = OSError(exc.errno if exc else None, f"the WARC writer stopped ({why})")


def _describe_exit(status: int) -> str:
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-status).name}"
    return f"exit status {status}"


def with_pipe_size(fd: int) -> None:
    """Ask for a bigger pipe buffer where the platform has ``F_SETPIPE_SZ``."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setpipe is not None:
        # Over /proc/sys/fs/pipe-max-size: keep the default size.
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setpipe, _PIPE_SIZE)


def serve(in_fd: int, ack_fd: int, writer: WarcWriter) -> None:
    """The child's loop: read frames, write their exchanges, ack each batch."""
    buffer = bytearray()
    written = 0
    while True:
        chunk = os.read(in_fd, _READ_SIZE)
        if not chunk:
            return  # the crawl closed the pipe (or died): a torn frame is dropped
        buffer += chunk
        view = memoryview(buffer)
        start = 0
        while len(buffer) - start >= _FRAME.size:
            meta_length, body_length = _FRAME.unpack_from(buffer, start)
            meta_end = start + _FRAME.size + meta_length
            end = meta_end + body_length
            if end > len(buffer):
                break
            (url, status, headers, skipped, date, protocol, via, record_id, revisit, sent) = (
                marshal.loads(view[start + _FRAME.size : meta_end])
            )
            result = FetchResult(
                url, status, dict(headers), bytes(view[meta_end:end]), 0.0, skipped, protocol
            )
            write = functools.partial(
                writer.write_capture,
                url=url,
                result=result,
                protocol=protocol,
                date=date,
                metadata=None if via is None else {"via": via},
                record_id=record_id,
                request_headers=None if sent is None else dict(sent),
            )
            try:
                write(revisit_of=None if revisit is None else RevisitOf(*revisit))
            except ValueError:  # a body whose digest is not the one named: store it
                write()
            written += 1
            start = end
            if ack_fd >= 0:  # at once: the page's record waits for it
                try:
                    os.write(ack_fd, _ACK.pack(written))
                except BrokenPipeError:  # the crawl is gone: write what it sent
                    ack_fd = -1
        view.release()
        if start:
            del buffer[:start]


def main(argv: list[str]) -> int:
    settings = json.loads(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # end only at end-of-file
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    file = os.fdopen(settings["fd"], "ab", buffering=0)
    writer = WarcWriter(
        file,
        filename=os.path.basename(settings["path"]),
        request_headers=settings["request_headers"],
        compresslevel=settings["compresslevel"],
        dedup=settings["dedup"],
        warcinfo_id=settings["warcinfo_id"],
        fresh_start=settings.get("fresh_start"),
    )
    try:
        serve(sys.stdin.fileno(), sys.stdout.fileno(), writer)
    except OSError as exc:
        print(f"{exc.errno or 0} {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    finally:
        with contextlib.suppress(OSError):
            writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
