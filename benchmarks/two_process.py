"""One crawl split over P OS processes by URL hash: a prototype, and its benchmark.

Question (issue 6, item 6): on a 2-core machine, does ONE crawl partitioned over TWO
processes beat one process? Not a test, not part of the package: a measurement, built
from the package's real pieces (``open_curl_fetcher``, ``extract_links``, ``Scope``,
``Frontier``) around a deliberately small engine.

Rules of the partitioned crawl
------------------------------
1. Process ``i`` of ``P`` owns the canonical URLs with ``crc32(url) % P == i`` (a hash
   every interpreter agrees on, unlike ``hash()``). Only the owner admits, fetches,
   parses and records a URL; its ``Frontier`` is its part of the seen set. So a URL is
   fetched at most once overall because it is fetched at most once by its owner.
2. A page's links are split by owner. Own links go to the local frontier. Links owned
   by process ``j`` go to ``j``'s outbox (``j``'s frontier checks the scope, only for
   URLs it has not seen: cheaper than checking every link here); a sender task writes an
   outbox as one batch of newline-separated lines (``>DEPTH REFERRER`` then the page's
   URLs) with ``trio.SocketStream.send_all`` over a socketpair, taking everything that
   piled up while the previous batch was on the wire. A receiver task splits the byte
   stream into lines and offers them to the local frontier (``Frontier.discover``), which
   drops the ones already seen.
3. Counters, in URL lines: ``sent`` grows when lines leave the outbox for the wire (in
   the same step), ``received`` grows when received lines have been offered to the
   frontier and what they admitted is queued (in the same step, no checkpoint between).
   A process is *idle* when its frontier has no unfinished URL (queued or fetching) and
   its outboxes are empty. An idle process can only become busy by receiving a line.
4. Every process tells the parent ``(idle, sent, received)``: on its own whenever it is
   idle and that triple differs from the last one it pushed, and at once whenever the
   parent asks (a "confirm" with a wave number). All its control messages go through
   one writer, so the parent gets them in the order their snapshots were taken.
5. The parent (``TerminationDetector``, pure) ends the crawl by double counting
   (Mattern's four-counter method): when the latest snapshots of all processes are
   idle and sum(sent) == sum(received), it asks everyone for a fresh snapshot (wave 2).
   If every answer is idle and equal to the snapshot it had, it sends "stop"; otherwise
   it waits for the next pushed snapshots. No timers, no polling.

Why the double count is exact. Let t be the moment the parent sends the confirm. Every
snapshot of the first set was taken before t (the parent had received it), every answer
after t (it answers the confirm). Counters only grow, so if a process's answer equals its
earlier snapshot, its counters were constant over that interval, in particular at t;
summed, S(t) = R(t). On each link, lines received never exceed lines sent, so equal sums
mean every link is empty: no line was in transit at t (sent, not yet received, including
bytes in the kernel or in a receiver's partial line). A process idle at its snapshot and
with ``received`` unchanged since cannot have become busy (only a received line makes
work, rule 3), so it was idle at t. All idle and nothing in transit is final: nothing
can ever make work again. One set of snapshots alone is not enough: they are taken at
different times, and a process can receive, become busy and send between its snapshot
and another's (A idle (0,0); B sends m to A; A receives m, sends m' to B; B receives m'
and reports idle (1,1); sums: 1 = 1 while A is busy). The second wave refutes exactly
that: A's answer differs from (0,0).

Measured configurations (each run spawned and reaped by this script, ``os.wait4`` gives
each process's own CPU time and peak RSS; wall time runs from before the first spawn to
the last reap, so start-up counts as in ``run.py``):

- ``cli``: the real ``trio-crawl`` CLI (``-w W -q`` plus ``--cli-args``).
- ``proto:P[:W]``: this prototype over P processes, W crawler tasks (and libcurl handles)
  in each. ``proto:1`` is the same code in one process (the coordination is still there:
  one idle report and one confirm round at the end).
- ``indep:K[:W]``: K independent one-process crawls of the whole site at once: what
  the processes cost each other on the machine, without any exchange (a control).
- ``+tN`` after proto/indep: parse in up to N threads instead of inline.

Every run is checked for exactness with ``run.verify`` (every expected URL fetched
exactly once overall, nothing else, no error record). Other programs' CPU use during
each run is measured from ``/proc/stat``; the machine is shared, and a run during which
they used more than ``QUIET`` of a core on average is reported but left out of the
"quiet" medians. ``--self-check`` runs ``simulate``: the detector against thousands of
random interleavings of a model of the crawl.

Usage: python benchmarks/two_process.py [--pages N] [--rounds R] [--configs ...]
       python benchmarks/two_process.py --self-check
Findings: TWO_PROCESS.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import enum
import json
import math
import os
import random
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bytecode import trio_crawl_command
from exactness import Fetches, Verdict, read_trio_crawl, verify
from generate_site import SiteParams, ensure_site, read_expected
from measure import (
    Measured,
    alternating,
    machine_busy_s,
    machine_info,
    machine_line,
    output_dir,
    run_measured,
    text_table,
)
from servers import Server, find_nginx, open_nginx, warm_page_cache

from trio_crawl.core.frontier import Entry, Frontier
from trio_crawl.core.http import FetchConfig
from trio_crawl.core.parse import extract_links
from trio_crawl.core.scope import Scope
from trio_crawl.errors import FetchError
from trio_crawl.fetch.curl import CurlFetcher, open_curl_fetcher

#: A run is "quiet" when other programs used at most this many cores on average.
QUIET = 0.1

DEFAULT_CONFIGS = ("cli", "proto:1", "proto:2", "proto:2:8")


def owner(url: str, parts: int) -> int:
    """The index of the process that owns canonical ``url`` (rule 1)."""
    return zlib.crc32(url.encode()) % parts


# -- pure pieces ------------------------------------------------------------------------


class LineSplitter:
    """Complete ``\\n``-terminated lines out of a byte stream cut anywhere.

    ``feed`` returns the complete lines (decoded; canonical URLs are ASCII) and keeps
    the unterminated tail for the next call."""

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[str]:
        cut = data.rfind(b"\n")
        if cut < 0:
            self._tail += data
            return []
        head = self._tail + data[:cut] if self._tail else data[:cut]
        self._tail = data[cut + 1 :]
        return head.decode().split("\n")

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held back."""
        return len(self._tail)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One process's state as it reported it (rule 4)."""

    idle: bool
    sent: int
    received: int

    def line(self, wave: int) -> str:
        return f"R {wave} {int(self.idle)} {self.sent} {self.received}\n"

    @staticmethod
    def parse(line: str) -> tuple[int, Snapshot]:
        """(wave, snapshot) from a control line ``R WAVE IDLE SENT RECEIVED``."""
        tag, wave, idle, sent, received = line.split()
        if tag != "R":
            raise ValueError(f"not a report: {line!r}")
        return int(wave), Snapshot(idle == "1", int(sent), int(received))


class Decision(enum.Enum):
    """What the parent does after a report (``TerminationDetector.report``)."""

    WAIT = "wait"  # nothing yet
    CONFIRM = "confirm"  # ask every process for a snapshot, wave ``detector.wave``
    STOP = "stop"  # the crawl is over: tell every process to stop


class TerminationDetector:
    """Double-counting termination detection over ``parts`` processes (rule 5).

    Pure: feed it every report in the order each process's reports arrive
    (``wave`` 0 for a pushed report, else the wave it answers); it says what to do.
    ``waves`` counts the confirm rounds asked for.
    """

    def __init__(self, parts: int) -> None:
        if parts < 1:
            raise ValueError("parts must be >= 1")
        self.parts = parts
        self.latest: list[Snapshot | None] = [None] * parts
        self.wave = 0
        self._basis: tuple[Snapshot, ...] | None = None  # first count of the open wave
        self._answers: dict[int, Snapshot] = {}
        self.stopped = False

    @property
    def waves(self) -> int:
        return self.wave

    def report(self, index: int, wave: int, snapshot: Snapshot) -> Decision:
        if self.stopped:
            return Decision.WAIT
        # A process's messages arrive in the order it took them: each is its newest.
        self.latest[index] = snapshot
        if self._basis is not None and wave == self.wave:
            self._answers[index] = snapshot
            if len(self._answers) == self.parts:
                basis, self._basis = self._basis, None
                answers = tuple(self._answers[i] for i in range(self.parts))
                if answers == basis and all(s.idle for s in answers):
                    self.stopped = True
                    return Decision.STOP
        if self._basis is None and self._quiet():
            self.wave += 1
            self._basis = tuple(s for s in self.latest if s is not None)
            self._answers = {}
            return Decision.CONFIRM
        return Decision.WAIT

    def _quiet(self) -> bool:
        """The first count: everyone idle, as many lines received as sent."""
        snaps = [s for s in self.latest if s is not None]
        return (
            len(snaps) == self.parts
            and all(s.idle for s in snaps)
            and sum(s.sent for s in snaps) == sum(s.received for s in snaps)
        )


# -- checking the detector: a randomized simulation (pure) ---------------------------


@dataclass(slots=True)
class SimResult:
    """What one simulated crawl showed (``simulate``)."""

    steps: int
    messages: int
    waves: int
    #: reports after which one count alone (all idle, sums equal) would have stopped
    #: a crawl that was still running
    single_count_errors: int


def simulate(rng: random.Random, parts: int, budget: int) -> SimResult:
    """Run ``TerminationDetector`` against a randomly interleaved model of the crawl.

    Processes do units of work that make local work and messages to peers (until
    ``budget`` is spent); a delivered message is counted as received and makes work
    half the time (the other half is a URL already seen). Every channel is FIFO with
    unbounded delay: peer links, reports up, confirms down. Processes push a snapshot
    when idle and changed, answer confirms at once (rules 3-5). Raises AssertionError if
    the detector says STOP while any process is busy or any message is in transit, or
    if it never says STOP.
    """
    work = [0] * parts
    work[0] = 1  # the start URL's owner
    sent = [0] * parts
    received = [0] * parts
    pushed: list[Snapshot | None] = [None] * parts
    links = {(i, j): collections.deque[int]() for i in range(parts) for j in range(parts)}
    up = [collections.deque[tuple[int, Snapshot]]() for _ in range(parts)]
    down = [collections.deque[int]() for _ in range(parts)]
    detector = TerminationDetector(parts)
    messages = errors = steps = 0

    def snap(i: int) -> Snapshot:
        return Snapshot(work[i] == 0, sent[i], received[i])

    def terminated() -> bool:
        return not any(work) and not any(links.values())

    while True:
        steps += 1
        actions: list[tuple[str, int, int]] = []
        for i in range(parts):
            if work[i]:
                actions.append(("work", i, 0))
            elif snap(i) != pushed[i]:
                actions.append(("push", i, 0))
            if up[i]:
                actions.append(("up", i, 0))
            if down[i]:
                actions.append(("down", i, 0))
        actions += [("deliver", i, j) for (i, j), q in links.items() if q]
        assert actions, "no step possible, and the detector never said STOP"
        kind, i, j = rng.choice(actions)
        if kind == "work":
            work[i] -= 1
            for _ in range(rng.randint(0, 3)):
                if budget <= 0:
                    break
                budget -= 1
                peer = rng.randrange(parts)
                if peer == i:
                    work[i] += 1
                else:
                    links[i, peer].append(1)
                    sent[i] += 1  # in the same step (rule 3)
                    messages += 1
        elif kind == "deliver":
            links[i, j].popleft()
            work[j] += rng.random() < 0.5
            received[j] += 1  # in the same step as the work it made (rule 3)
        elif kind == "push":
            pushed[i] = snap(i)
            up[i].append((0, snap(i)))
        elif kind == "down":
            up[i].append((down[i].popleft(), snap(i)))
        else:  # "up": the parent reads a report
            wave, s = up[i].popleft()
            decision = detector.report(i, wave, s)
            latest = detector.latest
            if (
                all(x is not None and x.idle for x in latest)
                and sum(x.sent for x in latest if x) == sum(x.received for x in latest if x)
                and not terminated()
            ):
                errors += 1
            if decision is Decision.CONFIRM:
                for q in down:
                    q.append(detector.wave)
            elif decision is Decision.STOP:
                assert terminated(), f"STOP while running: work={work}"
                return SimResult(steps, messages, detector.waves, errors)


def self_check(runs: int = 3000) -> None:
    """``simulate`` over many seeds and sizes; print what one count alone would do."""
    errors = stops = 0
    for seed in range(runs):
        rng = random.Random(seed)
        result = simulate(rng, parts=1 + seed % 3, budget=rng.randint(0, 60))
        stops += 1
        errors += result.single_count_errors
    print(
        f"self-check: {stops} simulated crawls, the double count stopped each exactly "
        f"after termination; one count alone would have stopped a running crawl "
        f"{errors} times"
    )
    splitter = LineSplitter()
    data = b">0 http://h/\nhttp://h/a\nhttp://h/b\n"
    got = [line for k in range(len(data)) for line in splitter.feed(data[k : k + 1])]
    assert got == [">0 http://h/", "http://h/a", "http://h/b"], got
    assert splitter.pending == 0


# -- one crawler process (trio) -----------------------------------------------------


def _stream(fd: int) -> trio.SocketStream:
    sock = socket.socket(fileno=fd)
    sock.setblocking(False)
    return trio.SocketStream(trio.socket.from_stdlib_socket(sock))


class Partition:
    """The crawl of the URLs one process owns: frontier, queue, outboxes, counters.

    Crawler tasks take entries from ``queue`` (parking in ``_work`` when it is empty),
    fetch, parse, and route links (rules 1-2). See the module docstring for the
    counters and the idle condition.
    """

    def __init__(self, index: int, parts: int, start_url: str, scope: Scope, out: TextIO) -> None:
        self.index = index
        self.parts = parts
        self.scope = scope
        self.out = out
        self.frontier = Frontier(in_scope=scope.allows)
        self.queue: collections.deque[Entry] = collections.deque()
        self._work = trio.lowlevel.ParkingLot()
        self.peers = [j for j in range(parts) if j != index]
        self.outbox: dict[int, list[str]] = {j: [] for j in self.peers}
        self.outbox_urls: dict[int, int] = dict.fromkeys(self.peers, 0)
        self._outbox_ready = {j: trio.lowlevel.ParkingLot() for j in self.peers}
        self.sent = 0
        self.received = 0
        self.batches_sent = 0
        self.bytes_sent = 0
        self.pages = 0
        self.errors = 0
        self._changed = trio.Event()
        self._control_send, self._control_out = trio.open_memory_channel[str](math.inf)
        self.stopping = False
        #: parse in worker threads (libxml2 releases the GIL while it parses), or not
        self.parse_limiter: trio.CapacityLimiter | None = None
        self.last_page_at = 0.0
        self.stop_at = 0.0
        if owner(start_url, parts) == index:
            self._queue_entries(self.frontier.add_start(start_url))

    # -- state --------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        idle = self.frontier.unfinished == 0 and not any(self.outbox.values())
        return Snapshot(idle, self.sent, self.received)

    def _note_change(self) -> None:
        """Wake the reporter if this process is idle now. Only a finished page, an outbox
        taken or a received batch can make it idle, and only a received batch changes its
        counters while idle: those call this, so no idle snapshot goes unreported, and a
        busy process pays no wake-up per page."""
        if self.frontier.unfinished == 0 and not any(self.outbox.values()):
            self._changed.set()

    def _queue_entries(self, entries: list[Entry]) -> None:
        if entries:
            self.queue.extend(entries)
            self._work.unpark(count=len(entries))

    # -- crawling -----------------------------------------------------------------

    async def crawler(self, fetcher: CurlFetcher) -> None:
        queue, frontier = self.queue, self.frontier
        while True:
            if not queue:
                await self._work.park()
                continue
            entry = queue.popleft()
            if not frontier.start(entry):
                continue
            record: dict[str, Any] = {"url": entry.url, "depth": entry.depth}
            links: list[str] = []
            t0 = time.perf_counter()
            try:
                result = await fetcher.fetch(entry.url)
            except FetchError as exc:
                record.update(status=None, error={"kind": exc.kind, "message": str(exc)})
                self.errors += 1
            else:
                content_type = result.headers.get("content-type")
                if result.status == 200 and self.parse_limiter is not None:
                    links = await trio.to_thread.run_sync(
                        extract_links,
                        result.body,
                        entry.url,
                        content_type,
                        limiter=self.parse_limiter,
                    )
                elif result.status == 200:
                    links = extract_links(result.body, entry.url, content_type)
                record.update(status=result.status, error=None, content_type=content_type)
            record.update(
                referrer=entry.referrer,
                elapsed_ms=round((time.perf_counter() - t0) * 1000, 2),
                links=len(links),
                attempts=1,
            )
            self._route(entry, links)
            self.pages += 1
            self.last_page_at = time.time()
            self.out.write(json.dumps(record, separators=(",", ":")) + "\n")
            self.out.flush()
            self._note_change()

    def _route(self, entry: Entry, links: list[str]) -> None:
        """Finish ``entry`` with its own links; queue the rest for their owners."""
        parts, me = self.parts, self.index
        if parts == 1:
            local = links
        else:
            local = []
            remote: dict[int, list[str]] = {}
            for url in links:
                j = zlib.crc32(url.encode()) % parts
                if j == me:
                    local.append(url)
                else:  # the owner's frontier checks the scope, once per new URL
                    remote.setdefault(j, []).append(url)
            for j, urls in remote.items():
                box = self.outbox[j]
                box.append(f">{entry.depth} {entry.url}")
                box.extend(urls)
                self.outbox_urls[j] += len(urls)
                self._outbox_ready[j].unpark()
        self._queue_entries(self.frontier.finish(entry, local))

    # -- exchange with peers (rule 2) -----------------------------------------------

    async def sender(self, peer: int, stream: trio.SocketStream) -> None:
        ready = self._outbox_ready[peer]
        while True:
            if not self.outbox[peer]:
                await ready.park()
                continue
            lines, self.outbox[peer] = self.outbox[peer], []
            self.sent += self.outbox_urls[peer]  # in the same step (rule 3)
            self.outbox_urls[peer] = 0
            self._note_change()
            data = ("\n".join(lines) + "\n").encode()
            await stream.send_all(data)
            self.batches_sent += 1
            self.bytes_sent += len(data)

    async def receiver(self, peer: int, stream: trio.SocketStream) -> None:
        splitter = LineSplitter()
        depth, referrer = 0, ""
        discover = self.frontier.discover
        while True:
            data = await stream.receive_some(1 << 16)
            if not data:
                if not self.stopping and splitter.pending:
                    raise RuntimeError(f"peer {peer} closed mid-line")
                return  # the peer stopped (it exits only when told to)
            urls: list[str] = []
            admitted: list[Entry] = []
            count = 0
            for line in splitter.feed(data):
                if line[0] == ">":
                    if urls:
                        admitted += discover(urls, depth, referrer)
                        count += len(urls)
                        urls = []
                    d, _, referrer = line[1:].partition(" ")
                    depth = int(d)
                else:
                    urls.append(line)
            if urls:
                admitted += discover(urls, depth, referrer)
                count += len(urls)
            self._queue_entries(admitted)
            self.received += count  # in the same step as the queueing (rule 3)
            self._note_change()

    # -- talking to the parent (rules 4-5) ------------------------------------------

    async def reporter(self) -> None:
        """Push a snapshot whenever idle and different from the last one pushed."""
        last: Snapshot | None = None
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            snap = self.snapshot()
            if snap.idle and snap != last:
                self._control_send.send_nowait(snap.line(0))
                last = snap

    async def control_writer(self, stream: trio.SocketStream) -> None:
        async for line in self._control_out:
            await stream.send_all(line.encode())

    async def control_reader(self, stream: trio.SocketStream, cancel: trio.CancelScope) -> None:
        splitter = LineSplitter()
        while True:
            data = await stream.receive_some(4096)
            if not data:
                raise RuntimeError("the parent closed the control channel before 'stop'")
            for line in splitter.feed(data):
                if line.startswith("C "):
                    self._control_send.send_nowait(self.snapshot().line(int(line[2:])))
                elif line == "S":
                    self.stop_at = time.time()
                    self.stopping = True
                    cancel.cancel()
                    return
                else:
                    raise RuntimeError(f"unknown control line {line!r}")


def run_worker(options: dict[str, Any], imported_at: float) -> None:
    """One crawler process: crawl its partition until the parent says stop."""
    with open(options["output"], "w") as out:
        part = trio.run(_crawl_partition, options, out)
    spawned = options["spawned_at"]
    # Told to stop: the detector says nothing can be left. Check it loudly.
    if part.frontier.unfinished or any(part.outbox.values()) or part.queue:
        raise RuntimeError(f"stopped with work left: {part.frontier!r}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    stats = {
        "index": part.index,
        "pages": part.pages,
        "errors": part.errors,
        "seen": len(part.frontier.seen),
        "sent": part.sent,
        "received": part.received,
        "batches_sent": part.batches_sent,
        "bytes_sent": part.bytes_sent,
        "cpu_s_at_stop": usage.ru_utime + usage.ru_stime,
        # seconds since the parent spawned this process
        "ready_s": imported_at - spawned,
        "last_page_s": part.last_page_at - spawned,
        "stop_s": part.stop_at - spawned,
    }
    print("STATS " + json.dumps(stats), flush=True)


async def _crawl_partition(options: dict[str, Any], out: TextIO) -> Partition:
    index, parts, workers = options["index"], options["parts"], options["workers"]
    start_url = options["start_url"]
    control = _stream(options["control_fd"])
    peer_streams = {int(j): _stream(fd) for j, fd in options["peer_fds"].items()}
    part = Partition(index, parts, start_url, Scope([start_url]), out)
    if options["parse_threads"]:
        part.parse_limiter = trio.CapacityLimiter(options["parse_threads"])
    config = FetchConfig(max_connections=workers, timeout=options["fetch_timeout"])
    async with open_curl_fetcher(config) as fetcher, trio.open_nursery() as nursery:
        for _ in range(workers):
            nursery.start_soon(part.crawler, fetcher)
        for j, stream in peer_streams.items():
            nursery.start_soon(part.sender, j, stream)
            nursery.start_soon(part.receiver, j, stream)
        nursery.start_soon(part.reporter)
        nursery.start_soon(part.control_writer, control)
        nursery.start_soon(part.control_reader, control, nursery.cancel_scope)
        part._note_change()  # an idle process (nothing owned yet) reports at once
    return part


# -- the parent: spawn, detect termination, measure ---------------------------------


@dataclass(slots=True)
class ProtoResult:
    """One run of the prototype: per-process measurements and the exchange stats."""

    parts: int
    workers: int
    wall_s: float
    processes: list[Measured]
    coordinator_cpu_s: float
    waves: int
    stats: list[dict[str, Any]]
    outputs: list[Path]
    logs: list[Path]


@dataclass(slots=True)
class _Children:
    """Spawned worker processes and the parent's ends of their control sockets."""

    procs: list[subprocess.Popen[bytes]]
    control: list[socket.socket]
    logs: list[Path]
    started: float
    reaped: list[tuple[float, int, resource.struct_rusage] | None]


def _spawn(
    base_url: str,
    parts: int,
    workers: int,
    parse_threads: int,
    outputs: list[Path],
    logs: list[Path],
) -> _Children:
    """Start ``parts`` workers: a control socketpair each, one socketpair per pair of them."""
    child_ends: list[list[int]] = [[] for _ in range(parts)]
    theirs_all: list[socket.socket] = []
    control: list[socket.socket] = []
    peer_fds: list[dict[str, int]] = [{} for _ in range(parts)]
    for i in range(parts):
        mine, theirs = socket.socketpair()
        control.append(mine)
        theirs_all.append(theirs)
        child_ends[i].append(theirs.fileno())
    for i in range(parts):
        for j in range(i + 1, parts):
            a, b = socket.socketpair()
            theirs_all += [a, b]
            peer_fds[i][str(j)] = a.fileno()
            peer_fds[j][str(i)] = b.fileno()
            child_ends[i].append(a.fileno())
            child_ends[j].append(b.fileno())
    procs: list[subprocess.Popen[bytes]] = []
    started = time.perf_counter()
    try:
        for i in range(parts):
            options = {
                "index": i,
                "parts": parts,
                "workers": workers,
                "start_url": base_url,
                "control_fd": child_ends[i][0],
                "peer_fds": peer_fds[i],
                "output": str(outputs[i]),
                "fetch_timeout": 30.0,
                "parse_threads": parse_threads,
                "spawned_at": time.time(),
            }
            with logs[i].open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, __file__, "--worker", json.dumps(options)],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        pass_fds=child_ends[i],
                    )
                )
    except BaseException:
        for proc in procs:
            proc.kill()
            proc.wait()
        raise
    finally:
        for sock in theirs_all:  # the children have their copies
            sock.close()
    return _Children(procs, control, logs, started, [None] * parts)


async def _coordinate(children: _Children, detector: TerminationDetector) -> None:
    """Relay reports to ``detector``, confirm and stop as it says, reap the children."""
    parts = len(children.procs)
    streams = [_stream(sock.detach()) for sock in children.control]
    stop_sent = False

    async def reap(i: int) -> None:
        proc = children.procs[i]
        _pid, status, usage = await trio.to_thread.run_sync(
            os.wait4, proc.pid, 0, abandon_on_cancel=True
        )
        children.reaped[i] = (time.perf_counter() - children.started, status, usage)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by hand
        if not stop_sent:
            raise RuntimeError(
                f"worker {i} exited ({proc.returncode}) before 'stop': see {children.logs[i]}"
            )

    async def broadcast(line: str) -> None:
        for stream in streams:
            await stream.send_all(line.encode())

    async def listen(i: int, send: trio.MemorySendChannel[tuple[int, str]]) -> None:
        splitter = LineSplitter()
        async with send:
            while data := await streams[i].receive_some(4096):
                for line in splitter.feed(data):
                    send.send_nowait((i, line))

    try:
        async with trio.open_nursery() as nursery:
            for i in range(parts):
                nursery.start_soon(reap, i)
            send, receive = trio.open_memory_channel[tuple[int, str]](math.inf)
            async with send:
                for i in range(parts):
                    nursery.start_soon(listen, i, send.clone())
            async for i, line in receive:
                if stop_sent:
                    continue
                wave, snap = Snapshot.parse(line)
                decision = detector.report(i, wave, snap)
                if decision is Decision.CONFIRM:
                    await broadcast(f"C {detector.wave}\n")
                elif decision is Decision.STOP:
                    stop_sent = True
                    await broadcast("S\n")
    finally:
        for stream in streams:
            await stream.aclose()


def run_crawls(
    base_url: str,
    crawls: Sequence[int],
    workers: int,
    out_dir: Path,
    tag: str,
    timeout: float,
    parse_threads: int = 0,
) -> list[ProtoResult]:
    """Run one crawl of ``base_url`` per item of ``crawls`` (its number of processes), all
    at the same time; return how each went. ``[2]`` is one crawl over two processes,
    ``[1, 1]`` two independent single-process crawls (a control experiment).

    Every child is killed if anything fails or ``timeout`` seconds pass."""
    names = [f"{tag}-c{k}" if len(crawls) > 1 else tag for k in range(len(crawls))]
    outputs = [
        [out_dir / f"{n}-w{i}.jsonl" for i in range(p)] for n, p in zip(names, crawls, strict=True)
    ]
    logs = [
        [out_dir / f"{n}-w{i}.log" for i in range(p)] for n, p in zip(names, crawls, strict=True)
    ]
    detectors = [TerminationDetector(p) for p in crawls]
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    groups: list[_Children] = []

    async def main() -> None:
        with trio.fail_after(timeout):
            async with trio.open_nursery() as nursery:
                for children, detector in zip(groups, detectors, strict=True):
                    nursery.start_soon(_coordinate, children, detector)

    try:
        for k, parts in enumerate(crawls):
            groups.append(_spawn(base_url, parts, workers, parse_threads, outputs[k], logs[k]))
        trio.run(main)
    except BaseException:
        for children in groups:
            for proc in children.procs:
                if proc.returncode is None:
                    proc.kill()
        raise
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    coordinator = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
    results = []
    for k, children in enumerate(groups):
        measured = []
        for got in children.reaped:
            assert got is not None
            wall, status, usage = got
            measured.append(
                Measured(
                    exit_code=os.waitstatus_to_exitcode(status),
                    wall_s=wall,
                    cpu_s=usage.ru_utime + usage.ru_stime,
                    peak_rss_mb=usage.ru_maxrss / 1024,
                    timed_out=False,
                )
            )
        stats = []
        for log in logs[k]:
            text = log.read_text(errors="replace")
            lines = [x for x in text.splitlines() if x.startswith("STATS ")]
            stats.append(json.loads(lines[-1][6:]) if lines else {})
        results.append(
            ProtoResult(
                parts=crawls[k],
                workers=workers,
                wall_s=max(m.wall_s for m in measured),
                processes=measured,
                coordinator_cpu_s=coordinator / len(crawls),
                waves=detectors[k].waves,
                stats=stats,
                outputs=outputs[k],
                logs=logs[k],
            )
        )
    return results


def nginx_cpu_s() -> float:
    """CPU seconds used so far by the nginx started by this process (master and workers),
    read from ``/proc`` (0.0 where there is no ``/proc``): the server's share of the two
    cores is part of the answer."""
    procs: dict[int, tuple[int, bytes, float]] = {}  # pid -> (ppid, cmdline, cpu s)
    tick = os.sysconf("SC_CLK_TCK")
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                if not cmdline.startswith(b"nginx:"):
                    continue
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # after "(comm)": state ppid ... utime (field 14) stime (15)
            procs[int(name)] = (
                int(fields[1]),
                cmdline,
                (int(fields[11]) + int(fields[12])) / tick,
            )
    masters = {pid for pid, (ppid, _, _) in procs.items() if ppid == os.getpid()}
    return sum(cpu for pid, (ppid, _, cpu) in procs.items() if pid in masters or ppid in masters)


def settle(limit_s: float, window_s: float = 0.5) -> float:
    """Wait (at most ``limit_s``) until other programs use at most ``QUIET`` core over a
    ``window_s`` window; return the cores they used in the last window."""
    deadline = time.monotonic() + limit_s
    while True:
        busy0 = machine_busy_s()
        time.sleep(window_s)
        used = (machine_busy_s() - busy0) / window_s
        if used <= QUIET or time.monotonic() >= deadline:
            return used


# -- the benchmark ------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    """One run of one configuration, as the table shows it."""

    config: str
    round: int
    verdict: Verdict
    ok: bool
    wall_s: float
    cpu_s: float  # sum over the crawl's processes (and the coordinator for proto)
    rss_mb: list[float]
    extra: dict[str, Any] = field(default_factory=dict)
    nginx_cpu_s: float = 0.0  # the server's CPU during the run (not in cpu_s)
    others_cpu_s: float = 0.0  # CPU other programs used during the run
    label: str = ""  # for the round column of a summary row

    @property
    def quiet(self) -> bool:
        """Other programs used less than a tenth of a core on average during the run."""
        return self.others_cpu_s <= QUIET * self.wall_s

    @property
    def pages_per_s(self) -> float:
        return self.verdict.fetched / self.wall_s if self.wall_s else 0.0


@dataclass(frozen=True, slots=True)
class Config:
    """A parsed ``--configs`` item (``parse_config``)."""

    kind: str  # "cli", "proto" or "indep"
    count: int  # proto: processes of the one crawl; indep: independent crawls
    workers: int  # crawler tasks per process
    parse_threads: int = 0  # proto/indep: parse in up to this many threads (0: inline)


def parse_config(spec: str, default_workers: int) -> Config:
    """``cli``; ``proto:P[:W]``: one crawl over P processes of W tasks; ``indep:K[:W]``: K
    whole, independent one-process crawls at once (a control: what two processes cost
    each other, without any exchange). A ``+tN`` suffix on proto/indep parses pages in
    up to N worker threads (``trio.to_thread``) instead of inline."""
    if spec == "cli":
        return Config("cli", 1, default_workers)
    body, _, threads = spec.partition("+t")
    kind, _, rest = body.partition(":")
    if kind not in ("proto", "indep") or not rest:
        raise ValueError(f"unknown configuration {spec!r} (cli, proto:P[:W] or indep:K[:W])")
    p, _, w = rest.partition(":")
    config = Config(kind, int(p), int(w) if w else default_workers, int(threads or 0))
    if config.count < 1 or config.workers < 1 or config.parse_threads < 0:
        raise ValueError(f"bad configuration {spec!r}")
    return config


def merged_fetches(paths: Iterable[Path]) -> Fetches:
    fetched: list[str] = []
    errors: list[str] = []
    for path in paths:
        f = read_trio_crawl(path)
        fetched += f.fetched
        errors += f.errors
    return Fetches(fetched, errors)


def run_config(
    spec: str, rnd: int, server: Server, expected: list[str], args: Any, out: Path
) -> Row:
    config = parse_config(spec, args.workers)
    kind, count, workers = config.kind, config.count, config.workers
    tag = spec.replace(":", "_").replace("+", "_") + f"-r{rnd}"
    if kind == "cli":
        output = out / f"{tag}.jsonl"
        command = [
            *trio_crawl_command(None),
            server.base_url,
            "-w",
            str(workers),
            "-o",
            str(output),
            "-q",
            *shlex.split(args.cli_args),
        ]
        m = run_measured(command, timeout=args.timeout, log_path=out / f"{tag}.log")
        verdict = verify(read_trio_crawl(output), expected, server.base_url)
        return Row(
            spec,
            rnd,
            verdict,
            m.exit_code == 0 and verdict.exact,
            m.wall_s,
            m.cpu_s,
            [m.peak_rss_mb],
            {"command": shlex.join(command)},
        )
    crawls = [count] if kind == "proto" else [1] * count
    results = run_crawls(
        server.base_url, crawls, workers, out, tag, args.timeout, config.parse_threads
    )
    verdicts = [verify(merged_fetches(r.outputs), expected, server.base_url) for r in results]
    verdict = Verdict(
        fetched=sum(v.fetched for v in verdicts),
        distinct=sum(v.distinct for v in verdicts),
        errors=sum(v.errors for v in verdicts),
        missing=[u for v in verdicts for u in v.missing],
        duplicates=[u for v in verdicts for u in v.duplicates],
        unexpected=[u for v in verdicts for u in v.unexpected],
    )
    processes = [m for r in results for m in r.processes]
    stats = [s for r in results for s in r.stats]
    ok = verdict.exact and all(m.exit_code == 0 for m in processes)
    coordinator = sum(r.coordinator_cpu_s for r in results)
    extra = {
        "pages_per_process": [s.get("pages") for s in stats],
        "ready_s": [round(s.get("ready_s", 0), 2) for s in stats],
        "last_page_s": [round(s.get("last_page_s", 0), 2) for s in stats],
        "stop_s": [round(s.get("stop_s", 0), 3) for s in stats],
        "urls_sent": sum(s.get("sent", 0) for s in stats),
        "batches": sum(s.get("batches_sent", 0) for s in stats),
        "mb_sent": sum(s.get("bytes_sent", 0) for s in stats) / 1e6,
        "waves": [r.waves for r in results],
        "coordinator_cpu_s": coordinator,
        "cpu_per_process": [round(m.cpu_s, 2) for m in processes],
    }
    return Row(
        spec,
        rnd,
        verdict,
        ok,
        max(r.wall_s for r in results),
        sum(m.cpu_s for m in processes) + coordinator,
        [m.peak_rss_mb for m in processes],
        extra,
    )


def _why(row: Row) -> str:
    v = row.verdict
    parts = [
        f"{len(v.missing)} missing" if v.missing else "",
        f"{len(v.duplicates)} twice" if v.duplicates else "",
        f"{len(v.unexpected)} unexpected" if v.unexpected else "",
        f"{v.errors} errors" if v.errors else "",
    ]
    return "FAILED " + ", ".join(p for p in parts if p) if not row.ok else "yes"


def format_rows(rows: Sequence[Row]) -> str:
    header = ["configuration", "round", "pages", "exact-once OK?", "wall s", "pages/s"]
    header += ["CPU s (sum)", "CPU ms/page", "nginx CPU s", "others CPU s"]
    header += ["peak RSS MB / process"]
    table = [header]
    for r in rows:
        table.append(
            [
                r.config,
                r.label or str(r.round),
                str(r.verdict.fetched),
                _why(r),
                f"{r.wall_s:.2f}",
                f"{r.pages_per_s:.0f}",
                f"{r.cpu_s:.1f}",
                f"{1000 * r.cpu_s / max(r.verdict.fetched, 1):.3f}",
                f"{r.nginx_cpu_s:.1f}",
                f"{r.others_cpu_s:.1f}",
                " / ".join(f"{x:.0f}" for x in r.rss_mb),
            ]
        )
    return text_table(header, table[1:], left=(0, 3))


def median_row(rows: Sequence[Row], label: str) -> Row:
    """Medians of wall s, CPU s and each process's RSS; the median run's verdict."""
    by_wall = sorted(rows, key=lambda r: r.wall_s)
    mid = by_wall[len(by_wall) // 2]
    n = len(rows[0].rss_mb)
    return Row(
        mid.config,
        0,
        mid.verdict,
        all(r.ok for r in rows),
        statistics.median(r.wall_s for r in rows),
        statistics.median(r.cpu_s for r in rows),
        [statistics.median(r.rss_mb[i] for r in rows) for i in range(n)],
        mid.extra,
        statistics.median(r.nginx_cpu_s for r in rows),
        statistics.median(r.others_cpu_s for r in rows),
        label=f"{label} of {len(rows)}",
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--pages", type=int, default=20_000, help="site size (default 20000)")
    p.add_argument("--workers", type=int, default=16, help="crawler tasks per process")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--configs",
        default=",".join(DEFAULT_CONFIGS),
        help="comma-separated: cli, proto:P[:W][+tN], indep:K[:W][+tN] (default %(default)s)",
    )
    p.add_argument("--cli-args", default="--ignore-robots", help="extra trio-crawl arguments")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    p.add_argument(
        "--settle",
        type=float,
        default=3.0,
        help="before each run, wait up to S seconds for other programs to go quiet",
    )
    p.add_argument("--keep-output", type=Path, help="keep outputs and logs here")
    p.add_argument("--json", type=Path, help="write every figure here")
    p.add_argument(
        "--self-check", action="store_true", help="check the termination detector, then exit"
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.config_list = [c.strip() for c in args.configs.split(",") if c.strip()]
    for spec in args.config_list:
        parse_config(spec, args.workers)
    return args


def main(argv: list[str] | None = None) -> int:
    imported_at = time.time()
    args = parse_args(argv)
    if args.worker:
        run_worker(json.loads(args.worker), imported_at)
        return 0
    if args.self_check:
        self_check()
        return 0
    binary = find_nginx()
    if binary is None:
        print("nginx is required (apt-get install -y nginx)", file=sys.stderr)
        return 2
    machine = machine_info()
    print(machine_line(machine))
    site_dir, _ = ensure_site(SiteParams(pages=args.pages))
    expected = read_expected(site_dir)
    warm_page_cache(site_dir)
    print(f"site:    {site_dir}: {len(expected)} expected URLs")
    out_ctx = output_dir(args.keep_output, "trio-crawl-two-process-")
    rows: list[Row] = []
    with out_ctx as out_name, open_nginx(site_dir, binary) as server:
        out = Path(out_name)
        print(f"server:  {server.description} at {server.base_url}")
        for rnd in range(1, args.rounds + 1):
            order = alternating(args.config_list, rnd)
            for spec in order:
                load = os.getloadavg()[0]
                settle(args.settle)
                nginx0, busy0 = nginx_cpu_s(), machine_busy_s()
                row = run_config(spec, rnd, server, expected, args, out)
                row.nginx_cpu_s = nginx_cpu_s() - nginx0
                busy = machine_busy_s() - busy0
                row.others_cpu_s = max(0.0, busy - row.nginx_cpu_s - row.cpu_s)
                row.extra["load1_before"] = load
                rows.append(row)
                more = ""
                if row.extra.get("urls_sent"):
                    e = row.extra
                    more = (
                        f"; sent {e['urls_sent']} URLs in {e['batches']} batches "
                        f"({e['mb_sent']:.1f} MB), pages per process {e['pages_per_process']}"
                    )
                if "waves" in row.extra:
                    e = row.extra
                    more += (
                        f"; confirm waves {e['waves']}; ready at {e['ready_s']} s, "
                        f"last page at {e['last_page_s']} s, stop at {e['stop_s']} s"
                    )
                print(
                    f"  {spec:<10} round {rnd}: {_why(row)}, {row.wall_s:.2f} s, "
                    f"{row.pages_per_s:.0f} pages/s, CPU {row.cpu_s:.1f} s, "
                    f"nginx {row.nginx_cpu_s:.1f} s, others {row.others_cpu_s:.1f} s "
                    f"(load {load:.2f}){more}",
                    flush=True,
                )
    print()
    print(format_rows(rows))
    medians = [median_row([r for r in rows if r.config == c], "median") for c in args.config_list]
    print()
    print(f"medians over {args.rounds} round(s):")
    print(format_rows(medians))
    quiet = [
        median_row(mine, "quiet median")
        for c in args.config_list
        if (mine := [r for r in rows if r.config == c and r.quiet])
    ]
    print()
    print(f"medians over quiet runs only (other programs used <= {QUIET} core on average):")
    print(format_rows(quiet) if quiet else "(no quiet run)")
    if args.json:
        payload = {
            "machine": machine,
            "args": {k: str(v) for k, v in vars(args).items()},
            "runs": [
                {
                    "config": r.config,
                    "round": r.round,
                    "ok": r.ok,
                    "fetched": r.verdict.fetched,
                    "wall_s": r.wall_s,
                    "pages_per_s": r.pages_per_s,
                    "cpu_s": r.cpu_s,
                    "rss_mb": r.rss_mb,
                    "nginx_cpu_s": r.nginx_cpu_s,
                    "others_cpu_s": r.others_cpu_s,
                    **r.extra,
                }
                for r in rows
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
