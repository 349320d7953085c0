"""What a Redis crawl costs its redis-server (issue 37, Part A item 1),
against a real redis-server (tests/redis_fixture.py).

Admitting a link Redis knows already is a seen-set probe and two lookups
that change nothing; most links of a site are such links. A worker sends a
link it had Redis accept at the same depth or lower as its digest only
(``frontiers/redis/sent_links.py``): the server's own command counts
(``INFO commandstats``) show which links were admitted. The crawl stays
exact: every page once, at its link distance.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from trio_crawl import CrawlRecord, redis_frontier, run_crawl
from trio_crawl.frontiers.redis.outbox import CALL_WEIGHT, Batch
from trio_crawl.frontiers.redis.sent_links import SentLinks

import redis_fixture
from fakes import FakeFetcher, FakePage
from redis_fixture import RedisServer

pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id
own_redis = redis_fixture.own_redis

SITE = "http://cpu.test"


def url(name: object) -> str:
    return f"{SITE}/{name}"


async def command_calls(server: RedisServer) -> Counter[str]:
    """Calls of each command since the last ``CONFIG RESETSTAT``."""
    import coredis

    client: Any = coredis.Redis.from_url(server.url)
    async with client:
        stats = await client.info("commandstats")
    calls: Counter[str] = Counter()
    for name, value in stats.items():
        if name.startswith("cmdstat_"):
            calls[name.removeprefix("cmdstat_")] = int(value["calls"])
    return calls


async def crawl(
    server: RedisServer, name: str, pages: dict[str, FakePage], **options: Any
) -> list[CrawlRecord]:
    records: list[CrawlRecord] = []
    with trio.fail_after(120):
        await run_crawl(
            [url(0)],
            frontier=redis_frontier(server.url, name, name="w"),
            fetcher=FakeFetcher(pages),
            on_record=records.append,
            ignore_robots=True,
            workers=2,
            **options,
        )
    return records


def hub_site(again: bool) -> dict[str, FakePage]:
    """0 -> a; a -> x0..x49 and c (depth 2); c -> x0..x49 again (depth 3)
    when ``again``. ``c`` is admitted by ``a``'s finish, so Redis has
    accepted ``a``'s links before ``c`` is even handed out."""
    xs = [url(f"x{i}") for i in range(50)]
    pages = {url(0): FakePage(links=[url("a")]), url("a"): FakePage(links=[*xs, url("c")])}
    pages[url("c")] = FakePage(links=xs if again else [])
    pages.update({x: FakePage() for x in xs})
    return pages


async def test_links_redis_accepted_at_a_lower_depth_are_not_admitted_again(
    redis_server: RedisServer, crawl_id: str
) -> None:
    admitted: list[int] = []
    for again in (False, True):
        redis_server.command("CONFIG", "RESETSTAT")
        records = await crawl(redis_server, f"{crawl_id}-{again}", hub_site(again))
        # Exact all the same: 53 pages, each once, at its link distance.
        depths = {r.url: r.depth for r in records}
        assert len(records) == len(depths) == 53
        assert depths[url("c")] == 2 and depths[url("x7")] == 2
        admitted.append((await command_calls(redis_server))["hsetnx"])
    # Every seen-set probe (HSETNX) is an admission: c's 50 links, sent at
    # depth 3 after Redis accepted them at depth 2, cost none.
    assert admitted[0] == 53  # 0, a, then a's 51 links
    assert admitted[1] == admitted[0]


def test_sent_links_is_exact_and_bounded() -> None:
    sent = SentLinks(size=2)
    assert not sent.known("u", 5)
    sent.confirm(["u"], 3)
    assert sent.known("u", 3) and sent.known("u", 4) and not sent.known("u", 2)
    sent.confirm(["u"], 5)  # a deeper send never raises what Redis has
    assert sent.known("u", 4)
    sent.confirm(["v", "w", "z", "y", "q"], 1)  # u is pushed out of both generations
    assert len(sent) <= 4
    assert not sent.known("u", 9)


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 5)), max_size=60))
def test_sent_links_never_claims_more_than_was_confirmed(
    sends: list[tuple[str, int]],
) -> None:
    """``known`` is only ever True for a depth at or above the lowest
    confirmed one (forgetting is allowed, inventing is not)."""
    sent = SentLinks(size=3)
    lowest: dict[str, int] = {}
    for link, depth in sends:
        sent.confirm([link], depth)
        lowest[link] = min(depth, lowest.get(link, depth))
        for other in "abcdefgh":
            for probe in range(6):
                if sent.known(other, probe):
                    assert other in lowest and lowest[other] <= probe


async def test_a_page_with_50000_links_is_admitted_in_bounded_calls(own_redis: Any) -> None:
    """Redis runs one call at a time, and every other worker waits behind
    it: a page's 50,000 links go over many calls, each a bounded part
    (``CALL_WEIGHT`` admissions), never as one call of 350,000 arguments.
    SLOWLOG gives each call's argument count."""
    import coredis

    # Calls over 200 us: every call that carries hundreds of admissions, and
    # few of the commands they run (each logged too).
    server = own_redis("--slowlog-log-slower-than", "200", "--slowlog-max-len", "100000")
    many = [url(f"m{i}") for i in range(50_000)]
    pages = {url(0): FakePage(links=many), **{u: FakePage() for u in many[:5]}}
    records = await crawl(server, "big", pages, max_pages=3)
    assert records[0].url == url(0) and len(records) == 3
    # Every link was admitted (one seen-set probe each, and one for the start).
    assert (await command_calls(server))["hsetnx"] == 50_001
    client: Any = coredis.Redis.from_url(server.url)
    async with client:
        entries = await client.slowlog_get(-1)
    sizes = []
    for entry in entries:
        args = [a.decode("latin-1") if isinstance(a, bytes) else str(a) for a in entry.command]
        if args[0].upper() != "FCALL":
            continue
        more = 0
        if args[-1].startswith("... ("):  # SLOWLOG keeps 31 arguments, then a count
            more = int(args[-1].split("(")[1].split()[0]) - 1
        sizes.append(len(args) + more)
    # About 7 arguments an admission: 50,000 links in calls of CALL_WEIGHT.
    assert len([n for n in sizes if n > 1_000]) >= 50_000 // CALL_WEIGHT
    assert max(sizes) < 8 * (CALL_WEIGHT + 10), max(sizes)


@given(st.lists(st.integers(1, 2 * CALL_WEIGHT), max_size=40), st.integers(0, 3))
def test_a_batch_is_cut_into_calls_of_bounded_weight(weights: list[int], loose: int) -> None:
    """Every op once, in order, whole; a call weighs at most ``CALL_WEIGHT``
    unless it is one op that weighs more by itself."""
    batch = Batch()
    for i, weight in enumerate(weights):
        batch.add([i] * 3, 0.0, weight)
        batch.ops += ["x"] * (i % (loose + 1) == 0)  # an op added without ``add``
    calls = batch.calls()
    assert [op for call in calls for op in call] == batch.ops
    numbered = [[op for op in call if op != "x"] for call in calls]
    for call in numbered:
        ops = sorted(set(call))  # each op's 3 fields stay together
        assert all(call.count(op) == 3 for op in ops)
        weight = sum(weights[op] for op in ops)  # type: ignore[index]
        assert weight <= CALL_WEIGHT or len(ops) <= 1


async def test_a_host_is_read_and_written_once_a_call(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """A call finishes and leases many pages of one host: its hash is read
    (HMGET) and written (HSET) once in that call, not once a page. Each call
    reads the crawl's counters (one HMGET)."""
    pages = {url(0): FakePage(links=[url(i) for i in range(1, 400)])}
    pages.update({url(i): FakePage() for i in range(1, 400)})
    redis_server.command("CONFIG", "RESETSTAT")
    records = await crawl(redis_server, crawl_id, pages)
    assert sorted(r.url for r in records) == sorted(pages)
    assert {r.depth for r in records if r.url != url(0)} == {1}
    calls = await command_calls(redis_server)
    functions = calls["fcall"]
    assert functions < len(pages) / 4, calls  # pages went many a call
    # One host: at most one HMGET of it a call, besides the counters' and a
    # few at the start (hello's); it was one a page: over 400. Its HSET goes
    # with it (``flush_hosts``).
    assert calls["hmget"] <= 2 * functions + 5, (calls["hmget"], functions)


def test_a_finish_weighs_more_than_its_links() -> None:
    """A finish costs Redis work of its own (its lease checked and dropped,
    its host released, its links kept), about four admissions: a batch of
    many finishes of pages without links is cut into calls as well, not
    sent as one call that holds Redis for milliseconds."""
    from trio_crawl.frontiers.redis.outbox import Lease
    from trio_crawl.frontiers.redis.page_links import FINISH_WEIGHT, finish_ops

    batch = Batch()
    for i in range(CALL_WEIGHT):
        lease = Lease(i.to_bytes(8, "big"), 1, None, False, started=True)  # type: ignore[arg-type]
        for op, weight in finish_ops(lease):
            batch.add(op, 0.0, weight)
    calls = batch.calls()
    assert sum(call.count("F") for call in calls) == CALL_WEIGHT
    assert len(calls) >= FINISH_WEIGHT
    assert all(call.count("F") * FINISH_WEIGHT <= CALL_WEIGHT for call in calls)


class Functions:
    """The crawl's functions called directly, as a worker calls them."""

    def __init__(self, client: Any, crawl: str) -> None:
        from trio_crawl.frontiers.redis import keys_prefix

        self.client, self.prefix, self.owner = client, keys_prefix(crawl), ""

    async def call(self, name: str, args: list[object]) -> Any:
        from trio_crawl.frontiers.redis import lua

        return await self.client.fcall(lua.function(name), keys=[self.prefix], args=args)

    async def hello(self, start: str) -> None:
        from trio_crawl.frontiers.redis import lua, wire

        await self.client.function_load(lua.LIBRARY, replace=True)
        reply = wire.HelloReply.parse(
            await self.call(
                "hello",
                wire.hello_args(
                    "f", 600, may_create=True, identity_json="{}", max_pages=None, rate=None,
                    per_host_concurrency=None, read_robots=False, max_depth=None, settle=True,
                    starts=wire.admission(start, 0, ""),
                ),
            )
        )  # fmt: skip
        self.owner = reply.owner

    async def sync(self, ops: list[object], want: int = 100) -> Any:
        from trio_crawl.frontiers.redis import wire

        return wire.SyncReply.parse(
            await self.call("sync", wire.sync_args(self.owner, want, want, ops))
        )

    async def problems(self) -> list[Any]:
        """What the crawl's consistency check finds (``tc_check``)."""
        from trio_crawl.frontiers.redis import lua

        found: list[Any] = await self.client.fcall_ro(
            lua.function("check"), keys=[self.prefix], args=[]
        )
        return found


async def test_a_known_url_is_answered_by_the_seen_set_alone(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """A link in full to a URL Redis has (another worker found it first)
    costs its seen-set probe and one read of the depth the seen set keeps,
    not a lookup of its entry and then of its finished page's record (which
    holds all its links, unpacked to read one number)."""
    import coredis

    from trio_crawl.frontiers.redis import wire

    client: Any = coredis.Redis.from_url(redis_server.url)
    async with client:
        f = Functions(client, crawl_id)
        await f.hello(url(0))
        # 0 -> a, k; a -> x0..x4 (depth 2). The x pages finish while k (depth
        # 1) is leased: they are kept (not settled), records with their links.
        (start,) = (await f.sync([])).taken
        kids = [*wire.admission(url("a"), 1, url(0)), *wire.admission(url("k"), 1, url(0))]
        taken = {
            t.url: t for t in (await f.sync(wire.finish_op(start.digest, 1, True, kids))).taken
        }
        xs = [wire.admission(url(f"x{i}"), 2, url("a")) for i in range(5)]
        a = taken[url("a")]
        reply = await f.sync(wire.finish_op(a.digest, a.token, True, [v for x in xs for v in x]))
        ops: list[object] = []
        for t in reply.taken:
            ops += wire.finish_op(t.digest, t.token, True, [])
        await f.sync(ops, want=0)

        async def reads(ops: list[object]) -> int:
            redis_server.command("CONFIG", "RESETSTAT")
            await f.sync(ops, want=0)
            return (await command_calls(redis_server))["hget"]

        # The five, found again deeper (as another worker sends them): one
        # read each, beside what any call reads.
        again = [v for i in range(5) for v in wire.admission(url(f"x{i}"), 3, url("k"))]
        assert await reads(wire.admit_op(again)) - await reads([]) == 5  # it was 10
        assert await f.problems() == []


def test_known_links_travel_as_one_argument() -> None:
    """Redis turns every argument of a call into a Lua string: a page's
    known links (some 28 a page of the benchmark site) go as one argument,
    their digests end to end, which Redis keeps as it came."""
    from trio_crawl.frontiers.redis import wire

    known = [wire.url_digest(url(f"k{i}")) for i in range(50)]
    op = wire.finish_op(b"d" * 8, 3, True, [], known, 2)
    assert op == ["F", b"d" * 8, 3, 1, 0, 2, b"".join(known)]
    part = wire.part_op(b"d" * 8, 3, [], known, 2)
    assert len(part) == 6 and part[-1] == b"".join(known)


async def test_a_shorter_path_passes_through_known_links_kept_with_a_page(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """A finished page kept with its known links (one string of digests):
    a shorter path to the page lowers the URLs they lead to, and the seen
    set's depths follow (the consistency check compares them)."""
    import coredis

    from trio_crawl.frontiers.redis import wire

    client: Any = coredis.Redis.from_url(redis_server.url)
    async with client:
        f = Functions(client, crawl_id)
        await f.hello(url(0))
        (start,) = (await f.sync([])).taken
        kids = [*wire.admission(url("a"), 1, url(0)), *wire.admission(url("k"), 1, url(0))]
        taken = {
            t.url: t for t in (await f.sync(wire.finish_op(start.digest, 1, True, kids))).taken
        }
        a = taken[url("a")]
        x_admission = wire.admission(url("x"), 2, url("a"))
        (x,) = (await f.sync(wire.finish_op(a.digest, a.token, True, x_admission), 1)).taken
        # y is known at depth 3 (admitted, queued); x (depth 2) finishes with
        # y as a known link, and is kept: k, at depth 1, is still leased.
        y = wire.admission(url("y"), 3, url("x"))
        ops = [*wire.admit_op(y), *wire.finish_op(x.digest, x.token, True, [], [y[0]], 3)]  # type: ignore[list-item]
        assert (await f.sync(ops, want=0)).refused == 0
        # A path of 1 to x (a start URL's link, say): x's record is corrected,
        # and y, one link further, is now at depth 2.
        reply = await f.sync(wire.admit_op(wire.admission(url("x"), 1, url(0))), want=0)
        assert [(c.url, c.depth, c.previous_depth) for c in reply.corrections] == [
            (url("x"), 1, 2)
        ]
        assert await f.problems() == []
        taken = {t.url: t for t in (await f.sync([])).taken}
        assert taken[url("y")].depth == 2


async def test_a_call_changes_the_lease_set_and_pops_a_queue_once(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """A worker's lease set (``wl:<owner>``) takes the digests a call
    leases in one SADD and drops those it finishes in one SREM, a host that
    is not spaced gives a call its URLs in one LPOP, and the entries of the
    pages a call finishes go in one HDEL: not a command a page each."""
    pages = {url(0): FakePage(links=[url(i) for i in range(1, 400)])}
    pages.update({url(i): FakePage() for i in range(1, 400)})
    redis_server.command("CONFIG", "RESETSTAT")
    records = await crawl(redis_server, crawl_id, pages)
    assert sorted(r.url for r in records) == sorted(pages)
    calls = await command_calls(redis_server)
    # Besides the lease set, a call may register its worker as idle (SADD).
    assert calls["sadd"] + calls["srem"] <= 3 * calls["fcall"] + 5, calls  # it was over 800
    assert calls["lpop"] <= 2 * calls["fcall"], calls  # it was 400
    assert calls["hdel"] <= calls["fcall"], calls  # a finished entry's: it was 400


async def test_links_of_a_move_still_in_the_outbox_are_sent_once(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """a and b are finished together, both linking to the same 50 new
    pages: b's finish, behind a's in the same call, sends them as digests
    (a's carries them in full, and Redis runs a's first)."""
    xs = [url(f"x{i}") for i in range(50)]
    pages = {url(0): FakePage(links=[url("a"), url("b")])}
    pages.update({url("a"): FakePage(links=xs), url("b"): FakePage(links=xs)})
    pages.update({x: FakePage() for x in xs})
    redis_server.command("CONFIG", "RESETSTAT")
    records = await crawl(redis_server, crawl_id, pages)
    assert sorted(r.url for r in records) == sorted(pages)
    assert {r.depth for r in records if r.url in xs} == {2}
    # One seen-set probe a URL: 0, a, b and the 50 (b's would make 50 more).
    assert (await command_calls(redis_server))["hsetnx"] == 53


def test_a_link_in_the_outbox_is_known_only_to_its_join_until_accepted() -> None:
    sent = SentLinks()
    carried = sent.pend(["x"], 2, join=0)
    assert sent.known("x", 2, 0) and sent.known("x", 3, 0)
    assert not sent.known("x", 1, 0)  # deeper in flight says nothing of depth 1
    assert not sent.known("x", 2, 1)  # a later join: its moves may be accepted alone
    assert not sent.known("x", 2)  # no join given: confirmed links only
    sent.settle([carried], accepted=False)  # refused: nothing admitted
    assert not sent.known("x", 2, 0)
    sent.settle([sent.pend(["x"], 2, join=0)], accepted=True)
    assert sent.known("x", 2) and sent.known("x", 2, 5)
    budgets = SentLinks(pending=False)  # with host budgets: confirmed only
    budgets.pend(["y"], 1, join=0)
    assert not budgets.known("y", 1, 0)


@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 3), st.integers(0, 1), st.booleans()),
        max_size=30,
    )
)
def test_settling_every_move_leaves_nothing_pending(
    moves: list[tuple[str, int, int, bool]],
) -> None:
    """Pending links are counted per move: settling one move of a link
    leaves another still in flight known, and settling all leaves none."""
    sent = SentLinks(size=0)  # confirmed links forgotten: only pending ones count
    carried = [(sent.pend([u], d, j), ok) for u, d, j, ok in moves]
    for (urls, depth, join), _ in carried:
        assert sent.known(urls[0], depth, join)
    for k, (item, ok) in enumerate(carried):
        sent.settle([item], accepted=ok)
        for (urls, depth, join), _ in carried[k + 1 :]:  # still in flight
            assert sent.known(urls[0], depth, join)
    for u, d, j, _ in moves:
        assert not sent.known(u, d, j)


def test_a_known_link_keeps_its_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's known links go as digests: the one kept with each link is
    used, not a BLAKE2b of the URL each time it is found again."""
    from trio_crawl.frontiers.redis import sent_links, wire

    sent = SentLinks()
    sent.confirm([url("u")], 1)
    hashed: list[str] = []
    monkeypatch.setattr(sent_links, "url_digest", lambda u: hashed.append(u) or b"?" * 8)
    assert sent.digest(url("u"), 2) == wire.url_digest(url("u"))
    assert sent.digest(url("u"), 0) is None and sent.digest(url("v"), 5) is None
    assert hashed == []
