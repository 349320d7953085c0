"""``--mirror`` as ``wget -m`` behaves where a new user compares them (issue
#36 items 6 and 7), through the CLI on a site served on 127.0.0.1:

- without ``--page-requisites``, a mirror still takes what its pages need
  (stylesheet, script, image) and ``-k`` links the page to those files, so
  the copy is browsable offline; with ``--state`` (whose frontier keeps no
  requisites) the mirror saves what is followed, as before;
- ``-A``/``-R`` decide what is kept on disk: an HTML page they reject is
  fetched and read for its links, never saved; requisites obey them too.
"""

from __future__ import annotations

import re
from pathlib import Path

from trio_crawl.testing import Response, Site, serve_site

from cli_helpers import records_in, run_cli, run_on_a_terminal


def page(body: str) -> Response:
    return Response(
        body=(
            "<!DOCTYPE html>\n<html><head><meta charset=utf-8>"
            '<link rel="stylesheet" href="/static/site.css">'
            '<script src="/static/app.js"></script>'
            f"</head>\n<body>{body}</body></html>\n"
        ).encode()
    )


def docs_site() -> Site:
    """Pages that use a stylesheet, a script and an image; two index pages
    named ``genindex*``; the only links to ``/files/x.png``, ``/files/y.py``
    and ``/files/z.txt`` are on pages whose names ``-A png,py`` rejects."""
    return Site(
        {
            "/": page(
                '<img id="logo" src="/static/logo.png"> <a href="/guide/intro.html">Intro</a>'
                ' <a href="/genindex.html">Index</a> <a href="/genindex-all.html">All</a>'
            ),
            "/guide/intro.html": page(
                '<a href="/">Home</a> <a href="/files/x.png">x</a> <a href="/files/y.py">y</a>'
                ' <a href="/files/z.txt">z</a>'
            ),
            "/genindex.html": page('<a href="/">Home</a>'),
            "/genindex-all.html": page('<a href="/guide/intro.html">Intro</a>'),
            "/static/site.css": Response(
                body=b"body { background: url(bg.png) }\n", content_type="text/css"
            ),
            "/static/app.js": Response(body=b"// app\n", content_type="text/javascript"),
            "/static/logo.png": Response(body=b"\x89PNG logo", content_type="image/png"),
            "/static/bg.png": Response(body=b"\x89PNG bg", content_type="image/png"),
            "/files/x.png": Response(body=b"\x89PNG x", content_type="image/png"),
            "/files/y.py": Response(body=b"print('y')\n", content_type="text/x-python"),
            "/files/z.txt": Response(body=b"z\n", content_type="text/plain"),
        }
    )


def saved(root: Path) -> set[str]:
    """The saved files, relative to the host directory."""
    [host] = [p for p in root.iterdir() if p.name != ".trio-crawl"]  # its own visits aside
    return {str(p.relative_to(host)) for p in host.rglob("*") if p.is_file()}


def test_a_mirror_without_page_requisites_is_browsable(tmp_path: Path) -> None:
    root, out = tmp_path / "copy", tmp_path / "out.jsonl"
    with serve_site(docs_site()) as server:
        done = run_cli(server.url("/"), "-o", str(out), "--mirror", str(root), "-k", "-E")
    assert done.returncode == 0, done.stderr
    files = saved(root)
    assert {"static/site.css", "static/app.js", "static/logo.png", "static/bg.png"} <= files
    [host] = [p for p in root.iterdir() if p.name != ".trio-crawl"]  # its own visits aside
    home = (host / "index.html").read_text()
    for relative in (
        'href="static/site.css"',
        'src="static/app.js"',
        'src="static/logo.png"',
        'href="guide/intro.html"',
    ):
        assert relative in home, relative
    assert server.base_url not in home  # nothing left pointing at the live site
    intro = (host / "guide" / "intro.html").read_text()
    assert 'href="../static/site.css"' in intro and 'src="../static/app.js"' in intro


def test_a_mirror_with_state_saves_what_it_follows_as_before(tmp_path: Path) -> None:
    root, out, state = tmp_path / "copy", tmp_path / "out.jsonl", tmp_path / "s.db"
    with serve_site(docs_site()) as server:
        done = run_cli(
            server.url("/"), "-o", str(out), "--state", str(state), "--mirror", str(root), "-k"
        )
    assert done.returncode == 0, done.stderr
    files = saved(root)
    assert "guide/intro.html" in files and "files/y.py" in files
    assert not any(name.startswith("static/") for name in files)  # no requisites here


def test_reject_keeps_the_rejected_pages_off_the_disk(tmp_path: Path) -> None:
    root, out = tmp_path / "copy", tmp_path / "out.jsonl"
    with serve_site(docs_site()) as server:
        done = run_cli(
            server.url("/"), "-o", str(out), "--mirror", str(root), "-k", "-R", "genindex*"
        )
        targets = server.targets()
    assert done.returncode == 0, done.stderr
    files = saved(root)
    assert not any("genindex" in name for name in files), files
    assert {"index.html", "guide/intro.html", "files/x.png", "static/site.css"} <= files
    # Fetched and read for links all the same (wget reads them, then deletes them).
    assert targets.count("/genindex.html") == targets.count("/genindex-all.html") == 1
    assert "2 read for links only (-A/-R reject their names)" in done.stderr
    # A link to a page that is not kept leads to the live site.
    home = (root / server.base_url.removeprefix("http://") / "index.html").read_text()
    assert f'href="{server.base_url}/genindex.html"' in home


def test_accept_keeps_only_the_files_it_names(tmp_path: Path) -> None:
    root, out = tmp_path / "copy", tmp_path / "out.jsonl"
    with serve_site(docs_site()) as server:
        done = run_cli(server.url("/"), "-o", str(out), "--mirror", str(root), "-A", "png,py")
        targets = server.targets()
    assert done.returncode == 0, done.stderr
    # The HTML pages were walked to the files, none kept; the requisites
    # obey -A too: the images are kept, the stylesheet and script not.
    assert saved(root) == {"files/x.png", "files/y.py", "static/logo.png", "static/bg.png"}
    assert "/guide/intro.html" in targets and "/files/z.txt" not in targets
    fetched = {r["url"] for r in records_in(out.read_text()) if r["status"] == 200}
    assert server.url("/guide/intro.html") in fetched


def test_the_conversion_shows_progress_and_counts_in_the_elapsed_time(tmp_path: Path) -> None:
    """Issue #36 item 8: on a terminal, ``-k`` draws a line while it converts
    (the terminal was blank), and the summary's elapsed time includes it."""
    root, out = tmp_path / "copy", tmp_path / "out.jsonl"
    with serve_site(docs_site()) as server:
        code, screen = run_on_a_terminal(
            server.url("/"), "-o", str(out), "--mirror", str(root), "-k", "-E"
        )
    assert code == 0, screen
    assert "converting links (-k)" in screen
    summary = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.split("trio-crawl summary")[1])
    assert re.search(r"elapsed\W+[\d.]+ s \(crawl [\d.]+ s, link conversion [\d.]+ s\)", summary)
    assert re.search(r"links converted in \d+ of \d+ files \([\d.]+ s\)", summary)
