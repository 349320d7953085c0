"""The crawl's proxy as Chromium takes it: command-line flags and the logins.

Chromium's ``--proxy-server`` cannot carry a user name and password, and the
browser must not read the proxy variables itself (it reads them its own
way). So the proxy the crawl's fetchers use (``core.proxy``) is turned into
flags here, without credentials, and the credentials are kept apart: the
session gives them to the proxy when it asks (``Fetch.authRequired`` whose
challenge comes from a proxy), never to a web server.

Rules (``browser_proxy``), following ``core.proxy.ProxyChooser``:

1. ``""``: ``--no-proxy-server``.
2. An explicit proxy URL: ``--proxy-server`` with its scheme, host and port,
   for every URL, loopback included (``<-loopback>``: Chromium would
   otherwise send loopback directly), bypassed where ``NO_PROXY`` says.
3. ``None``: the environment's ``http_proxy`` / ``https_proxy`` /
   ``all_proxy`` (as ``core.proxy.environment_proxies`` reads them) per
   scheme, bypassed where ``NO_PROXY`` says; loopback goes directly
   (Chromium's default); no proxy at all: ``--no-proxy-server``.
4. ``NO_PROXY`` entries become Chromium bypass rules that match the same
   hosts: a name matches itself and its subdomains (``name;*.name``), an
   address or CIDR block itself, ``*`` everything; a ``:port`` is kept.
5. A proxy URL's ``user:password`` (percent-decoded) is its login, keyed by
   the proxy's origin (``scheme://host:port``, the port made explicit).

Pure: no I/O; the caller passes ``os.environ`` in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from ...core.proxy import environment_proxies

__all__ = ["BrowserProxy", "browser_proxy", "proxy_origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class BrowserProxy:
    """Chromium's proxy flags and the logins of the proxies they name."""

    flags: tuple[str, ...] = ()
    #: ``(user, password)`` by proxy origin (rule 5).
    logins: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def login_for(self, origin: str) -> tuple[str, str] | None:
        """The login of the proxy at ``origin`` (as a challenge names it)."""
        key = proxy_origin(origin)
        return None if key is None else self.logins.get(key)


def proxy_origin(url: str) -> str | None:
    """``scheme://host:port`` of ``url``, the port made explicit; None if
    it is not an http(s) URL with a host."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port or _DEFAULT_PORTS[scheme]}"


def _server(url: str) -> str:
    """The proxy as Chromium names it: ``scheme://host[:port]``, no login."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme.lower()}://{host}{port}"


def _login(url: str) -> tuple[str, tuple[str, str]] | None:
    parts = urlsplit(url)
    origin = proxy_origin(url)
    if origin is None or parts.username is None:
        return None
    return origin, (unquote(parts.username), unquote(parts.password or ""))


def bypass_rules(no_proxy: str) -> list[str]:
    """Chromium bypass rules matching the hosts ``NO_PROXY`` names (rule 4)."""
    rules: list[str] = []
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return ["*"]
        name, port = entry, ""
        if entry.startswith("["):  # [v6] or [v6]:port
            name, _, rest = entry[1:].partition("]")
            port = rest if rest.startswith(":") else ""
            rules.append(f"[{name}]{port}")
            continue
        if entry.count(":") == 1:
            name, _, number = entry.partition(":")
            port = f":{number}"
        elif entry.count(":") > 1:  # a bare v6 address or block
            rules.append(entry)
            continue
        name = name.strip(".")
        if not name:
            continue
        if "/" in name or name.replace(".", "").isdigit():  # an address or a block
            rules.append(f"{name}{port}")
        else:
            rules.extend((f"{name}{port}", f"*.{name}{port}"))
    return rules


def browser_proxy(explicit: str | None, environ: Mapping[str, str]) -> BrowserProxy:
    """Chromium's proxy settings for a crawl whose ``FetchConfig.proxy`` is
    ``explicit`` (module rules)."""
    if explicit == "":
        return BrowserProxy(("--no-proxy-server",))
    found = environment_proxies(environ)
    bypass = bypass_rules(found.get("no", ""))
    if explicit is not None:
        proxies = {"": explicit}
        flags = [f"--proxy-server={_server(explicit)}"]
        bypass.append("<-loopback>")
    else:
        proxies = {
            scheme: url
            for scheme in ("http", "https")
            if (url := found.get(scheme) or found.get("all")) is not None
        }
        if not proxies:
            return BrowserProxy(("--no-proxy-server",))
        flags = ["--proxy-server=" + ";".join(f"{s}={_server(u)}" for s, u in proxies.items())]
    if bypass:
        flags.append("--proxy-bypass-list=" + ";".join(bypass))
    logins = dict(login for url in proxies.values() if (login := _login(url)) is not None)
    return BrowserProxy(tuple(flags), logins)
