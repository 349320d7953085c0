"""The frontier on its own: no trio, no sockets. Exhaustive and property-based."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.core.frontier import (
    MAX_REDIRECT_HOPS,
    EntryState,
    Frontier,
    RedirectOutcome,
)

from fakes import bfs_depths


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


@settings(max_examples=200, deadline=None)
@given(
    graph=graphs,
    max_depth=st.one_of(st.none(), st.integers(0, 6)),
    seed=st.integers(0, 2**32),
    concurrency=st.integers(1, 8),
)
def test_any_interleaving_fetches_exactly_the_bfs_ball(
    graph: dict[int, list[int]], max_depth: int | None, seed: int, concurrency: int
) -> None:
    """Whatever order pages finish in, the fetched set is exactly the pages
    within max_depth links of the start, each fetched once, with its true
    shortest depth in the end."""
    rng = random.Random(seed)
    url = "http://site/{}".format
    f = Frontier(in_scope=everything, max_depth=max_depth)
    queued = f.add_start(url(0))
    in_flight = []
    fetched: list[str] = []
    started_at: dict[str, tuple[int, str | None]] = {}
    while queued or in_flight:
        if queued and (len(in_flight) < concurrency) and (not in_flight or rng.random() < 0.5):
            entry = queued.pop(rng.randrange(len(queued)))
            if f.start(entry):
                fetched.append(entry.url)
                in_flight.append(entry)
                started_at[entry.url] = (entry.depth, entry.referrer)
        else:
            entry = in_flight.pop(rng.randrange(len(in_flight)))
            node = int(entry.url.rsplit("/", 1)[1])
            queued.extend(f.finish(entry, [url(c) for c in graph[node]]))
        # The depth gate's held entries are unfinished too (rule 7).
        assert f.unfinished == len(queued) + len(in_flight) + f.held
    assert f.held == 0
    expected = bfs_depths(graph, max_depth)
    assert sorted(fetched) == sorted(url(n) for n in expected)
    assert len(fetched) == len(set(fetched))
    # Rules 7 and 8: the depth an entry has when it starts is already its BFS
    # depth (its record says so), and its referrer is one link closer.
    for node, depth in expected.items():
        got_depth, referrer = started_at[url(node)]
        assert got_depth == depth
        if depth == 0:
            assert referrer is None
        else:
            assert referrer is not None
            assert expected[int(referrer.rsplit("/", 1)[1])] == depth - 1
            assert node in graph[int(referrer.rsplit("/", 1)[1])]
