"""What a rendered page may request: the crawl's rules applied to the browser.

Every request the browser makes (the page's, its frames', its popups') is
paused by the Fetch domain and judged here before it is sent. Pure: no trio,
no browser; the thin layer (``tab``) asks robots.txt only when this says so.

Rules, in order (the first that applies decides):

1. Only ``http`` and ``https`` go out (``file:``, ``chrome:``, ``ftp:``... are
   failed); ``data:``, ``blob:`` and ``javascript:`` never reach the network.
2. Kinds of request that only leak or keep the network busy are failed
   (the kind as ``resource_kind`` tells it from the type and headers):
   beacons and pings, CSP reports, prefetches, manifests, signed exchanges,
   event streams, WebSocket handshakes.
3. Images, media, fonts and text tracks only with ``--page-requisites``.
4. The URL must be in the crawl's scope (hosts, ``--allow-domain``, filters).
5. Then robots.txt must allow it (``Verdict.ROBOTS``: the caller checks),
   unless robots are ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ...core.url import canonicalize

__all__ = ["NEVER_TYPES", "REQUISITE_TYPES", "RequestPolicy", "Verdict", "resource_kind"]

#: CDP ``Network.ResourceType`` values that are never sent.
NEVER_TYPES = frozenset(
    {
        "Ping",
        "CSPViolationReport",
        "Prefetch",
        "Manifest",
        "SignedExchange",
        "EventSource",
        "WebSocket",
        "FedCM",
    }
)
#: Resource types fetched only with ``--page-requisites``.
REQUISITE_TYPES = frozenset({"Image", "Media", "Font", "TextTrack"})


def resource_kind(resource_type: str | None, headers: Mapping[str, str]) -> str | None:
    """The request's real kind: browser-wide interception names some coarsely
    (a prefetch is ``Fetch``, an event stream ``XHR``, the favicon
    ``Other``); its headers tell them apart."""
    lower = {name.lower(): value for name, value in headers.items()}
    if "prefetch" in lower.get("sec-purpose", "") or "prefetch" in lower.get("purpose", ""):
        return "Prefetch"
    accept = lower.get("accept", "")
    if accept.startswith("text/event-stream"):
        return "EventSource"
    if resource_type == "Other" and accept.startswith("image/"):
        return "Image"
    return resource_type


class Verdict(enum.Enum):
    """``ALLOW``: send it; ``ROBOTS``: send it if robots.txt allows; the
    others: fail it, and count it under that name."""

    ALLOW = "allow"
    ROBOTS = "robots"
    SCHEME = "scheme"
    KIND = "kind"
    REQUISITE = "requisite"
    SCOPE = "scope"


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """The rules for one crawl.

    Args:
        in_scope: the crawl's scope test on a canonical URL.
        page_requisites: whether images, media and fonts may load.
        obey_robots: whether robots.txt is asked (``--ignore-robots``: not).
    """

    in_scope: Callable[[str], bool]
    page_requisites: bool = False
    obey_robots: bool = True

    def judge(self, url: str, resource_type: str | None) -> Verdict:
        """The verdict on a request for ``url`` of CDP ``resource_type``."""
        scheme = url.partition(":")[0].lower()
        if scheme not in ("http", "https"):
            return Verdict.SCHEME
        if resource_type in NEVER_TYPES:
            return Verdict.KIND
        if resource_type in REQUISITE_TYPES and not self.page_requisites:
            return Verdict.REQUISITE
        canonical = canonicalize(url)
        if canonical is None or not self.in_scope(canonical):
            return Verdict.SCOPE
        return Verdict.ROBOTS if self.obey_robots else Verdict.ALLOW

    @staticmethod
    def may_navigate(url: str) -> bool:
        """Whether the crawl may point a tab at ``url``: http(s) only, never
        ``javascript:``, ``file:``, ``data:`` or ``chrome:``."""
        return url.partition(":")[0].lower() in ("http", "https")
