"""One page's life in a tab, as plain state: what the browser has told us.

Pure: the router (``session``) and the tab (``tab``) feed it events and read
its decisions; no trio, no browser here, so each rule is tested directly.

Rules:

1. A tab's main frame is armed for exactly one document: the first
   main-frame ``Document`` request for the URL we navigate to (as the
   browser writes it, or canonicalized as the crawler does) is answered
   with the response the crawler already fetched (``fulfill``); the browser
   never fetches the page itself and never follows a redirect itself.
2. Any later main-frame document request (``location.replace``, a meta
   refresh, a link clicked by a script) is a client-side redirect: the first
   one's URL is kept and the request is answered ``204 No Content``, so the
   tab stays on the page (a failed navigation would show an error page);
   the page counts as settled at once (``on_leave``).
3. The page settles ``QUIET`` seconds after its load event, and no sooner
   than ``QUIET`` seconds after its last request started or ended, with
   none in flight (a ``fetch()`` whose answer is slow is waited for);
   ``settled_at`` says when that will be, given what is known now. Quiet
   counts from the load event too, not only from the last request: a page
   whose requests all ended before its load event (the usual case) still
   gets its timers' ``QUIET`` seconds after load, however late the load
   came (a busy browser loads late; issue #36 item 9).
4. A later main-frame document request the tab's network log never saw
   (no ``networkId``: the download manager's, for an ``<a download>`` the
   page clicked) is a download, not a navigation: it is failed and the page
   goes on (the browser counts the download when it begins).
5. A navigation a script starts to a URL whose answer the browser would
   save rather than show (``is_download``: an attachment, or a type it
   cannot display) is a download too, not a redirect of the page: the
   fetcher asks for the target once the render is over and drops the
   client redirect if so (the page's own links are what the crawl reads).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.models import FetchResult
from ...core.url import canonicalize

__all__ = ["QUIET", "DocumentStep", "PageLife", "fulfilled_headers", "is_download"]

#: Seconds without a new request that make the network quiet.
QUIET = 0.5

#: Response headers not passed on to the browser: the body it gets is
#: already decoded and whole.
_DROPPED = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class DocumentStep(enum.Enum):
    """What to do with a main-frame document request."""

    FULFILL = "fulfill"  # the page itself: answer it with the fetched response
    CLIENT_REDIRECT = "client_redirect"  # a later navigation: note it, answer 204
    DOWNLOAD = "download"  # a download the page started: fail it, the page stays


#: Types a browser shows in a tab (anything else it saves: rule 5).
_SHOWN_PREFIXES = ("text/", "image/", "video/", "audio/")
_SHOWN_TYPES = frozenset(
    {
        "application/xhtml+xml",
        "application/xml",
        "application/json",
        "application/javascript",
        "application/pdf",
    }
)


def is_download(result: FetchResult) -> bool:
    """Whether a browser navigated to ``result`` would save it, not show it
    (rule 5): ``Content-Disposition: attachment``, or a media type it does
    not display. A response without a type is sniffed by the browser, and
    counts as shown."""
    disposition = result.headers.get("content-disposition", "")
    if disposition.split(";")[0].strip().lower() == "attachment":
        return True
    media = (result.content_type or "").split(";")[0].strip().lower()
    if not media:
        return False
    shown = media.startswith(_SHOWN_PREFIXES) or media.endswith("+xml")
    return not (shown or media in _SHOWN_TYPES)


def fulfilled_headers(result: FetchResult) -> list[dict[str, str]]:
    """The fetched response's headers as the Fetch domain takes them."""
    out: list[dict[str, str]] = []
    for name, value in result.headers.items():
        if name in _DROPPED:
            continue
        if name == "set-cookie":  # joined with ", " by the fetcher; one is enough
            value = value.split(", ")[0]
        out.append({"name": name, "value": value})
    return out


@dataclass(slots=True)
class PageLife:
    """The state of one render. ``now`` values are the caller's clock."""

    url: str
    result: FetchResult
    started_at: float
    document_sent: bool = False
    #: When the load event of this navigation was seen (None: not yet).
    loaded_at: float | None = None
    crashed: bool = False
    client_redirect: str | None = None
    last_request_at: float = 0.0
    requests: int = 0
    #: Requests of the page sent and not yet finished or failed (by id).
    in_flight: set[str] = field(default_factory=set)
    blocked: Counter[str] = field(default_factory=Counter)
    #: The page's cookies when it was read (DevTools ``Network.Cookie``s),
    #: if the tab was asked for them (``jar``).
    cookies: list[dict[str, Any]] = field(default_factory=list)
    #: Called when the page starts leaving (a client redirect): the tab
    #: stops waiting for it to settle.
    on_leave: Callable[[], None] = field(default=lambda: None, repr=False)

    def __post_init__(self) -> None:
        self.last_request_at = self.started_at

    def document_request(self, url: str, navigation: bool = True) -> DocumentStep:
        """A main-frame document request for ``url`` (rules 1, 2 and 4);
        ``navigation``: the tab's own network log saw it."""
        if not self.document_sent and (url == self.url or canonicalize(url) == self.url):
            self.document_sent = True
            return DocumentStep.FULFILL
        if self.document_sent and not navigation:
            return DocumentStep.DOWNLOAD
        if self.document_sent and self.client_redirect is None:
            self.client_redirect = url
            self.on_leave()
        return DocumentStep.CLIENT_REDIRECT

    @property
    def loaded(self) -> bool:
        return self.loaded_at is not None

    def load(self, now: float) -> None:
        """The load event of this navigation was seen: quiet counts from now too."""
        if self.loaded_at is None:
            self.loaded_at = now

    def moved(self, now: float) -> None:
        """The page was scrolled: what it does about it gets ``QUIET`` seconds."""
        self.last_request_at = max(self.last_request_at, now)

    def request_started(self, now: float) -> None:
        """The page asked for something (allowed or not): the network is busy."""
        self.requests += 1
        self.last_request_at = max(self.last_request_at, now)

    def request_sent(self, request_id: str, now: float) -> None:
        """A request of the page went out (the tab's network events)."""
        self.in_flight.add(request_id)
        self.last_request_at = max(self.last_request_at, now)

    def request_ended(self, request_id: str, now: float) -> None:
        """A request finished or failed: quiet counts from now."""
        if request_id in self.in_flight:
            self.in_flight.discard(request_id)
            self.last_request_at = max(self.last_request_at, now)

    def settled_at(self) -> float | None:
        """When the page counts as settled if nothing new starts (rule 3);
        None before the load event or while a request is in flight. A page
        that is leaving is settled."""
        if self.client_redirect is not None:
            return self.started_at
        if self.loaded_at is None or self.in_flight:
            return None
        return max(self.loaded_at, self.last_request_at) + QUIET
