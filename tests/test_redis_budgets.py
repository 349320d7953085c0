"""Host budgets on Redis (``--max-pages-per-host``, ``--max-hosts``;
``frontiers/redis/budgets.py``), against a real redis-server
(tests/redis_fixture.py) and several real servers on 127.0.0.1, one
``host:port`` each.

The memory frontier is the reference: the Lua rules, offered the same URLs
in the same order, admit and refuse what it does (hypothesis); the same
budgeted crawl in memory, on a
state file and on Redis with two workers records the same URLs; workers
killed with SIGKILL (another worker goes on, or the same command is run
again) leave a crawl as exact: every page of the budgeted crawl recorded, no
other, no host asked for more distinct URLs than its budget, and Redis's
counts agree with its seen set (``check_crawl``). Every crawl and
subprocess has a timeout; the waits for a kill poll an output file, as the
other worker-kill tests do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_crawl
from trio_crawl import redis_frontier
from trio_crawl.core.frontier import Frontier, RedirectOutcome
from trio_crawl.core.host_budget import HostBudget
from trio_crawl.core.scope import Scope
from trio_crawl.frontiers.redis import check_crawl, keys_prefix, wire
from trio_crawl.frontiers.redis import lua as redis_lua
from trio_crawl.frontiers.redis.budgets import redirect_target
from trio_crawl.frontiers.redis.sent_links import SentLinks
from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Route, Site, SiteRequest, page, redirect

import redis_fixture
from cli_helpers import TIMEOUT, records_in, run_cli, start_cli
from redis_fixture import RedisServer

pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id

# -- the Lua rules decide as the memory frontier does ------------------------------


def u(host: int, n: int = 0) -> str:
    return f"http://h{host}.test/{n}"


link = st.builds(u, st.integers(0, 5), st.integers(0, 5))
ALL_LINKS = [u(host, n) for host in range(6) for n in range(6)]


async def admitted_in_redis(
    server: RedisServer, starts: list[str], batches: list[list[str]], budget: HostBudget
) -> tuple[set[str], int, dict[str, int], dict[str, int]]:
    """Create a crawl with ``starts`` and the budgets, admit each batch in
    one sync call (as a worker's finish or its seeds do), then take
    everything: the URLs admitted, the refusals the calls reported,
    Redis's counts per host, and what ``fits`` (a redirect's question)
    says of every URL the links may name."""
    import coredis

    name = f"rules-{uuid.uuid4().hex[:12]}"
    prefix = keys_prefix(name)
    budgets = {"max_pages_per_host": budget.max_pages_per_host, "max_hosts": budget.max_hosts}
    client = coredis.Redis.from_url(server.url)
    async with client:

        async def call(fn: str, args: list[object]) -> Any:
            return await client.fcall(redis_lua.function(fn), keys=[prefix], args=args)

        await client.function_load(redis_lua.LIBRARY, replace=True)
        starts_ops: list[object] = []
        for url in starts:
            starts_ops += wire.admission(url, 0, "")
        hello = await call(
            "hello",
            wire.hello_args(
                "t", 60, may_create=True, identity_json=json.dumps(budgets), max_pages=None,
                rate=None, per_host_concurrency=None, read_robots=False, max_depth=None,
                settle=True, starts=starts_ops,
            ),
        )  # fmt: skip
        owner = hello[2]
        refused = 0
        for batch in batches:
            ops: list[object] = []
            for url in batch:
                ops += wire.admission(url, 1, starts[0])
            reply = wire.SyncReply.parse(
                await call("sync", wire.sync_args(owner, 0, 0, wire.admit_op(ops)))
            )
            refused += reply.over_budget
        taken = wire.SyncReply.parse(await call("sync", wire.sync_args(owner, 1000, 1000, [])))
        counts = await client.hgetall(prefix + "hb")
        fits = {
            url: int(await call("fits", [wire.url_digest(url), urlsplit(url).netloc + ":80"]))
            for url in ALL_LINKS
        }
    assert await check_crawl(server.url, name) == []
    return (
        {t.url for t in taken.taken},
        refused,
        {k.decode(): int(v) for k, v in counts.items()},
        fits,
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    starts=st.lists(link, min_size=1, max_size=3, unique=True),
    batches=st.lists(st.lists(link, min_size=1, max_size=10), min_size=1, max_size=6),
    per_host=st.one_of(st.none(), st.integers(1, 4)),
    max_hosts=st.one_of(st.none(), st.integers(1, 4)),
)
def test_redis_admits_what_the_memory_frontier_admits(
    redis_server: RedisServer,
    starts: list[str],
    batches: list[list[str]],
    per_host: int | None,
    max_hosts: int | None,
) -> None:
    """Start URLs (always admitted, counted) and batches of links, a URL
    repeated within and across batches: Redis admits the URLs the memory
    frontier admits, refuses as many offers, and counts each host's URLs
    (none without budgets). Then a redirect's question (``fits``): 2 for a
    URL the memory frontier knows (SEEN), else 1 if its budgets would admit
    it (FOLLOW), 0 if not (BUDGET)."""
    memory = Frontier(
        in_scope=Scope(starts, span_hosts=True).allows,
        host_budget=HostBudget(max_pages_per_host=per_host, max_hosts=max_hosts),
    )
    for url in starts:
        memory.add_start(url)
    for batch in batches:
        memory.discover(batch, 0, starts[0])
    budget = HostBudget(max_pages_per_host=per_host, max_hosts=max_hosts)
    admitted, refused, counts, fits = trio.run(
        admitted_in_redis, redis_server, starts, batches, budget
    )
    assert admitted == set(memory.seen)
    assert memory.host_budget is not None
    assert refused == memory.host_budget.refused
    budgeted = (per_host, max_hosts) != (None, None)
    per_url = Counter(urlsplit(url).netloc + ":80" for url in memory.seen)
    assert counts == (dict(per_url) if budgeted else {})
    hosts = len(per_url)
    expected = {
        url: 2
        if url in memory.seen
        else int(memory.host_budget.fits(per_url.get(urlsplit(url).netloc + ":80"), hosts))
        for url in ALL_LINKS
    }
    assert fits == expected


async def test_a_redirect_target_the_worker_saw_redis_accept_costs_no_call() -> None:
    """``redirect_target``: a target this worker saw Redis accept (or that a
    move of the same registration carries first) is ``SEEN`` with no call;
    any other is Redis's answer (``fits``: 2 known, 1 new, 0 refused)."""
    sent = SentLinks()
    sent.confirm([u(0, 1)], 3)
    sent.pend([u(0, 2)], 1, join=5)
    asked: list[str] = []
    answers = [2, 1, 0]
    wire_url = {wire.url_digest(url): url for url in (u(0, 1), u(0, 2))}

    async def fcall(name: str, args: Any) -> int:
        asked.append(wire_url[args[0]])
        return answers.pop(0)

    assert await redirect_target(fcall, sent, u(0, 1), 0) is RedirectOutcome.SEEN
    assert await redirect_target(fcall, sent, u(0, 2), 5) is RedirectOutcome.SEEN
    assert asked == []
    said = [await redirect_target(fcall, sent, u(0, 2), 6) for _ in range(3)]  # another join
    assert said == [RedirectOutcome.SEEN, RedirectOutcome.FOLLOW, RedirectOutcome.BUDGET]
    assert asked == [u(0, 2)] * 3


HOSTS = 5
OWN = 12  # pages of each host besides "/": /p/0 .. /p/11


def routes_of(
    bases: list[str], k: int, delay: float, hold: threading.Event | None
) -> dict[str, Route]:
    """Host ``k``: ``/`` links its own pages in order, then every host's ``/``
    in host order; ``/p/0`` links the next host's ``/`` and ``/p/0``;
    ``/p/1`` redirects to the host's last page, ``/p/2`` to the last host's
    ``/``; the rest link their host's ``/p/0`` and ``/p/0`` two hosts on.

    So which URLs the budgets admit does not depend on timing: a host's
    first URLs all come from its ``/`` (in one page's order), the hosts in
    the order the start page lists them, and the other links lead only to
    URLs every budget admits first (a host's ``/`` and ``/p/0``) or never
    (the redirects' targets, found after their host's ``/`` filled it).
    With ``hold``, host 0's ``/`` links ``/hold`` first, which answers once
    ``hold`` is set: the crawl cannot end before then."""
    me = bases[k]
    first = [f"{me}/hold"] if hold is not None and k == 0 else []
    routes: dict[str, Response] = {
        "/": page(*first, *(f"{me}/p/{i}" for i in range(OWN)), *(b + "/" for b in bases)),
        "/p/0": page(bases[(k + 1) % HOSTS] + "/", bases[(k + 1) % HOSTS] + "/p/0"),
        "/p/1": redirect(f"{me}/p/{OWN - 1}"),
        "/p/2": redirect(bases[-1] + "/"),
    }
    for i in range(3, OWN):
        routes[f"/p/{i}"] = page(f"{me}/p/0", bases[(k + 2) % HOSTS] + "/p/0")
    slow: dict[str, Route] = {t: dataclasses.replace(r, delay=delay) for t, r in routes.items()}
    if first and hold is not None:
        slow["/hold"] = held(page(), hold)
    return slow


def held(response: Response, hold: threading.Event) -> Route:
    """A route that answers once ``hold`` is set (after 60 s anyway: the test
    then fails on what it finds)."""

    def answer(request: SiteRequest) -> Response:
        hold.wait(60)
        return response

    return answer


@contextlib.contextmanager
def hosts_site(
    delay: float = 0.0, hold: threading.Event | None = None
) -> Iterator[list[SiteServer]]:
    """``HOSTS`` servers on 127.0.0.1 (see ``routes_of``)."""
    with contextlib.ExitStack() as stack:
        routes: list[dict[str, Route]] = [{} for _ in range(HOSTS)]
        servers = [stack.enter_context(serve_site(Site(r))) for r in routes]
        bases = [server.base_url for server in servers]
        for k, own in enumerate(routes):  # the servers read them per request
            own.update(routes_of(bases, k, delay, hold))
        yield servers


def fetched(servers: list[SiteServer], before: list[int]) -> dict[str, int]:
    """Distinct URLs each host was asked for since ``before``, robots.txt aside."""
    counts: dict[str, int] = {}
    for server, start in zip(servers, before, strict=True):
        targets = {r.target for r in server.log[start:] if r.target != "/robots.txt"}
        if targets:
            counts[urlsplit(server.base_url).netloc] = len(targets)
    return counts


def per_host(urls: set[str]) -> dict[str, int]:
    return dict(Counter(urlsplit(url).netloc for url in urls))


def within(counts: dict[str, int], pages: int | None, hosts: int | None) -> bool:
    return (hosts is None or len(counts) <= hosts) and (
        pages is None or max(counts.values()) <= pages
    )


Outcome = tuple[str, int | None]


async def crawl_once(
    start: str, options: dict[str, Any], *, state: str | None = None
) -> tuple[set[Outcome], int]:
    """One crawl in this process: its records' URLs and statuses, and the URLs
    the host budgets refused."""
    outcomes: set[Outcome] = set()
    async with trio_crawl.open_crawler(start, state=state, workers=6, **options) as run:
        async for record in run:
            outcomes.add((record.url, record.status))
    return outcomes, run.summary.over_host_budget


async def crawl_on_redis(
    server: RedisServer, name: str, start: str, options: dict[str, Any], workers: int
) -> tuple[set[Outcome], int, int]:
    """``workers`` workers of one Redis crawl in this process: their records'
    outcomes, how many records (a URL twice would show), their refusals."""
    outcomes: set[Outcome] = set()
    records = 0
    refused = 0

    async def one(i: int) -> None:
        nonlocal records, refused
        frontier = redis_frontier(server.url, name, name=f"w{i}")
        async with trio_crawl.open_crawler(start, frontier=frontier, workers=3, **options) as run:
            async for record in run:
                outcomes.add((record.url, record.status))
                records += 1
        refused += run.summary.over_host_budget

    async with trio.open_nursery() as nursery:
        for i in range(workers):
            nursery.start_soon(one, i)
    return outcomes, records, refused


BUDGETS = [(4, None), (None, 3), (3, 2), (6, 4)]


@pytest.mark.parametrize(("pages", "hosts"), BUDGETS)
async def test_memory_state_file_and_two_redis_workers_record_the_same_urls(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path, pages: int | None, hosts: int | None
) -> None:
    """The same budgeted crawl through the three frontiers: the same records
    (URLs and statuses: a redirect whose target is over budget is recorded,
    its target never fetched), the same distinct URLs asked of each host,
    within the budgets, and refusals counted by all three."""
    options: dict[str, Any] = {
        "span_hosts": True,
        "max_pages_per_host": pages,
        "max_hosts": hosts,
        "ignore_robots": True,
    }
    with hosts_site() as servers:
        start = servers[0].url("/")
        results: dict[str, set[Outcome]] = {}
        asked: dict[str, dict[str, int]] = {}
        refused: dict[str, int] = {}
        with trio.fail_after(TIMEOUT):
            for name in ("memory", "state", "redis"):
                before = [len(s.log) for s in servers]
                if name == "redis":
                    outcomes, records, refused[name] = await crawl_on_redis(
                        redis_server, crawl_id, start, options, workers=2
                    )
                    assert records == len(outcomes)  # no URL twice
                else:
                    state = str(tmp_path / "crawl.db") if name == "state" else None
                    outcomes, refused[name] = await crawl_once(start, options, state=state)
                results[name] = outcomes
                asked[name] = fetched(servers, before)
            assert await check_crawl(redis_server.url, crawl_id) == []
    assert results["redis"] == results["memory"] == results["state"]
    assert asked["redis"] == asked["memory"] == asked["state"]
    assert asked["memory"] == per_host({url for url, _ in results["memory"]})
    assert within(asked["redis"], pages, hosts)
    assert refused["memory"] > 0 and refused["state"] > 0 and refused["redis"] > 0
    if hosts is not None and (pages is None or pages > 3):
        # /p/2 (admitted) redirects to the last host, never admitted
        assert (servers[1].url("/p/2"), 301) in results["redis"]
        assert urlsplit(servers[-1].base_url).netloc not in asked["redis"]


@pytest.mark.parametrize(("pages", "hosts"), [(4, None), (None, 3), (None, None)])
async def test_a_redirect_over_budget_is_budget_on_all_three_frontiers(
    redis_server: RedisServer,
    crawl_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pages: int | None,
    hosts: int | None,
) -> None:
    """What ``admit_redirect`` says of a redirect whose target the host
    budgets refuse: ``BUDGET`` in memory, on a state file and on Redis alike
    (Redis said ``FOLLOW``: its admission goes with the page's finish); and
    of one whose target the crawl knows: ``SEEN`` on all three, budgets or
    not (Redis said ``FOLLOW``). With 4 pages a host, each host's ``/p/1``
    goes to its ``/p/11``, already refused, and ``/p/2`` to the last host's
    ``/``, known; with 3 hosts, ``/p/1`` goes to its ``/p/11``, known, and
    ``/p/2`` to the fifth host; without budgets both are known."""
    from trio_crawl.frontiers.memory import MemoryFrontier
    from trio_crawl.frontiers.redis import RedisFrontier
    from trio_crawl.frontiers.sqlite import SqliteFrontier

    said: list[tuple[str, RedirectOutcome]] = []
    for backend in (MemoryFrontier, SqliteFrontier, RedisFrontier):
        real = backend.admit_redirect

        async def spy(self: Any, entry: Any, target: str, real: Any = real) -> RedirectOutcome:
            outcome: RedirectOutcome = await real(self, entry, target)
            said.append((entry.url, outcome))
            return outcome

        monkeypatch.setattr(backend, "admit_redirect", spy)
    options: dict[str, Any] = {
        "span_hosts": True,
        "max_pages_per_host": pages,
        "max_hosts": hosts,
        "ignore_robots": True,
    }
    outcomes: dict[str, dict[str, RedirectOutcome]] = {}
    with hosts_site() as servers, trio.fail_after(TIMEOUT):
        start = servers[0].url("/")
        for name in ("memory", "state", "redis"):
            said.clear()
            if name == "redis":
                await crawl_on_redis(redis_server, crawl_id, start, options, workers=2)
            else:
                state = str(tmp_path / "crawl.db") if name == "state" else None
                await crawl_once(start, options, state=state)
            assert len(said) == len(dict(said)), said  # each redirect once
            outcomes[name] = dict(said)
        budget, seen = RedirectOutcome.BUDGET, RedirectOutcome.SEEN
        admitted = servers if hosts is None else servers[:hosts]
        if pages is not None:
            expected = {
                s.url(hop): o for s in admitted for hop, o in (("/p/1", budget), ("/p/2", seen))
            }
        elif hosts is not None:
            expected = {
                s.url(hop): o for s in admitted for hop, o in (("/p/1", seen), ("/p/2", budget))
            }
        else:
            expected = {s.url(hop): seen for s in admitted for hop in ("/p/1", "/p/2")}
    assert outcomes["redis"] == outcomes["memory"] == outcomes["state"] == expected


def test_the_command_line_takes_budgets_with_redis_and_says_what_they_refused(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    """``--redis`` with ``--max-pages-per-host`` and ``--max-hosts``: two worker
    processes record what one process records in memory, and each worker's
    summary counts the links its calls' budgets turned away. The second
    joins with no URL and no budgets: it takes the crawl's (and its
    ``--span-hosts``), as it takes its other settings."""
    budgets = ["--span-hosts", "--max-pages-per-host", "5", "--max-hosts", "3", "-w", "3"]
    with hosts_site() as servers:
        start = servers[0].url("/")
        alone = run_cli(start, *budgets, "-o", "-")
        assert alone.returncode == 0, alone.stderr
        expected = {r["url"] for r in records_in(alone.stdout)}
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(2)]
        common = ["--redis", redis_server.url, "--crawl-id", crawl_id]
        before = [len(s.log) for s in servers]
        first = start_cli(start, *common, *budgets, "-o", str(outputs[0]))
        wait_for_records(outputs[0], 1, servers, before, 1)  # the crawl is created
        workers = [first, start_cli(*common, "-w", "3", "-o", str(outputs[1]))]
        errors = [w.communicate(timeout=TIMEOUT)[1] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], errors
    got = [r["url"] for out in outputs for r in records_in(out.read_text())]
    assert sorted(got) == sorted(expected)
    assert within(per_host(expected), 5, 3) and len(per_host(expected)) == 3
    assert any("not followed" in e for e in errors), errors
    assert trio.run(check_crawl, redis_server.url, crawl_id) == []
    status = run_cli(*common, "--status")
    assert status.returncode == 0, status.stderr
    assert "host budgets: 3 hosts admitted of at most 3, at most 5 URLs a host\n" in status.stdout


def wait_for_records(
    path: Path, n: int, servers: list[SiteServer], before: list[int], all_but_hold: int
) -> None:
    """Until ``path`` holds ``n`` records, or every page of the crawl but
    ``/hold`` was asked for since ``before`` (the victim may get few); 30 s at most."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        if sum(fetched(servers, before).values()) >= all_but_hold:
            return
        time.sleep(0.005)


@pytest.mark.parametrize("seed", range(4))
def test_a_budgeted_worker_killed_mid_crawl_leaves_the_crawl_exact(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path, seed: int
) -> None:
    """Three workers, one killed with SIGKILL after a random number of its
    records and a random delay (mid-fetch, mid-write, between a record and
    its finish); then the victim's command is run again, as a resume. The
    records of all runs hold every URL of the budgeted crawl and no other
    (a URL twice only as marked ``refetched``), each host was asked for at
    most its budget of distinct URLs, and Redis's counts agree with its
    seen set: nothing the victim held was lost or counted twice."""
    rng = random.Random(seed)
    budgets = ["--span-hosts", "--max-pages-per-host", "8", "--max-hosts", "4"]
    hold = threading.Event()
    hold.set()  # for the crawl in one process
    with hosts_site(delay=0.03, hold=hold) as servers:
        start = servers[0].url("/")
        alone = run_cli(start, *budgets, "-w", "4", "-o", "-")
        assert alone.returncode == 0, alone.stderr
        expected = {r["url"] for r in records_in(alone.stdout)}
        hold.clear()  # the crawl cannot end before the kill
        before = [len(s.log) for s in servers]
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(3)]
        common = [start, "--redis", redis_server.url, "--crawl-id", crawl_id, "-w", "2"]
        common += [*budgets, "--lease", "2"]
        victim = rng.randrange(3)
        workers = [start_cli(*common, "-o", str(out)) for out in outputs]
        wait_for_records(outputs[victim], rng.randint(1, 6), servers, before, len(expected))
        time.sleep(rng.uniform(0, 0.05))
        workers[victim].send_signal(signal.SIGKILL)
        hold.set()
        codes = [w.wait(timeout=TIMEOUT) for w in workers]
        assert codes[victim] == -signal.SIGKILL
        assert [c for i, c in enumerate(codes) if i != victim] == [0, 0]
        again = run_cli(*common, "-o", str(outputs[victim]))  # the crawl is done: at once
        assert again.returncode == 0, again.stderr
        asked = fetched(servers, before)
    got = [r for out in outputs for r in records_in(out.read_text())]
    counts = Counter(r["url"] for r in got)
    assert set(counts) == expected
    for url, n in counts.items():
        if n > 1:
            assert sum(bool(r.get("refetched")) for r in got if r["url"] == url) >= n - 1
    assert asked == per_host(expected)
    assert within(asked, 8, 4)
    assert trio.run(check_crawl, redis_server.url, crawl_id) == []


def test_a_budgeted_crawl_killed_and_run_again_goes_on_from_its_counts(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    """One worker, killed with SIGKILL mid-crawl, and the same command run
    again (a resume: it takes the killed run's pages back at once): the
    output holds the budgeted crawl's URLs, and no host was asked for more
    distinct URLs than its budget across both runs."""
    budgets = ["--span-hosts", "--max-pages-per-host", "7", "--max-hosts", "4"]
    hold = threading.Event()
    hold.set()
    with hosts_site(delay=0.03, hold=hold) as servers:
        start = servers[0].url("/")
        alone = run_cli(start, *budgets, "-o", "-")
        assert alone.returncode == 0, alone.stderr
        expected = {r["url"] for r in records_in(alone.stdout)}
        hold.clear()
        before = [len(s.log) for s in servers]
        out = tmp_path / "w.jsonl"
        args = [start, "--redis", redis_server.url, "--crawl-id", crawl_id, *budgets]
        args += ["-o", str(out)]
        worker = start_cli(*args)
        wait_for_records(out, 6, servers, before, len(expected))
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=TIMEOUT) == -signal.SIGKILL
        hold.set()
        first = len(records_in(out.read_text()))
        assert first < len(expected)
        again = run_cli(*args)
        assert again.returncode == 0, again.stderr
        asked = fetched(servers, before)
    assert {r["url"] for r in records_in(out.read_text())} == expected
    assert asked == per_host(expected)
    assert within(asked, 7, 4)
    assert trio.run(check_crawl, redis_server.url, crawl_id) == []
