"""Plain data that crosses module boundaries: fetch results, failures, records.

Everything here is a frozen (or slotted) dataclass with no behaviour beyond
serialisation, so that every layer (pure frontier, trio engine, sinks, CLI) can
share it without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Failure kinds, the short machine-readable half of a record's ``error``.
#: The fetch layer produces the network ones; the engine produces the rest.
ERROR_KINDS: frozenset[str] = frozenset(
    {
        "timeout",  # connect, read or total deadline passed
        "connect",  # DNS failure, refused, unreachable
        "tls",  # TLS handshake failed: certificate not trusted, wrong host name, ...
        "reset",  # peer closed or reset the connection mid-exchange
        "protocol",  # malformed HTTP, truncated body, bad chunking
        "decode",  # content-encoding could not be decoded
        "too_large",  # body exceeded max_bytes (compressed or not)
        "http_4xx",  # final 4xx answer (kept as a record, not retried)
        "http_5xx",  # final 5xx answer after retries
        "http_429",  # still rate limited after retries
        "robots",  # disallowed by robots.txt, never requested
        "redirect_loop",  # the chain came back to a URL already in it
        "too_many_redirects",  # more than the hop budget
        "out_of_scope_redirect",  # Location points outside the crawl scope
        "bad_redirect",  # 3xx without a usable Location
        "handler",  # a user handler raised
        "internal",  # an unexpected exception while processing this page
        # --render: the retry class of a render that failed (a crash is tried
        # again); no record has it since a failed render keeps the page as
        # served (``RenderFailure``, the record's ``render_error``).
        "render",
    }
)

#: Failure kinds that mean the host cannot be talked to at all. When the
#: robots.txt request of a host fails with one of them, every page of the host
#: is recorded with that kind at once, never requested: its own request would
#: meet the same wall (a certificate not trusted, a port that speaks another
#: protocol, a refused connection), and waiting to re-fetch robots.txt would
#: only make the crawl longer. Such a record counts ``attempts: 1``: the
#: robots.txt request, made on the page's behalf (``make_record``).
HOST_FAILURE_KINDS: frozenset[str] = frozenset({"connect", "timeout", "tls", "reset", "protocol"})


@dataclass(frozen=True, slots=True)
class RenderFailure:
    """Why a page's render (``--render``) gave no DOM, and after how long.

    The page is kept as the server sent it (status, headers, the links in
    its bytes): a browser's trouble is no failure of the HTTP exchange, so
    it is said here, not by the record's ``status`` or ``error``. ``kind``:
    ``timeout`` (the page gave no DOM within its budget: a script that never
    yields), ``crash`` (the tab or the browser died), ``browser`` (no tab
    could be had), ``no_dom`` (the document could not be read). ``retry``:
    whether another attempt may do better (a crash may; a script that loops
    will loop again).
    """

    kind: str
    message: str
    seconds: float
    retry: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One HTTP exchange as the fetch layer saw it.

    ``headers`` has lower-case names; repeated headers are joined with ``", "``.
    ``body`` is the decoded (gunzipped, ...) body, or ``b""`` when the fetcher
    skipped it because the content type was not wanted (``body_skipped``).
    ``url`` is the URL that was requested: fetchers never follow redirects.
    ``http_version`` is the protocol the answer came in (``"HTTP/1.0"``, ``"HTTP/1.1"``,
    ``"HTTP/2"``), ``None`` when the fetcher cannot tell.

    A rendered page (``--render``) has ``rendered=True``, the rendered DOM as
    ``body`` and what came over the network as ``network_body`` (a WARC
    keeps that); ``client_redirect`` is where its scripts or a meta refresh
    sent the tab (recorded as a redirect). ``render_failure`` says why a page
    meant to be rendered was not: the result is then the page as served.
    """

    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    elapsed: float
    body_skipped: bool = False
    http_version: str | None = None
    rendered: bool = False
    network_body: bytes | None = field(default=None, repr=False)
    client_redirect: str | None = None
    render_failure: RenderFailure | None = None

    @property
    def content_type(self) -> str | None:
        value = self.headers.get("content-type")
        return value.strip() if value else None


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The ``error`` field of a record: a short kind plus a human message."""

    kind: str
    message: str
    traceback: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {"kind": self.kind, "message": self.message}
        if self.traceback is not None:
            out["traceback"] = self.traceback
        return out


@dataclass(frozen=True, slots=True)
class CrawlRecord:
    """One line of output: the outcome of one URL that was tried.

    ``url`` is the canonical URL; ``status`` is ``None`` when no HTTP answer was
    had; ``redirect`` is the canonical target of a 3xx; ``links`` counts the
    distinct links extracted from the page (0 for non-HTML); ``t`` is when the
    record was made, in seconds since the crawl (this run of it) started;
    ``size`` is the length of the body as downloaded and decoded
    (gunzipped...), None when no body was read (an error, or a skipped
    non-HTML body). ``protocol`` is the ``FetchResult.http_version`` of the
    answer; the JSON leaves it out when unknown (no answer, or a fetcher that
    cannot tell).

    ``attempts`` counts the requests made for the URL, retries included, with
    one rule for a URL that made none: 0 when nothing was asked on its behalf
    (robots.txt disallows it), 1 when its host's robots.txt request failed in
    a way that means the host cannot be talked to (``connect``, ``timeout``,
    ``tls``, ``reset``, ``protocol``). Such a page is recorded with the
    failure's kind at once, never requested, and that one robots.txt request,
    made on its behalf, is its attempt; the message starts with
    ``robots.txt:``, except a refused connection's, which is the host's
    whichever URL asked. A robots.txt that answers (a 5xx, say) is no such
    failure: the page waits for one re-fetch, and robots.txt's verdict then
    gives ``robots`` with 0 attempts.
    """

    url: str
    status: int | None
    depth: int
    error: ErrorInfo | None = None
    redirect: str | None = None
    referrer: str | None = None
    content_type: str | None = None
    elapsed_ms: float | None = None
    links: int = 0
    attempts: int = 1
    t: float | None = None
    size: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    protocol: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "url": self.url,
            "status": self.status,
            "depth": self.depth,
            "error": self.error.to_json() if self.error else None,
            "redirect": self.redirect,
            "referrer": self.referrer,
            "content_type": self.content_type,
            "elapsed_ms": self.elapsed_ms,
            "links": self.links,
            "attempts": self.attempts,
            "t": self.t,
            "size": self.size,
        }
        if self.protocol is not None:
            out["protocol"] = self.protocol
        if self.extra:
            out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True)
class DepthUpdate:
    """A correction of an earlier record: a shorter path to ``url`` was found
    after its record was written (a shallow page slower than a deeper
    chain). ``depth`` and ``referrer`` replace the record's; nothing else
    about the record changes. The command line writes it to the
    ``--depth-updates`` file (never among the records) as a JSON line with
    ``"depth_update": true``, after the record it corrects; applying the
    lowest of them to its URL's record gives the shortest depth.
    """

    url: str
    depth: int
    referrer: str | None
    previous_depth: int
    t: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "depth": self.depth,
            "referrer": self.referrer,
            "depth_update": True,
            "previous_depth": self.previous_depth,
            "t": self.t,
        }
