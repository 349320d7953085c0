"""The latency-bound hint: a crawl of many hosts whose workers all waited on servers.

The pure rule (``latency_bound_hint``) is checked on summaries built by hand; the CLI
test crawls four real servers on 127.0.0.1 that answer every page after 50 ms with two
workers, so the two are busy all the time while the process idles: the summary must
end with the hint and a worker count to try.
"""

from __future__ import annotations

from pathlib import Path

from trio_crawl.core.models import CrawlRecord
from trio_crawl.core.stats import CrawlStats, CrawlSummary, latency_bound_hint
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page

from cli_helpers import run_cli


def summary(*, records: int = 20_000, hosts: int = 1000, in_flight: float = 15.0) -> CrawlSummary:
    elapsed = 150.0
    return CrawlSummary(
        records=records,
        pages_ok=records,
        failures={},
        statuses={200: records},
        elapsed=elapsed,
        latency_p50_ms=100.0,
        latency_p95_ms=110.0,
        latency_p99_ms=120.0,
        stopped=False,
        unfinished=0,
        busy_seconds=in_flight * elapsed,
        hosts=hosts,
    )


def test_hint_when_every_worker_waits_and_the_cpu_idles() -> None:
    hint = latency_bound_hint(summary(), workers=16, per_host=None, cpu_seconds=36.0)
    # 24% of a CPU: 16 x 0.8 / 0.24 = 53 workers, rounded up to a multiple of 16.
    assert hint is not None and "15 of 16 workers" in hint and "-w 64 " in hint, hint
    assert "1,000 hosts" in hint and "24% of a CPU" in hint


def test_no_hint_when_cpu_bound_one_host_short_or_workers_idle() -> None:
    cases = [
        dict(cpu_seconds=90.0),  # 60% of a CPU: more workers would not help much
        dict(summary=summary(hosts=1)),  # one host: more workers would only press it
        dict(summary=summary(records=50)),  # too little to go by
        dict(summary=summary(in_flight=6.0)),  # the workers were not all busy
    ]
    for case in cases:
        s = case.pop("summary", summary())
        cpu = case.pop("cpu_seconds", 36.0)
        assert latency_bound_hint(s, workers=16, per_host=None, cpu_seconds=cpu) is None, case


def test_suggestion_capped_by_hosts_per_host_limit_and_descriptors() -> None:
    few_hosts = latency_bound_hint(summary(hosts=5), workers=4, per_host=8, cpu_seconds=3.0)
    assert few_hosts is not None and "-w 48 " in few_hosts  # 5 x 8 = 40, rounded up
    many = latency_bound_hint(
        summary(), workers=16, per_host=None, cpu_seconds=1.5, max_workers=256
    )
    assert many is not None and "-w 256 " in many
    # Capped at less than twice the workers (2 hosts x 8): not worth a hint.
    assert latency_bound_hint(summary(hosts=2), workers=16, per_host=8, cpu_seconds=1.0) is None


def test_stats_add_up_fetch_time_and_hosts() -> None:
    stats = CrawlStats()
    for url in ("http://a.test/", "http://a.test/x", "http://b.test:8080/", "https://c.test/y"):
        stats.add(CrawlRecord(url, 200, 0, elapsed_ms=250.0))
    s = stats.summary(elapsed=1.0, stopped=False, unfinished=0)
    assert s.hosts == 3 and s.busy_seconds == 1.0


def slow_site(pages: int, delay: float) -> Site:
    routes = {"/": page(*[f"/p/{i}" for i in range(pages)])}
    for i in range(pages):
        routes[f"/p/{i}"] = Response(body=page("/").body, delay=delay)
    return Site(routes)


def test_cli_prints_the_hint_after_a_latency_bound_crawl(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with (
        serve_site(slow_site(30, 0.05)) as a,
        serve_site(slow_site(30, 0.05)) as b,
        serve_site(slow_site(30, 0.05)) as c,
        serve_site(slow_site(30, 0.05)) as d,
    ):
        roots = [s.base_url + "/" for s in (a, b, c, d)]
        result = run_cli(*roots, "-w", "2", "--ignore-robots", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert len(out.read_text().splitlines()) == 4 * 31
    hints = [line for line in result.stderr.splitlines() if line.startswith("hint: ")]
    assert len(hints) == 1, result.stderr
    assert "latency-bound" in hints[0] and "of 2 workers" in hints[0] and "4 hosts" in hints[0]
    assert "-w 16 " in hints[0] or "-w 32 " in hints[0], hints[0]  # capped at 4 hosts x 2
