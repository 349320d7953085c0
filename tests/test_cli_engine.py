"""Engine fixes seen from the command line: real subprocesses against real
servers on 127.0.0.1, every subprocess with a timeout."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from trio_crawl.testing import Response, Site, page, serve_site

from cli_helpers import records_in, run_cli

TIMEOUT = 60


def records(path: Path) -> list[dict[str, object]]:
    return records_in(path.read_text())


def wide_site(n: int = 166) -> Site:
    routes = {f"/p/{i}": page(*(f"/p/{j}" for j in range(n))) for i in range(n)}
    routes["/"] = page(*(f"/p/{j}" for j in range(n)))
    return Site(routes)


def test_max_pages_with_rate_ends_within_seconds(tmp_path: Path) -> None:
    """Issue #13 item 1: `--max-pages 60 --rate 40` on a 166-page site hung."""
    out = tmp_path / "out.jsonl"
    with serve_site(wide_site()) as server:
        started = time.monotonic()
        result = run_cli(
            server.url("/"), "--max-pages", "60", "--rate", "40", "-q", "-o", str(out),
            timeout=30,
        )  # fmt: skip
        took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert len(records(out)) == 60
    # 60 starts at 40/s (plus 5% slack) take about 1.5 s; the crawl must not
    # wait for anything else (generous bound for a loaded CI machine).
    assert took < 20, took


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_host_gives_connect_records_without_the_robots_wait(tmp_path: Path) -> None:
    """Issue #13 item 3: a refused connection is `connect`, said at once (not
    `robots` after a 10 s wait), with or without --ignore-robots."""
    port = free_port()
    for extra in ((), ("--ignore-robots", "--retries", "0")):
        out = tmp_path / f"dead{len(extra)}.jsonl"
        started = time.monotonic()
        run_cli(f"http://127.0.0.1:{port}/", "-q", "-o", str(out), *extra, timeout=30)
        took = time.monotonic() - started
        (record,) = records(out)
        assert record["error"]["kind"] == "connect", record  # type: ignore[index]
        assert took < 8, took  # the robots re-fetch rule would wait 10 s


def test_state_with_sitemaps_crawls_each_url_once(tmp_path: Path) -> None:
    """Issue #9 bug 1: --state with --sitemaps fetched / and /a twice, then
    exited 70 with 'crawl state invariant broken'."""
    routes: dict[str, Response] = {
        "/": page("/a", "/b"),
        "/a": page("/"),
        "/b": page("/"),
        "/orphan": page("/"),
    }
    with serve_site(Site(routes)) as server:
        sitemap = (
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<url><loc>{server.url(p)}</loc></url>" for p in ("/", "/a", "/orphan"))
            + "</urlset>"
        )
        robots = f"User-agent: *\nDisallow:\nSitemap: {server.url('/sitemap.xml')}\n"
        routes["/robots.txt"] = Response(body=robots.encode(), content_type="text/plain")
        routes["/sitemap.xml"] = Response(body=sitemap.encode(), content_type="application/xml")
        out = tmp_path / "out.jsonl"
        result = run_cli(
            server.url("/"), "--state", str(tmp_path / "c.db"), "--sitemaps", "-q", "-o", str(out)
        )
        assert result.returncode == 0, result.stderr
        urls = [str(r["url"]) for r in records(out)]
        assert sorted(urls) == sorted(server.url(p) for p in ("/", "/a", "/b", "/orphan"))
        fetched = [r.target for r in server.log if r.target not in ("/robots.txt", "/sitemap.xml")]
        assert sorted(fetched) == ["/", "/a", "/b", "/orphan"]
