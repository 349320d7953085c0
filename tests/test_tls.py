"""HTTPS and HTTP/2, with every fetcher, against local servers (issue #11).

Rules of this suite:

- Certificates come from a throwaway CA made by ``trustme``; nothing here
  trusts anything but it, or the system's CAs (which never signed it).
- The server is ``hypercorn`` (trio worker) serving a small ASGI app on
  127.0.0.1, port 0, over TLS with ALPN ``h2`` and ``http/1.1``: it speaks
  whichever protocol the client offers. It runs in the test's own nursery
  and stops with it.
- The TLS environment variables are cleared for every test (``clean_env``)
  and set only by the tests about them.
- Every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_crawl.cli.common import UsageError
from trio_crawl.cli.options import build_config
from trio_crawl.cli.parser import build_parser
from trio_crawl.core.config import CrawlConfig
from trio_crawl.core.http import FetchConfig
from trio_crawl.core.models import CrawlRecord
from trio_crawl.engine.resources import check_resources
from trio_crawl.errors import ConfigError, FetchError
from trio_crawl.fetch.curl.handle import HTTP2 as CURL_HAS_HTTP2
from trio_crawl.fetch.tls import ca_locations, is_tls_failure

from fetcher_factories import FETCHER_FACTORIES, FetcherFactory

trustme = pytest.importorskip("trustme")
hypercorn_config = pytest.importorskip("hypercorn.config")
hypercorn_trio = pytest.importorskip("hypercorn.trio")

TLS_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE")

#: The protocol each fetcher should end up speaking when offered HTTP/2.
WITH_HTTP2 = {
    "curl": "HTTP/2" if CURL_HAS_HTTP2 else "HTTP/1.1",
    "httpx": "HTTP/2",
    "asks": "HTTP/1.1",  # asks speaks HTTP/1.1 only
}

FETCHERS = pytest.mark.parametrize(
    ("name", "factory"), FETCHER_FACTORIES, ids=[name for name, _ in FETCHER_FACTORIES]
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TLS_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def ca() -> Any:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tls")


@pytest.fixture(scope="module")
def ca_file(ca: Any, tls_dir: Path) -> str:
    path = tls_dir / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def server_cert(ca: Any, directory: Path, *names: str) -> tuple[str, str]:
    """``(certfile, keyfile)`` of a server certificate for ``names``."""
    cert = ca.issue_cert(*names)
    certfile, keyfile = directory / f"{names[0]}.crt", directory / f"{names[0]}.key"
    certfile.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(keyfile))
    return str(certfile), str(keyfile)


@pytest.fixture(scope="module")
def good_cert(ca: Any, tls_dir: Path) -> tuple[str, str]:
    return server_cert(ca, tls_dir, "127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def wrong_host_cert(ca: Any, tls_dir: Path) -> tuple[str, str]:
    return server_cert(ca, tls_dir, "elsewhere.example")


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI page that says which HTTP version carried it."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = f"<!doctype html><p>HTTP/{scope['http_version']} {scope['path']}</p>".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"x-multi", b"one"),
                (b"x-multi", b"two"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def serve_https(cert: tuple[str, str]) -> AsyncIterator[str]:
    """hypercorn on 127.0.0.1 with ``cert``; yields ``https://127.0.0.1:PORT``."""
    config = hypercorn_config.Config()
    config.bind = ["127.0.0.1:0"]
    config.certfile, config.keyfile = cert
    config.alpn_protocols = ["h2", "http/1.1"]
    config.graceful_timeout = 0.2
    config.accesslog = None
    config.errorlog = None  # failed handshakes are what some tests are about
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        serve = partial(hypercorn_trio.serve, app, config, shutdown_trigger=stop.wait)
        binds: list[str] = await nursery.start(serve)
        try:
            yield binds[0].replace("0.0.0.0", "127.0.0.1")
        finally:
            stop.set()


async def fetch_error(factory: FetcherFactory, url: str, config: FetchConfig) -> FetchError:
    async with factory(config) as fetcher:
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(url)
    return info.value


# -- trusting the right CAs ------------------------------------------------------------


@FETCHERS
async def test_https_with_a_custom_ca(
    name: str, factory: FetcherFactory, ca_file: str, good_cert: tuple[str, str]
) -> None:
    with trio.fail_after(20):
        async with serve_https(good_cert) as base, factory(FetchConfig(ca_bundle=ca_file)) as f:
            result = await f.fetch(base + "/page")
            again = await f.fetch(base.replace("127.0.0.1", "localhost") + "/x")
    assert result.status == again.status == 200
    assert result.body == b"<!doctype html><p>HTTP/1.1 /page</p>"
    assert result.http_version == again.http_version == "HTTP/1.1"


@FETCHERS
async def test_https_with_the_ca_from_ssl_cert_file(
    name: str,
    factory: FetcherFactory,
    ca_file: str,
    good_cert: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    with trio.fail_after(20):
        async with serve_https(good_cert) as base, factory(FetchConfig()) as fetcher:
            assert (await fetcher.fetch(base + "/")).status == 200


@pytest.fixture(scope="module")
def hashed_ca_dir(ca_file: str, tls_dir: Path) -> str:
    """A directory holding the CA under its OpenSSL subject-hash name."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to name the hashed CA file")
    subject_hash = subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", ca_file],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    directory = tls_dir / "hashed"
    directory.mkdir()
    shutil.copy(ca_file, directory / f"{subject_hash}.0")
    return str(directory)


@FETCHERS
async def test_https_with_the_ca_from_ssl_cert_dir(
    name: str,
    factory: FetcherFactory,
    hashed_ca_dir: str,
    good_cert: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_DIR", hashed_ca_dir)
    with trio.fail_after(20):
        async with serve_https(good_cert) as base, factory(FetchConfig()) as fetcher:
            assert (await fetcher.fetch(base + "/")).status == 200


async def test_curl_honours_curl_ca_bundle(
    ca_file: str, good_cert: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trio_crawl.fetch.curl import open_curl_fetcher

    monkeypatch.setenv("CURL_CA_BUNDLE", ca_file)
    with trio.fail_after(20):
        async with serve_https(good_cert) as base, open_curl_fetcher(FetchConfig()) as fetcher:
            assert (await fetcher.fetch(base + "/")).status == 200


@FETCHERS
async def test_a_certificate_from_an_unknown_ca_is_a_tls_error(
    name: str, factory: FetcherFactory, good_cert: tuple[str, str]
) -> None:
    with trio.fail_after(20):
        async with serve_https(good_cert) as base:
            error = await fetch_error(factory, base + "/", FetchConfig())
    assert error.kind == "tls", error


@FETCHERS
async def test_a_certificate_for_another_host_is_a_tls_error(
    name: str, factory: FetcherFactory, ca_file: str, wrong_host_cert: tuple[str, str]
) -> None:
    with trio.fail_after(20):
        async with serve_https(wrong_host_cert) as base:
            error = await fetch_error(factory, base + "/", FetchConfig(ca_bundle=ca_file))
    assert error.kind == "tls", error


@FETCHERS
async def test_a_missing_ca_bundle_fails_when_opening(
    name: str, factory: FetcherFactory, tmp_path: Path
) -> None:
    with trio.fail_after(10), pytest.raises(FileNotFoundError, match="CA bundle not found"):
        async with factory(FetchConfig(ca_bundle=str(tmp_path / "nope.pem"))):
            pass


# -- HTTP/2 ------------------------------------------------------------------------------


@FETCHERS
async def test_http2_is_negotiated_when_asked_for(
    name: str, factory: FetcherFactory, ca_file: str, good_cert: tuple[str, str]
) -> None:
    if name == "httpx":
        pytest.importorskip("h2")
    expected = WITH_HTTP2[name]
    bodies: dict[int, bytes] = {}
    with trio.fail_after(20):
        async with serve_https(good_cert) as base:
            config = FetchConfig(ca_bundle=ca_file, http2=True, max_connections=4)
            async with factory(config) as fetcher:
                result = await fetcher.fetch(base + "/first")

                async def one(i: int) -> None:  # more streams than connections
                    bodies[i] = (await fetcher.fetch(f"{base}/p{i}")).body

                async with trio.open_nursery() as nursery:
                    for i in range(12):
                        nursery.start_soon(one, i)
    assert result.http_version == expected
    assert result.body == f"<!doctype html><p>{expected} /first</p>".encode()
    assert result.content_type == "text/html; charset=utf-8"
    if name != "asks":  # asks keeps only the last of repeated headers
        assert result.headers["x-multi"] == "one, two"
    assert bodies == {i: f"<!doctype html><p>{expected} /p{i}</p>".encode() for i in range(12)}


@FETCHERS
async def test_without_http2_every_fetcher_speaks_http11(
    name: str, factory: FetcherFactory, ca_file: str, good_cert: tuple[str, str]
) -> None:
    with trio.fail_after(20):
        async with serve_https(good_cert) as base, factory(FetchConfig(ca_bundle=ca_file)) as f:
            result = await f.fetch(base + "/")
    assert result.http_version == "HTTP/1.1"


@pytest.mark.skipif(CURL_HAS_HTTP2, reason="this libcurl has HTTP/2")
def test_curl_without_nghttp2_says_so() -> None:
    assert WITH_HTTP2["curl"] == "HTTP/1.1"  # documents the fallback where it applies


# -- configuration, the command line, records --------------------------------------------


def test_ca_locations_order(tmp_path: Path) -> None:
    file_a, file_b = tmp_path / "a.pem", tmp_path / "b.pem"
    file_a.write_text("x")
    file_b.write_text("x")
    both = {"SSL_CERT_FILE": str(file_a), "CURL_CA_BUNDLE": str(file_b)}
    assert ca_locations(str(file_b), both) == (str(file_b), None)
    assert ca_locations(str(tmp_path), both) == (None, str(tmp_path))
    assert ca_locations(None, both) == (str(file_a), None)
    assert ca_locations(None, {"CURL_CA_BUNDLE": str(file_b)}) == (None, None)
    assert ca_locations(None, {"CURL_CA_BUNDLE": str(file_b)}, curl=True) == (str(file_b), None)
    gone = {"SSL_CERT_FILE": str(tmp_path / "gone.pem"), "SSL_CERT_DIR": str(tmp_path)}
    assert ca_locations(None, gone) == (None, str(tmp_path))
    assert ca_locations(None, {}) == (None, None)
    with pytest.raises(FileNotFoundError):
        ca_locations(str(tmp_path / "gone.pem"), {})


def test_is_tls_failure_looks_behind_wrappers() -> None:
    import ssl

    wrapper = ConnectionError("connect failed")
    wrapper.__cause__ = ssl.SSLCertVerificationError("certificate verify failed")
    assert is_tls_failure(wrapper)
    closed = ConnectionError("closed")
    closed.__cause__ = ssl.SSLEOFError("EOF occurred in violation of protocol")
    assert not is_tls_failure(closed)
    assert not is_tls_failure(ConnectionRefusedError())


def test_cli_flags_reach_the_fetch_config(ca_file: str) -> None:
    url = "https://127.0.0.1:8443/"
    args = build_parser().parse_args([url, "--ca-bundle", ca_file, "--http2"])
    fetch = build_config(args, args.urls).fetch_config()
    assert (fetch.ca_bundle, fetch.http2) == (ca_file, True)
    args = build_parser().parse_args([url])
    plain = build_config(args, args.urls).fetch_config()
    assert (plain.ca_bundle, plain.http2) == (None, False)
    missing = os.path.join(ca_file, "missing")
    config = CrawlConfig.from_options(start_urls=[url], ca_bundle=missing)  # no I/O here
    with pytest.raises(ConfigError, match=r"^ca_bundle=: no such file or directory: "):
        check_resources(config)  # where the crawl's fetcher is opened
    args = build_parser().parse_args([url, "--ca-bundle", missing])
    with pytest.raises(UsageError, match=r"^--ca-bundle: no such file or directory: "):
        build_config(args, args.urls)


def test_the_record_says_which_protocol_when_known() -> None:
    assert CrawlRecord("http://h/", 200, 0, protocol="HTTP/2").to_json()["protocol"] == "HTTP/2"
    assert "protocol" not in CrawlRecord("http://h/", None, 0).to_json()


async def test_httpx_connects_to_the_cached_address_but_verifies_the_name(
    ca: Any, ca_file: str, tls_dir: Path
) -> None:
    """The certificate names only ``a.test`` (no IP): verifying against the
    address would fail. ``a.test`` passes (SNI and check on the name);
    ``b.test``, on the same address, is refused: ``tls``."""
    from trio_crawl.fetch.dns.resolve import CachingResolver
    from trio_crawl.fetch.httpx import open_httpx_fetcher

    looked_up: list[str] = []

    async def resolve(name: str) -> list[str]:
        looked_up.append(name)
        return ["127.0.0.1"]

    config = FetchConfig(ca_bundle=ca_file, http2=True)
    with trio.fail_after(20):
        async with (
            serve_https(server_cert(ca, tls_dir, "a.test")) as base,
            open_httpx_fetcher(config, resolver=CachingResolver(resolve)) as fetcher,
        ):
            port = base.rpartition(":")[2]
            result = await fetcher.fetch(f"https://a.test:{port}/page")
            with pytest.raises(FetchError) as info:
                await fetcher.fetch(f"https://b.test:{port}/page")
    assert result.status == 200 and result.http_version == "HTTP/2"
    assert info.value.kind == "tls" and "b.test" in str(info.value)
    assert looked_up == ["a.test", "b.test"]
