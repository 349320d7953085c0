"""A website as data: what an in-process server should answer, faults included.

Used by ``trio-crawl demo`` (the embedded demo site), by the test suite's
servers and by benchmarks. Pure data: no sockets, no trio. ``server.py``
serves a ``Site`` over real HTTP/1.1 on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

HTML = "text/html; charset=utf-8"


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """One canned answer, with optional faults.

    Faults, applied by the server in this order:
    ``delay`` seconds before the status line; ``drip`` seconds between 1 KiB
    chunks of the body; ``reset_after`` bytes of body, then a TCP reset;
    ``truncate``: stop half-way through the body and close (with
    ``chunked``: no terminating chunk; without: fewer bytes than
    Content-Length); ``close``: ``Connection: close`` after this answer.
    """

    status: int = 200
    body: bytes = b""
    content_type: str | None = HTML
    headers: tuple[tuple[str, str], ...] = ()
    gzip: bool = False
    chunked: bool = False
    delay: float = 0.0
    drip: float = 0.0
    reset_after: int | None = None
    truncate: bool = False
    close: bool = False


@dataclass(frozen=True, slots=True)
class SiteRequest:
    """What a dynamic route sees: the request target and lower-cased headers."""

    method: str
    target: str  # path plus "?query", exactly as sent
    headers: Mapping[str, str]


#: A route is a fixed answer, a sequence answered in turn (the last one
#: repeats: ``[Response(status=503), Response(body=...)]`` is "fail once"),
#: or a function of the request.
Route = Response | Sequence[Response] | Callable[[SiteRequest], Response]


@dataclass(frozen=True, slots=True)
class Site:
    """Routes keyed by request target (path plus query, no fragment).

    ``fallback`` answers targets with no route (default: a plain 404).
    """

    routes: Mapping[str, Route]
    fallback: Callable[[SiteRequest], Response] | None = None


def redirect(location: str, status: int = 301) -> Response:
    """A redirect with an empty body."""
    return Response(status=status, headers=(("Location", location),), content_type=None)


def page(*hrefs: str, title: str = "", extra: str = "") -> Response:
    """An HTML page linking to ``hrefs`` (written as given, not resolved)."""
    links = "".join(f'<a href="{h}">{h}</a>\n' for h in hrefs)
    html = (
        f"<!doctype html><html><head><title>{title}</title></head>"
        f"<body>{links}{extra}</body></html>"
    )
    return Response(body=html.encode())
