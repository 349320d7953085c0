"""The parse co-process (engine/parse_process.py): same crawl, another core.

Rules: servers on 127.0.0.1 only (port 0), every wait bounded by
``trio.fail_after(LIMIT)``. The crawls hold their later pages behind a
"gate" page the server answers only once the test says so (a threading
event), so the child is ready, or has parsed pages, exactly when the test
acts: no race decides what a test sees.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from processes import alive, wait_gone

import trio_crawl
from trio_crawl.engine.parse_exchange import PageExchange
from trio_crawl.engine.parse_fork import can_fork
from trio_crawl.engine.parse_places import BYTES_PER_PLACE, WORKERS_PER_PLACE, ChildPlaces
from trio_crawl.engine.parse_process import (
    EARLY_START_PAGES,
    EXIT_WAIT,
    START_AFTER,
    ParseProcess,
    parse_process_for,
    parse_process_wanted,
    starts_after,
)
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, SiteRequest, page

LIMIT = 30
PACKAGE_ROOT = str(Path(__file__).parents[1])


def gated_site(gate: threading.Event, pages: int = 60) -> Site:
    """``/`` links to more pages than ``START_AFTER`` (parsed in the crawl
    while the child starts); each links to ``/gate``, answered once
    ``gate`` is set; behind it, ``pages`` pages in a web of relative,
    absolute, fragment and repeated links (and a ``<base href>``)."""
    front = [f"/front/{i}.html" for i in range(START_AFTER + 2)]

    def gated(request: SiteRequest) -> Response:
        gate.wait(LIMIT)
        return page("/p/0.html", "p/1.html", "#top", "/gate")

    routes: dict[str, Any] = {"/": page(*front)}
    for path in front:
        routes[path] = page("/gate", "/", "../front/0.html")
    routes["/gate"] = gated
    for i in range(pages):
        hrefs = [f"{(i * 7 + 1) % pages}.html", f"/p/{(i * 3 + 2) % pages}.html#s{i}"]
        hrefs += ["./", "../gate", f"?q={i % 5}", "mailto:x@example.com"]
        base = '<base href="/p/sub/">' if i % 9 == 0 else ""
        routes[f"/p/{i}.html"] = page(*hrefs, extra=f'{base}<a href="../{i}.html">up</a>')
        routes[f"/p/sub/{i}.html"] = page(f"../{i}.html")
    routes["/p/"] = page("0.html")
    for q in range(5):
        routes[f"/p/?q={q}"] = page("/p/0.html")
    return Site(routes)


def shape(
    records: list[trio_crawl.CrawlRecord], updates: list[trio_crawl.DepthUpdate], origin: str
) -> dict[str, tuple[Any, ...]]:
    """What must not change: per URL, its status, final depth (the record's,
    or a later ``DepthUpdate``'s: which page is fetched first varies between
    any two crawls), links followed and error; URLs without ``origin``."""
    depth = {r.url: r.depth for r in records}
    for update in updates:
        depth[update.url] = min(depth[update.url], update.depth)
    assert len(depth) == len(records)  # each URL once
    return {
        r.url.removeprefix(origin): (r.status, depth[r.url], r.links, r.error and r.error.kind)
        for r in records
    }


async def gated_crawl(
    parse_process: bool,
    act: Callable[[trio_crawl.RunningCrawl, threading.Event], Any] | None = None,
) -> tuple[dict[str, tuple[Any, ...]], trio_crawl.EngineStatistics]:
    """Crawl ``gated_site``; ``act(crawl, gate)`` runs beside the crawl and
    must set the gate (without ``act`` it is open from the start)."""
    gate = threading.Event()
    if act is None:
        gate.set()
    records: list[trio_crawl.CrawlRecord] = []
    updates: list[trio_crawl.DepthUpdate] = []
    with serve_site(gated_site(gate)) as server:
        try:
            with trio.fail_after(LIMIT):
                async with trio_crawl.open_crawler(
                    server.url("/"),
                    workers=4,
                    ignore_robots=True,
                    parse_process=parse_process,
                    on_record=records.append,
                    on_depth_update=updates.append,
                ) as crawl:
                    if act is not None:
                        await act(crawl, gate)
                    summary = await crawl.wait()
                    statistics = crawl.statistics()
                    assert summary.parsed_in_process == statistics.parsed_in_process
        finally:
            gate.set()
    return shape(records, updates, server.url("/")), statistics


async def until(condition: Callable[[], bool]) -> None:
    """Wait (bounded by the caller's deadline) until ``condition()``: a state
    of another process, or of a statistics snapshot, which no event tells."""
    while not condition():  # noqa: ASYNC110
        await trio.sleep(0.01)


async def open_gate_when_ready(crawl: trio_crawl.RunningCrawl, gate: threading.Event) -> None:
    await until(lambda: crawl.statistics().parse_process_pid is not None)
    gate.set()


async def test_a_crawl_in_the_co_process_records_exactly_what_an_inline_one_does() -> None:
    inline, before = await gated_crawl(False)
    offloaded, after = await gated_crawl(True, open_gate_when_ready)
    assert offloaded == inline
    assert len(inline) > 60
    assert before.parsed_in_process == 0 and before.parse_process_pid is None
    assert after.parsed_in_process > 0  # the pages behind the gate went to the child
    assert after.parse_process_pid is None  # it has ended with the crawl


async def test_a_child_killed_mid_crawl_leaves_the_crawl_exact(
    caplog: pytest.LogCaptureFixture,
) -> None:
    killed: list[int] = []

    async def kill_after_some_pages(crawl: trio_crawl.RunningCrawl, gate: threading.Event) -> None:
        await until(lambda: crawl.statistics().parse_process_pid is not None)
        pid = crawl.statistics().parse_process_pid
        assert pid is not None and pid != os.getpid()
        gate.set()
        await until(lambda: crawl.statistics().parsed_in_process >= 3)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    inline, _ = await gated_crawl(False)
    with caplog.at_level(logging.WARNING, logger="trio_crawl.parse_process"):
        offloaded, after = await gated_crawl(True, kill_after_some_pages)
    assert offloaded == inline
    assert killed and after.parsed_in_process >= 3
    warnings = [r.getMessage() for r in caplog.records if r.name == "trio_crawl.parse_process"]
    assert warnings == [
        "the parse process ended (killed by SIGKILL); parsing pages in the crawl's process"
    ]


# -- the protocol, against children that misbehave -----------------------------

#: A child that says it is ready, then answers its first request with ``REPLY``.
FAKE_CHILD = """
import marshal, socket, struct, sys
sock = socket.socket(fileno=int(sys.argv[-1]))
def send(message):
    data = marshal.dumps(message)
    sock.sendall(struct.pack("<Q", len(data)) + data)
send((0, "ready"))
head = sock.recv(8, socket.MSG_WAITALL)
request = marshal.loads(sock.recv(struct.unpack("<Q", head)[0], socket.MSG_WAITALL))
send(REPLY)
sock.recv(1)
"""


async def ask_fake_child(reply: str) -> tuple[list[str] | None, list[str] | None, ParseProcess]:
    """Two pages for a fake child whose answer to the first is ``reply``
    (Python source; ``request`` is what it got)."""
    command = [sys.executable, "-c", FAKE_CHILD.replace("REPLY", reply)]
    process = ParseProcess(command, start_after=1)
    body, url = b'<a href="/x">x</a>', "http://h.test/"
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(process.serve)
            assert await process.links(body, url, "text/html") is None  # starts it
            await until(lambda: process.ready)
            first = await process.links(body, url, "text/html")
            second = await process.links(body, url, "text/html")
            nursery.cancel_scope.cancel()
    return first, second, process


async def test_an_answer_from_the_child_is_the_pages_links() -> None:
    first, _, process = await ask_fake_child('(request[0], ["http://h.test/from-child"])')
    assert first == ["http://h.test/from-child"] and process.pages == 1


async def test_a_page_the_child_failed_on_is_parsed_by_the_crawl() -> None:
    # None: the crawl parses the page itself, so its record is the inline one.
    first, _, process = await ask_fake_child('(request[0], "ValueError: no")')
    assert first is None and process.pages == 0


@pytest.mark.parametrize(
    "reply", ["[1, 2, 3]", '(request[0] + 5, ["x"])', '(request[0], {"a": 1})', '"garbage"']
)
async def test_garbage_from_the_child_sends_every_page_back_to_the_crawl(
    reply: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="trio_crawl.parse_process"):
        first, second, process = await ask_fake_child(reply)
    assert first is None and second is None and process.pages == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "trio_crawl.parse_process"]
    assert warning.startswith("the parse process sent something that is not an answer")


async def test_a_child_that_cannot_start_leaves_every_page_to_the_crawl(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    process = ParseProcess([str(tmp_path / "no-such-python")], start_after=1)
    with caplog.at_level(logging.WARNING, logger="trio_crawl.parse_process"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(process.serve)
            assert await process.links(b"", "http://h.test/", "text/html") is None
            await trio.testing.wait_all_tasks_blocked()
            assert await process.links(b"", "http://h.test/", "text/html") is None
            nursery.cancel_scope.cancel()
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "trio_crawl.parse_process"]
    assert warning.startswith("the parse process could not start ([Errno 2]")
    assert process.pid is None and process.pages == 0


async def test_a_child_that_stops_answering_is_killed_and_the_crawl_parses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The child takes the page and never answers (stuck, or stopped with
    # SIGSTOP): after answer_wait the page comes back to the crawl, the child
    # is killed, and later pages never go to it.
    stuck = FAKE_CHILD.replace("send(REPLY)", "import time; time.sleep(600)")
    process = ParseProcess([sys.executable, "-c", stuck], start_after=1, answer_wait=0.5)
    body, url = b'<a href="/x">x</a>', "http://h.test/"
    with caplog.at_level(logging.WARNING, logger="trio_crawl.parse_process"):
        async with started(process):
            assert await process.links(body, url, "text/html") is None  # hung: back
            assert process.pid is not None
            pid = process.pid
            await until(lambda: not alive({pid}))
            assert await process.links(body, url, "text/html") is None
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "trio_crawl.parse_process"]
    assert warning.startswith("the parse process did not answer within 0.5 s (killed)")
    assert process.pages == 0


TAKES_TWO_ANSWERS_ONE = """
import marshal, socket, struct, sys, time
sock = socket.socket(fileno=int(sys.argv[-1]))
def send(message):
    data = marshal.dumps(message)
    sock.sendall(struct.pack("<Q", len(data)) + data)
def receive():
    head = sock.recv(8, socket.MSG_WAITALL)
    return marshal.loads(sock.recv(struct.unpack("<Q", head)[0], socket.MSG_WAITALL))
send((0, "ready"))
first, second = receive(), receive()
send((first[0], []))
time.sleep(600)
"""


async def test_the_child_is_given_up_answer_wait_after_the_oldest_unanswered_page(
    slow_jump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # One watchdog times every page: page A (sent at 0) is answered once page
    # B (sent at 3) arrives; B never is, and comes back at 3 + answer_wait,
    # not at A's deadline (5) nor later.
    process = ParseProcess(
        [sys.executable, "-c", TAKES_TWO_ANSWERS_ONE], start_after=1, answer_wait=5
    )
    body, url = b'<a href="/x">x</a>', "http://h.test/"
    answers: dict[str, tuple[list[str] | None, float]] = {}
    b_answered = trio.Event()

    async def ask(name: str) -> None:
        answers[name] = (await process.links(body, url, "text/html"), trio.current_time())
        if name == "b":
            b_answered.set()

    with caplog.at_level(logging.WARNING, logger="trio_crawl.parse_process"):
        async with started(process) as nursery:
            start = trio.current_time()
            nursery.start_soon(ask, "a")
            await trio.sleep(3)
            nursery.start_soon(ask, "b")
            await b_answered.wait()
    assert answers["a"][0] == [] and answers["a"][1] == start + 3
    assert answers["b"] == (None, pytest.approx(start + 3 + 5))
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "trio_crawl.parse_process"]
    assert warning.startswith("the parse process did not answer within 5 s (killed)")


@pytest.fixture
def slow_jump_clock() -> trio.testing.MockClock:
    """Virtual time that moves only after a whole real second with every task
    blocked: a wait for a real process's exit costs no virtual time."""
    return trio.testing.MockClock(autojump_threshold=1.0)


async def test_a_crawl_that_ends_before_the_child_is_ready_does_not_wait_for_it(
    slow_jump_clock: trio.testing.MockClock,
) -> None:
    # A child still starting (here: one that never says it is ready, and
    # would outlive end-of-file) is killed at once, not after EXIT_WAIT.
    forever = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    process = ParseProcess([sys.executable, "-c", forever], start_after=1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(process.serve)
        assert await process.links(b"", "http://h.test/", "text/html") is None
        await trio.testing.wait_all_tasks_blocked()  # serve is starting it
        start = trio.current_time()
        nursery.cancel_scope.cancel()
    assert trio.current_time() - start < EXIT_WAIT
    assert process.pid is not None and alive({process.pid}) == set()


async def test_a_new_interpreter_child_starts_with_the_crawl_before_any_page_is_parsed() -> None:
    # ``/`` is answered only once the child has said it is ready: the child
    # started while the crawl waited for its first page, not after pages.
    # (The server's thread rules out a fork: the child is a new interpreter.)
    gate = threading.Event()

    def front(request: SiteRequest) -> Response:
        gate.wait(LIMIT)
        return page("/a.html", "/b.html")

    site = Site({"/": front, "/a.html": page("/b.html"), "/b.html": page("/")})
    records: list[trio_crawl.CrawlRecord] = []
    with serve_site(site) as server:
        assert not can_fork()
        try:
            with trio.fail_after(LIMIT):
                async with trio_crawl.open_crawler(
                    server.url("/"), ignore_robots=True, parse_process=True,
                    on_record=records.append,
                ) as crawl:  # fmt: skip
                    await until(lambda: crawl.statistics().parse_process_pid is not None)
                    gate.set()
                    await crawl.wait()
        finally:
            gate.set()
    assert sorted(r.url.removeprefix(server.url("/")) for r in records) == ["", "a.html", "b.html"]


def test_a_crawl_known_to_be_small_starts_the_child_only_after_some_pages() -> None:
    def start_after(**settings: Any) -> int:
        process = parse_process_for(
            trio_crawl.CrawlConfig.from_options(
                start_urls=["http://h.test/"], parse_process=True, **settings
            ),
            auto=True,
        )
        assert process is not None
        return process.start_after

    assert start_after() is None  # decided as it starts: see the next test
    assert start_after(max_pages=EARLY_START_PAGES) is None
    assert start_after(max_pages=EARLY_START_PAGES - 1) == START_AFTER
    assert start_after(max_depth=0) == START_AFTER
    assert start_after(max_depth=1) is None


def test_a_fork_waits_for_some_pages_and_a_new_interpreter_starts_with_the_crawl() -> None:
    # A fork is ready at once: a crawl of a few pages need never make one. A
    # new interpreter takes ~0.1 s: it starts while the first pages are fetched.
    assert starts_after(None, fork=True) == START_AFTER
    assert starts_after(None, fork=False) == 0
    assert starts_after(3, fork=True) == starts_after(3, fork=False) == 3


def test_the_co_process_is_on_by_default_only_where_it_can_pay() -> None:
    wanted = parse_process_wanted
    assert wanted(None, auto=True, links_only=True, cpus=2)
    assert not wanted(None, auto=True, links_only=True, cpus=1)
    assert not wanted(None, auto=True, links_only=False, cpus=8)
    assert not wanted(None, auto=False, links_only=True, cpus=8)
    assert wanted(True, auto=False, links_only=False, cpus=1)
    assert not wanted(False, auto=True, links_only=True, cpus=8)


# -- a full queue: wait for a place, or parse when the crawl is idle ----------

#: A child that answers each request (with its URL and "#child") only once
#: the test writes a byte to the FIFO named by its first argument.
HELD_CHILD = """
import marshal, socket, struct, sys
sock = socket.socket(fileno=int(sys.argv[-1]))
release = open(sys.argv[1], "rb", buffering=0)
def send(message):
    data = marshal.dumps(message)
    sock.sendall(struct.pack("<Q", len(data)) + data)
send((0, "ready"))
while True:
    head = sock.recv(8, socket.MSG_WAITALL)
    if len(head) < 8:
        break
    request = marshal.loads(sock.recv(struct.unpack("<Q", head)[0], socket.MSG_WAITALL))
    if not release.read(1):
        break
    send((request[0], [request[1] + "#child"]))
"""


def asker(
    process: ParseProcess, got: dict[str, list[str] | None], pages: int
) -> tuple[Callable[[str], Awaitable[None]], trio.Event]:
    """A task that asks ``process`` for page ``name``'s links into ``got``,
    and the event set once ``pages`` pages have their answer."""
    done = trio.Event()

    async def ask(name: str) -> None:
        got[name] = await process.links(b"<a href=x>", f"http://h.test/{name}", "text/html")
        if len(got) == pages:
            done.set()

    return ask, done


async def held_child(tmp_path: Path, max_in_flight: int = 1) -> tuple[ParseProcess, int]:
    """A ready ``ParseProcess`` (one page in the child at most, unless told)
    whose child answers a page per byte written to the descriptor returned."""
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    release = os.open(fifo, os.O_RDWR)  # never blocks; the child reads the other end
    process = ParseProcess(
        [sys.executable, "-c", HELD_CHILD, str(fifo)], start_after=0, max_in_flight=max_in_flight
    )
    return process, release


@asynccontextmanager
async def serving(process: ParseProcess, release: int) -> AsyncIterator[trio.Nursery]:
    """``process`` linked to its held child and ready, in a nursery the test
    starts its pages in; the nursery is cancelled when the block ends, and the
    child's release descriptor closed whatever happened."""
    try:
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(process.serve)
                await until(lambda: process.ready)
                yield nursery
                nursery.cancel_scope.cancel()
    finally:
        os.close(release)


@asynccontextmanager
async def started(process: ParseProcess) -> AsyncIterator[trio.Nursery]:
    """``process`` serving in a nursery, asked once (that page is the crawl's
    to parse: the child is only starting) and ready; the nursery is cancelled
    when the block ends."""
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(process.serve)
            assert await process.links(b"<a href=x>", "http://h.test/", "text/html") is None
            await until(lambda: process.ready)
            yield nursery
            nursery.cancel_scope.cancel()


async def test_a_page_that_finds_the_queue_full_waits_for_the_child_while_the_crawl_is_busy(
    tmp_path: Path,
) -> None:
    process, release = await held_child(tmp_path)
    got: dict[str, list[str] | None] = {}
    second_done = trio.Event()

    async def ask(name: str, done: trio.Event | None = None) -> None:
        got[name] = await process.links(b"<a href=x>", f"http://h.test/{name}", "text/html")
        if done is not None:
            done.set()

    async def busy() -> None:  # the crawl's third task, working on its page
        while not second_done.is_set():
            await trio.lowlevel.checkpoint()

    process.crawl_tasks = lambda: 3  # first, second and busy
    async with serving(process, release) as nursery:
        nursery.start_soon(ask, "first")
        await until(lambda: process.in_flight == 1)
        nursery.start_soon(busy)
        nursery.start_soon(ask, "second", second_done)
        await until(lambda: process.queued == 1)
        os.write(release, b"11")  # answer the first, then the second
        await second_done.wait()
    assert got == {
        "first": ["http://h.test/first#child"],
        "second": ["http://h.test/second#child"],
    }
    assert process.pages == 2


async def test_a_waiting_page_is_parsed_by_the_crawl_when_it_has_nothing_else_to_do(
    tmp_path: Path,
) -> None:
    process, release = await held_child(tmp_path)
    got: dict[str, list[str] | None] = {}

    async def ask(name: str, done: trio.Event) -> None:
        got[name] = await process.links(b"<a href=x>", f"http://h.test/{name}", "text/html")
        done.set()

    first_done, second_done = trio.Event(), trio.Event()
    process.crawl_tasks = lambda: 2  # both of the crawl's tasks wait on the child
    async with serving(process, release) as nursery:
        nursery.start_soon(ask, "first", first_done)
        await until(lambda: process.in_flight == 1)
        nursery.start_soon(ask, "second", second_done)
        await second_done.wait()  # every task waits: handed back at once
        assert got == {"second": None} and process.in_flight == 1
        os.write(release, b"1")
        await first_done.wait()
    assert got == {"second": None, "first": ["http://h.test/first#child"]}
    assert process.pages == 1 and process.queued == 0


async def test_a_programs_own_busy_task_does_not_keep_a_waiting_page_from_the_idle_crawl(
    tmp_path: Path,
) -> None:
    # Idle is the crawl's own state (its tasks with a page all wait on the
    # child), not the scheduler's: a task of the program beside the crawl,
    # always runnable, neither holds the page back nor is waited for.
    process, release = await held_child(tmp_path)
    process.crawl_tasks = lambda: 2
    got: dict[str, list[str] | None] = {}
    ask, both = asker(process, got, 2)
    second_back = trio.Event()

    async def programs_task() -> None:
        while not second_back.is_set():
            await trio.lowlevel.checkpoint()

    async with serving(process, release) as nursery:
        nursery.start_soon(programs_task)
        nursery.start_soon(ask, "first")
        await until(lambda: process.in_flight == 1)
        nursery.start_soon(ask, "second")
        await until(lambda: "second" in got)
        second_back.set()
        assert got == {"second": None} and process.in_flight == 1
        os.write(release, b"1")
        await both.wait()
    assert got == {"second": None, "first": ["http://h.test/first#child"]}
    assert process.pages == 1 and process.queued == 0


async def test_the_crawl_is_idle_when_its_tasks_wait_on_the_child_and_no_answer_waits() -> None:
    # The idle signal, from the crawl's own state: every crawl task with a
    # page has it in the child (or queued for it), and the child has written
    # nothing the reader has not taken (an answer would free a place first).
    exchange = PageExchange()
    places = ChildPlaces(exchange, max_in_flight=1)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        exchange.sock = ours
        assert places.idle()  # no count of the crawl's tasks: the child's are all
        places.crawl_tasks = lambda: 1  # one task holds a page, not on the child
        assert not places.idle()
        exchange.waiting[1] = trio.lowlevel.current_task()  # stands for a page sent
        assert places.idle()  # now it is
        theirs.send(b"answer")
        assert not places.idle()  # the reader has an answer to take first
        ours.recv(100)
        assert places.idle()
        theirs.close()
        assert not places.idle()  # end-of-file: the reader gives the child up first


async def test_a_waiting_page_stays_for_the_child_while_another_crawl_task_waits_on_a_server(
    tmp_path: Path,
) -> None:
    # The crawl has three tasks with a page: two on the child, one (not here)
    # waiting on a server, whose page will need the crawl's core soon.
    process, release = await held_child(tmp_path)
    process.crawl_tasks = lambda: 3
    got: dict[str, list[str] | None] = {}
    ask, both = asker(process, got, 2)

    async with serving(process, release) as nursery:
        nursery.start_soon(ask, "first")
        await until(lambda: process.in_flight == 1)
        nursery.start_soon(ask, "second")
        await until(lambda: process.queued == 1)
        await trio.testing.wait_all_tasks_blocked()
        await trio.testing.wait_all_tasks_blocked()  # the idle crawl has looked
        assert got == {} and process.queued == 1
        os.write(release, b"11")
        await both.wait()
    assert got == {
        "first": ["http://h.test/first#child"],
        "second": ["http://h.test/second#child"],
    }


async def test_pages_waiting_for_a_place_are_parsed_by_the_crawl_when_the_child_dies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    process, release = await held_child(tmp_path)
    got: dict[str, list[str] | None] = {}
    both = trio.CapacityLimiter(2)

    async def ask(name: str) -> None:
        async with both:
            got[name] = await process.links(b"<a href=x>", f"http://h.test/{name}", "text/html")

    async def busy() -> None:  # the crawl's third task, working on its page
        while len(got) < 2:
            await trio.lowlevel.checkpoint()

    process.crawl_tasks = lambda: 3  # first, second and busy
    with caplog.at_level(logging.WARNING, logger="trio_crawl.parse_process"):
        async with serving(process, release) as nursery:
            nursery.start_soon(ask, "first")
            await until(lambda: process.in_flight == 1)
            nursery.start_soon(busy)
            nursery.start_soon(ask, "second")
            await until(lambda: process.queued == 1)
            assert process.pid is not None
            os.kill(process.pid, signal.SIGKILL)
            await until(lambda: len(got) == 2)
    assert got == {"first": None, "second": None} and process.pages == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "trio_crawl.parse_process"]
    assert warning.startswith("the parse process ended (killed by SIGKILL)")


# -- the child ends with the crawler --------------------------------------------


def parse_children(pid: int) -> set[int]:
    """``pid``'s live parse co-processes that ignore SIGINT by now (from /proc):
    its children that do (a new interpreter running ``parse_child``, or a fork
    of the crawl, whose command line is the crawl's)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                status = (entry / "status").read_text()
            except OSError:
                continue
            ignored = int(status.partition("SigIgn:")[2].split()[0], 16)
            if int(stat.rpartition(")")[2].split()[1]) == pid and ignored & (
                1 << (signal.SIGINT - 1)
            ):
                found.add(int(entry.name))
    return found


def cmdline(pid: int) -> bytes:
    return (Path("/proc") / str(pid) / "cmdline").read_bytes()


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
async def test_the_child_ends_with_the_crawler(how: signal.Signals, tmp_path: Path) -> None:
    gate = threading.Event()  # never opened: the crawl waits at the gate
    with serve_site(gated_site(gate)) as server:
        env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT}
        crawler = subprocess.Popen(  # noqa: ASYNC220 (starting it does not block)
            [sys.executable, "-m", "trio_crawl", server.url("/"), "--parse-process",
             "--ignore-robots", "-w", "4", "--grace", "0.5", "-o", str(tmp_path / "out.jsonl")],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        try:
            with trio.fail_after(LIMIT):
                await until(lambda: bool(parse_children(crawler.pid)))
                children = parse_children(crawler.pid)
                # A fork of the crawl (engine/parse_fork.py): no thread beside it.
                forked = [cmdline(child) == cmdline(crawler.pid) for child in children]
                if how is signal.SIGINT:  # Ctrl-C: the whole process group, child too
                    os.killpg(crawler.pid, how)
                    for child in children:
                        os.kill(child, how)
                else:
                    crawler.send_signal(how)
                await trio.to_thread.run_sync(crawler.wait)
                await wait_gone(children)
        finally:
            gate.set()
            crawler.kill()
            crawler.wait()
    assert len(children) == 1 and alive(children) == set()
    assert forked == [True]
    if how is signal.SIGINT:
        assert crawler.returncode == 130
        assert b"Traceback" not in (crawler.stderr.read() if crawler.stderr else b"")


async def test_a_large_pool_gives_the_child_a_deeper_queue(tmp_path: Path) -> None:
    """One place per WORKERS_PER_PLACE workers beyond max_in_flight: a pool
    of 3 x WORKERS_PER_PLACE workers has 3 pages in the child at once, the
    4th waits for a place (a crawl task waits on a server, so no hand-back)."""
    process, release = await held_child(tmp_path)  # max_in_flight=1
    assert process.queue_size == 1
    process.crawl_workers = lambda: 3 * WORKERS_PER_PLACE
    process.crawl_tasks = lambda: 5
    assert process.queue_size == 3
    got: dict[str, list[str] | None] = {}
    ask, all_done = asker(process, got, 4)

    async with serving(process, release) as nursery:
        for name in "abc":
            nursery.start_soon(ask, name)
        await until(lambda: process.in_flight == 3)
        nursery.start_soon(ask, "d")
        await until(lambda: process.queued == 1)
        assert process.in_flight == 3
        os.write(release, b"1111")
        await all_done.wait()
    assert got == {name: [f"http://h.test/{name}#child"] for name in "abcd"}


async def test_big_pages_fill_the_childs_queue_before_its_places_do(tmp_path: Path) -> None:
    """3 places hold 3 x BYTES_PER_PLACE of bodies: a page of 2.5 places'
    worth and one of 1.25 (the first always goes; the second while the bytes
    are under) leave the third page waiting, though a place is free, until an
    answer frees bytes (a crawl task waits on a server, so no hand-back)."""
    process, release = await held_child(tmp_path, max_in_flight=3)
    process.crawl_tasks = lambda: 5
    got: dict[str, list[str] | None] = {}
    sizes = {"a": BYTES_PER_PLACE * 5 // 2, "b": BYTES_PER_PLACE * 5 // 4, "c": 100}
    all_done = trio.Event()

    async def ask(name: str) -> None:
        body = b"<a href=x>".ljust(sizes[name], b" ")
        got[name] = await process.links(body, f"http://h.test/{name}", "text/html")
        if len(got) == 3:
            all_done.set()

    async with serving(process, release) as nursery:
        nursery.start_soon(ask, "a")
        await until(lambda: process.in_flight == 1)
        nursery.start_soon(ask, "b")
        await until(lambda: process.in_flight == 2)
        nursery.start_soon(ask, "c")
        await until(lambda: process.queued == 1)
        assert process.in_flight == 2  # a place is free; the bytes are not
        os.write(release, b"1")  # a's answer frees its bytes: c goes
        await until(lambda: process.queued == 0 and process.in_flight == 2)
        os.write(release, b"11")
        await all_done.wait()
    assert got == {name: [f"http://h.test/{name}#child"] for name in "abc"}
    assert process.pages == 3
