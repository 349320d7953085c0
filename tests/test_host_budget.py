"""--span-hosts, --max-pages-per-host, --max-hosts: the pure budget, the
frontier using it (hypothesis), and a crawl across hosts under MockClock."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl import run_crawl
from trio_crawl.core.config import CrawlConfig
from trio_crawl.core.frontier import Frontier, RedirectOutcome
from trio_crawl.core.host_budget import HostBudget
from trio_crawl.core.models import CrawlRecord
from trio_crawl.core.scope import Scope
from trio_crawl.core.url import host_port
from trio_crawl.errors import ConfigError
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Site, page

from cli_helpers import records_in, run_cli
from fakes import FakeFetcher, FakePage


def u(host: int, page: int = 0) -> str:
    return f"http://h{host}.test/{page}"


def test_budget_counts_pages_per_host_and_hosts() -> None:
    budget = HostBudget(max_pages_per_host=2, max_hosts=2)
    assert [budget.admits(u(1, p)) for p in range(3)] == [True, True, False]
    assert budget.admits(u(2)) and not budget.admits(u(3))
    assert (budget.hosts, budget.pages("h1.test:80"), budget.refused) == (2, 2, 2)
    with pytest.raises(ValueError):
        HostBudget(max_hosts=0)


def test_start_urls_are_admitted_whatever_the_budget_but_count() -> None:
    budget = HostBudget(max_pages_per_host=1, max_hosts=1)
    frontier = Frontier(in_scope=Scope([u(1)], span_hosts=True).allows, host_budget=budget)
    assert frontier.add_start(u(1)) and frontier.add_start(u(2))
    assert budget.hosts == 2
    assert frontier.discover([u(1, 5), u(3, 1)], 0, u(1)) == []


def test_span_hosts_scope_admits_any_host_but_no_trap() -> None:
    scope = Scope([u(1)], span_hosts=True)
    assert scope.allows("https://elsewhere.example:8443/x")
    assert not scope.allows("http://a.test/" + "x" * 5000)
    assert not Scope([u(1)]).allows(u(2))


def test_a_redirect_to_a_host_over_budget_is_not_followed() -> None:
    budget = HostBudget(max_hosts=1)
    frontier = Frontier(in_scope=Scope([u(1)], span_hosts=True).allows, host_budget=budget)
    (entry,) = frontier.add_start(u(1))
    frontier.start(entry)
    outcome, admitted = frontier.redirect(entry, u(2))
    assert (outcome, admitted) == (RedirectOutcome.BUDGET, [])


@settings(max_examples=150, deadline=None)
@given(
    links=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9)), min_size=1, max_size=200),
    per_host=st.one_of(st.none(), st.integers(1, 5)),
    max_hosts=st.one_of(st.none(), st.integers(1, 5)),
)
def test_the_frontier_never_admits_past_the_budgets(
    links: list[tuple[int, int]], per_host: int | None, max_hosts: int | None
) -> None:
    """Whatever links arrive, in whatever batches: no host gets more than
    ``per_host`` URLs, no more than ``max_hosts`` hosts are admitted, each URL
    once, and a URL is refused only when a budget said so."""
    budget = HostBudget(max_pages_per_host=per_host, max_hosts=max_hosts)
    frontier = Frontier(in_scope=Scope([u(0)], span_hosts=True).allows, host_budget=budget)
    admitted = [e.url for e in frontier.add_start(u(0))]
    for i in range(0, len(links), 7):
        batch = [u(h, p) for h, p in links[i : i + 7]]
        admitted += [e.url for e in frontier.discover(batch, 0, u(0))]
    assert len(admitted) == len(set(admitted))
    per = {}
    for url in admitted:
        per[host_port(url)] = per.get(host_port(url), 0) + 1
    assert max_hosts is None or len(per) <= max_hosts
    assert per_host is None or max(per.values()) <= per_host
    offered = {u(0)} | {u(h, p) for h, p in links}
    for url in offered - set(admitted):
        host = host_port(url)
        full = per_host is not None and per.get(host, 0) >= per_host
        assert full or (max_hosts is not None and host not in per and len(per) == max_hosts)


async def test_a_crawl_spans_hosts_within_its_budgets(autojump_clock: object) -> None:
    pages = {
        u(1): FakePage(links=[u(1, 1), u(1, 2), u(1, 3), u(2), u(3)]),
        u(2): FakePage(links=[u(2, 1), u(4)]),
        u(3): FakePage(links=[u(3, 1)]),
        u(4): FakePage(),
    }
    for url in list(pages):
        pages.setdefault(url, FakePage())
    records: list[CrawlRecord] = []
    await run_crawl(
        u(1),
        fetcher=FakeFetcher(pages),
        on_record=records.append,
        span_hosts=True,
        max_pages_per_host=2,
        max_hosts=3,
        ignore_robots=True,
    )
    assert sorted(r.url for r in records) == sorted([u(1), u(1, 1), u(2), u(2, 1), u(3), u(3, 1)])
    records.clear()
    await run_crawl(u(1), fetcher=FakeFetcher(pages), on_record=records.append, ignore_robots=True)
    assert {host_port(r.url) for r in records} == {"h1.test:80"}


def test_budgets_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"^max_hosts= must be at least 1 \(got 0\)$"):
        CrawlConfig.from_options(start_urls=[u(1)], max_hosts=0)


def test_span_hosts_from_the_command_line_across_two_real_servers(tmp_path: Path) -> None:
    """Two 127.0.0.1 servers (two host:ports): the link from A to B is followed
    with --span-hosts only; --max-hosts 1 keeps the crawl on A; robots.txt is
    asked of each host it visits."""
    site_b = Site({"/": page("/b1"), "/b1": page()})
    with serve_site(site_b) as b:
        site_a = Site({"/": page("/a1", b.base_url + "/"), "/a1": page()})
        with serve_site(site_a) as a:
            spanning = run_cli(a.base_url + "/", "--span-hosts", "-o", "-", "-q")
            kept = run_cli(a.base_url + "/", "--span-hosts", "--max-hosts", "1", "-o", "-", "-q")
            b_asked = b.targets()
    assert spanning.returncode == 0 and kept.returncode == 0, spanning.stderr + kept.stderr
    assert sorted(r["url"] for r in records_in(spanning.stdout)) == sorted(
        [a.base_url + "/", a.base_url + "/a1", b.base_url + "/", b.base_url + "/b1"]
    )
    assert sorted(r["url"] for r in records_in(kept.stdout)) == [
        a.base_url + "/",
        a.base_url + "/a1",
    ]
    assert b_asked.count("/robots.txt") == 1


def test_the_summary_says_how_many_links_the_budgets_turned_away() -> None:
    """Two links to a second host and --max-hosts 1: both are refused, once
    each, and the summary's row says so (no row without budgets)."""
    site_b = Site({"/": page(), "/b1": page()})
    with serve_site(site_b) as b:
        site_a = Site({"/": page("/a1", b.base_url + "/", b.base_url + "/b1"), "/a1": page()})
        with serve_site(site_a) as a:
            kept = run_cli(a.base_url + "/", "--span-hosts", "--max-hosts", "1", "-o", "-")
            free = run_cli(a.base_url + "/", "-o", "-")
    assert kept.returncode == 0 and free.returncode == 0, kept.stderr + free.stderr
    assert len(records_in(kept.stdout)) == 2
    row = re.search(r"over host budgets\s*│\s*(\d+) new links not followed", kept.stderr)
    assert row is not None and row[1] == "2", kept.stderr
    assert "over host budgets" not in free.stderr
