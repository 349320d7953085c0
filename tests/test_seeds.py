"""``--seeds FILE``: a file of at most ``SEEDS_IN_MEMORY`` URLs is crawled in
memory, as start URLs given as arguments are; a larger one, or one given with
``--state`` or ``--max-queue``, waits in SQLite. Either way a seed is the same
kind of start URL (scope, ``--no-parent`` roots, depth 0, filtered redirects,
no handlers), which the CLI tests here check against real local servers by
running the same crawl both ways."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from trio_crawl.cli.crawl import seeds_to_hold
from trio_crawl.cli.seeds import SEEDS_IN_MEMORY, check_seeds
from trio_crawl.testing import Site, page, redirect, serve_site

from cli_helpers import records_in, run_cli


def test_check_seeds_keeps_a_small_file_and_only_counts_a_large_one(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# hosts\nhttp://a.test/x\nftp://nope/\nHTTP://B.test:80/y\n\nc.test/\n")
    small = check_seeds(str(seeds), other_urls=False, keep=3)
    assert small.urls == ["http://a.test/x", "http://b.test/y"]
    assert small.warning is not None and "skipped 2 lines" in small.warning
    assert "(first: line 3: 'ftp://nope/')" in small.warning
    exact = check_seeds(str(seeds), other_urls=False, keep=2)
    assert exact.urls == ["http://a.test/x", "http://b.test/y"]
    large = check_seeds(str(seeds), other_urls=False, keep=1)
    assert large.urls is None
    assert large.warning == small.warning


def namespace(seeds: Path, **more: object) -> argparse.Namespace:
    return argparse.Namespace(seeds=str(seeds), **{"state": None, "max_queue": None, **more})


def test_only_a_seeds_file_alone_is_held(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\nhttp://b.test/\n")
    assert seeds_to_hold(namespace(seeds), []) == ["http://a.test/", "http://b.test/"]
    assert seeds_to_hold(namespace(seeds, state=str(tmp_path / "s.db")), []) is None
    assert seeds_to_hold(namespace(seeds, max_queue=100), []) is None
    assert seeds_to_hold(argparse.Namespace(seeds=None), ["http://a.test/"]) is None
    seeds.write_text("".join(f"http://h{i}.test/\n" for i in range(SEEDS_IN_MEMORY + 1)))
    assert seeds_to_hold(namespace(seeds), []) is None  # read again, lazily, from disk


def redirecting_site() -> Site:
    """``/hop`` redirects to an excluded page; ``/a/b/sub/`` links above
    itself, where ``--no-parent`` keeps out a crawl rooted there."""
    return Site(
        {
            "/hop": redirect("/a/b/moved"),
            "/a/b/moved": redirect("/other/landing"),
            "/other/landing": page("/"),
            "/": page("/a/b/sub/", "/other/landing"),
            "/a/b/sub/": page("deep.html", "/a/b/sub/../../"),
            "/a/b/sub/deep.html": page("/a/b/sub/"),
        }
    )


@pytest.mark.parametrize("disk", [[], ["--max-queue", "10000"]], ids=["held", "on-disk"])
def test_seeds_are_start_urls_whether_held_or_on_disk(tmp_path: Path, disk: list[str]) -> None:
    """Host A's seed redirects to an excluded URL: a seed's redirect is
    judged by the filters (only a start URL given as an argument is spared),
    so it is not followed. Host B's seed is a ``--no-parent`` root. Host C is
    an argument: its redirect chain is followed through the excluded URL."""
    seeds, out = tmp_path / "seeds.txt", tmp_path / "out.jsonl"
    with (
        serve_site(redirecting_site()) as a,
        serve_site(redirecting_site()) as b,
        serve_site(redirecting_site()) as c,
    ):
        seeds.write_text(f"{a.url('/hop')}\n# B below /a/b/sub/\n{b.url('/a/b/sub/')}\n")
        result = run_cli(
            c.url("/hop"), "--seeds", str(seeds), "--no-parent", "--exclude", "moved",
            "--ignore-robots", "-o", str(out), "-q", *disk,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        fetched = {name: server.targets() for name, server in zip("abc", (a, b, c), strict=True)}
        records = {
            (r["url"], r["status"], r["depth"], (r["error"] or {}).get("kind"))
            for r in records_in(out.read_text())
        }
    assert sorted(fetched["a"]) == ["/hop"]
    assert sorted(fetched["b"]) == ["/a/b/sub/", "/a/b/sub/deep.html"]
    assert sorted(fetched["c"]) == [
        *("/", "/a/", "/a/b/moved", "/a/b/sub/", "/a/b/sub/deep.html"),
        *("/hop", "/other/landing"),
    ]
    assert (a.url("/hop"), 301, 0, "out_of_scope_redirect") in records
    assert (b.url("/a/b/sub/deep.html"), 200, 1, None) in records
    assert (c.url("/other/landing"), 200, 0, None) in records
    assert (c.url("/a/b/sub/deep.html"), 200, 3, None) in records
    assert {url for url, *_ in records} == {
        server.url(target) for server, name in ((a, "a"), (b, "b"), (c, "c"))
        for target in fetched[name]
    }  # fmt: skip


def test_a_held_seeds_file_still_refuses_handlers(tmp_path: Path) -> None:
    """Handlers are refused with ``--seeds`` whatever the file's size, so
    that a file growing past the limit changes only where the queue waits."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    result = run_cli(
        "--seeds", str(seeds), "--handler", "asyncio:sleep", "--items", str(tmp_path / "i.jsonl")
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "--seeds" in result.stderr and "handler" in result.stderr


def test_a_held_seed_host_is_searched_for_sitemaps_as_on_disk(tmp_path: Path) -> None:
    """``--sitemaps`` reads the sitemap of a seed's host (it is in scope)
    and ``--no-parent`` keeps to the seed's directory, held or on disk."""
    from test_filters import filter_site

    fetched = []
    for disk in ([], ["--max-queue", "100"]):
        with serve_site(filter_site()) as seeded, serve_site(filter_site()) as argument:
            seeds = tmp_path / "seeds.txt"
            seeds.write_text(seeded.url("/a/b/") + "\n")
            result = run_cli(
                argument.url("/a/b/"), "--seeds", str(seeds), "--sitemaps", "--no-parent",
                "-q", "-o", str(tmp_path / "out.jsonl"), *disk,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            fetched.append((sorted(seeded.targets()), sorted(argument.targets())))
    held, on_disk = fetched
    assert held == on_disk
    assert held[0] == held[1]  # a seed is a start URL to the scope, the sitemap and --no-parent
    assert "/a/b/listed.html" in held[0] and "/other/listed.html" not in held[0]
    assert "/a/b/sub/deep.html" in held[0] and "/a/" not in held[0]
