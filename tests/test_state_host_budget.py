"""Per-host budgets on the ``--state`` file (``frontiers/sqlite/hosts.py``).

The memory frontier (``core/frontier.py`` with ``core/host_budget.py``) is
the reference: the state file, offered the same URLs in the same order,
admits the same ones, across resumes and failed transactions (hypothesis);
a file whose URLs were never counted is counted when budgets first come; and
real crawls of a multi-host site on 127.0.0.1 (several servers, one
host:port each) fetch as many pages per host through the memory frontier,
``state=``, ``--seeds`` and a ``--seeds`` crawl killed with SIGKILL and
resumed. Every subprocess and crawl has a timeout; no sleeps.
"""

from __future__ import annotations

import contextlib
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_crawl
from trio_crawl.core.frontier import Frontier, RedirectOutcome
from trio_crawl.core.host_budget import HostBudget
from trio_crawl.core.scope import Scope
from trio_crawl.core.url import host_port
from trio_crawl.frontiers.sqlite import Admit, CrawlState
from trio_crawl.frontiers.sqlite import hosts as sqlite_hosts
from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Site, SiteRequest, page, redirect

from cli_helpers import TIMEOUT, records_in


def u(host: int, page: int = 0) -> str:
    return f"http://h{host}.test/{page}"


START = u(0)

# -- the state file decides as the memory frontier does -------------------------

link = st.builds(u, st.integers(0, 5), st.integers(0, 6))
event = st.one_of(
    st.tuples(st.just("links"), st.lists(link, min_size=1, max_size=12, unique=True)),
    st.tuples(st.just("seeds"), st.lists(link, min_size=1, max_size=4, unique=True)),
    st.tuples(st.just("redirect"), link.filter(lambda url: url != START)),
    st.tuples(st.just("resume"), st.just(None)),
    st.tuples(st.just("crash"), st.lists(link, min_size=1, max_size=12, unique=True)),
)


class Mirror:
    """The memory frontier, offered what the state file is offered."""

    def __init__(self, budget: HostBudget) -> None:
        self.budget = budget
        self.frontier = Frontier(
            in_scope=Scope([START], span_hosts=True).allows, host_budget=budget
        )
        (self.start,) = self.frontier.add_start(START)

    def links(self, urls: list[str]) -> list[str]:
        return [e.url for e in self.frontier.discover(urls, 0, START)]

    def seeds(self, urls: list[str]) -> list[str]:
        return [e.url for url in urls for e in self.frontier.add_start(url, scoped=True)]

    def redirect(self, target: str) -> tuple[RedirectOutcome, list[str]]:
        outcome, admitted = self.frontier.redirect(self.start, target)
        return outcome, [e.url for e in admitted]


def open_state(path: Path, budget: HostBudget) -> CrawlState:
    state = CrawlState.open(path)
    state.recover()
    state.use_host_budget(budget)
    state.add_seeds([START])  # as every run does (counted once: it is known after)
    return state


def stored_counts(path: Path) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return dict(conn.execute("SELECT host, pages FROM hosts"))


def url_rows(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return [url for (url,) in conn.execute("SELECT url FROM urls ORDER BY id")]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=st.lists(event, min_size=1, max_size=14),
    per_host=st.one_of(st.none(), st.integers(1, 4)),
    max_hosts=st.one_of(st.none(), st.integers(1, 4)),
)
def test_the_state_file_admits_what_the_memory_frontier_admits(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    events: list[tuple[str, object]],
    per_host: int | None,
    max_hosts: int | None,
) -> None:
    """Links, sitemap seeds and redirects, offered in the same order to both:
    the same URLs are admitted, the same redirects followed or refused
    (``BUDGET``), the same number refused. A resume (the file closed and
    opened again, budgets given anew) and a transaction that fails after it
    counted (a crash before the COMMIT) change nothing; nor does a cache of
    two hosts' counts (the rest read from the file)."""
    monkeypatch.setattr(sqlite_hosts, "CACHE_HOSTS", 2)
    path = tmp_path_factory.mktemp("budget") / "crawl.db"
    mirror = Mirror(HostBudget(max_pages_per_host=per_host, max_hosts=max_hosts))
    fresh = HostBudget(max_pages_per_host=per_host, max_hosts=max_hosts)
    state = open_state(path, fresh)
    refused = 0
    try:
        for kind, arg in events:
            if kind == "links":
                assert isinstance(arg, list)
                offered = state.offer_links(START, arg, room=100, max_depth=None)
                assert [row.url for row in offered.kept] == mirror.links(arg)
            elif kind == "seeds":
                assert isinstance(arg, list)
                offered = state.offer_seeds(arg, "sitemap", room=100)
                assert [row.url for row in offered.kept] == mirror.seeds(arg)
            elif kind == "redirect":
                assert isinstance(arg, str)
                offered = state.offer_redirect(START, arg, room=100, max_depth=None)
                outcome, admitted = mirror.redirect(arg)
                assert [row.url for row in offered.kept] == admitted
                assert offered.target_refused == (outcome is RedirectOutcome.BUDGET)
            elif kind == "resume":
                state.close()
                state = open_state(
                    path, HostBudget(max_pages_per_host=per_host, max_hosts=max_hosts)
                )
                continue
            else:
                assert isinstance(arg, list)
                crash_before_commit(state, arg)
                continue
            refused += offered.refused
            assert offered.spilled == 0
    finally:
        state.close()
    assert refused == mirror.budget.refused
    urls = url_rows(path)
    assert urls == list(mirror.frontier.seen)
    counts = Counter(host_port(url) for url in urls)
    assert stored_counts(path) == counts
    assert max_hosts is None or len(counts) <= max_hosts
    assert per_host is None or max(counts.values()) <= per_host


def crash_before_commit(state: CrawlState, links: list[str]) -> None:
    """Offer ``links`` with the hosts table's write failing, as a kill
    between the counting and the COMMIT would: nothing of it may stay."""
    ledger = state._books.ledger
    assert ledger is not None

    def fail(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("killed before the commit")

    ledger.write = fail  # type: ignore[method-assign]
    try:
        with pytest.raises(sqlite3.OperationalError, match="killed"):
            state.offer_links(START, links, room=100, max_depth=None)
    finally:
        del ledger.write


def test_urls_a_run_without_budgets_admitted_are_counted_when_budgets_come(
    tmp_path: Path,
) -> None:
    """A file of an older version, or of a run without budgets, has no (or a
    stale) hosts table: the first run with budgets counts its URLs, so a
    host already full admits nothing more."""
    path = tmp_path / "crawl.db"
    with CrawlState.open(path) as state:  # no budgets: no hosts table
        state.add_seeds([START])
        state.offer_links(START, [u(0, 1), u(0, 2), u(1)], room=10, max_depth=None)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT name FROM sqlite_schema WHERE name = 'hosts'").fetchall() == []
    state = open_state(path, HostBudget(max_pages_per_host=3))
    with state:
        assert stored_counts(path) == {"h0.test:80": 3, "h1.test:80": 1}
        offered = state.offer_links(START, [u(0, 3), u(1, 1)], room=10, max_depth=None)
        assert [row.url for row in offered.kept] == [u(1, 1)] and offered.refused == 1
    with CrawlState.open(path) as state:  # a run without budgets again: uncounted
        state.recover()
        state.offer_links(START, [u(2), u(2, 1)], room=10, max_depth=None)
    with open_state(path, HostBudget(max_hosts=3)) as state:
        assert stored_counts(path) == {"h0.test:80": 3, "h1.test:80": 2, "h2.test:80": 2}
        offered = state.offer_links(START, [u(3), u(2, 2)], room=10, max_depth=None)
        assert [row.url for row in offered.kept] == [u(2, 2)] and offered.refused == 1


def test_seeds_and_admit_ops_are_admitted_whatever_the_budgets_but_count(
    tmp_path: Path,
) -> None:
    path = tmp_path / "crawl.db"
    with open_state(path, HostBudget(max_pages_per_host=1, max_hosts=1)) as state:
        assert state.add_seeds([u(0, 1), u(1), u(1, 1)]) == 3
        offered = state.offer_links(START, [u(0, 2), u(2)], room=10, max_depth=None)
        assert offered.kept == [] and offered.refused == 2
        state.apply([Admit(u(3), 1, START), Admit(u(1), 1, START)])  # an Admit counts too
    assert stored_counts(path) == {"h0.test:80": 2, "h1.test:80": 2, "h3.test:80": 1}


def test_links_a_shorter_path_brings_within_max_depth_are_budgeted_too(tmp_path: Path) -> None:
    """Links ``max_depth`` cut off are kept with their page (rule 7 of both
    frontiers) and admitted when a shorter path (here a redirect from a
    start URL) lowers it: then they meet the budgets like any new URL, in
    memory and in the file alike."""
    cut = [u(1, 2), u(1, 3), u(1, 4)]
    budget = HostBudget(max_pages_per_host=2)
    memory = Frontier(
        in_scope=Scope([START], span_hosts=True).allows, max_depth=1, host_budget=budget
    )
    (a,) = memory.add_start(START)
    (other,) = memory.add_start(u(2))
    memory.start(a)
    (b,) = memory.finish(a, [u(1, 1)])
    memory.start(b)
    assert memory.finish(b, cut) == []
    memory.start(other)
    outcome, admitted = memory.redirect(other, u(1, 1))
    assert outcome is RedirectOutcome.SEEN and [e.url for e in admitted] == [u(1, 2)]
    assert budget.refused == 2

    with open_state(tmp_path / "crawl.db", HostBudget(max_pages_per_host=2)) as state:
        state.add_seeds([u(2)])
        state.take_queued(10)
        state.offer_links(START, [u(1, 1)], room=10, max_depth=1)
        assert state.offer_links(u(1, 1), cut, room=10, max_depth=1).kept == []
        offered = state.offer_redirect(u(2), u(1, 1), room=10, max_depth=1)
        assert [row.url for row in offered.kept] == [u(1, 2)] and offered.refused == 2
        assert not offered.target_refused


# -- real crawls of a multi-host site --------------------------------------------

HOSTS = 6
PAGES = 10  # per host, besides "/"


class Hosts:
    """``HOSTS`` servers on 127.0.0.1: each ``/`` links to every host's ``/``
    (in host order) and to its own ``/p/0`` .. ``/p/9``; each page links to
    up to four random pages of random hosts; ``/p/9`` redirects to the next host's
    ``/p/0``. Every request is counted (``hits``); ``on_request`` is called
    with the running count, from the server's thread."""

    def __init__(self) -> None:
        self.routes: list[dict[str, Callable[[SiteRequest], Response]]] = [
            {} for _ in range(HOSTS)
        ]
        self.servers: list[SiteServer] = []
        self.hits = 0
        self.lock = threading.Lock()
        self.on_request: Callable[[int], None] = lambda n: None

    def answer(self, response: Response) -> Callable[[SiteRequest], Response]:
        def route(request: SiteRequest) -> Response:
            with self.lock:
                self.hits += 1
                hits = self.hits
            self.on_request(hits)
            return response

        return route

    def build(self) -> None:
        bases = [server.base_url for server in self.servers]
        rng = random.Random(11)
        for k, routes in enumerate(self.routes):
            own = [f"/p/{i}" for i in range(PAGES)]
            routes["/"] = self.answer(page(*(b + "/" for b in bases), *own))
            for i in range(PAGES - 1):
                others = {
                    f"{bases[rng.randrange(HOSTS)]}/p/{rng.randrange(PAGES)}" for _ in "abcd"
                }
                routes[f"/p/{i}"] = self.answer(page(*sorted(others)))
            routes[f"/p/{PAGES - 1}"] = self.answer(redirect(bases[(k + 1) % HOSTS] + "/p/0"))


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    site = Hosts()
    with contextlib.ExitStack() as stack:
        site.servers = [stack.enter_context(serve_site(Site(routes))) for routes in site.routes]
        site.build()
        yield site


def expected(hosts: Hosts, per_host: int | None, max_hosts: int | None) -> dict[str, int]:
    """Pages per host of a budgeted crawl from host 0's ``/``: every host's
    ``/`` is found on the first page, in host order, so the first
    ``max_hosts`` are admitted; each has ``PAGES + 1`` URLs."""
    admitted = hosts.servers[: max_hosts or HOSTS]
    pages = min(per_host or PAGES + 1, PAGES + 1)
    return {urlsplit(server.base_url).netloc: pages for server in admitted}


def fetched_since(hosts: Hosts, before: list[int]) -> dict[str, int]:
    """Distinct URLs each host was asked for since ``before`` (its log's
    lengths then), robots.txt aside, by host:port."""
    counts: dict[str, int] = {}
    for server, start in zip(hosts.servers, before, strict=True):
        targets = {r.target for r in server.log[start:] if r.target != "/robots.txt"}
        if targets:
            counts[urlsplit(server.base_url).netloc] = len(targets)
    return counts


def by_host(urls: list[str]) -> dict[str, int]:
    return dict(Counter(urlsplit(url).netloc for url in set(urls)))


BUDGETS = [(4, None), (None, 3), (3, 4)]
#: A record's URL, status and error kind.
Outcome = tuple[str, int | None, str | None]


def crawl(start: str, state: str | None, options: dict[str, Any]) -> tuple[set[Outcome], int]:
    """Crawl in this process (the servers answer from their threads): each
    record's URL, status and error kind, and the URLs the frontier refused."""
    outcomes: set[Outcome] = set()

    async def main() -> int:
        with trio.fail_after(TIMEOUT):
            async with trio_crawl.open_crawler(start, state=state, workers=8, **options) as run:
                async for r in run:
                    outcomes.add((r.url, r.status, r.error and r.error.kind))
            assert run.summary.records == len(outcomes)
            return run.summary.over_host_budget

    return outcomes, trio.run(main)


@pytest.mark.parametrize(("per_host", "max_hosts"), BUDGETS)
def test_memory_and_state_file_crawls_fetch_the_same_pages_per_host(
    hosts: Hosts, tmp_path: Path, per_host: int | None, max_hosts: int | None
) -> None:
    """The same crawl through both frontiers: as many pages per host as the
    site and budgets allow, and with ``max_hosts`` alone the same records, a
    redirect to a host over budget included (recorded, not followed)."""
    start = hosts.servers[0].base_url + "/"
    options: dict[str, Any] = {
        "span_hosts": True,
        "max_pages_per_host": per_host,
        "max_hosts": max_hosts,
    }
    fetched: dict[str, dict[str, int]] = {}
    outcomes: dict[str, set[Outcome]] = {}
    refused: dict[str, int] = {}
    for name, state in (("memory", None), ("state", str(tmp_path / "crawl.db"))):
        before = [len(server.log) for server in hosts.servers]
        outcomes[name], refused[name] = crawl(start, state, options)
        fetched[name] = fetched_since(hosts, before)
        assert len(outcomes[name]) == sum(fetched[name].values()), name
    assert fetched["memory"] == fetched["state"] == expected(hosts, per_host, max_hosts)
    assert refused["memory"] > 0 and refused["state"] > 0
    if per_host is None:  # which URLs of a host come first is timing's, not their count
        assert outcomes["memory"] == outcomes["state"]
        assert refused["memory"] == refused["state"]
    if max_hosts == 3:  # host 2's last page redirects to host 3, not admitted: not followed
        redirected = hosts.servers[2].url(f"/p/{PAGES - 1}")
        assert (redirected, 301, None) in outcomes["memory"] & outcomes["state"]


def seeds_command(hosts: Hosts, tmp_path: Path, per_host: int, *extra: str) -> list[str]:
    """A ``--seeds`` crawl of hosts 0 and 1, at most ``per_host`` pages per
    host and 4 hosts, a memory window of 4 (the rest waits on disk)."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(server.base_url + "/\n" for server in hosts.servers[:2]))
    return [
        sys.executable, "-m", "trio_crawl", "--seeds", str(seeds), "--span-hosts",
        "--max-pages-per-host", str(per_host), "--max-hosts", "4", "--fetcher", "httpx",
        "-w", "4", "--max-queue", "4", "-q", *extra,
    ]  # fmt: skip


def test_a_seeds_file_crawl_with_budgets_from_the_command_line(
    hosts: Hosts, tmp_path: Path
) -> None:
    """The broad crawl the budgets are for: a seeds file of hosts (both
    admitted: seeds are start URLs), at most 3 pages per host and 4 hosts."""
    before = [len(server.log) for server in hosts.servers]
    result = subprocess.run(
        seeds_command(hosts, tmp_path, 3, "-o", "-"),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    urls = [record["url"] for record in records_in(result.stdout)]
    assert by_host(urls) == fetched_since(hosts, before) == expected(hosts, 3, 4)


@pytest.mark.parametrize("kill_at", [2, 9, 17, 26])
def test_a_budgeted_crawl_killed_and_resumed_stays_exact(
    hosts: Hosts, tmp_path: Path, kill_at: int
) -> None:
    """SIGKILL the ``--seeds`` crawl while the server holds its
    ``kill_at``-th request (mid-crawl for sure; the other workers' requests
    go on, so the kill finds the rest at no chosen step), resume it: the
    records of both runs hold exactly the pages per host an uninterrupted
    crawl fetches, and no host was asked for more URLs than its budget."""
    state, out = tmp_path / "crawl.db", tmp_path / "out.jsonl"
    command = seeds_command(hosts, tmp_path, 8, "--state", str(state), "-o", str(out))
    want = expected(hosts, 8, 4)
    before = [len(server.log) for server in hosts.servers]
    reached, killed = threading.Event(), threading.Event()
    start_hits = hosts.hits

    def hold(hits: int) -> None:
        if hits - start_hits == kill_at:
            reached.set()
            killed.wait(TIMEOUT)

    hosts.on_request = hold
    proc = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    try:
        assert reached.wait(TIMEOUT)
        proc.send_signal(signal.SIGKILL)
        proc.wait(TIMEOUT)
    finally:
        killed.set()
        hosts.on_request = lambda n: None
        if proc.poll() is None:
            proc.kill()
    first = out.read_bytes().count(b"\n") if out.exists() else 0
    assert first < sum(want.values())
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr
    urls = [record["url"] for record in records_in(out.read_text())]
    assert by_host(urls) == want, (first, urls)
    assert fetched_since(hosts, before) == want  # distinct URLs: a refetch is no new one
    assert stored_counts(state) == want
