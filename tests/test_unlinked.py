"""The pages a recrawl no longer reaches (``core/unlinked.py``): exactly the
previous URLs not reached now, each with its previous depth and the
shallowest previous page that linked to it; a site's example and hypothesis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trio_crawl.core.unlinked import PreviousPage, Unlinked, find_unlinked

A = "http://a.test"


def test_a_site_after_a_change_lists_what_no_link_reaches_and_where_it_was_linked() -> None:
    previous = {
        f"{A}/": PreviousPage([f"{A}/news", f"{A}/about"], 0),
        f"{A}/news": PreviousPage([f"{A}/news/1", f"{A}/news/2", f"{A}/"], 1),
        f"{A}/about": PreviousPage([f"{A}/team", f"{A}/news/2"], 1),
        f"{A}/news/1": PreviousPage([f"{A}/news/1/photo"], 2),
        f"{A}/news/1/photo": PreviousPage([], 3),
        f"{A}/news/2": PreviousPage([], 2),
        f"{A}/team": PreviousPage([], 2),
        f"{A}/old-start": PreviousPage([f"{A}/"], 0),  # a start URL given last time only
    }
    # this time /news dropped its link to /news/1, and /about was not reached
    reached = {f"{A}/", f"{A}/news", f"{A}/news/2", f"{A}/team", f"{A}/new"}
    assert find_unlinked(previous, reached) == [
        Unlinked(f"{A}/old-start", 0, None),
        Unlinked(f"{A}/about", 1, f"{A}/"),
        Unlinked(f"{A}/news/1", 2, f"{A}/news"),
        Unlinked(f"{A}/news/1/photo", 3, f"{A}/news/1"),
    ]


def test_the_shallowest_referrer_wins_then_the_first_url() -> None:
    previous = {
        "d": PreviousPage([], 3),
        "x2": PreviousPage(["d"], 2),
        "b1": PreviousPage(["d"], 1),
        "a1": PreviousPage(["d", "d"], 1),
        "self": PreviousPage(["self"], None),  # a page linking to itself is not its referrer
    }
    assert find_unlinked(previous, {"x2", "b1", "a1"}) == [
        Unlinked("d", 3, "a1"),
        Unlinked("self", None, None),
    ]


urls = st.sampled_from([f"{A}/{i}" for i in range(12)])


@given(
    st.dictionaries(
        urls, st.tuples(st.lists(urls, max_size=6), st.none() | st.integers(0, 5)), max_size=12
    ),
    st.sets(urls),
)
def test_exactly_the_unreached_previous_urls_with_their_best_referrer(
    raw: dict[str, tuple[list[str], int | None]], reached: set[str]
) -> None:
    previous = {url: PreviousPage(links, depth) for url, (links, depth) in raw.items()}
    found = find_unlinked(previous, reached)
    assert [u.url for u in found] == sorted(
        (url for url in previous if url not in reached),
        key=lambda url: (previous[url].depth is None, previous[url].depth or 0, url),
    )
    for item in found:
        assert item.depth == previous[item.url].depth
        linkers = sorted(
            (p.depth is None, p.depth or 0, url)
            for url, p in previous.items()
            if item.url in p.links and url != item.url
        )
        assert item.referrer == (linkers[0][2] if linkers else None)
    # the order the store gives its pages in changes nothing
    assert find_unlinked(dict(reversed(list(previous.items()))), reached) == found
