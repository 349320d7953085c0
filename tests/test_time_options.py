"""``random_wait`` (``--random-wait``) and ``max_time`` (``--max-time``),
issue #25 item 5: the pure schedule with a seeded rng, the engine under
``MockClock`` (exact virtual times), and the command line's resumable time
limit against a real local server."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_crawl import ConfigError, CrawlConfig, CrawlRecord
from trio_crawl.core.stats import CrawlSummary

# The private engine: a seeded rng= for the random waits drawn here.
from trio_crawl.engine.crawler import Crawler
from trio_crawl.engine.schedule import RANDOM_WAIT_RANGE, RATE_SLACK, PoliteSchedule
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page

from cli_helpers import records_in, run_cli
from fakes import FakeFetcher, FakePage

H = "a.test:80"


def gaps(schedule: PoliteSchedule[int], n: int) -> list[float]:
    """Start ``n`` jobs on one host as soon as the schedule lets each go;
    the gaps between their starts."""
    starts: list[float] = []
    now = 0.0
    for job in range(n):
        if not schedule.try_start(job, H, now):
            deadline = schedule.next_deadline()
            assert deadline is not None
            now = deadline
            assert schedule.pop_ready(now) == [job]
            assert schedule.try_start(job, H, now)
        starts.append(now)
        schedule.release(H, now)
    return [b - a for a, b in itertools.pairwise(starts)]


def test_random_wait_draws_each_gap_from_the_rng() -> None:
    interval = 0.5 * (1 + RATE_SLACK)
    got = gaps(PoliteSchedule(rate=2, random_wait=True, rng=random.Random(7)), 6)
    rng = random.Random(7)
    expected = [interval * rng.uniform(*RANDOM_WAIT_RANGE) for _ in range(5)]
    assert got == pytest.approx(expected)
    assert len(set(got)) == 5  # not machine-regular


def test_without_random_wait_the_gaps_are_the_interval() -> None:
    assert gaps(PoliteSchedule(rate=2), 5) == pytest.approx([0.5 * (1 + RATE_SLACK)] * 4)


@given(st.integers(0, 10_000), st.sampled_from([0.5, 2.0, 10.0]))
def test_random_gaps_stay_within_half_and_one_and_a_half_intervals(seed: int, rate: float) -> None:
    interval = (1 / rate) * (1 + RATE_SLACK)
    for gap in gaps(PoliteSchedule(rate=rate, random_wait=True, rng=random.Random(seed)), 8):
        assert 0.5 * interval - 1e-9 <= gap <= 1.5 * interval + 1e-9


@given(st.integers(0, 10_000))
def test_a_crawl_delay_is_a_floor_under_the_random_gap(seed: int) -> None:
    schedule: PoliteSchedule[int] = PoliteSchedule(
        rate=0.5, random_wait=True, rng=random.Random(seed)
    )
    schedule.set_crawl_delay(H, 1.5)  # the rate's interval (2 s) is the longer one
    # Each gap is the longer of a random rate gap (1 to 3 s with slack) and
    # the delay stretched at random (1.5 to 2.25 s after the instant end).
    for gap in gaps(schedule, 8):
        assert 1.5 - 1e-9 <= gap <= 3 * (1 + RATE_SLACK) + 1e-9


def test_random_wait_stretches_a_crawl_delay_after_each_end_and_never_shortens_it() -> None:
    """Rule 6 on rule 9: a request that lasts 1 s, a Crawl-delay of 2 s, a
    rate that never binds: each next start is 2 to 3 s after the end."""
    schedule: PoliteSchedule[int] = PoliteSchedule(
        rate=100, random_wait=True, rng=random.Random(11)
    )
    schedule.set_crawl_delay(H, 2.0)
    waits: list[float] = []
    now = 0.0
    for job in range(20):
        if job:
            assert not schedule.try_start(job, H, now)
            deadline = schedule.next_deadline()
            assert deadline is not None
            waits.append(deadline - now)
            now = deadline
            assert schedule.pop_ready(now) == [job] and schedule.try_start(job, H, now)
        else:
            assert schedule.try_start(job, H, now)
        now += 1.0
        schedule.release(H, now)
    assert all(2.0 - 1e-9 <= wait <= 3.0 + 1e-9 for wait in waits), waits
    assert min(waits) == pytest.approx(2.0)  # a factor below 1 leaves the delay as it is
    assert max(waits) > 2.2  # and one above stretches it


def test_random_wait_needs_a_rate() -> None:
    with pytest.raises(ConfigError, match=r"^random_wait=True needs rate="):
        CrawlConfig.from_options(start_urls=["http://a.test/"], random_wait=True)


def chain(n: int, delay: float) -> dict[str, FakePage]:
    return {
        f"http://a.test/{i}": FakePage(
            links=[f"http://a.test/{i + 1}"] if i + 1 < n else [], delay=delay
        )
        for i in range(n)
    }


def fan(n: int, delay: float = 0.0) -> dict[str, FakePage]:
    pages = {"http://a.test/0": FakePage(links=[f"http://a.test/{i}" for i in range(1, n)])}
    pages.update({f"http://a.test/{i}": FakePage(delay=delay) for i in range(1, n)})
    return pages


async def crawl(
    pages: dict[str, FakePage], **options: object
) -> tuple[CrawlSummary, FakeFetcher, list[CrawlRecord]]:
    records: list[CrawlRecord] = []
    fetcher = FakeFetcher(pages)
    config = CrawlConfig.from_options(
        start_urls=["http://a.test/0"], ignore_robots=True, **options
    )  # type: ignore[arg-type]
    crawler = Crawler(config, fetcher, on_record=[records.append], rng=random.Random(3))  # type: ignore[arg-type]
    with trio.fail_after(10_000):
        summary = await crawler.run()
    return summary, fetcher, records


Outcome = tuple[CrawlSummary, FakeFetcher, list[CrawlRecord], float]


def mock_run(pages: dict[str, FakePage], **options: object) -> Outcome:
    """Crawl ``pages`` under MockClock; the summary, fetcher, records and end time."""

    async def main() -> Outcome:
        summary, fetcher, records = await crawl(pages, **options)
        return summary, fetcher, records, trio.current_time()

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_engine_spaces_a_hosts_starts_at_random() -> None:
    """Under MockClock: every gap within 0.5-1.5 intervals, and not all
    alike (the exact draws are the seeded schedule's test, above)."""
    _, fetcher, _, _ = mock_run(fan(12), rate=1, random_wait=True, workers=4)
    starts = [call.start for call in fetcher.calls]
    spacing = [b - a for a, b in itertools.pairwise(starts)]
    interval = 1 + RATE_SLACK
    assert all(0.5 * interval - 1e-9 <= s <= 1.5 * interval + 1e-9 for s in spacing)
    assert max(spacing) - min(spacing) > 0.1 * interval
    _, steady, _, _ = mock_run(fan(12), rate=1, workers=4)
    regular = [b.start - a.start for a, b in itertools.pairwise(steady.calls)]
    assert regular == pytest.approx([interval] * 11)


def test_max_time_stops_gracefully_at_the_limit() -> None:
    """Pages take 1 s each, one after another; at 3.5 s the fourth is in
    flight: it finishes (within the grace), nothing new starts."""
    summary, fetcher, records, ended = mock_run(chain(10, 1.0), max_time=3.5, grace=10)
    assert fetcher.urls == [f"http://a.test/{i}" for i in range(4)]
    assert [r.url for r in records] == fetcher.urls and all(r.status == 200 for r in records)
    assert ended == pytest.approx(4.0)
    assert summary.stopped and summary.unfinished == 1  # /4, found by /3


def test_max_time_grace_cuts_a_page_that_takes_too_long() -> None:
    _, fetcher, records, ended = mock_run(chain(3, 100.0), max_time=1.0, grace=2)
    assert fetcher.urls == ["http://a.test/0"] and records == []
    assert ended == pytest.approx(3.0)


def test_a_crawl_that_ends_first_is_not_touched_by_max_time() -> None:
    summary, _, records, ended = mock_run(chain(3, 1.0), max_time=60)
    assert len(records) == 3 and ended == pytest.approx(3.0)
    assert not summary.stopped


def test_max_time_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"^max_time= must be a number of seconds > 0 \(got 0\)"):
        CrawlConfig.from_options(start_urls=["http://a.test/"], max_time=0)


def slow_site(n: int, delay: float) -> Site:
    routes: dict[str, Response] = {"/": page(*[f"/p/{i}" for i in range(n)])}
    for i in range(n):
        routes[f"/p/{i}"] = Response(body=page().body, delay=delay)
    return Site(routes)


def test_cli_max_time_stops_and_state_resumes(tmp_path: Path) -> None:
    out, db = tmp_path / "out.jsonl", tmp_path / "crawl.db"
    args = ["-o", str(out), "--state", str(db), "-w", "2", "--ignore-robots"]
    with serve_site(slow_site(30, 0.1)) as server:
        first = run_cli(server.base_url + "/", *args, "--max-time", "0.5s", "--grace", "30")
        first_records = records_in(out.read_text())
        second = run_cli(server.base_url + "/", *args)
        targets = server.targets()
    assert first.returncode == 0, first.stderr
    assert "stopped at --max-time 0.5s" in first.stderr
    assert 1 <= len(first_records) < 31
    assert second.returncode == 0, second.stderr
    records = records_in(out.read_text())
    urls = [r["url"].removeprefix(server.base_url) for r in records]
    assert sorted(urls) == sorted(["/"] + [f"/p/{i}" for i in range(30)])
    assert len(targets) == len(set(targets)) == 31  # nothing fetched twice
    assert all(json.loads(line) for line in out.read_text().splitlines())


def test_random_wait_is_refused_with_the_redis_frontier() -> None:
    """The Redis server spaces a host's requests: this process's random
    draw would be ignored, so the library refuses it (a library sentence,
    worded with flags on the command line)."""
    from trio_crawl import redis_frontier, run_crawl
    from trio_crawl.cli.flags import in_flags

    spec = redis_frontier("redis://127.0.0.1:1/0", "x")  # refused before it connects
    with pytest.raises(ConfigError) as refused:
        trio.run(lambda: run_crawl("http://a.test/", frontier=spec, rate=1, random_wait=True))
    assert in_flags(refused.value) == (
        "--random-wait cannot be combined with --redis yet: "
        "the Redis server spaces each host's requests"
    )


async def test_run_crawl_takes_max_time(autojump_clock: trio.testing.MockClock) -> None:
    """The library's face: ``run_crawl(..., max_time=)`` stops as the
    engine does (pages of 1 s in a chain; the third is in flight at 2.5 s)."""
    from trio_crawl import run_crawl

    fetcher = FakeFetcher(chain(10, 1.0))
    records: list[CrawlRecord] = []
    summary = await run_crawl(
        "http://a.test/0",
        fetcher=fetcher,
        on_record=records.append,
        ignore_robots=True,
        max_time=2.5,
    )
    assert fetcher.urls == [f"http://a.test/{i}" for i in range(3)]
    assert len(records) == 3 and summary.stopped
    assert trio.current_time() == pytest.approx(3.0)


def test_cli_max_time_note_does_not_advise_a_state_file_the_crawl_cannot_use(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    with serve_site(slow_site(30, 0.1)) as server:
        result = run_cli(
            server.base_url + "/", "-o", str(out), "-w", "2", "--ignore-robots",
            "--page-requisites", "--max-time", "0.5s",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "stopped at --max-time 0.5s: " in result.stderr
        and "URLs left; a crawl with --page-requisites cannot resume (it cannot use --state)"
        in result.stderr
    ), result.stderr
    assert "add --state" not in result.stderr
