"""``--mirror`` / ``mirror=`` end to end: a small documentation site served on
127.0.0.1, crawled through the library and the CLI, and the directory that
comes out: its files, its converted links, a resumed ``--state`` crawl, and
write failures. Every crawl is bounded by ``trio.fail_after`` or a
subprocess timeout."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import sqlite3
import struct
import subprocess
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from trio_crawl import CrawlRecord, run_crawl
from trio_crawl.core.config import CrawlConfig
from trio_crawl.errors import ConfigError, OutputError
from trio_crawl.mirror import output as mirror_module
from trio_crawl.mirror.files import MirrorFiles
from trio_crawl.testing import Response, Site, serve_site

from cli_helpers import records_in, run_cli


def png(rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real 1x1 PNG (a browser decodes it)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + bytes(rgb))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", pixels)
        + chunk(b"IEND", b"")
    )


def html(body: str, head: str = "") -> Response:
    return Response(
        body=(
            "<!DOCTYPE html>\n<html><head><meta charset=utf-8>"
            '<link rel="stylesheet" href="/css/site.css">'
            f"{head}</head>\n<body>{body}</body></html>\n"
        ).encode()
    )


def doc_site() -> Site:
    """A documentation site: pages in directories, a page without an
    extension, a query, a stylesheet with an @import and a url(), images, a
    script, a 404 and a redirect."""
    return Site(
        {
            "/": html(
                '<h1 id="title">Docs</h1><a id="to-intro" href="docs/intro.html">Intro</a>'
                ' <a href="docs/">Guide</a> <a href="/about">About</a>'
                ' <a href="/docs/api?v=2#get">API</a> <a href="/gone">Gone</a>'
                ' <a href="/old">Old</a> <img id="logo" src="img/logo.png">'
                '<script src="/js/check.js"></script>'
            ),
            "/docs/": html('<a href="../">Home</a> <a href="intro.html">Intro</a>'),
            "/docs/intro.html": html(
                '<h1>Intro</h1><a href="/">Home</a> <a href="/about">About</a>'
            ),
            "/docs/api?v=2": html('<a href="/docs/">Guide</a>'),
            "/about": html('<a href="/">Home</a>'),
            "/gone": Response(status=404, body=b"not here", content_type="text/plain"),
            "/old": Response(status=301, headers=(("Location", "/docs/"),)),
            "/css/site.css": Response(
                body=b'@import "print.css";\n'
                b"h1 { color: rgb(1, 2, 3); background-image: url(../img/bg.png) }\n",
                content_type="text/css",
            ),
            "/css/print.css": Response(
                body=b"a { color: rgb(4, 5, 6) }\n", content_type="text/css"
            ),
            "/img/logo.png": Response(body=png(), content_type="image/png"),
            "/img/bg.png": Response(body=png((1, 2, 3)), content_type="image/png"),
            "/js/check.js": Response(
                body=b"// served as is\n", content_type="application/javascript"
            ),
        }
    )


def saved(root: Path) -> dict[str, bytes]:
    """Relative path (host directory replaced by ``H``) -> content; what the
    mirror keeps for itself (``.trio-crawl/``, its visits) is no saved file."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.relative_to(root).parts[0] != ".trio-crawl":
            parts = path.relative_to(root).parts
            out["/".join(("H", *parts[1:]))] = path.read_bytes()
    return out


async def crawl(url: str, **options: object) -> list[CrawlRecord]:
    records: list[CrawlRecord] = []
    with trio.fail_after(60):
        await run_crawl(url, on_record=records.append, **options)  # type: ignore[arg-type]
    return records


async def test_the_library_saves_the_site_as_wget_lays_it_out(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    with serve_site(doc_site()) as server:
        await crawl(server.url("/"), mirror=str(root), page_requisites=True, html_only=False)
        host = server.base_url.removeprefix("http://")
    files = saved(root)
    assert set(files) == {
        "H/index.html",
        "H/docs/index.html",
        "H/docs/intro.html",
        "H/docs/api?v=2",
        "H/about",
        "H/css/site.css",
        "H/css/print.css",
        "H/img/logo.png",
        "H/img/bg.png",
        "H/js/check.js",
    }  # no 404 body, no redirect body
    # 127.0.0.1:PORT, and what the mirror keeps for itself (its visits)
    assert sorted(os.listdir(root)) == sorted([host, ".trio-crawl"])
    assert files["H/img/logo.png"] == png()
    assert files["H/about"] == doc_site().routes["/about"].body  # type: ignore[union-attr]
    assert b'href="/about"' in files["H/index.html"]  # not converted without convert_links


async def test_convert_links_and_adjust_extension(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    with serve_site(doc_site()) as server:
        await crawl(
            server.url("/"),
            mirror=str(root),
            page_requisites=True,
            html_only=False,
            convert_links=True,
            adjust_extension=True,
        )
        base = server.base_url
    files = saved(root)
    assert {"H/about.html", "H/docs/api?v=2.html", "H/index.html"} <= set(files)
    home = files["H/index.html"].decode()
    for new in (
        'href="css/site.css"',
        'href="docs/intro.html"',
        'href="docs/index.html"',
        'href="about.html"',
        'href="docs/api%3Fv=2.html#get"',
        f'href="{base}/gone"',  # not saved: the absolute URL
        f'href="{base}/old"',
        'src="img/logo.png"',
        'src="js/check.js"',
    ):
        assert new in home, new
    assert files["H/docs/index.html"].decode().count('href="../index.html"') == 1
    assert b'href="../about.html"' in files["H/docs/intro.html"]
    assert files["H/css/site.css"] == (
        b'@import "print.css";\nh1 { color: rgb(1, 2, 3); background-image: url(../img/bg.png) }\n'
    )  # already relative, and saved: unchanged
    # Only the link values changed: the rest of the page is byte for byte.
    original = doc_site().routes["/"].body  # type: ignore[union-attr]
    assert home.replace('href="about.html"', 'href="/about"').count(
        "<a "
    ) == original.decode().count("<a ")
    assert len(home.splitlines()) == len(original.decode().splitlines())


def test_the_cli_mirror_and_its_usage_errors(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    out = tmp_path / "out.jsonl"
    with serve_site(doc_site()) as server:
        done = run_cli(
            server.url("/"), "-o", str(out), "--mirror", str(root), "-k", "-E", "--page-requisites"
        )
        targets = server.targets()
    assert done.returncode == 0, done.stderr
    records = records_in(out.read_text())
    ok = [r for r in records if r["status"] == 200]
    assert len(ok) == len(saved(root)) == 10
    assert f"mirror: 10 files saved under {root}; links converted in " in done.stderr
    # --mirror implies --all-bodies (wget -m saves everything it follows).
    assert targets.count("/img/logo.png") == 1
    for args, message in (
        (["-k"], "--convert-links needs --mirror (a directory to save the site in)"),
        (["--adjust-extension"], "--adjust-extension needs --mirror (a directory"),
    ):
        refused = run_cli("http://127.0.0.1:9/", "-o", str(out), *args)
        assert refused.returncode == 2
        assert message in refused.stderr and "Traceback" not in refused.stderr


def test_the_library_names_its_own_arguments() -> None:
    with pytest.raises(ConfigError, match=r"^convert_links=True needs mirror="):
        trio.run(functools.partial(crawl, "http://127.0.0.1:9/", convert_links=True))


def test_a_resumed_crawl_converts_every_page(tmp_path: Path) -> None:
    """Run 1 stops after 2 pages (its links to unfetched pages become
    absolute); run 2 resumes the state and fetches the rest: then the pages
    of run 1 link to them relatively too."""
    root, out, state = tmp_path / "copy", tmp_path / "out.jsonl", tmp_path / "s.db"
    common = ["-o", str(out), "--state", str(state), "--mirror", str(root), "-k", "-w", "1"]
    with serve_site(doc_site()) as server:
        first = run_cli(server.url("/"), *common, "--max-pages", "2")
        assert first.returncode == 0, first.stderr
        home_after_first = (root / server.base_url[7:] / "index.html").read_text()
        second = run_cli(server.url("/"), *common, "--force")
        assert second.returncode == 0, second.stderr
        targets = server.targets()
        base = server.base_url
    assert f'href="{base}/about"' in home_after_first  # not saved yet: absolute
    files = saved(root)
    assert "H/about" in files and targets.count("/") == 1  # the home page was not refetched
    home = files["H/index.html"].decode()
    assert 'href="about"' in home and 'href="docs/intro.html"' in home
    assert f'href="{base}/gone"' in home
    assert "links converted in" in second.stderr


async def test_a_full_disk_stops_the_crawl_and_a_resume_saves_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page whose body could not be written gets no record; with a state
    file the resume fetches it again. Nothing already saved is lost."""
    root, state = tmp_path / "copy", tmp_path / "s.db"
    real_save = MirrorFiles.save
    calls = 0

    def save_until_full(self: MirrorFiles, parts: tuple[str, ...], body: bytes) -> tuple[str, ...]:
        nonlocal calls
        calls += 1
        if calls >= 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(self, parts, body)

    first_records: list[CrawlRecord] = []
    with serve_site(doc_site()) as server:
        monkeypatch.setattr(MirrorFiles, "save", save_until_full)
        with pytest.raises(OutputError, match=r"No space left on device"), trio.fail_after(60):
            await run_crawl(
                server.url("/"),
                on_record=first_records.append,
                mirror=str(root),
                state=str(state),
                workers=1,
            )
        first = saved(root)
        assert len(first) == 2
        monkeypatch.setattr(MirrorFiles, "save", real_save)
        records = await crawl(server.url("/"), mirror=str(root), state=str(state), workers=1)
        base = server.base_url
    files = saved(root)
    assert {k: files[k] for k in first} == first  # kept
    pages = {"H/index.html", "H/docs/index.html", "H/docs/intro.html", "H/docs/api?v=2", "H/about"}
    assert set(files) == pages
    # Every URL has one record across the two runs; the page whose body hit
    # the full disk had none in the first run (it was fetched again).
    urls = [r.url.removeprefix(base) for r in [*first_records, *records]]
    assert sorted(urls) == sorted(
        ["/", "/docs/", "/docs/intro.html", "/docs/api?v=2", "/about", "/gone", "/old"]
    )
    ok_first = [r for r in first_records if r.status == 200]
    assert len(ok_first) == len(first)


def test_a_symlink_in_the_mirror_skips_one_file_with_one_line(tmp_path: Path) -> None:
    root, outside, out = tmp_path / "copy", tmp_path / "outside", tmp_path / "out.jsonl"
    outside.mkdir()
    with serve_site(doc_site()) as server:
        host_dir = root / server.base_url.removeprefix("http://")
        host_dir.mkdir(parents=True)
        (host_dir / "docs").symlink_to(outside)
        done = run_cli(server.url("/"), "-o", str(out), "--mirror", str(root))
    assert done.returncode == 0, done.stderr
    assert list(outside.iterdir()) == []
    warnings = [line for line in done.stderr.splitlines() if "cannot save" in line]
    assert len(warnings) == 3  # docs/, docs/intro.html, docs/api?v=2
    assert all(line.endswith("is a symlink: not followed") for line in warnings)
    # Every URL still has its record: 7 pages, 5 requisites (--mirror implies them).
    assert len(records_in(out.read_text())) == 7 + 5
    assert "H/about" in saved(root)


def test_a_mirror_directory_that_cannot_be_made_is_one_line_before_any_fetch(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("earlier\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with serve_site(doc_site()) as server:
        done = run_cli(server.url("/"), "-o", str(out), "--mirror", str(blocker / "copy"))
        targets = server.targets()
    # A usage error found before anything starts (exit 2), as for a --mirror
    # that is itself a file (issue #36 cleanups): exit 3 is for a write that
    # fails during the crawl.
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"trio-crawl: error: --mirror {blocker / 'copy'}: not a directory ({blocker} is a file)"
    ], done.stderr
    assert targets == []  # nothing fetched
    assert out.read_text() == "earlier\n"  # the old output kept


async def test_a_stopped_conversion_ends_at_the_next_batch_and_says_so(tmp_path: Path) -> None:
    """Ctrl-C after the crawl, while links are converted (the CLI calls
    ``stop_converting``): the conversion ends between two batches, what was
    converted stays converted, and the summary line says to run again."""
    root = tmp_path / "copy"
    for i in range(3 * mirror_module.CONVERT_BATCH):
        page = root / "127.0.0.1" / f"p{i}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_bytes(b'<a href="/p0.html">x</a>')
    config = CrawlConfig.from_options(
        start_urls=["http://127.0.0.1/"], mirror=str(root), convert_links=True, html_only=False
    )
    batches = 0
    real_step = mirror_module.ConvertRun.step

    def counting_step(self: mirror_module.ConvertRun, n: int) -> bool:
        nonlocal batches
        batches += 1
        if batches == 1:
            link.stop_converting()  # as if a signal came during the first batch
        return real_step(self, n)

    with trio.fail_after(30), pytest.MonkeyPatch.context() as patch:
        patch.setattr(mirror_module.ConvertRun, "step", counting_step)
        async with mirror_module.open_mirror(config, on_failure=lambda error: None) as link:
            pass
    assert batches == 1
    assert link.statistics.interrupted
    converted = link.statistics.converted
    assert converted is not None and 0 < converted.converted <= mirror_module.CONVERT_BATCH
    assert "interrupted: run the same command again" in mirror_module.report_mirror(link)


@contextlib.contextmanager
def small_disk(where: Path) -> Iterator[Path]:
    """A real 1 MiB file system (tmpfs) mounted at ``where``: mounting needs
    root (and ``mount``), so the test skips, saying so, without them."""
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a 1 MiB tmpfs needs root and mount(8)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def fill_up(path: Path) -> None:
    """Write ``path`` until its file system is full (ENOSPC)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_full_disk_under_the_mirrors_visit_file_is_one_line_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """A real full disk (tmpfs) when the mirror's own visit file
    (``DIR/.trio-crawl/visits.db``) writes a page's visit: the mirror's
    one-line error and exit 3 (it was an internal error: SQLite's
    "cannot rollback" hid "database or disk is full"), every record written
    has its visit in the file, and once there is room the same command
    mirrors the whole site."""
    disk = tmp_path / "disk"
    out = tmp_path / "out.jsonl"
    filler = disk / "filler"
    full = threading.Event()

    def fill(request: object) -> Response:
        if not full.is_set():  # an empty body: its file needs no room
            fill_up(filler)
            full.set()
        return Response(body=b"")

    site = Site(
        {
            "/": Response(body=b'<a href="/a">a</a>'),
            "/a": Response(body=b'<a href="/full">f</a>'),
            "/full": fill,
        }
    )
    with small_disk(disk), serve_site(site) as server:
        root = disk / "copy"
        command = [server.url("/"), "-o", str(out), "--mirror", str(root), "-w", "1"]
        failed = run_cli(*command, "--ignore-robots")
        assert failed.returncode == 3, failed.stderr
        assert "Traceback" not in failed.stderr and "internal error" not in failed.stderr
        assert (
            f"trio-crawl: error: cannot write to {root}: cannot keep its visits in "
            ".trio-crawl/visits.db: database or disk is full\n"
        ) in failed.stderr
        written = [r["url"] for r in records_in(out.read_text())]
        assert written == [server.url("/"), server.url("/a")]
        with contextlib.closing(sqlite3.connect(root / ".trio-crawl" / "visits.db")) as db:
            kept = {url for (url,) in db.execute("SELECT url FROM visits")}
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert set(written) <= kept
        filler.unlink()
        again = run_cli(*command, "--ignore-robots")
        assert again.returncode == 0, again.stderr
    assert {r["url"] for r in records_in(out.read_text())} == {
        server.url(p) for p in ("/", "/a", "/full")
    }


async def test_the_visit_files_last_writes_on_a_full_disk_fail_the_mirror_not_the_crawl(
    tmp_path: Path,
) -> None:
    """The end of a crawl writes the visit file too (the unlinked marks, the
    generation done): on a real full disk each failure goes to the mirror's
    ``on_failure`` (one line, exit 3 in the CLI), is not raised (it was an
    internal error), and ``unreached`` then says nothing more, so the
    caller's loop over it ends."""
    from trio_crawl.mirror.visits import open_mirror_visits
    from trio_crawl.recrawl.visit import Visit

    failures: list[OSError] = []
    with small_disk(tmp_path / "disk") as disk:
        visits = open_mirror_visits(str(disk / "m"), failures.append)
        try:
            await visits.kept(visits.keep(Visit(url="http://h/", status=200)))
            fill_up(disk / "filler")
            await visits.mark_unlinked(["http://h/gone"])
            await visits.finish()
            assert await visits.unreached() == []
        finally:
            visits.close()
        assert [str(f) for f in failures] == [
            "cannot keep its visits in .trio-crawl/visits.db: database or disk is full"
        ]
        (disk / "filler").unlink()
        again = open_mirror_visits(str(disk / "m"), failures.append)
        try:  # the run did not end whole: the next one does it again, from the start
            assert again.generation == 1
        finally:
            again.close()
