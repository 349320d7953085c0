"""The mirror opened from ``file://`` in a real headless Chromium (Debian's
``chromium``; skipped with the reason when it is not installed): the saved
stylesheet (and the one it ``@import``s) applies, the images load, and a
link leads to a saved page that is styled too. A control run on the same
copy without ``--convert-links`` shows that the check can fail. Nothing here
talks to any host but 127.0.0.1 and file://."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from lxml import html as lxml_html
from test_mirror_crawl import doc_site

from trio_crawl.testing import Response, serve_site

from cli_helpers import run_cli

TIMEOUT = 60

#: Served as the site's own script: it writes what the browser computed into
#: the DOM, which --dump-dom then prints.
CHECK_JS = b"""
window.addEventListener("load", () => {
  const body = document.body;
  const title = document.getElementById("title");
  const link = document.getElementById("to-intro") || document.querySelector("a");
  const logo = document.getElementById("logo");
  body.dataset.color = getComputedStyle(title).color;
  body.dataset.background = getComputedStyle(title).backgroundImage;
  body.dataset.linkColor = getComputedStyle(link).color;
  body.dataset.href = link.href;
  body.dataset.logo = logo ? String(logo.naturalWidth) : "";
});
"""


def browser_site() -> object:
    site = doc_site()
    site.routes["/js/check.js"] = Response(body=CHECK_JS, content_type="application/javascript")
    intro = site.routes["/docs/intro.html"]
    assert isinstance(intro, Response)
    site.routes["/docs/intro.html"] = Response(
        body=intro.body.replace(b"<h1>", b'<h1 id="title">').replace(
            b"</body>", b'<script src="../js/check.js"></script></body>'
        )
    )
    return site


def chromium(tmp_path: Path, target: Path) -> dict[str, str]:
    """Load ``target`` from file:// in headless chromium; the data attributes
    the page's script set on ``<body>``."""
    exe = shutil.which("chromium")
    assert exe is not None
    result = subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            target.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    body = lxml_html.fromstring(result.stdout).find(".//body")
    assert body is not None, result.stdout[:2000]
    return {k.removeprefix("data-"): v for k, v in body.attrib.items() if k.startswith("data-")}


def test_the_mirror_opens_in_chromium_styled_and_linked(tmp_path: Path) -> None:
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not on PATH (apt-get install chromium); no browser test")
    copies = {"converted": tmp_path / "converted", "plain": tmp_path / "plain"}
    with serve_site(browser_site()) as server:  # type: ignore[arg-type]
        host = server.base_url.removeprefix("http://")
        for name, root in copies.items():
            extra = ["-k"] if name == "converted" else []
            done = run_cli(
                server.url("/"), "-q", "-o", str(tmp_path / f"{name}.jsonl"),
                "--mirror", str(root), "--page-requisites", *extra,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr

    home = copies["converted"] / host / "index.html"
    seen = chromium(tmp_path, home)
    assert seen["color"] == "rgb(1, 2, 3)"  # css/site.css applies
    assert seen["link-color"] == "rgb(4, 5, 6)"  # and the print.css it @imports
    assert seen["background"] == f'url("{(home.parent / "img" / "bg.png").as_uri()}")'
    assert seen["logo"] == "1"  # the saved PNG decoded
    href = urlsplit(seen["href"])
    assert href.scheme == "file"
    target = Path(unquote(href.path))
    assert target == copies["converted"] / host / "docs" / "intro.html"
    assert target.is_file()
    # The page the link leads to is itself styled, from one directory down.
    assert chromium(tmp_path, target)["color"] == "rgb(1, 2, 3)"

    # Control: the copy without --convert-links has root-relative links that
    # lead nowhere from file://: not even its script loads to report a color.
    assert chromium(tmp_path, copies["plain"] / host / "index.html") == {}
