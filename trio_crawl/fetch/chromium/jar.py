"""Cookies a page's scripts set (``document.cookie``), into the crawl's jar.

The crawl's fetcher sends the browser's requests with the crawl's cookie jar
(``fetch.identity``), not Chromium's: a cookie a script writes lives only in
the browser's own jar. After each render the tab reads the page's cookies
(``Network.getCookies``) and they go to the crawl's jar here, so the
browser's later requests to that host, and the crawler's, carry them.
Pure: no trio, no browser.

Rules:

1. Only with a jar (a crawl without cookies keeps none), only cookies
   that apply to the page (its host, or a domain it belongs to) and only if
   the page's origin with the cookie's path is in the crawl's scope: a page
   cannot plant cookies for hosts the crawl does not visit.
2. A cookie is the browser's as it stands: name, value, domain (a leading
   dot: the host and its subdomains), path, secure, expiry (none: a session
   cookie, kept for the crawl), HttpOnly. The jar's policy has its say only
   on ``Set-Cookie`` headers; a page's cookie is already the browser's
   decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from http.cookiejar import Cookie, CookieJar
from typing import Any
from urllib.parse import urlsplit

from ...core.url import canonicalize

__all__ = ["keep_page_cookies", "to_cookie"]


def to_cookie(raw: Mapping[str, Any]) -> Cookie | None:
    """The jar's ``Cookie`` for one DevTools ``Network.Cookie`` (rule 2);
    None if it lacks a name's worth of fields."""
    name, domain = raw.get("name"), raw.get("domain")
    if not isinstance(name, str) or not isinstance(domain, str) or not domain:
        return None
    expires = raw.get("expires", -1)
    session = bool(raw.get("session")) or not isinstance(expires, int | float) or expires <= 0
    dotted = domain.startswith(".")
    return Cookie(
        version=0,
        name=name,
        value=str(raw.get("value", "")),
        port=None,
        port_specified=False,
        domain=domain,
        domain_specified=dotted,
        domain_initial_dot=dotted,
        path=str(raw.get("path") or "/"),
        path_specified=True,
        secure=bool(raw.get("secure")),
        expires=None if session else int(expires),
        discard=session,
        comment=None,
        comment_url=None,
        rest={"HttpOnly": ""} if raw.get("httpOnly") else {},
    )


def keep_page_cookies(
    jar: CookieJar | None,
    cookies: Iterable[Mapping[str, Any]],
    page: str,
    in_scope: Callable[[str], bool],
) -> int:
    """Put the cookies of ``page`` that rule 1 allows into ``jar``; returns
    how many were kept."""
    if jar is None:
        return 0
    parts = urlsplit(page)
    host = (parts.hostname or "").lower()
    kept = 0
    for raw in cookies:
        cookie = to_cookie(raw)
        if cookie is None:
            continue
        domain = cookie.domain.lstrip(".").lower()
        if host != domain and not host.endswith("." + domain):
            continue
        url = canonicalize(f"{parts.scheme}://{parts.netloc}{cookie.path}")
        if url is None or not in_scope(url):
            continue
        jar.set_cookie(cookie)
        kept += 1
    return kept
