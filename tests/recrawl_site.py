"""A site whose pages change between two crawls, served as a real server
would: ETag and/or Last-Modified per page, 304 to a request that names the
current validator (or, for a host that ignores them, always 200)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from email.utils import formatdate

from trio_crawl.testing import Response, Site
from trio_crawl.testing import page as html_page

#: How a page lets itself be revalidated.
ETAG, MODIFIED, BOTH, NONE = "etag", "modified", "both", "none"
DAY = 86_400.0
EPOCH = 1_700_000_000.0


@dataclass
class Page:
    links: tuple[str, ...]
    text: str = ""
    validators: str = ETAG
    version: int = 1
    #: The ETag stays when the page changes (a server that forgets to update it).
    sticky_etag: bool = False
    etag_version: int = 1


@dataclass
class ChangingSite:
    pages: dict[str, Page] = field(default_factory=dict)
    #: Always 200, whatever the request says (a server that ignores validators).
    ignores_validators: bool = False
    #: Paths answered 304 whatever the request says (even with no validator).
    blind_304: set[str] = field(default_factory=set)
    #: Paths answered 503 (a server in trouble).
    failing: set[str] = field(default_factory=set)

    def add(self, path: str, *links: str, validators: str = ETAG, text: str = "") -> None:
        self.pages[path] = Page(tuple(links), text, validators)

    def edit(self, path: str, *, links: tuple[str, ...] | None = None, text: str = "") -> None:
        page = self.pages[path]
        page.links = page.links if links is None else links
        page.text = text or f"edited {page.version}"
        page.version += 1
        if not page.sticky_etag:
            page.etag_version = page.version

    def body(self, path: str) -> bytes:
        page = self.pages[path]
        return html_page(*page.links, extra=f"<p>{page.text} v{page.version}</p>").body

    def headers(self, path: str) -> tuple[tuple[str, str], ...]:
        page = self.pages[path]
        out: list[tuple[str, str]] = []
        if page.validators in (ETAG, BOTH):
            tag = hashlib.sha1(f"{path}:{page.etag_version}".encode()).hexdigest()[:12]
            out.append(("ETag", f'"{tag}"'))
        if page.validators in (MODIFIED, BOTH):
            out.append(("Last-Modified", formatdate(EPOCH + page.version * DAY, usegmt=True)))
        return tuple(out)

    def answer(self, request: object) -> Response:
        target: str = request.target  # type: ignore[attr-defined]
        asked: dict[str, str] = request.headers  # type: ignore[attr-defined]
        if target in self.failing:
            return Response(status=503, body=b"busy", content_type="text/plain")
        if target in self.blind_304:
            return Response(status=304, content_type=None)
        if target not in self.pages:
            return Response(status=404, body=b"<!doctype html><title>Not found</title>")
        headers = self.headers(target)
        mine = dict((name.lower(), value) for name, value in headers)
        if not self.ignores_validators:
            inm, ims = asked.get("if-none-match"), asked.get("if-modified-since")
            if inm is not None and "etag" in mine:
                if inm == mine["etag"]:
                    return Response(status=304, content_type=None, headers=headers)
            elif ims is not None and ims == mine.get("last-modified"):
                return Response(status=304, content_type=None, headers=headers)
        return Response(body=self.body(target), headers=headers)

    def site(self) -> Site:
        return Site({}, fallback=self.answer)
