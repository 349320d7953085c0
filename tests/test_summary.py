"""The end-of-crawl summary: counts by status code and bytes downloaded."""

from __future__ import annotations

import dataclasses
import io

from trio_crawl.cli.progress import human_bytes, print_summary
from trio_crawl.core.models import CrawlRecord, ErrorInfo
from trio_crawl.core.stats import CrawlStats


def test_stats_count_statuses_and_bytes() -> None:
    stats = CrawlStats()
    stats.add(CrawlRecord("http://a.test/", 200, 0, size=1_000_000))
    stats.add(CrawlRecord("http://a.test/b", 200, 1, size=234_567))
    stats.add(CrawlRecord("http://a.test/c", 404, 1, ErrorInfo("http_4xx", "HTTP 404"), size=10))
    stats.add(CrawlRecord("http://a.test/d", None, 1, ErrorInfo("connect", "refused")))
    summary = stats.summary(elapsed=1.0, stopped=False, unfinished=0)
    assert summary.statuses == {200: 2, 404: 1}
    assert summary.bytes == 1_234_577
    out = io.StringIO()
    print_summary(summary, stream=out)
    text = out.getvalue()
    assert "status codes" in text and "200 × 2, 404 × 1" in text
    assert "downloaded" in text and "1.2 MB" in text


def test_record_json_has_the_size() -> None:
    assert CrawlRecord("http://a.test/", 200, 0, size=12).to_json()["size"] == 12
    assert CrawlRecord("http://a.test/", None, 0).to_json()["size"] is None


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (0, 999, 1000, 1_234_567, 999_999_999)] == [
        "0 bytes",
        "999 bytes",
        "1.0 kB",
        "1.2 MB",
        "1.0 GB",
    ]


def test_the_summary_says_how_the_browsers_requests_were_answered() -> None:
    summary = CrawlStats().summary(elapsed=1.0, stopped=False, unfinished=0)
    summary = dataclasses.replace(
        summary, browsers=1, render_requests={"fetched": 30, "reused": 12, "sent": 0, "failed": 1}
    )
    out = io.StringIO()
    print_summary(summary, stream=out)
    text = " ".join(out.getvalue().split())
    assert "browser's requests" in text
    assert "30 fetched by the crawl, 12 already fetched, 1 failed" in text


def test_the_summary_counts_pages_that_needed_retries() -> None:
    stats = CrawlStats()
    stats.add(CrawlRecord("http://a.test/", 200, 0))
    stats.add(dataclasses.replace(CrawlRecord("http://a.test/flaky", 200, 1), attempts=2))
    stats.add(
        dataclasses.replace(
            CrawlRecord("http://a.test/down", 503, 1, ErrorInfo("http_5xx", "HTTP 503")),
            attempts=3,
        )
    )
    summary = stats.summary(elapsed=1.0, stopped=False, unfinished=0)
    assert (summary.retried, summary.retries) == (2, 3)
    out = io.StringIO()
    print_summary(summary, stream=out)
    assert "retried" in out.getvalue() and "2 pages (3 extra attempts)" in out.getvalue()
    quiet = io.StringIO()
    print_summary(CrawlStats().summary(elapsed=1.0, stopped=False, unfinished=0), stream=quiet)
    assert "retried" not in quiet.getvalue()
