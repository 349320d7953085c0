"""Depth and referrer under concurrency (issue #18 items 1 and 11).

A slow page must delay nothing else: nothing is held back for the sake of a
record's depth. A record says the depth known when it is written; a later,
shorter path writes a ``depth_update`` (to ``--depth-updates``, never into
the output). What is finally true (the
record, corrected by its updates) is the shortest path, where a redirect
hop costs nothing. Engine tests run under ``MockClock``; the last ones
crawl a real server on 127.0.0.1 from the command line.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_crawl import CrawlConfig, CrawlRecord, DepthUpdate, run_crawl

# The private engine: a seeded rng= and an on_response hook (the archive's) are its own.
from trio_crawl.engine.crawler import Crawler
from trio_crawl.testing import Response, Site, page, redirect, serve_site

from cli_helpers import fold_depth_updates, records_in, run_cli
from fakes import FakeFetcher, FakePage

SITE = "http://site.test"
OTHER = "http://other.test"


def url(n: int | str, base: str = SITE) -> str:
    return f"{base}/{n}"


async def crawl(
    fetcher: FakeFetcher, start: list[str] | None = None, **options: object
) -> tuple[list[CrawlRecord], list[DepthUpdate]]:
    records: list[CrawlRecord] = []
    updates: list[DepthUpdate] = []
    options.setdefault("ignore_robots", True)
    config = CrawlConfig.from_options(start_urls=start or [url(0)], **options)  # type: ignore[arg-type]
    crawler = Crawler(
        config,
        fetcher,
        on_record=[records.append],
        on_depth_update=[updates.append],
        rng=random.Random(0),
    )
    with trio.fail_after(10_000):
        await crawler.run()
    return records, updates


def final(
    records: list[CrawlRecord], updates: list[DepthUpdate]
) -> dict[str, tuple[int, str | None]]:
    """Each URL's (depth, referrer) once its updates are applied in order."""
    out = {r.url: (r.depth, r.referrer) for r in records}
    for u in updates:
        assert u.url in out, u  # an update follows its record
        assert out[u.url][0] == u.previous_depth > u.depth, u
        out[u.url] = (u.depth, u.referrer)
    return out


def chain_site(hang: float | None, length: int = 50) -> dict[str, FakePage]:
    """0 links a page that hangs ``hang`` seconds (None: no such page) and
    the head of a chain of ``length`` pages that take 0.1 s each; the hanging
    page links into the chain too."""
    pages = {url(0): FakePage(links=[url("c0")])}
    if hang is not None:
        pages[url(0)] = FakePage(links=[url("hang"), url("c0")])
        pages[url("hang")] = FakePage(links=[url("c3")], delay=hang)
    for i in range(length):
        pages[url(f"c{i}")] = FakePage(links=[url(f"c{i + 1}")], delay=0.1)
    return pages


async def test_a_hanging_shallow_page_delays_nothing_else(autojump_clock: object) -> None:
    """Item 1: the chain takes 5 s; a page at depth 1 that hangs 30 s must not
    hold it back (the depth gate held it until the hang ended)."""
    fast, _ = await crawl(FakeFetcher(chain_site(hang=None)), workers=4)
    alone = max(r.t or 0.0 for r in fast)
    records, updates = await crawl(FakeFetcher(chain_site(hang=30.0)), workers=4)
    chain = [r for r in records if "/c" in r.url]
    assert len(chain) == 51
    assert max(r.t or 0.0 for r in chain) == alone
    # c3 was first found at depth 4 (0 -> c0 -> c1 -> c2 -> c3); the hanging
    # page links to it, so it is corrected to depth 2, and so is its chain.
    depths = final(records, updates)
    assert depths[url("c3")] == (2, url("hang"))
    assert depths[url("c4")] == (3, url("c3"))
    assert depths[url("c50")] == (49, url("c49"))
    assert {u.url for u in updates} == {url(f"c{i}") for i in range(3, 51)}


async def test_a_crawl_delayed_host_does_not_hold_another_hosts_chain(
    autojump_clock: object,
) -> None:
    """Item 1: a host that takes its six shallow pages one at a time, 1 s
    each (as a Crawl-delay of 1 does), held another host's deep chain for
    the whole 6 s."""
    pages = {
        url(0): FakePage(links=[*(url(f"s{i}") for i in range(6)), url("c0", OTHER)]),
        **{url(f"s{i}"): FakePage(delay=1.0) for i in range(6)},
        **{url(f"c{i}", OTHER): FakePage(links=[url(f"c{i + 1}", OTHER)]) for i in range(30)},
    }
    slow, _ = await crawl(
        FakeFetcher(pages), workers=4, allow_domains=["other.test"], per_host_concurrency=1
    )
    chain_end = next(r.t for r in slow if r.url == url("c30", OTHER))
    assert chain_end is not None and chain_end < 0.1


async def test_a_redirect_target_has_the_depth_of_the_redirecting_url(
    autojump_clock: object,
) -> None:
    """Item 11: 0 links /r/x (a slow 301 to /x) and /b, and /b links /x. A
    redirect is not a link: /x is depth 1, by way of /r/x, with or without
    --max-depth 1, and --max-depth 1 fetches it."""
    pages = {
        url(0): FakePage(links=[url("r/x"), url("b")]),
        url("r/x"): FakePage(status=301, headers={"location": url("x")}, delay=2.0),
        url("b"): FakePage(links=[url("x")]),
        url("x"): FakePage(links=[url("y")]),
        url("y"): FakePage(),
    }
    records, updates = await crawl(FakeFetcher(pages), workers=4)
    depths = final(records, updates)
    assert depths[url("x")] == (1, url("r/x"))
    assert depths[url("y")] == (2, url("x"))
    fetcher = FakeFetcher(pages)
    records, updates = await crawl(fetcher, workers=4, max_depth=1)
    depths = final(records, updates)
    assert sorted(fetcher.urls) == sorted([url(0), url("r/x"), url("b"), url("x")])
    assert depths[url("x")] == (1, url("r/x"))


async def test_a_redirect_lowered_later_lowers_its_target(autojump_clock: object) -> None:
    """A redirect hop found by a long path first, then by a short one: its
    target (already recorded) moves up with it, and so does what it links to."""
    pages = {
        url(0): FakePage(links=[url("slow"), url("a")]),
        url("slow"): FakePage(links=[url("r")], delay=3.0),
        url("a"): FakePage(links=[url("b")]),
        url("b"): FakePage(links=[url("r")]),
        url("r"): FakePage(status=302, headers={"location": url("x")}),
        url("x"): FakePage(links=[url("y")]),
        url("y"): FakePage(),
    }
    records, updates = await crawl(FakeFetcher(pages), workers=4)
    depths = final(records, updates)
    assert depths[url("r")] == (2, url("slow"))
    assert depths[url("x")] == (2, url("r"))
    assert depths[url("y")] == (3, url("x"))
    assert len(records) == 7


class Later:
    """What a response callback may return: the record waits for it (as for
    the WARC writer's "on disk")."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def _wait(self) -> None:
        await trio.sleep(self.seconds)

    def __await__(self) -> Generator[Any, None, None]:
        return self._wait().__await__()


async def test_a_shorter_path_found_while_a_record_waits_goes_into_the_record(
    autojump_clock: object,
) -> None:
    """x's record is made at depth 3 (by way of c), then waits 5 s for its
    archive; meanwhile a (depth 1) links to x. The record goes out saying
    depth 2 and referrer a, with no update line."""
    pages = {
        url(0): FakePage(links=[url("a"), url("b")]),
        url("a"): FakePage(links=[url("x")], delay=1.0),
        url("b"): FakePage(links=[url("c")]),
        url("c"): FakePage(links=[url("x")]),
        url("x"): FakePage(),
    }
    records: list[CrawlRecord] = []
    updates: list[DepthUpdate] = []

    def archive(page_url: str, result: object) -> Later | None:
        return Later(5.0) if page_url == url("x") else None

    config = CrawlConfig.from_options(start_urls=[url(0)], ignore_robots=True, workers=4)
    crawler = Crawler(
        config,
        FakeFetcher(pages),
        on_record=[records.append],
        on_response=[archive],
        on_depth_update=[updates.append],
    )
    with trio.fail_after(100):
        await crawler.run()
    (x,) = [r for r in records if r.url == url("x")]
    assert (x.depth, x.referrer, x.t) == (2, url("a"), 0.0)
    assert trio.current_time() == 5.0
    assert updates == []


async def test_run_crawl_hands_depth_updates_to_its_callback(autojump_clock: object) -> None:
    records: list[CrawlRecord] = []
    updates: list[DepthUpdate] = []
    await run_crawl(
        url(0),
        fetcher=FakeFetcher(chain_site(hang=1.0, length=5)),
        on_record=records.append,
        on_depth_update=updates.append,
        ignore_robots=True,
        workers=4,
    )
    # The chain (0.5 s) was done before the hanging page (1 s) linked to c3.
    assert [(u.url, u.depth, u.previous_depth, u.t) for u in updates] == [
        (url("c3"), 2, 4, 1.0),
        (url("c4"), 3, 5, 1.0),
        (url("c5"), 4, 6, 1.0),
    ]
    assert len(records) == 8
    assert updates[0].to_json() == {
        "url": url("c3"),
        "depth": 2,
        "referrer": url("hang"),
        "depth_update": True,
        "previous_depth": 4,
        "t": 1.0,
    }


# -- a real server, from the command line ------------------------------------


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def chain_routes(hang: float) -> Site:
    routes: dict[str, Response | list[Response]] = {
        "/": page("/hang", "/c0"),
        "/hang": Response(body=b"<a href='/c3'>c3</a>", delay=hang),
    }
    for i in range(200):
        routes[f"/c{i}"] = page(f"/c{i + 1}")
    routes["/c200"] = page()
    return Site(routes)


def test_cli_a_hanging_page_holds_up_nothing_and_updates_follow(tmp_path: Path) -> None:
    """Item 1 against a real server: /hang answers after 30 s, past --timeout
    3 with one retry. The 200-page chain (under a second) is all written
    long before /hang gives up; the depth gate held it until then."""
    out = tmp_path / "out.jsonl"
    with serve_site(chain_routes(hang=30.0)) as server:
        started = time.monotonic()
        result = run_cli(
            server.url("/"), "--timeout", "3", "--retries", "1", "--ignore-robots",
            "-q", "-o", str(out), timeout=60,
        )  # fmt: skip
        took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    records = records_in(out.read_text())  # no depth_update line in the output
    assert len(records) == 203
    by_url = {r["url"]: r for r in records}
    hang = by_url[server.url("/hang")]
    assert hang["error"]["kind"] == "timeout" and hang["t"] >= 6.0
    # The chain was all written before /hang timed out twice (6 s and more).
    assert by_url[server.url("/c200")]["t"] < hang["t"], by_url[server.url("/c200")]
    # /hang failed: it has no links, so nothing is corrected.
    assert "depth updates" not in result.stderr
    assert took < 30


@pytest.mark.parametrize("backend", ["memory", "state"])
def test_cli_depth_update_lines_correct_earlier_records(tmp_path: Path, backend: str) -> None:
    """The hanging page answers (after 3 s, within --timeout): its link to c3
    is a shorter path, and c3... c200 get depth_update lines after their
    records, in the --depth-updates file (the output keeps one line per
    URL), which the crawl report folds into its depth chart. The same with a
    state file (issue #24: one depth contract on every backend)."""
    out, updates_file = tmp_path / "out.jsonl", tmp_path / "updates.jsonl"
    state = ["--state", str(tmp_path / "crawl.db")] if backend == "state" else []
    with serve_site(chain_routes(hang=3.0)) as server:
        result = run_cli(
            server.url("/"), "--timeout", "10", "--ignore-robots", "-o", str(out), *state,
            "--depth-updates", str(updates_file), timeout=60,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "depth updates" in result.stderr  # the end-of-crawl summary counts them
    records = records_in(out.read_text())
    assert len(records) == len({r["url"] for r in records}) == 203
    got = lines(updates_file)
    seen = {r["url"]: dict(r) for r in records}
    for line in got:
        assert line["depth_update"] is True
        earlier = seen[line["url"]]  # an update corrects a record that is out
        assert earlier["depth"] == line["previous_depth"] > line["depth"]
        earlier.update(depth=line["depth"], referrer=line["referrer"])
    assert seen[server.url("/c3")]["depth"] == 2
    assert seen[server.url("/c3")]["referrer"] == server.url("/hang")
    assert seen[server.url("/c200")]["depth"] == 199
    # How far the chain got in 3 s decides how many records needed an update.
    updates = got
    assert updates
    assert set(updates[0]) == {"url", "depth", "referrer", "depth_update", "previous_depth", "t"}


def test_cli_a_redirect_target_is_at_the_redirecting_urls_depth(tmp_path: Path) -> None:
    """Item 11 against a real server: / links /r/x (a 301 to /x that takes
    1 s) and /b; /b links /x, /x links /y. /x is depth 1 by way of /r/x in
    the records (after their updates), and --max-depth 1 fetches /x, once,
    and not /y."""
    slow_redirect = redirect("/x")
    site = Site(
        {
            "/": page("/r/x", "/b"),
            "/r/x": Response(
                status=301, headers=slow_redirect.headers, content_type=None, delay=1.0
            ),
            "/b": page("/x"),
            "/x": page("/y"),
            "/y": page(),
        }
    )
    for extra in ((), ("--max-depth", "1")):
        out = tmp_path / f"out{len(extra)}.jsonl"
        updates = tmp_path / f"updates{len(extra)}.jsonl"
        with serve_site(site) as server:
            result = run_cli(
                server.url("/"), "--ignore-robots", "-q", "-o", str(out),
                "--depth-updates", str(updates), *extra, timeout=60,
            )  # fmt: skip
            counts = {t: server.count(t) for t in ("/x", "/y")}
        assert result.returncode == 0, result.stderr
        final = fold_depth_updates(records_in(out.read_text()), lines(updates))
        x = final[server.url("/x")]
        assert (x["depth"], x["referrer"]) == (1, server.url("/r/x")), x
        if extra:
            assert counts == {"/x": 1, "/y": 0}
            assert server.url("/y") not in final
        else:
            assert counts == {"/x": 1, "/y": 1}
            assert final[server.url("/y")]["depth"] == 2
