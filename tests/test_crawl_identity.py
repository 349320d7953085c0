"""The identity a stored crawl is resumed (``--state``) or joined (``--redis``) with.

Pure: ``frontiers/crawl_identity.py`` from ``CrawlConfig`` values, through JSON
and back, as the state file and Redis store it.
"""

from __future__ import annotations

import dataclasses
import json
import os

from hypothesis import given
from hypothesis import strategies as st

from trio_crawl import CrawlConfig
from trio_crawl.frontiers.crawl_identity import CrawlIdentity, SharedIdentity, StateIdentity

COMMON = [
    "start_urls", "allow_domains", "max_depth", "max_pages", "filters",
    "span_hosts", "max_pages_per_host", "max_hosts",
]  # fmt: skip


def config(**options: object) -> CrawlConfig:
    options.setdefault("start_urls", ["http://a.test/", "http://b.test/x/"])
    return CrawlConfig.from_options(**options)  # type: ignore[arg-type]


def stored(settings: dict[str, object]) -> dict[str, object]:
    """What a backend reads back: the settings through JSON."""
    return dict(json.loads(json.dumps(settings)))


def test_both_backends_are_identified_by_the_same_fields_and_their_own() -> None:
    names = [f.name for f in dataclasses.fields(CrawlIdentity)]
    assert names == COMMON
    assert [f.name for f in dataclasses.fields(StateIdentity)] == [*COMMON, "seeds"]
    assert [f.name for f in dataclasses.fields(SharedIdentity)] == [
        *COMMON, "rate", "per_host_concurrency", "ignore_robots",
    ]  # fmt: skip


def test_the_stored_form_is_json_and_reads_back_equal() -> None:
    identity = StateIdentity.of(config(max_depth=2, include=["/x/"], no_parent=True), "seeds.txt")
    assert identity.settings() == {
        "start_urls": ["http://a.test/", "http://b.test/x/"],
        "allow_domains": [],
        "max_depth": 2,
        "max_pages": None,
        "filters": {"include": ["/x/"], "exclude": [], "no_parent": True},
        "span_hosts": None,
        "max_pages_per_host": None,
        "max_hosts": None,
        "seeds": os.path.abspath("seeds.txt"),
    }
    assert identity.differing(stored(identity.settings())) == []


def test_each_differing_field_is_named_in_field_order() -> None:
    before = SharedIdentity.of(config(rate=2.0, max_pages=10))
    after = SharedIdentity.of(config(rate=3.0, max_pages=11, ignore_robots=True))
    assert after.differing(stored(before.settings())) == ["max_pages", "rate", "ignore_robots"]


def test_start_url_order_does_not_make_another_crawl() -> None:
    one = StateIdentity.of(config(start_urls=["http://a.test/", "http://b.test/"]), None)
    other = StateIdentity.of(config(start_urls=["http://b.test/", "http://a.test/"]), None)
    assert one == other and one.differing(stored(other.settings())) == []


def test_a_crawl_stored_before_filters_existed_matches_one_without_filters() -> None:
    identity = StateIdentity.of(config(), None)
    old = stored(identity.settings())
    del old["filters"]
    assert identity.differing(old) == []
    filtered = StateIdentity.of(config(exclude=["\\.pdf$"]), None)
    assert filtered.differing(old) == ["filters"]


def test_a_crawl_stored_before_span_hosts_and_host_budgets_matches_one_without() -> None:
    """Files and Redis crawls stored before these fields existed resume as
    before; with --span-hosts or a per-host budget they are another crawl
    (--force to resume anyway), as other start URLs or --max-pages are."""
    identity = StateIdentity.of(config(), None)
    old = stored(identity.settings())
    for name in ("span_hosts", "max_pages_per_host", "max_hosts"):
        del old[name]
    assert identity.differing(old) == []
    wider = StateIdentity.of(config(span_hosts=True, max_pages_per_host=5, max_hosts=9), None)
    assert wider.differing(old) == ["span_hosts", "max_pages_per_host", "max_hosts"]


@given(
    max_depth=st.none() | st.integers(0, 50),
    max_pages=st.none() | st.integers(1, 10**6),
    domains=st.lists(st.sampled_from(["a.test", "b.test", "c.test"]), unique=True),
    include=st.lists(st.sampled_from(["/a", "/b", "x$"]), max_size=2),
    rate=st.none() | st.floats(0.1, 100),
)
def test_any_identity_reads_back_equal_and_differs_from_another_by_its_fields(
    max_depth: int | None,
    max_pages: int | None,
    domains: list[str],
    include: list[str],
    rate: float | None,
) -> None:
    made = config(
        max_depth=max_depth, max_pages=max_pages, allow_domains=domains, include=include, rate=rate
    )
    identity = SharedIdentity.of(made)
    assert identity.differing(stored(identity.settings())) == []
    base = SharedIdentity.of(config())
    expected = [
        name for name in identity.settings() if getattr(identity, name) != getattr(base, name)
    ]
    assert identity.differing(stored(base.settings())) == expected
