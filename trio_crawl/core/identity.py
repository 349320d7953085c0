"""Who the crawler says it is, per request: extra headers and HTTP basic auth.

Why a pure module: which identity a request carries is a security decision
(credentials must never reach a host they were not given for), so it is made
in one place, per request, from the URL alone, and tested without a network.

Rules (``identity_headers``):

1. Credentials belong to *origins* (scheme, host, port) of the start URLs
   (``origin_of``). ``Credentials`` for an origin come from ``--user`` and
   ``--password`` (the same for every start origin) or from a netrc file
   (``start_credentials``). Basic auth is sent to a URL only when its origin
   is one of those: a redirect to another host, another port or from http to
   https (another default port) therefore drops it. The engine follows
   redirects itself, one fetch per hop, so this rule is all it takes.
2. ``--header`` fields go with every request of the crawl (robots.txt,
   pages, page requisites on other hosts), as with wget, except those that
   carry credentials (``CREDENTIAL_HEADERS``: Authorization, Cookie,
   Proxy-Authorization), which obey rule 1 as curl treats them on redirects.
3. A ``--header Authorization`` of the user wins over basic auth from
   ``--user`` or netrc for the same origin (it was given explicitly). A
   crawl's configuration refuses the two together (``CrawlConfig``: one
   would silently replace the other); the rule holds for a ``FetchConfig``
   built by hand.
4. Secrets are never shown: ``Credentials`` has a repr without them, and
   the messages of errors here name options and files, never values.

Cookies are the fetch layer's (``fetch.identity``: a stdlib cookie jar),
not this module's: their rules (domain, path, secure, expiry) are the jar's.
None of this is part of a ``--state`` crawl's identity: a resumed crawl may
bring other credentials or cookies.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = [
    "CREDENTIAL_HEADERS",
    "HEADER_NAME",
    "HEADER_VALUE",
    "Credentials",
    "basic_authorization",
    "identity_headers",
    "merged",
    "origin_of",
    "parse_header",
    "start_credentials",
    "start_origins",
]

#: A header name: an RFC 9110 token.
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: A header value we send: visible ASCII, spaces and tabs (no CR, LF, NUL, non-ASCII).
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")

#: Header names (lower case) whose values are credentials (rule 2).
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class Credentials:
    """A user name and password for one origin (``scheme://host:port``).

    The repr shows the origin only (rule 4).
    """

    origin: str
    user: str = field(repr=False)
    password: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Credentials(origin={self.origin!r}, user=***, password=***)"


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` of an http(s) URL, with its default port
    spelt out and the host lower-cased; ``None`` for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port if port is not None else _DEFAULT_PORTS[scheme]}"


def basic_authorization(user: str, password: str) -> str:
    """The ``Authorization`` value for HTTP basic auth (RFC 7617, UTF-8)."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def parse_header(text: str) -> tuple[str, str]:
    """``"Name: value"`` (a ``--header`` option) as ``(name, value)``.

    Raises ``ValueError`` with a one-line message that never repeats the value.
    """
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip(" \t")
    if not sep or not HEADER_NAME.fullmatch(name):
        shown = f" (name {name!r})" if sep and len(name) <= 60 else ""
        raise ValueError(f"--header must look like 'Name: value' with a valid name{shown}")
    if not HEADER_VALUE.fullmatch(value):
        raise ValueError(
            f"--header {name}: the value has a line break, control character or non-ASCII text"
        )
    return name, value


def start_origins(start_urls: Iterable[str]) -> tuple[str, ...]:
    """The origins of the start URLs, sorted: where credentials may go (rule 1)."""
    return tuple(sorted({o for o in map(origin_of, start_urls) if o is not None}))


def start_credentials(
    start_urls: Iterable[str],
    *,
    auth: tuple[str, str] | None = None,
    netrc_file: str | None = None,
) -> tuple[Credentials, ...]:
    """Credentials for each start URL's origin (rule 1): ``auth`` for all of
    them, else the netrc entry of each host (its ``default`` entry too, as
    curl reads it), else none.

    Raises ``ValueError`` (a one-line message naming the file, never its
    contents) when the netrc file cannot be read or parsed.
    """
    origins = start_origins(start_urls)
    if auth is not None:
        return tuple(Credentials(o, auth[0], auth[1]) for o in origins)
    if netrc_file is None:
        return ()
    import netrc  # here: only a crawl given --netrc-file reads one

    try:
        entries = netrc.netrc(netrc_file)
    except netrc.NetrcParseError as exc:
        raise ValueError(f"cannot parse netrc file {netrc_file} (line {exc.lineno})") from None
    except OSError as exc:
        raise ValueError(f"cannot read netrc file {netrc_file}: {exc.strerror or exc}") from None
    found = []
    for origin in origins:
        host = urlsplit(origin).hostname or ""
        entry = entries.authenticators(host)
        if entry is not None:
            login, _account, password = entry
            found.append(Credentials(origin, login, password or ""))
    return tuple(found)


def identity_headers(
    url: str,
    headers: Sequence[tuple[str, str]],
    trusted_origins: Collection[str],
    credentials: Sequence[Credentials],
) -> dict[str, str]:
    """The identity headers a request for ``url`` carries (rules 1-3).

    ``headers`` are the ``--header`` fields, in order (a repeated name: the
    last wins); ``trusted_origins`` the origins credentials may go to (the
    start URLs'); ``credentials`` the basic-auth ``Credentials`` of some of them.
    """
    origin = origin_of(url)
    trusted = origin is not None and origin in trusted_origins
    sent: dict[str, str] = {}
    for name, value in headers:
        if name.lower() in CREDENTIAL_HEADERS and not trusted:
            continue
        sent = merged(sent, {name: value})
    own = next((c for c in credentials if c.origin == origin), None) if trusted else None
    if own is not None and not any(k.lower() == "authorization" for k in sent):
        sent["Authorization"] = basic_authorization(own.user, own.password)
    return sent


def merged(first: Mapping[str, str], then: Mapping[str, str] | None) -> dict[str, str]:
    """``first`` overridden by ``then``, names compared case-insensitively."""
    out = dict(first)
    for name, value in (then or {}).items():
        for old in [k for k in out if k.lower() == name.lower()]:
            del out[old]
        out[name] = value
    return out
