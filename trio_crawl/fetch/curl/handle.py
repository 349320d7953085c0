"""One libcurl easy handle, configured for crawling, and its callbacks.

Rules:

1. Every transfer shares the same options (``Slot.configure``): no redirects
   followed, only ``http`` and ``https`` (``PROTOCOLS``), the content codings
   ``fetch.decode`` undoes, received undecoded (the ``Collector`` decodes),
   the connect timeout and User-Agent of the ``FetchConfig``. ``begin`` adds
   what one transfer needs (URL, extra headers, its proxy, what is left of
   the total deadline). The proxy is always set, ``""`` for none, so libcurl
   never reads the proxy variables itself (``fetch.proxy`` decides), and its
   cookie engine stays off (``fetch.identity`` sends and keeps cookies).
2. TLS peers are verified against ``FetchConfig.ca_bundle``, else the
   standard environment variables, else the system's CA bundle
   (``fetch.tls``; ``find_ca_bundle``), never the path compiled into
   pycurl's wheel, which most systems lack.
3. HTTP/1.1 unless ``FetchConfig.http2``: then HTTP/2 is offered on https
   connections (ALPN), where this libcurl has it (nghttp2), and libcurl may
   multiplex transfers to one host over one connection. Plain http stays
   HTTP/1.1 either way (no h2c).
4. One request per transfer: the pre-request callback lets the ``Collector``
   refuse libcurl's silent resend after a reused connection died. It also
   refuses, before a byte is sent, a connection known to be dead (``dead``,
   by local address and port): libcurl keeps a connection closed mid-head
   for reuse (it checks an idle connection's life only once a second), and
   the next request on it would fail; refused, libcurl closes it, and the
   fetcher starts the transfer again (``refused_dead``): no request was
   sent, so this is no resend.
5. libcurl callbacks never raise into libcurl. An exception inside one is our
   bug: the slot keeps it and ``outcome`` re-raises it, loudly.
6. Through an http proxy, https goes in a CONNECT tunnel, and libcurl hands
   the proxy's answer to the CONNECT (``HTTP/1.1 200 Connection
   established`` and its headers) to the header callback before the site's
   own head, unless told not to (``SUPPRESS_CONNECT_HEADERS``): the
   ``Collector`` took the proxy's 200 and headers for the answer, whatever
   the site said. Suppressed, the callback sees the site's head only, as
   the other fetchers do; a tunnel the proxy refuses is curl's error
   (``CurlError``), not a status of the page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pycurl
import trio

from ...core.http import FetchConfig
from ...core.models import FetchResult
from ..decode import ACCEPT_ENCODING
from .collector import Collector

#: How long a resolved host name is reused (libcurl's default is 60 s): a
#: broad crawl meets each host many times, and one lookup per host and crawl
#: is what a polite, fast crawler does.
DNS_CACHE_SECONDS = 3600

__all__ = ["HTTP2", "Slot", "find_ca_bundle"]


class Slot:
    """One easy handle, its callbacks, and the transfer it is lent to."""

    __slots__ = (
        "_has_headers",
        "bug",
        "ca",
        "closed",
        "code",
        "collector",
        "config",
        "curl",
        "dead",
        "done",
        "elapsed",
        "local",
        "message",
        "refused_dead",
        "started",
        "url",
    )

    def __init__(
        self,
        config: FetchConfig,
        ca: tuple[str | None, str | None],
        dead: dict[tuple[str, int], float] | None = None,
    ) -> None:
        self.config = config
        #: connections that must not carry another request, by local (address,
        #: port), shared by every slot of a fetcher (rule 4)
        self.dead: dict[tuple[str, int], float] = {} if dead is None else dead
        self.local: tuple[str, int] | None = None  # the last request's connection
        self.refused_dead = False
        self.ca = ca  # (CAINFO, CAPATH); both None: libcurl's own default
        self.curl: Any = pycurl.Curl()
        self.collector = Collector(max_bytes=config.max_bytes, html_only=config.html_only)
        self._has_headers = False
        self.url = ""
        self.done = trio.Event()
        self.code = 0
        self.message = ""
        self.started = 0.0
        self.elapsed = 0.0
        self.bug: BaseException | None = None
        self.closed = False  # the fetcher closed while this transfer ran
        self.configure()

    def configure(self) -> None:
        """Options every transfer shares; again after ``curl.reset()``."""
        c, cfg = self.curl, self.config
        c.setopt(pycurl.NOSIGNAL, 1)
        c.setopt(pycurl.FOLLOWLOCATION, 0)
        c.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        c.setopt(pycurl.ACCEPT_ENCODING, ACCEPT_ENCODING)
        c.setopt(pycurl.HTTP_CONTENT_DECODING, 0)  # the Collector decodes (rule 1)
        c.setopt(pycurl.BUFFERSIZE, _BUFFER)
        cafile, capath = self.ca
        if cafile is not None:
            c.setopt(pycurl.CAINFO, cafile)
        elif capath is not None:
            c.unsetopt(pycurl.CAINFO)  # the wheel's compiled-in file may not exist
        if capath is not None:
            c.setopt(pycurl.CAPATH, capath)
        c.setopt(pycurl.HTTP_VERSION, _HTTP2 if cfg.http2 and HTTP2 else _HTTP11)
        c.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, round(cfg.connect_timeout * 1000)))
        # Names are resolved by libcurl's threaded resolver (never on the event
        # loop) into the multi handle's DNS cache, shared by every handle of
        # the crawl; an hour keeps each host's answer for a crawl of most sizes.
        c.setopt(pycurl.DNS_CACHE_TIMEOUT, DNS_CACHE_SECONDS)
        c.setopt(pycurl.USERAGENT, cfg.user_agent)
        c.setopt(pycurl.HEADERFUNCTION, self._on_header)
        c.setopt(pycurl.WRITEFUNCTION, self._on_write)
        c.setopt(pycurl.PREREQFUNCTION, self._on_prereq)
        c.setopt(_SUPPRESS_CONNECT_HEADERS, 1)  # rule 6
        self._has_headers = False

    def begin(
        self,
        url: str,
        headers: dict[str, str] | None,
        timeout: float,
        any_body: bool,
        proxy: str | None = None,
    ) -> None:
        """Ready the handle for ``url``, with ``timeout`` seconds for everything,
        through ``proxy`` (``None``: directly)."""
        c = self.curl
        # check_url kept control characters out; libcurl takes other text as UTF-8
        c.setopt(pycurl.URL, url if url.isascii() else url.encode("utf-8", "surrogatepass"))
        if headers:
            c.setopt(pycurl.HTTPHEADER, _header_lines(headers))
            self._has_headers = True
        elif self._has_headers:
            c.unsetopt(pycurl.HTTPHEADER)
            self._has_headers = False
        c.setopt(pycurl.PROXY, proxy or "")
        c.setopt(pycurl.TIMEOUT_MS, max(1, round(timeout * 1000)))
        self.url = url
        self.collector.reset(any_body=any_body)
        self.done = trio.Event()
        self.code = 0
        self.message = ""
        self.bug = None
        self.closed = False
        self.local = None
        self.refused_dead = False

    def reset(self) -> None:
        """Forget every option and state (after a cancelled transfer)."""
        self.curl.reset()
        self.configure()

    def finish(self, code: int, message: str, now: float) -> None:
        self.code = code
        self.message = message
        self.elapsed = now - self.started
        self.done.set()

    def outcome(self) -> FetchResult | Exception:
        if self.bug is not None:
            raise self.bug
        if self.closed:
            raise RuntimeError("the CurlFetcher was closed while this fetch was running")
        return self.collector.outcome(self.url, self.code, self.message, self.elapsed)

    # Callbacks run inside libcurl: they must not raise (rule 5).

    def _on_prereq(
        self, primary_ip: str, local_ip: str, primary_port: int, local_port: int
    ) -> int:
        try:
            self.local = local = (local_ip, local_port)
            if self.dead and self.dead.pop(local, None) is not None:  # rule 4
                self.refused_dead = True
                return _PREREQ_ABORT
            return _PREREQ_OK if self.collector.request_sent() else _PREREQ_ABORT
        except BaseException as exc:
            self.bug = exc
            return _PREREQ_ABORT

    def _on_header(self, line: bytes) -> int | None:
        try:
            return None if self.collector.header_line(line) else 0
        except BaseException as exc:
            self.bug = exc
            return 0

    def _on_write(self, data: bytes) -> int | None:
        try:
            return None if self.collector.body(data) else 0
        except BaseException as exc:
            self.bug = exc
            return 0


#: Where systems keep their CA bundle, most common first.
_CA_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Arch, Alpine, Gentoo
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL, CentOS
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # RHEL 7+
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/ssl/cert.pem",  # macOS, BSDs, Alpine
)


def find_ca_bundle(python_cafile: str | None, exists: Callable[[str], bool]) -> str | None:
    """The system's CA bundle for libcurl when neither the configuration nor
    the environment names one (``tls.ca_locations``), or ``None`` for
    libcurl's own default.

    pycurl's wheels carry their own libcurl, built with one distribution's
    bundle path, which other systems lack: left alone, every https fetch on
    them fails verification. Order: the file Python's own ``ssl`` module uses
    (``python_cafile``), then the usual system paths.
    """
    candidates = (python_cafile, *_CA_BUNDLES)
    return next((path for path in candidates if path and exists(path)), None)


def _header_lines(headers: dict[str, str]) -> list[str]:
    """``HTTPHEADER`` lines for headers ``request.request_headers`` checked.
    curl reads ``"Name:"`` as "drop this header", so an empty value is
    spelled ``"Name;"``."""
    return [f"{name}: {value}" if value else f"{name};" for name, value in headers.items()]


#: CURLOPT_SUPPRESS_CONNECT_HEADERS (libcurl 7.54.0); pycurl has no name for it.
_SUPPRESS_CONNECT_HEADERS: int = getattr(pycurl, "SUPPRESS_CONNECT_HEADERS", 265)
#: libcurl's receive buffer (CURLOPT_BUFFERSIZE; 16 KiB by default): a page of
#: 94 KiB reaches the Collector in 2 writes, not 6, with fewer reads from the
#: socket. libcurl 8.7+ lends one buffer of the multi handle to the transfer that
#: reads, so it is not per handle: 400 transfers at once peaked at the same RSS.
_BUFFER = 64 * 1024
_PREREQ_OK: int = pycurl.PREREQFUNC_OK
_PREREQ_ABORT: int = pycurl.PREREQFUNC_ABORT

#: Whether this libcurl speaks HTTP/2 (built with nghttp2).
HTTP2 = bool(int(pycurl.version_info()[4]) & pycurl.VERSION_HTTP2)
_HTTP2: int = pycurl.CURL_HTTP_VERSION_2TLS  # HTTP/2 over TLS (ALPN), HTTP/1.1 otherwise
_HTTP11: int = pycurl.CURL_HTTP_VERSION_1_1
