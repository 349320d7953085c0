"""The crawl's proxy as Chromium takes it (``fetch.chromium.proxy``): flags
without the login, the login kept for the proxy's own challenge. Pure; the
real browser through a proxy with a login is in ``test_render_refusals``."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from trio_crawl.fetch.chromium.browser import browser_command
from trio_crawl.fetch.chromium.proxy import (
    BrowserProxy,
    browser_proxy,
    bypass_rules,
    proxy_origin,
)


def test_no_proxy_at_all() -> None:
    for chosen in (browser_proxy("", {"http_proxy": "http://p:1"}), browser_proxy(None, {})):
        assert chosen.flags == ("--no-proxy-server",) and chosen.logins == {}
    # Only http(s) proxies count, as for the crawl's fetchers.
    assert browser_proxy(None, {"all_proxy": "socks5://s:1"}).flags == ("--no-proxy-server",)


def test_an_explicit_proxy_carries_everything_loopback_included_and_keeps_its_login() -> None:
    chosen = browser_proxy("http://me:p%40ss%20w@Proxy.test:3128", {"no_proxy": "skip.test"})
    assert chosen.flags == (
        "--proxy-server=http://proxy.test:3128",
        "--proxy-bypass-list=skip.test;*.skip.test;<-loopback>",
    )
    assert chosen.login_for("http://proxy.test:3128") == ("me", "p@ss w")
    assert chosen.login_for("http://PROXY.test:3128/") == ("me", "p@ss w")
    assert chosen.login_for("http://proxy.test:3129") is None
    assert chosen.login_for("https://proxy.test:3128") is None
    assert chosen.login_for("http://site.test") is None
    # A port left out is the scheme's, on both sides.
    default = browser_proxy("http://u:p@proxy.test", {})
    assert default.flags[0] == "--proxy-server=http://proxy.test"
    assert default.login_for("http://proxy.test") == ("u", "p")
    assert browser_proxy("http://proxy.test:3128", {}).logins == {}


def test_the_environments_proxies_per_scheme() -> None:
    env = {
        "http_proxy": "http://a:b@plain.test:1",
        "ALL_PROXY": "https://all.test:2",
        "NO_PROXY": ".corp.test,10.0.0.0/8,db:5432",
    }
    chosen = browser_proxy(None, env)
    assert chosen.flags == (
        "--proxy-server=http=http://plain.test:1;https=https://all.test:2",
        "--proxy-bypass-list=corp.test;*.corp.test;10.0.0.0/8;db:5432;*.db:5432",
    )  # loopback: not listed, so Chromium sends it directly (its default), as the crawl does
    assert chosen.logins == {"http://plain.test:1": ("a", "b")}
    assert browser_proxy(None, {"https_proxy": "proxy.test:3"}).flags == (
        "--proxy-server=https=http://proxy.test:3",
    )


def test_no_proxy_as_bypass_rules() -> None:
    assert bypass_rules("a.test, .b.test ,,[::1]:81,::2,192.168.0.1:80") == [
        "a.test", "*.a.test", "b.test", "*.b.test", "[::1]:81", "::2", "192.168.0.1:80"
    ]  # fmt: skip
    assert bypass_rules("a.test,*") == ["*"]


def test_proxy_origin() -> None:
    assert proxy_origin("HTTP://Proxy.test") == "http://proxy.test:80"
    assert proxy_origin("https://[::1]:8443") == "https://[::1]:8443"
    assert proxy_origin("proxy.test:3128") == "http://proxy.test:3128"
    assert proxy_origin("socks5://s:1") is None and proxy_origin("http://x:bad") is None


@given(
    user=st.text(min_size=1, max_size=12),
    password=st.text(min_size=1, max_size=12),
    env=st.booleans(),
)
def test_the_login_never_reaches_the_command_line(user: str, password: str, env: bool) -> None:
    """Any local user can read a process's command line (``ps``)."""

    def chosen_for(url: str) -> BrowserProxy:
        return browser_proxy(None, {"https_proxy": url}) if env else browser_proxy(url, {})

    url = f"http://{quote(user, safe='')}:{quote(password, safe='')}@proxy.test:3128"
    chosen = chosen_for(url)
    assert chosen.login_for("http://proxy.test:3128") == (user, password)
    # The flags are exactly those of the proxy without a login.
    without = browser_command("chromium", "/p", "ua", chosen_for("http://proxy.test:3128").flags)
    assert browser_command("chromium", "/p", "ua", chosen.flags) == without
