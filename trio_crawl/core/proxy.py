"""Which proxy, if any, one request goes through: the same answer for every fetcher.

libcurl reads the proxy variables itself, httpx only with ``trust_env``, asks
never; and they disagree on ``NO_PROXY``. So the decision is made here, per
URL, and each fetcher is told the answer (curl: ``PROXY`` set on every
transfer, ``""`` for none, so libcurl's own reading of the environment never
applies).

Rules (``ProxyChooser.proxy_for``):

1. ``FetchConfig.proxy`` is a URL: every request goes through it, http and
   https alike (https through a ``CONNECT`` tunnel), unless ``NO_PROXY``
   names its host. ``""``: no proxy at all, whatever the environment says.
2. ``None`` (the default): the environment, as curl and wget read it:
   ``http_proxy`` for http URLs, ``https_proxy`` for https, ``all_proxy``
   for either when the specific one is unset; lower case wins over upper
   case; only http:// and https:// proxies are used (a SOCKS proxy is
   ignored: not every fetcher speaks it); ``HTTP_PROXY`` (upper case) is
   ignored when ``REQUEST_METHOD`` is
   set (a CGI script: "httpoxy"), as Python's ``urllib`` does. A value
   without a scheme (``proxy:3128``) is an http proxy.
3. ``NO_PROXY`` / ``no_proxy`` is a comma-separated list, matched as curl
   matches it (``bypasses``): ``*`` is every host; a name matches itself and
   its subdomains (a leading dot is ignored); an IP address or CIDR block
   (``10.0.0.0/8``) matches the addresses in it; ``name:port`` matches that
   port only. It applies to an explicit proxy too.
4. Loopback hosts (``localhost``, ``127.0.0.0/8``, ``::1``) never go
   through a proxy taken from the environment, as Go's net/http and many
   tools decide: a local test server is always reached directly, whatever
   the environment of the test. An explicit ``FetchConfig.proxy`` applies
   to them too (rule 1).

Pure: no I/O; the fetchers pass ``os.environ`` in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["ProxyChooser", "bypasses", "environment_proxies"]


def environment_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """``{"http": ..., "https": ..., "all": ..., "no": ...}`` from the
    environment (rule 2), empty values left out."""
    found: dict[str, str] = {}
    for name in ("http", "https", "all", "no"):
        upper = environ.get(f"{name.upper()}_PROXY", "")
        if name == "http" and "REQUEST_METHOD" in environ:
            upper = ""
        value = (environ.get(f"{name}_proxy", "") or upper).strip()
        if value and name != "no":
            if "://" not in value:
                value = f"http://{value}"  # "host:3128", as curl reads it
            if value.split("://", 1)[0].lower() not in ("http", "https"):
                continue  # socks5://...: not every fetcher speaks it
        if value:
            found[name] = value
    return found


def bypasses(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` (``no_proxy``) exempts ``host:port`` (rule 3)."""
    host = host.lower().strip("[]").rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return True
        if not entry:
            continue
        name, want_port = entry, None
        if entry.startswith("["):  # [v6]:port
            name, _, rest = entry[1:].partition("]")
            want_port = rest[1:] if rest.startswith(":") else None
        elif entry.count(":") == 1:
            name, _, want_port = entry.partition(":")
        if want_port is not None and want_port != str(port):
            continue
        name = name.lstrip(".").rstrip(".")
        if address is not None:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if host == name or host.endswith("." + name):
            return True
    return False


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ProxyChooser:
    """The proxy of each request (module rules); pure, no I/O after creation."""

    __slots__ = ("_direct", "_explicit", "_proxies")

    def __init__(self, explicit: str | None, environ: Mapping[str, str]) -> None:
        self._explicit = explicit
        self._proxies = environment_proxies(environ)
        #: No request can go through a proxy: ``proxy_for`` need not parse
        #: the URL (it runs for every request).
        self._direct = not self.may_proxy

    @property
    def may_proxy(self) -> bool:
        """Whether any request could go through a proxy."""
        if self._explicit is not None:
            return bool(self._explicit)
        return any(k in self._proxies for k in ("http", "https", "all"))

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL for ``url``, or ``None`` for a direct connection."""
        if self._direct:
            return None
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if self._explicit is not None:
            proxy: str | None = self._explicit
        elif _is_loopback(host):
            return None
        else:
            proxy = self._proxies.get(parts.scheme.lower()) or self._proxies.get("all")
        if proxy is None:
            return None
        no_proxy = self._proxies.get("no")
        if no_proxy:
            try:
                port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
            except ValueError:
                return proxy
            if bypasses(host, port, no_proxy):
                return None
        return proxy
