"""What a request says about who sends it, and what the answer asks it to
remember: identity headers, basic auth and cookies, the same in every fetcher.

Rules:

1. Every fetcher calls ``Identity.outgoing`` for the headers of a request
   and ``Identity.received`` with the ``Set-Cookie`` fields of each answer
   (every status, redirects included), so the fetchers cannot disagree.
   libcurl's own cookie engine is never switched on.
2. Which ``--header`` fields and which basic auth a URL gets is the pure
   decision of ``core.identity.identity_headers`` (credentials only to the
   start origins). Headers the caller of ``fetch`` passes win over them.
3. Cookies are those of ``FetchConfig.cookies``, a standard library
   ``http.cookiejar.CookieJar`` (a ``MozillaCookieJar`` when the CLI reads
   or writes a Netscape cookie file): its policy decides which cookies are
   kept and which go to a URL (domain, path, secure, expiry). Without a jar
   no cookie is sent or kept. The jar's methods are synchronous and take its
   own lock, so the tasks of a crawl share one jar safely.
4. A ``Cookie`` header from ``--header`` (start origins only) comes first,
   followed by the jar's cookies for that URL.
5. Only cookies that can be sent back are kept: a ``Set-Cookie`` field with
   text outside visible ASCII (RFC 6265 cookie values are ASCII; a header
   ``fetch.request`` would refuse) is ignored, and such a cookie from a
   cookie file is left out of the ``Cookie`` header, so one odd cookie can
   never make every later request to its site fail.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..core.http import FetchConfig
from ..core.identity import HEADER_VALUE, identity_headers, merged

if TYPE_CHECKING:
    import email.message
    from http.cookiejar import CookieJar

__all__ = ["Identity"]


class Identity:
    """A fetcher's identity for one crawl (module rules)."""

    __slots__ = ("_config", "cookies")

    def __init__(self, config: FetchConfig) -> None:
        self._config = config
        self.cookies: CookieJar | None = config.cookies

    @property
    def active(self) -> bool:
        """Whether any request gets anything from here."""
        cfg = self._config
        return bool(cfg.headers or cfg.credentials or self.cookies is not None)

    def outgoing(self, url: str, extra: dict[str, str] | None) -> dict[str, str] | None:
        """The headers of a request for ``url``: identity, then ``extra``."""
        if not self.active:
            return extra
        cfg = self._config
        sent = identity_headers(url, cfg.headers, cfg.trusted_origins, cfg.credentials)
        if self.cookies is not None:
            jar = _sendable(_jar_header(self.cookies, url))
            if jar:
                own = next((v for k, v in sent.items() if k.lower() == "cookie"), None)
                sent = merged(sent, {"Cookie": f"{own}; {jar}" if own else jar})
        sent = merged(sent, extra)
        return sent or None

    def received(self, url: str, set_cookies: Iterable[str]) -> None:
        """Let the jar keep what the answer to ``url`` set (its policy decides)."""
        if self.cookies is None:
            return
        values = [value for value in set_cookies if HEADER_VALUE.fullmatch(value)]
        if values:
            _jar_keep(self.cookies, url, values)


def _sendable(header: str) -> str:
    """The jar's ``Cookie`` header without pairs we cannot send (rule 5)."""
    if HEADER_VALUE.fullmatch(header):
        return header
    return "; ".join(pair for pair in header.split("; ") if HEADER_VALUE.fullmatch(pair))


# The jar speaks urllib (requests, responses with email headers): imported by
# the two functions below, so that a crawl without cookies never imports them
# (a crawl with a jar has: http.cookiejar imports both).


def _jar_header(jar: CookieJar, url: str) -> str:
    """The ``Cookie`` header ``jar`` sends to ``url`` ("" for none)."""
    import urllib.request

    request = urllib.request.Request(url)
    jar.add_cookie_header(request)
    return request.get_header("Cookie") or ""


def _jar_keep(jar: CookieJar, url: str, set_cookies: list[str]) -> None:
    """Let ``jar`` keep what ``Set-Cookie`` fields of an answer to ``url`` set."""
    import email.message
    import urllib.request

    message = email.message.Message()
    for value in set_cookies:
        message["Set-Cookie"] = value
    jar.extract_cookies(_Answer(message), urllib.request.Request(url))  # type: ignore[arg-type]


class _Answer:
    """The little of a ``urllib`` response that ``CookieJar.extract_cookies`` reads."""

    __slots__ = ("_message",)

    def __init__(self, message: email.message.Message) -> None:
        self._message = message

    def info(self) -> email.message.Message:
        return self._message
