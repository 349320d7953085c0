"""Identity (issue #19): --header, cookies, basic auth, netrc and proxies.

Three parts: the pure per-request decisions (``core.identity``,
``core.proxy``); the ``Fetcher`` contract for them, run against every
fetcher of ``fetcher_factories`` with real servers on 127.0.0.1; and the
command line end to end (a subprocess), including that no secret is ever
printed or written to a record.
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.cookiejar import CookieJar, MozillaCookieJar
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl import CrawlRecord, run_crawl
from trio_crawl.cli.identity import load_cookies
from trio_crawl.core.config import CrawlConfig
from trio_crawl.core.http import FetchConfig
from trio_crawl.core.identity import (
    Credentials,
    identity_headers,
    origin_of,
    parse_header,
    start_credentials,
)
from trio_crawl.core.proxy import ProxyChooser, bypasses, environment_proxies
from trio_crawl.engine.resources import check_resources
from trio_crawl.errors import ConfigError
from trio_crawl.fetch.cookies import CrawlCookieJar
from trio_crawl.fetch.identity import Identity
from trio_crawl.sites.server import LoggedRequest, SiteServer, serve_site
from trio_crawl.sites.site import HTML, Response, Route, Site, page, redirect

from cli_helpers import TIMEOUT, records_in
from fetcher_factories import FETCHER_FACTORIES, FetcherFactory
from forward_proxy import serve_proxy

SECRET = "s3cret-pa55"
PROXY_VARIABLES = [f"{name}_proxy" for name in ("http", "https", "all", "no")] + [
    f"{name}_PROXY" for name in ("HTTP", "HTTPS", "ALL", "NO")
]


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# -- the pure decisions ---------------------------------------------------------


def test_origin_spells_out_the_default_port() -> None:
    assert origin_of("http://Example.COM/a") == "http://example.com:80"
    assert origin_of("https://example.com:8443/") == "https://example.com:8443"
    assert origin_of("http://[::1]:9/") == "http://[::1]:9"
    assert origin_of("ftp://example.com/") is None
    assert origin_of("http://example.com:99999/") is None


def test_auth_goes_to_its_origin_only() -> None:
    creds = (Credentials("http://a.test:80", "ann", SECRET),)
    trusted = ("http://a.test:80",)
    assert identity_headers("http://a.test/x", (), trusted, creds) == {
        "Authorization": basic("ann", SECRET)
    }
    for other in (
        "http://b.test/x",  # another host
        "http://a.test:8080/x",  # another port
        "https://a.test/x",  # http -> https: another origin
        "http://sub.a.test/x",  # a subdomain
    ):
        assert identity_headers(other, (), trusted, creds) == {}, other


def test_header_option_goes_everywhere_except_credential_headers() -> None:
    headers = (
        ("Accept-Language", "fr"),
        ("Authorization", "Bearer tok"),
        ("Cookie", "k=v"),
        ("accept-language", "de"),  # repeated name: the last wins
    )
    trusted = ("http://a.test:80",)
    creds = (Credentials("http://a.test:80", "ann", SECRET),)
    start = identity_headers("http://a.test/", headers, trusted, creds)
    # an explicit Authorization wins over basic auth (rule 3)
    assert start == {"accept-language": "de", "Authorization": "Bearer tok", "Cookie": "k=v"}
    assert identity_headers("http://cdn.test/", headers, trusted, creds) == {
        "accept-language": "de"
    }


def test_credentials_never_show_in_reprs() -> None:
    creds = Credentials("http://a.test:80", "ann", SECRET)
    config = CrawlConfig.from_options(
        start_urls=["http://a.test/"],
        auth=("ann", SECRET),
        proxy=f"http://pu:{SECRET}@127.0.0.1:3128",
    )
    bearer = CrawlConfig.from_options(
        start_urls=["http://a.test/"], headers=[("Authorization", f"Bearer {SECRET}")]
    )
    for shown in (
        repr(creds),
        repr(config),
        repr(config.fetch_config()),
        repr(bearer),
        repr(bearer.fetch_config()),
    ):
        assert SECRET not in shown
        assert "ann" not in shown.replace("http://a.test", "")


def test_parse_header_option() -> None:
    assert parse_header("X-A:  b c ") == ("X-A", "b c")
    assert parse_header("X-Empty:") == ("X-Empty", "")
    for bad in ("no colon", ": v", "Bad Name: v", "X:\x01"):
        with pytest.raises(ValueError) as caught:
            parse_header(bad)
        assert "v" not in str(caught.value).replace("valid", "").replace("value", "")


def test_netrc_gives_credentials_to_start_hosts(tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(
        f"machine a.test login ann password {SECRET}\ndefault login anon password guest\n"
    )
    netrc.chmod(0o600)
    creds = start_credentials(["http://a.test/", "https://b.test/"], netrc_file=str(netrc))
    assert [(c.origin, c.user, c.password) for c in creds] == [
        ("http://a.test:80", "ann", SECRET),
        ("https://b.test:443", "anon", "guest"),
    ]
    # --user wins over the netrc file
    assert {c.user for c in start_credentials(["http://a.test/"], auth=("u", "p"))} == {"u"}


def test_a_broken_netrc_file_is_named_not_quoted(tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine a.test login ann password {SECRET} bogus-token\n")
    netrc.chmod(0o600)
    config = CrawlConfig.from_options(start_urls=["http://a.test/"], netrc_file=str(netrc))
    with pytest.raises(ConfigError) as caught:
        check_resources(config)  # read where the crawl's fetcher is opened
    assert str(netrc) in str(caught.value)
    assert SECRET not in str(caught.value) and "bogus" not in str(caught.value)


def test_start_urls_with_userinfo_are_refused_without_echo() -> None:
    with pytest.raises(ConfigError) as caught:
        CrawlConfig.from_options(start_urls=[f"http://ann:{SECRET}@a.test/"])
    assert SECRET not in str(caught.value)


def test_environment_proxies() -> None:
    env = {"HTTP_PROXY": "up:1", "http_proxy": "http://low:2", "HTTPS_PROXY": "http://s:3"}
    assert environment_proxies(env) == {"http": "http://low:2", "https": "http://s:3"}
    # httpoxy: HTTP_PROXY is ignored in a CGI request
    assert environment_proxies({"HTTP_PROXY": "http://x:1", "REQUEST_METHOD": "GET"}) == {}
    assert environment_proxies({"ALL_PROXY": "http://x:1", "no_proxy": " a.test "}) == {
        "all": "http://x:1",
        "no": "a.test",
    }
    # SOCKS is not spoken by every fetcher: left out, so requests go direct
    assert environment_proxies({"all_proxy": "socks5h://x:1", "https_proxy": "socks5://y"}) == {}


def test_proxy_choice() -> None:
    env = {"http_proxy": "http://p:1", "https_proxy": "http://ps:2", "no_proxy": "skip.test"}
    choose = ProxyChooser(None, env).proxy_for
    assert choose("http://site.test/") == "http://p:1"
    assert choose("https://site.test/") == "http://ps:2"
    assert choose("http://www.skip.test/") is None
    # loopback never goes through a proxy from the environment (rule 4)
    for local in ("http://127.0.0.1:8000/", "http://localhost/", "http://[::1]:80/"):
        assert choose(local) is None, local
    # an explicit proxy replaces the variables, loopback included; NO_PROXY still applies
    explicit = ProxyChooser("http://mine:3", env).proxy_for
    assert explicit("http://127.0.0.1:8000/") == "http://mine:3"
    assert explicit("https://site.test/") == "http://mine:3"
    assert explicit("http://skip.test/") is None
    # "" is no proxy at all
    assert ProxyChooser("", env).proxy_for("http://site.test/") is None
    assert not ProxyChooser(None, {}).may_proxy
    assert ProxyChooser(None, {"all_proxy": "http://a:1"}).proxy_for("https://x.test/")


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "bypassed"),
    [
        ("a.test", 80, "*", True),
        ("a.test", 80, "b.test, a.test", True),
        ("x.a.test", 80, ".a.test", True),
        ("nota.test", 80, "a.test", False),
        ("a.test", 8080, "a.test:8080", True),
        ("a.test", 80, "a.test:8080", False),
        ("10.1.2.3", 80, "10.0.0.0/8", True),
        ("11.1.2.3", 80, "10.0.0.0/8", False),
        ("::1", 80, "::1", True),
        ("::1", 81, "[::1]:81", True),
    ],
)
def test_no_proxy(host: str, port: int, no_proxy: str, bypassed: bool) -> None:
    assert bypasses(host, port, no_proxy) is bypassed


HOSTS = ["a.test", "b.a.test", "c.b.a.test", "other.test", "127.0.0.1", "dotless", "A.Test"]


@settings(max_examples=200, deadline=None)
@given(
    sets=st.lists(
        st.tuples(
            st.sampled_from(HOSTS),
            st.sampled_from(["", "; Domain=a.test", "; Domain=.a.test", "; Domain=b.a.test"]),
            st.sampled_from(["", "; Path=/", "; Path=/x", "; Path=/x/y"]),
            st.sampled_from(["", "; Secure", "; Max-Age=0", "; Max-Age=100"]),
            st.sampled_from(["k", "m", "n"]),
        ),
        max_size=12,
    ),
    asks=st.lists(
        st.tuples(
            st.sampled_from(["http", "https"]),
            st.sampled_from(HOSTS),
            st.sampled_from(["/", "/x", "/x/y/z", "/other"]),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_crawl_cookie_jar_sends_what_the_standard_jar_sends(
    sets: list[tuple[str, str, str, str, str]], asks: list[tuple[str, str, str]]
) -> None:
    jars = [CrawlCookieJar(), MozillaCookieJar()]
    identities = [Identity(FetchConfig(cookies=jar)) for jar in jars]
    for number, (host, domain, path, flag, name) in enumerate(sets):
        for identity in identities:
            identity.received(f"http://{host}/x/page", [f"{name}={number}{domain}{path}{flag}"])
    for scheme, host, path in asks:
        url = f"{scheme}://{host}:8080{path}"
        sent = [(i.outgoing(url, None) or {}).get("Cookie", "") for i in identities]
        assert sorted(sent[0].split("; ")) == sorted(sent[1].split("; ")), url


def test_crawl_cookie_jar_lookups_do_not_grow_with_the_jar() -> None:
    jar = CrawlCookieJar()
    identity = Identity(FetchConfig(cookies=jar))
    for i in range(5000):
        identity.received(f"http://h{i}.test/", [f"s{i}=v"])
    found: list[str] = []  # the domains asked about: a full scan would ask about 5,000
    jar._cookies_for_domain = lambda domain, request: found.append(domain) or []  # type: ignore[attr-defined]
    identity.outgoing("http://h7.test/", None)
    assert found == ["h7.test"]


# -- every fetcher ----------------------------------------------------------------


def routes() -> dict[str, Route]:
    return {
        "/set": Response(
            body=b"<p>set</p>",
            headers=(("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Path=/; HttpOnly")),
        ),
        "/hop": Response(
            status=302,
            headers=(("Location", "/echo"), ("Set-Cookie", "hop=3; Path=/")),
            content_type=None,
        ),
        "/other-path": Response(headers=(("Set-Cookie", "deep=4; Path=/deep"),)),
        "/odd": Response(
            headers=(("Set-Cookie", "odd=caf\u00e9; Path=/"), ("Set-Cookie", "fine=5; Path=/"))
        ),
        "/echo": Response(body=b"<p>echo</p>"),
        "/page": page("/echo"),
    }


@pytest.fixture(scope="module")
def site() -> Iterator[SiteServer]:
    with serve_site(Site(routes())) as running:
        yield running


@pytest.fixture(scope="module")
def other_site() -> Iterator[SiteServer]:
    with serve_site(Site(routes())) as running:
        yield running


@pytest.fixture(params=FETCHER_FACTORIES, ids=[name for name, _ in FETCHER_FACTORIES])
def open_fetcher(request: pytest.FixtureRequest) -> FetcherFactory:
    factory: FetcherFactory = request.param[1]
    return factory


@pytest.fixture
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def last_request(server: SiteServer, target: str) -> LoggedRequest:
    return [entry for entry in server.log if entry.target == target][-1]


def cookies_sent(server: SiteServer, target: str) -> set[str]:
    header = last_request(server, target).headers.get("cookie")
    return set(header.split("; ")) if header else set()


async def test_a_cookie_set_by_one_page_is_sent_to_the_next(
    open_fetcher: FetcherFactory, site: SiteServer
) -> None:
    jar = CookieJar()
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig(cookies=jar)) as fetcher:
            await fetcher.fetch(site.url("/set"))
            await fetcher.fetch(site.url("/echo"))
            assert cookies_sent(site, "/echo") == {"a=1", "b=2"}
            # a redirect hop's cookie is kept too (the engine fetches each hop)
            hop = await fetcher.fetch(site.url("/hop"))
            assert hop.status == 302
            await fetcher.fetch(site.url("/echo"))
            assert cookies_sent(site, "/echo") == {"a=1", "b=2", "hop=3"}
            # the jar's rules decide: a cookie for /deep is not sent to /echo
            await fetcher.fetch(site.url("/other-path"))
            await fetcher.fetch(site.url("/echo"))
            assert cookies_sent(site, "/echo") == {"a=1", "b=2", "hop=3"}
    assert sorted(c.name for c in jar) == ["a", "b", "deep", "hop"]


async def test_a_cookie_that_cannot_be_sent_back_is_not_kept(
    open_fetcher: FetcherFactory, site: SiteServer
) -> None:
    jar = CookieJar()
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig(cookies=jar)) as fetcher:
            await fetcher.fetch(site.url("/odd"))
            echo = await fetcher.fetch(site.url("/echo"))
    assert echo.status == 200
    assert cookies_sent(site, "/echo") == {"fine=5"}
    assert [c.name for c in jar] == ["fine"]


async def test_without_a_jar_no_cookie_is_kept(
    open_fetcher: FetcherFactory, site: SiteServer
) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig()) as fetcher:
            await fetcher.fetch(site.url("/set"))
            await fetcher.fetch(site.url("/echo"))
    assert "cookie" not in last_request(site, "/echo").headers


async def test_cookies_from_a_file_go_to_their_domain_only(
    open_fetcher: FetcherFactory, site: SiteServer, tmp_path: Path
) -> None:
    path = tmp_path / "cookies.txt"
    path.write_text(
        "# Netscape HTTP Cookie File\n"
        "127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tfromfile\n"
        "elsewhere.test\tFALSE\t/\tFALSE\t0\tforeign\tno\n"
        "127.0.0.1\tFALSE\t/\tFALSE\t1000\texpired\tlong-ago\n"
    )
    jar = load_cookies(str(path))
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig(cookies=jar)) as fetcher:
            await fetcher.fetch(site.url("/echo"))
    assert last_request(site, "/echo").headers.get("cookie") == "session=fromfile"


async def test_auth_and_credential_headers_only_to_their_origin(
    open_fetcher: FetcherFactory, site: SiteServer, other_site: SiteServer
) -> None:
    origin = origin_of(site.base_url)
    assert origin is not None
    config = FetchConfig(
        headers=(("X-Team", "crawlers"), ("Cookie", "given=1")),
        trusted_origins=(origin,),
        credentials=(Credentials(origin, "ann", SECRET),),
    )
    with trio.fail_after(10):
        async with open_fetcher(config) as fetcher:
            await fetcher.fetch(site.url("/echo"))
            await fetcher.fetch(other_site.url("/echo"))
    mine = last_request(site, "/echo").headers
    theirs = last_request(other_site, "/echo").headers
    assert mine["authorization"] == basic("ann", SECRET)
    assert mine["cookie"] == "given=1"
    assert mine["x-team"] == theirs["x-team"] == "crawlers"
    assert "authorization" not in theirs and "cookie" not in theirs


async def test_a_proxy_carries_every_request(
    open_fetcher: FetcherFactory, site: SiteServer, no_proxy_variables: None
) -> None:
    if open_fetcher.__name__ == "open_asks_fetcher":
        with pytest.raises(ValueError, match="not supported with --fetcher asks"):
            async with open_fetcher(FetchConfig(proxy="http://127.0.0.1:9")):
                pass
        return
    with serve_proxy(site.port) as proxy, trio.fail_after(10):
        with_login = proxy.url.replace("http://", "http://pu:pp@")
        async with open_fetcher(FetchConfig(proxy=with_login)) as fetcher:
            # site.invalid is never resolved: only the proxy is connected to
            result = await fetcher.fetch("http://site.invalid/page")
            local = await fetcher.fetch(site.url("/echo"))
    assert result.status == 200 and b"/echo" in result.body
    assert local.status == 200
    assert proxy.lines == [
        "GET http://site.invalid/page HTTP/1.1",
        f"GET {site.url('/echo')} HTTP/1.1",
    ]
    # the proxy's own credentials, from its URL, go to the proxy
    assert {h.get("proxy-authorization") for _, h in proxy.seen} == {basic("pu", "pp")}


async def test_proxy_variables_never_take_loopback_hosts(
    open_fetcher: FetcherFactory,
    site: SiteServer,
    monkeypatch: pytest.MonkeyPatch,
    no_proxy_variables: None,
) -> None:
    with serve_proxy(site.port) as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        before = site.count("/echo")
        with trio.fail_after(10):
            async with open_fetcher(FetchConfig()) as fetcher:
                result = await fetcher.fetch(site.url("/echo"))
                if open_fetcher.__name__ != "open_asks_fetcher":  # asks ignores them
                    proxied = await fetcher.fetch("http://site.invalid/page")
                    assert proxied.status == 200
    assert result.status == 200 and site.count("/echo") == before + 1
    assert all("127.0.0.1" not in line for line in proxy.lines)


@contextlib.contextmanager
def serve_https(certfile: str, keyfile: str) -> Iterator[int]:
    """A stdlib HTTPS server on 127.0.0.1 answering every GET with a page; its port."""

    class Page(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<p>over tls</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    server.daemon_threads = True
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_https_goes_through_a_proxy_tunnel(
    open_fetcher: FetcherFactory, tmp_path: Path, no_proxy_variables: None
) -> None:
    if open_fetcher.__name__ == "open_asks_fetcher":
        pytest.skip("asks cannot use a proxy (it refuses FetchConfig.proxy)")
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cert = ca.issue_cert("site.invalid")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    with (
        serve_https(str(cert_file), str(key_file)) as tls_port,
        serve_proxy(0, tunnel_port=tls_port) as proxy,
    ):
        config = FetchConfig(proxy=proxy.url, ca_bundle=str(ca_file))
        with trio.fail_after(10):
            async with open_fetcher(config) as fetcher:
                result = await fetcher.fetch("https://site.invalid/secure")
    assert result.status == 200 and result.body == b"<p>over tls</p>"
    assert [line.split()[:2] for line in proxy.lines] == [["CONNECT", "site.invalid:443"]]


@pytest.mark.parametrize("backend", ["curl", "httpx"])
async def test_a_crawl_through_a_proxy_tunnel_records_the_sites_answers_not_the_proxys(
    backend: str, tmp_path: Path, no_proxy_variables: None
) -> None:
    """https through an http proxy: libcurl hands the proxy's ``200 Connection
    established`` head to the header callback before the site's own, and the
    curl fetcher took it for the answer (status 200 for a 404, the proxy's
    headers, no Content-Type, so no links read) until it set
    ``SUPPRESS_CONNECT_HEADERS``. Both fetchers must record the site's."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("site.invalid").configure_cert(tls)
    # Each answer closes its connection, so each request opens a tunnel.
    routes = {
        "/": page("/missing", "/moved"),
        "/missing": Response(status=404, body=b"gone", content_type="text/plain"),
        "/moved": redirect("/"),
        "/robots.txt": Response(status=404, content_type=None),
    }
    site = Site({target: replace(answer, close=True) for target, answer in routes.items()})
    records: list[CrawlRecord] = []
    with (
        serve_site(site, tls=tls) as server,
        serve_proxy(0, tunnel_port=server.port) as proxy,
    ):
        with trio.fail_after(20):
            await run_crawl(
                ["https://site.invalid/"],
                on_record=records.append,
                backend=backend,
                proxy=proxy.url,
                ca_bundle=str(ca_file),
            )
        targets = server.targets()
    got = {r.url: (r.status, r.content_type, r.redirect, r.links) for r in records}
    assert got == {
        "https://site.invalid/": (200, HTML, None, 2),
        "https://site.invalid/missing": (404, "text/plain", None, 0),
        "https://site.invalid/moved": (301, None, "https://site.invalid/", 0),
    }
    assert sorted(targets) == ["/", "/missing", "/moved", "/robots.txt"]
    assert [line.split()[0] for line in proxy.lines] == ["CONNECT"] * 4


# -- the command line --------------------------------------------------------------


def cookie_site() -> Site:
    return Site(
        {
            "/": Response(
                body=b'<a href="/next">next</a>',
                headers=(("Set-Cookie", "sid=abc; Path=/; Max-Age=3600"),),
            ),
            "/next": page("/last"),
            "/last": page(),
        }
    )


def crawl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "trio_crawl", "--ignore-robots", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        env=environ,
    )


def test_cli_cookies_kept_and_saved(tmp_path: Path) -> None:
    start = tmp_path / "in.txt"
    start.write_text("# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tpre\tloaded\n")
    saved = tmp_path / "out.txt"
    out = tmp_path / "out.jsonl"
    with serve_site(cookie_site()) as server:
        done = crawl(
            server.url("/"), "-o", str(out), "-q", "--cookies", str(start),
            "--save-cookies", str(saved),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert last_request(server, "/").headers.get("cookie") == "pre=loaded"
        assert cookies_sent(server, "/next") == {"sid=abc", "pre=loaded"}
    jar = MozillaCookieJar()
    jar.load(str(saved), ignore_discard=True)
    assert {(c.name, c.value) for c in jar} == {("sid", "abc"), ("pre", "loaded")}


def test_cli_without_cookie_options_keeps_none(tmp_path: Path) -> None:
    with serve_site(cookie_site()) as server:
        done = crawl(server.url("/"), "-o", str(tmp_path / "o.jsonl"), "-q")
        assert done.returncode == 0, done.stderr
        assert "cookie" not in last_request(server, "/next").headers


def auth_site(other: str) -> Site:
    return Site(
        {
            "/": page("/mine", f"{other}/theirs", "/away"),
            "/mine": page(),
            "/away": redirect(f"{other}/landing", 302),
        }
    )


def test_cli_basic_auth_only_to_the_start_host_and_never_printed(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    with (
        serve_site(Site({"/theirs": page(), "/landing": page()})) as other,
        serve_site(auth_site(other.base_url)) as mine,
    ):
        done = crawl(
            mine.url("/"), "-o", str(out), "--allow-domain", "127.0.0.1",
            "--user", "ann", "--password", SECRET, "-H", "X-Team: crawlers",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        for target in ("/", "/mine", "/away"):
            assert last_request(mine, target).headers["authorization"] == basic("ann", SECRET)
        assert sorted(other.targets()) == ["/landing", "/theirs"]
        for entry in other.log:  # a link or a redirect to another host: no credentials
            assert "authorization" not in entry.headers
            assert entry.headers["x-team"] == "crawlers"
    records = records_in(out.read_text())
    assert len(records) == 5
    for text in (done.stdout, done.stderr, out.read_text()):
        assert SECRET not in text
        assert base64.b64encode(f"ann:{SECRET}".encode()).decode() not in text


def test_cli_netrc(tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login ann password {SECRET}\n")
    netrc.chmod(0o600)
    with serve_site(Site({"/": page()})) as server:
        done = crawl(
            server.url("/"), "-o", str(tmp_path / "o.jsonl"), "-q", "--netrc-file", str(netrc)
        )
        assert done.returncode == 0, done.stderr
        assert last_request(server, "/").headers["authorization"] == basic("ann", SECRET)


def test_cli_proxy(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    with serve_site(cookie_site()) as server, serve_proxy(server.port) as proxy:
        login = proxy.url.replace("http://", f"http://pu:{SECRET}@")
        done = crawl("http://site.invalid/", "-o", str(out), "--proxy", login)
        assert done.returncode == 0, done.stderr
    for text in (done.stdout, done.stderr, out.read_text()):
        assert SECRET not in text
    assert proxy.lines == [
        f"GET http://site.invalid{target} HTTP/1.1" for target in ("/", "/next", "/last")
    ]
    urls = [r["url"] for r in records_in(out.read_text())]
    assert urls == ["http://site.invalid/", "http://site.invalid/next", "http://site.invalid/last"]


def test_cli_proxy_from_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    with serve_site(cookie_site()) as server, serve_proxy(server.port) as proxy:
        done = crawl("http://site.invalid/", "-o", str(out), "-q", env={"HTTP_PROXY": proxy.url})
        assert done.returncode == 0, done.stderr
    assert len(proxy.lines) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user", "ann"], "--user and --password go together"),
        (["-H", "Bad Header: x"], "--header must look like"),
        (["-H", "X-A: \x01"], "control character"),
        (["--proxy", "ftp://p:1"], "--proxy must be an http:// or https:// URL"),
        (["--cookies", "/nonexistent/c.txt"], "cannot read cookie file"),
        (["--save-cookies", "/nonexistent/dir/c.txt"], "cannot write cookie file"),
        (["--netrc-file", "/nonexistent/netrc"], "cannot read netrc file"),
    ],
)
def test_cli_bad_identity_options(args: list[str], message: str) -> None:
    done = crawl("http://127.0.0.1:9/", "-o", "-", *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_cli_a_bad_cookie_file_is_not_quoted(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text(f"# Netscape HTTP Cookie File\nbroken line with {SECRET}\n")
    done = crawl("http://127.0.0.1:9/", "-o", "-", "--cookies", str(path))
    assert done.returncode == 2
    assert "not a Netscape cookie file" in done.stderr and SECRET not in done.stderr


def test_cli_redis_cannot_save_cookies() -> None:
    done = crawl(
        "http://127.0.0.1:9/", "--redis", "redis://127.0.0.1:9/0", "--crawl-id", "c",
        "--save-cookies", "/tmp/never-written.txt",
    )  # fmt: skip
    assert done.returncode == 2
    assert "--redis cannot be combined with --save-cookies" in done.stderr
