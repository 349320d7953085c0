"""The frontier on its own: no trio, no sockets. Exhaustive and property-based."""

from __future__ import annotations

import random
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.core.frontier import (
    MAX_REDIRECT_HOPS,
    EntryState,
    Frontier,
    RedirectOutcome,
)


def everything(url: str) -> bool:
    return True


def test_start_url_admitted_once_at_depth_zero() -> None:
    f = Frontier(in_scope=everything)
    (first,) = f.add_start("http://a/")
    assert first.depth == 0 and first.referrer is None
    assert f.add_start("http://a/") == []
    assert f.unfinished == 1


def test_discover_admits_new_in_scope_links_only() -> None:
    f = Frontier(in_scope=lambda u: u.startswith("http://a/"))
    (root,) = f.add_start("http://a/")
    assert f.start(root)
    new = f.finish(root, ["http://a/1", "http://b/x", "http://a/1", "http://a/"])
    assert [(e.url, e.depth, e.referrer) for e in new] == [("http://a/1", 1, "http://a/")]
    assert f.statistics().done == 1 and f.unfinished == 1


def test_max_depth_cuts_links_beyond() -> None:
    f = Frontier(in_scope=everything, max_depth=1)
    (root,) = f.add_start("http://a/")
    assert f.start(root)
    (child,) = f.finish(root, ["http://a/1"])
    assert f.start(child)
    assert f.finish(child, ["http://a/2"]) == []
    assert "http://a/2" not in f.seen


def test_shorter_path_found_later_reopens_links() -> None:
    # a -> b -> c -> d   and   a -> x -> ... -> c ; with max_depth 2 and c first
    # reached at depth 2 (its links cut), then at depth 1: d must be admitted.
    f = Frontier(in_scope=everything, max_depth=2)
    (a,) = f.add_start("http://a/")
    assert f.start(a)
    b, x = f.finish(a, ["http://b/", "http://x/"])
    assert f.start(b) and f.start(x)
    (c,) = f.finish(b, ["http://c/"])  # c at depth 2
    assert c.depth == 2 and f.start(c)
    assert f.finish(c, ["http://d/"]) == []  # depth 3: cut
    # x is at depth 1, but pretend x links to c: no, c's true depth is via a
    # direct link discovered late, e.g. a redirect of x to c at depth 1.
    outcome, admitted = f.redirect(x, "http://c/")
    assert outcome is RedirectOutcome.SEEN
    assert c.depth == 1
    assert [(e.url, e.depth, e.referrer) for e in admitted] == [("http://d/", 2, "http://c/")]


def test_queued_entry_depth_improves_in_place() -> None:
    f = Frontier(in_scope=everything, max_depth=5)
    (a,) = f.add_start("http://a/")
    assert f.start(a)
    (b,) = f.finish(a, ["http://b/"])
    assert f.start(b)
    (c,) = f.finish(b, ["http://c/"])
    assert c.depth == 2
    f.add_start("http://c/")
    assert c.depth == 0 and c.state is EntryState.QUEUED


def test_max_pages_counts_starts_not_retries() -> None:
    f = Frontier(in_scope=everything, max_pages=2)
    (a,) = f.add_start("http://a/")
    assert f.start(a)
    assert f.start(a)  # a retry
    assert a.attempts == 2 and f.started == 1
    b, c = f.finish(a, ["http://b/", "http://c/"])
    assert f.start(b)
    assert f.budget_spent
    assert not f.start(c)
    assert c.state is EntryState.DROPPED
    assert f.finish(b, ["http://d/"]) == []
    assert f.unfinished == 0


def test_redirect_outcomes() -> None:
    f = Frontier(in_scope=lambda u: "out" not in u)
    (a,) = f.add_start("http://a/")
    assert f.start(a)
    outcome, (b,) = f.redirect(a, "http://b/")
    assert outcome is RedirectOutcome.FOLLOW and b.chain == ("http://a/",) and b.depth == 0
    assert f.redirect(a, "http://out/") == (RedirectOutcome.OUT_OF_SCOPE, [])
    assert f.start(b)
    assert f.redirect(b, "http://a/") == (RedirectOutcome.LOOP, [])
    f.finish(a)
    assert f.redirect(b, "http://b/") == (RedirectOutcome.LOOP, [])


def test_redirect_hop_budget() -> None:
    f = Frontier(in_scope=everything)
    (entry,) = f.add_start("http://a/0")
    followed = 0
    for i in range(1, 20):
        assert f.start(entry)
        outcome, admitted = f.redirect(entry, f"http://a/{i}")
        f.finish(entry)
        if outcome is not RedirectOutcome.FOLLOW:
            assert outcome is RedirectOutcome.TOO_MANY
            break
        followed += 1
        (entry,) = admitted
    assert followed == MAX_REDIRECT_HOPS
    assert f.unfinished == 0


def test_finishing_twice_is_a_loud_bug() -> None:
    f = Frontier(in_scope=everything)
    (a,) = f.add_start("http://a/")
    assert f.start(a)
    f.finish(a)
    with pytest.raises(RuntimeError, match="frontier invariant broken"):
        f.finish(a)


graphs = st.integers(min_value=1, max_value=30).flatmap(
    lambda n: st.lists(st.lists(st.integers(0, n - 1), max_size=5), min_size=n, max_size=n).map(
        lambda rows: dict(enumerate(rows))
    )
)


def shortest(
    graph: dict[int, list[int]], redirects: dict[int, int], max_depth: int | None
) -> dict[int, int]:
    """Depth from node 0 where a link costs 1 and a redirect 0 (a 0-1 BFS), of
    every node a crawl limited to ``max_depth`` fetches. A redirecting node
    has no links of its own."""
    depth = {0: 0}
    todo = deque([0])
    while todo:
        node = todo.popleft()
        if node in redirects:
            target = redirects[node]
            if depth.get(target, depth[node] + 1) > depth[node]:
                depth[target] = depth[node]
                todo.appendleft(target)
            continue
        if max_depth is not None and depth[node] >= max_depth:
            continue
        for child in graph[node]:
            if depth.get(child, depth[node] + 2) > depth[node] + 1:
                depth[child] = depth[node] + 1
                todo.append(child)
    return depth


@settings(max_examples=300, deadline=None)
@given(
    graph=graphs,
    redirect_to=st.lists(st.integers(0, 29), max_size=30),
    max_depth=st.one_of(st.none(), st.integers(0, 6)),
    seed=st.integers(0, 2**32),
    concurrency=st.integers(1, 8),
)
def test_any_interleaving_fetches_exactly_the_shortest_path_ball(
    graph: dict[int, list[int]],
    redirect_to: list[int],
    max_depth: int | None,
    seed: int,
    concurrency: int,
) -> None:
    """Whatever order pages finish in, the fetched set is exactly the pages
    within max_depth of the start, each fetched once, and nothing is ever
    held back (rule 6). Each record states the depth known when it was
    written; applying the corrections (rule 8) gives the shortest depth, a
    link costing 1 and a redirect 0, and a referrer one link closer (or the
    redirecting page, at the same depth). Settled entries keep no links."""
    rng = random.Random(seed)
    n = len(graph)
    # Some nodes answer with a redirect instead of links (never the start).
    redirects = {i: t % n for i, t in enumerate(redirect_to[:n]) if i and t % 3 == 0}
    redirects = dict(list((i, t) for i, t in redirects.items() if t != i)[:MAX_REDIRECT_HOPS])
    url = "http://site/{}".format
    node_of = lambda u: int(u.rsplit("/", 1)[1])  # noqa: E731
    f = Frontier(in_scope=everything, max_depth=max_depth)
    queued = f.add_start(url(0))
    in_flight = []
    fetched: list[str] = []
    records: dict[str, tuple[int, str | None]] = {}
    while queued or in_flight:
        if queued and (len(in_flight) < concurrency) and (not in_flight or rng.random() < 0.5):
            entry = queued.pop(rng.randrange(len(queued)))
            if f.start(entry):
                fetched.append(entry.url)
                in_flight.append(entry)
        else:
            entry = in_flight.pop(rng.randrange(len(in_flight)))
            node = node_of(entry.url)
            if node in redirects:
                _, admitted = f.redirect(entry, url(redirects[node]))
                queued.extend(admitted)
                queued.extend(f.finish(entry))
            else:
                queued.extend(f.finish(entry, [url(c) for c in graph[node]]))
            records[entry.url] = (entry.depth, entry.referrer)  # the record
            entry.written = True
        for c in f.take_corrections():
            assert records[c.url][0] == c.previous_depth > c.depth
            records[c.url] = (c.depth, c.referrer)
        # Nothing is held: every unfinished entry is queued or in flight.
        assert f.unfinished == len(queued) + len(in_flight)
        assert f.statistics().held == 0
    expected = shortest(graph, redirects, max_depth)
    assert sorted(fetched) == sorted(url(n) for n in expected)
    assert len(fetched) == len(set(fetched))
    assert f.unsettled == 0  # nothing unfinished: every entry settled
    for node, depth in expected.items():
        got_depth, referrer = records[url(node)]
        assert got_depth == depth, (node, records)
        if node == 0:
            assert referrer is None
            continue
        assert referrer is not None
        parent = node_of(referrer)
        if redirects.get(parent) == node:
            assert expected[parent] == depth
        else:
            assert expected[parent] == depth - 1 and node in graph[parent]
