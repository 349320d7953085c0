"""The pure parts of ``--render``: the request policy, a page's life, the
browser lookup, the pipe framing and the DOM's encoding. No browser here."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_crawl.cli.main import main
from trio_crawl.cli.parser import build_parser
from trio_crawl.core.browser import BROWSER_ENV, find_browser
from trio_crawl.core.frontier import Entry
from trio_crawl.core.models import FetchResult, RenderFailure
from trio_crawl.core.retry import RetryPolicy
from trio_crawl.core.scope import Scope
from trio_crawl.engine.outcome import Step, decide, make_record
from trio_crawl.errors import ConfigError
from trio_crawl.fetch.chromium.auto import STATIC_ENOUGH, RenderPlanner, pattern_of
from trio_crawl.fetch.chromium.browser import (
    browser_command,
    browser_environment,
    remove_orphan_profiles,
)
from trio_crawl.fetch.chromium.cdp import split_frames
from trio_crawl.fetch.chromium.fetcher import encode_dom
from trio_crawl.fetch.chromium.life import (
    QUIET,
    DocumentStep,
    PageLife,
    fulfilled_headers,
    is_download,
)
from trio_crawl.fetch.chromium.policy import RequestPolicy, Verdict

SCOPE = Scope(["http://127.0.0.1:8000/"])


def policy(**kwargs: bool) -> RequestPolicy:
    return RequestPolicy(SCOPE.allows, **kwargs)


@pytest.mark.parametrize(
    ("url", "kind", "verdict"),
    [
        ("http://127.0.0.1:8000/app.js", "Script", Verdict.ROBOTS),
        ("http://127.0.0.1:8000/data.json", "Fetch", Verdict.ROBOTS),
        ("http://127.0.0.1:8000/frame.html", "Document", Verdict.ROBOTS),
        ("http://127.0.0.1:9000/data.json", "XHR", Verdict.SCOPE),
        ("http://127.0.0.1:9000/", "Document", Verdict.SCOPE),
        ("http://10.0.0.1/admin", "Fetch", Verdict.SCOPE),
        ("http://127.0.0.1:8000/logo.png", "Image", Verdict.REQUISITE),
        ("http://127.0.0.1:8000/font.woff2", "Font", Verdict.REQUISITE),
        ("http://127.0.0.1:8000/movie.mp4", "Media", Verdict.REQUISITE),
        ("http://127.0.0.1:8000/beacon", "Ping", Verdict.KIND),
        ("http://127.0.0.1:8000/report", "CSPViolationReport", Verdict.KIND),
        ("http://127.0.0.1:8000/next", "Prefetch", Verdict.KIND),
        ("http://127.0.0.1:8000/stream", "EventSource", Verdict.KIND),
        ("ws://127.0.0.1:8000/socket", "WebSocket", Verdict.SCHEME),
        ("file:///etc/passwd", "Document", Verdict.SCHEME),
        ("chrome://settings/", "Document", Verdict.SCHEME),
        ("ftp://127.0.0.1:8000/x", "Other", Verdict.SCHEME),
    ],
)
def test_each_request_gets_the_crawls_verdict(url: str, kind: str, verdict: Verdict) -> None:
    assert policy().judge(url, kind) is verdict


def test_requisites_load_with_page_requisites_and_robots_can_be_ignored() -> None:
    assert policy(page_requisites=True).judge("http://127.0.0.1:8000/a.png", "Image") is (
        Verdict.ROBOTS
    )
    assert policy(obey_robots=False).judge("http://127.0.0.1:8000/a.js", "Script") is (
        Verdict.ALLOW
    )
    assert policy(page_requisites=True).judge("http://127.0.0.1:9/a.png", "Image") is (
        Verdict.SCOPE
    )


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1/", True),
        ("HTTPS://example.com/", True),
        ("javascript:alert(1)", False),
        ("file:///etc/passwd", False),
        ("data:text/html,<p>", False),
        ("chrome://crash", False),
    ],
)
def test_only_http_pages_are_navigated(url: str, ok: bool) -> None:
    assert RequestPolicy.may_navigate(url) is ok


def result(**headers: str) -> FetchResult:
    return FetchResult("http://127.0.0.1:8000/", 200, headers, b"<p>hi</p>", 0.01)


def test_the_page_is_fulfilled_once_and_later_navigations_are_client_redirects() -> None:
    life = PageLife("http://127.0.0.1:8000/", result(), started_at=10.0)
    assert life.document_request("http://127.0.0.1:8000/other") is DocumentStep.CLIENT_REDIRECT
    assert life.client_redirect is None  # a stale navigation before ours: not the page's
    assert life.document_request("http://127.0.0.1:8000/") is DocumentStep.FULFILL
    assert life.document_request("http://127.0.0.1:8000/next") is DocumentStep.CLIENT_REDIRECT
    assert life.document_request("http://127.0.0.1:8000/later") is DocumentStep.CLIENT_REDIRECT
    assert life.client_redirect == "http://127.0.0.1:8000/next"  # the first one counts


def test_a_download_the_page_starts_is_no_client_redirect() -> None:
    left: list[bool] = []
    life = PageLife("http://127.0.0.1:8000/", result(), started_at=10.0)
    life.on_leave = lambda: left.append(True)
    assert life.document_request("http://127.0.0.1:8000/") is DocumentStep.FULFILL
    # The download manager's request: the tab's network log never saw it.
    step = life.document_request("http://127.0.0.1:8000/file.bin", navigation=False)
    assert step is DocumentStep.DOWNLOAD and life.client_redirect is None and left == []
    assert life.document_request("http://127.0.0.1:8000/next") is DocumentStep.CLIENT_REDIRECT
    assert life.client_redirect == "http://127.0.0.1:8000/next" and left == [True]


def test_the_page_settles_quiet_seconds_after_load_and_its_last_request() -> None:
    life = PageLife("http://127.0.0.1:8000/", result(), started_at=10.0)
    life.request_started(10.2)
    assert life.settled_at() is None  # not loaded yet
    life.load(10.1)
    assert life.settled_at() == 10.2 + QUIET
    life.request_started(11.0)
    life.request_started(10.5)  # late news of an older request moves nothing back
    assert life.settled_at() == 11.0 + QUIET
    assert life.requests == 3


def test_a_late_load_event_still_gets_its_quiet_seconds() -> None:
    # Every request ended long before the load event (a busy browser loads
    # late): a timer the page set for after load still has QUIET to run.
    life = PageLife("http://127.0.0.1:8000/", result(), started_at=10.0)
    life.request_sent("style", 10.1)
    life.request_ended("style", 10.2)
    life.load(13.0)
    assert life.settled_at() == 13.0 + QUIET
    life.load(14.0)  # told twice: the first load event counts
    assert life.settled_at() == 13.0 + QUIET


def test_fulfilled_headers_drop_what_no_longer_describes_the_body() -> None:
    headers = fulfilled_headers(
        result(
            **{
                "content-type": "text/html",
                "content-encoding": "gzip",
                "content-length": "12",
                "transfer-encoding": "chunked",
                "set-cookie": "a=1, b=2",
            }
        )
    )
    assert headers == [
        {"name": "content-type", "value": "text/html"},
        {"name": "set-cookie", "value": "a=1"},
    ]


def which_of(*present: str) -> object:
    return lambda name: f"/usr/bin/{name}" if name in present else None


def test_the_browser_named_wins_then_the_environment_then_path() -> None:
    env = {BROWSER_ENV: "chrome-dev"}
    assert find_browser("chromium", env, which_of("chromium", "chrome-dev")) == "/usr/bin/chromium"  # type: ignore[arg-type]
    assert find_browser(None, env, which_of("chromium", "chrome-dev")) == "/usr/bin/chrome-dev"  # type: ignore[arg-type]
    assert find_browser(None, {}, which_of("google-chrome")) == "/usr/bin/google-chrome"  # type: ignore[arg-type]


def test_no_browser_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^browser=: not an executable browser: /no/such$"):
        find_browser("/no/such", {}, which_of("chromium"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=rf"^{BROWSER_ENV}: not an executable browser: nope$"):
        find_browser(None, {BROWSER_ENV: "nope"}, which_of("chromium"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^render=True needs Chromium: install it \(Debian"):
        find_browser(None, {}, which_of())  # type: ignore[arg-type]


@given(st.lists(st.binary().filter(lambda b: b"\0" not in b), max_size=5), st.binary())
def test_frames_are_cut_at_each_nul_and_a_partial_one_waits(
    messages: list[bytes], tail: bytes
) -> None:
    tail = tail.replace(b"\0", b"")
    buffer = bytearray(b"".join(m + b"\0" for m in messages) + tail)
    assert split_frames(buffer) == messages
    assert bytes(buffer) == tail


def test_the_dom_is_encoded_as_the_headers_say_or_as_declared_utf8() -> None:
    html = "<!DOCTYPE html><html><head></head><body>café €</body></html>"
    latin = encode_dom(html, "text/html; charset=ISO-8859-1")
    assert latin.decode("iso-8859-1").endswith("café &#8364;</body></html>")
    plain = encode_dom(html, "text/html")
    assert plain.startswith(b'<!DOCTYPE html><html><head><meta charset="utf-8">')
    assert "café €".encode() in plain


def test_a_page_that_leaves_is_settled_at_once() -> None:
    left: list[bool] = []
    life = PageLife("http://127.0.0.1:8000/", result(), started_at=10.0)
    life.on_leave = lambda: left.append(True)
    life.document_request("http://127.0.0.1:8000/")
    assert life.settled_at() is None and left == []
    life.document_request("http://127.0.0.1:8000/next")
    assert life.settled_at() == 10.0 and left == [True]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--render", "--browser", "/no/such/chromium"], {},
         "--browser: not an executable browser: /no/such/chromium"),
        (["--render"], {BROWSER_ENV: "/no/such/chrome"},
         f"{BROWSER_ENV}: not an executable browser: /no/such/chrome"),
        (["--render", "--render-wait", "0"], {}, None),
        (["--render"], {"PATH": "/nonexistent"},
         "--render needs Chromium: install it (Debian: apt-get install chromium) "
         f"or name it with --browser or {BROWSER_ENV}"),
        (["--render-wait", "3"], {}, "--render-wait needs --render"),
        (["--browser", "chromium"], {}, "--browser needs --render"),
    ],
)  # fmt: skip
def test_render_usage_errors_are_one_line_and_exit_2(
    args: list[str],
    env: dict[str, str],
    message: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(BROWSER_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_:
        main(["http://127.0.0.1:9/", "-o", "-", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    if message is not None:
        assert err.endswith(message)


@pytest.mark.parametrize(
    ("url", "pattern"),
    [
        ("http://h:1/", "h:1/"),
        ("http://h:1/index.html?x=1", "h:1/"),
        ("http://h:1/docs/intro.html", "h:1/docs/"),
        ("http://h:1/item/42/view", "h:1/item/*/"),
        ("http://h:1/item/7/view", "h:1/item/*/"),
        ("http://h:1/a/b/", "h:1/a/b/"),
    ],
)
def test_pages_are_grouped_by_host_and_directories(url: str, pattern: str) -> None:
    assert pattern_of(url) == pattern


def test_auto_samples_then_renders_only_where_scripts_add_links() -> None:
    planner = RenderPlanner(samples=2, recheck=4)
    # A burst of new pages: each is rendered until two renders have told us.
    assert all(planner.decide(f"http://h/app/{i}.html").render for i in range(3))
    # Rendering /app/ found nothing new twice: static from now on, a re-check every 4th.
    assert not planner.learn("http://h/app/0.html", ["http://h/x"], ["http://h/x"])
    assert not planner.learn("http://h/app/1.html", [], [])
    decisions = [planner.decide(f"http://h/app/{i}.html") for i in range(3, 10)]
    assert [d.render for d in decisions] == [False, False, False, True, False, False, False]
    assert decisions[3].reason == "re-check" and decisions[0].reason == STATIC_ENOUGH
    # /spa/: the first render finds a link the HTML lacks: every page is rendered.
    assert planner.decide("http://h/spa/a").render
    assert planner.learn("http://h/spa/a", ["http://h/1"], ["http://h/1", "http://h/2"])
    assert all(planner.decide(f"http://h/spa/{i}").render for i in range(10))
    report = {r.pattern: r for r in planner.report()}
    assert report["h/spa/"].reason == "scripts add links (1 of 1 renders)"
    assert report["h/app/"].reason == "static HTML has every link (2 renders)"
    assert (report["h/app/"].rendered, report["h/app/"].static) == (2, 6)


@pytest.mark.parametrize(
    ("argv", "render", "urls"),
    [
        (["--render", "http://a/"], True, ["http://a/"]),
        (["--render", "auto", "http://a/"], "auto", ["http://a/"]),
        (["http://a/", "--render"], True, ["http://a/"]),
        (["--render", "http://a/", "http://b/"], True, ["http://a/", "http://b/"]),
        (["http://a/"], False, ["http://a/"]),
    ],
)
def test_render_takes_auto_and_gives_a_start_url_back(
    argv: list[str], render: object, urls: list[str]
) -> None:
    args = build_parser().parse_args(argv)
    assert args.render == render
    assert [*getattr(args, "render_urls", []), *args.urls] == urls


def test_the_browser_gets_a_fresh_profile_as_its_home_and_the_crawls_proxy() -> None:
    env = browser_environment({"HOME": "/root", "PATH": "/bin"}, "/tmp/p")
    assert env == {
        "HOME": "/tmp/p",
        "PATH": "/bin",
        "XDG_CONFIG_HOME": "/tmp/p/config",
        "XDG_CACHE_HOME": "/tmp/p/cache",
        "XDG_DATA_HOME": "/tmp/p/data",
    }
    command = browser_command("/usr/bin/chromium", "/tmp/p", "bot/1.0")
    assert command[0] == "/usr/bin/chromium" and command[-1] == "about:blank"
    assert {"--headless", "--remote-debugging-pipe", "--user-data-dir=/tmp/p",
            "--user-agent=bot/1.0"} <= set(command)  # fmt: skip
    assert not any("proxy" in flag for flag in command)
    assert "--no-proxy-server" in browser_command("c", "/p", "ua", ["--no-proxy-server"])


def test_profiles_of_crawlers_that_are_gone_are_removed(tmp_path: Path) -> None:
    for name in ("trio-crawl-chromium-111-abc", "trio-crawl-chromium-222-def",
                 "trio-crawl-chromium-x-1", "other-111-abc"):  # fmt: skip
        (tmp_path / name).mkdir()
    remove_orphan_profiles(str(tmp_path), alive=lambda pid: pid == 222)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "other-111-abc",
        "trio-crawl-chromium-222-def",
        "trio-crawl-chromium-x-1",
    ]


def test_the_page_is_recognised_as_the_browser_writes_its_url() -> None:
    life = PageLife("http://xn--caf-dma.example/a%20b", result(), started_at=0.0)
    assert life.document_request("http://café.example/a b") is DocumentStep.FULFILL


def test_a_request_in_flight_keeps_the_page_unsettled() -> None:
    life = PageLife("http://127.0.0.1:8000/", result(), started_at=0.0)
    life.load(0.5)
    life.request_sent("a", 1.0)
    life.request_sent("b", 1.1)
    assert life.settled_at() is None
    life.request_ended("a", 1.2)
    assert life.settled_at() is None  # b is still out
    life.request_ended("b", 4.0)  # a slow fetch(): quiet counts from its end
    assert life.settled_at() == 4.0 + QUIET
    life.request_ended("b", 9.0)  # told twice: nothing moves
    assert life.settled_at() == 4.0 + QUIET


@pytest.mark.parametrize(
    ("headers", "download"),
    [
        ({"content-type": "application/zip"}, True),
        ({"content-type": "application/octet-stream"}, True),
        ({"content-type": "text/html", "content-disposition": "attachment; filename=a"}, True),
        ({"content-type": "text/html; charset=utf-8"}, False),
        ({"content-type": "image/png"}, False),
        ({"content-type": "application/atom+xml"}, False),
        ({"content-disposition": "inline"}, False),
        ({}, False),  # sniffed by the browser: shown
    ],
)
def test_a_navigation_target_is_a_download_when_the_browser_would_save_it(
    headers: dict[str, str], download: bool
) -> None:
    result = FetchResult("http://h/f", 200, headers, b"x", 0.0)
    assert is_download(result) is download


def _served(failure: RenderFailure) -> FetchResult:
    return FetchResult(
        "http://h/", 200, {"content-type": "text/html"}, b"<a href=/a>", 0.1,
        render_failure=failure,
    )  # fmt: skip


@pytest.mark.parametrize("retry", [True, False])
def test_a_failed_render_keeps_the_page_and_only_a_crash_is_tried_again(retry: bool) -> None:
    failure = RenderFailure("crash" if retry else "timeout", "gone", 2.5, retry=retry)
    result = _served(failure)
    first = decide(
        attempts=1, result=result, failure=None, policy=RetryPolicy(retries=1),
        stopping=False, rng=random.Random(0), now_epoch=0.0,
    )  # fmt: skip
    assert first.step is (Step.RETRY if retry else Step.PAGE)
    last = decide(
        attempts=2, result=result, failure=None, policy=RetryPolicy(retries=1),
        stopping=False, rng=random.Random(0), now_epoch=0.0,
    )  # fmt: skip
    assert last.step is Step.PAGE
    record = make_record(Entry("http://h/", 0, None), None, result, 2600.0, links=1)
    line = record.to_json()
    assert line["status"] == 200 and line["error"] is None and line["links"] == 1
    assert line["render_error"] == {"kind": failure.kind, "message": "gone", "seconds": 2.5}
    assert "rendered" not in line


def test_a_scroll_gives_the_page_quiet_seconds_again() -> None:
    life = PageLife("http://h/", FetchResult("http://h/", 200, {}, b"", 0.0), 0.0)
    life.load(1.0)
    assert life.settled_at() == 1.0 + QUIET
    life.moved(3.0)
    assert life.settled_at() == 3.0 + QUIET


def test_a_pages_cookies_go_to_the_jar_only_for_its_host_and_in_scope() -> None:
    from http.cookiejar import CookieJar

    from trio_crawl.fetch.chromium.jar import keep_page_cookies

    def raw(name: str, domain: str, **more: object) -> dict[str, object]:
        return {"name": name, "value": "v", "domain": domain, "path": "/", "expires": -1, **more}

    cookies = [
        raw("mine", "www.example.com"),
        raw("parent", ".example.com", expires=4102444800, secure=True),
        raw("other", "other.org"),  # not the page's: never planted
        {"domain": "www.example.com"},  # no name: not a cookie
    ]
    in_scope = Scope(["http://www.example.com/"]).allows
    jar = CookieJar()
    assert keep_page_cookies(jar, cookies, "http://www.example.com/a", in_scope) == 2
    kept = {c.name: c for c in jar}
    assert set(kept) == {"mine", "parent"}
    assert kept["mine"].discard and kept["mine"].expires is None
    assert kept["parent"].secure and kept["parent"].expires == 4102444800
    assert kept["parent"].domain_initial_dot
    assert keep_page_cookies(jar, cookies, "http://elsewhere.net/", lambda url: False) == 0
    assert keep_page_cookies(None, cookies, "http://www.example.com/", in_scope) == 0
