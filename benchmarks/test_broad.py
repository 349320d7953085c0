"""Tests of the broad-crawl harness (broad.py, loopback_hosts.py), not of either crawler.

Run with ``python benchmarks/bench.py test`` (see test_bench.py). The server test needs
nginx and its Lua module (skipped without them); it binds three 127.77.x.y addresses on
a free port.
"""

from __future__ import annotations

import http.client
import math
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broad import Config, limit_pages_per_s, parse_configs
from exactness import Fetches, normalize, verify_hosts
from generate_site import SiteParams, ensure_site
from loopback_hosts import host_addresses, lua_available, nginx_config, open_broad_nginx
from servers import find_nginx


def test_configs_and_addresses() -> None:
    assert parse_configs("1000x100x20, 100x0x50") == [Config(1000, 100, 20), Config(100, 0, 50)]
    with pytest.raises(ValueError, match="HOSTSxLATENCY_MSxPAGES"):
        parse_configs("1000x100")
    addresses = host_addresses(501)
    assert addresses[0] == "127.77.0.1" and addresses[249] == "127.77.0.250"
    assert addresses[250] == "127.77.1.1" and addresses[500] == "127.77.2.1"
    assert len(set(addresses)) == 501


def test_limit_is_the_smaller_of_hosts_and_cpu() -> None:
    # 10 hosts x 8 in flight / 0.1 s = 800 pages/s, under a 1,500 pages/s CPU rate.
    assert limit_pages_per_s(Config(10, 100, 20), 8, 1500.0) == pytest.approx(800.0)
    assert limit_pages_per_s(Config(1000, 100, 20), 8, 1500.0) == 1500.0
    assert limit_pages_per_s(Config(1000, 100, 20), None, 1500.0) == 1500.0
    assert math.isinf(limit_pages_per_s(Config(1000, 100, 20), None, None))


def test_config_binds_loopback_addresses_only() -> None:
    conf = nginx_config(
        tmp="/t", root=Path("/r"), addresses=["127.77.0.1", "127.77.0.2"], port=8080,
        latency_ms=100, user="",
    )  # fmt: skip
    assert "listen 127.77.0.1:8080;" in conf and "listen 127.77.0.2:8080;" in conf
    assert "ngx.sleep(0.100)" in conf and "load_module" in conf
    assert "listen 8080" not in conf and "0.0.0.0" not in conf
    assert "ngx.sleep" not in nginx_config(
        tmp="/t", root=Path("/r"), addresses=["127.77.0.1"], port=1, latency_ms=0, user=""
    )
    with pytest.raises(ValueError, match="loopback"):
        nginx_config(tmp="/t", root=Path("/r"), addresses=["10.0.0.1"], port=1, latency_ms=0,
                     user="")  # fmt: skip


def test_verify_hosts_counts_per_absolute_url() -> None:
    expected = {"http://127.77.0.1:80/", "http://127.77.0.2:80/"}
    fetched = ["http://127.77.0.1:80/#top", "http://127.77.0.1:80/", "http://127.77.0.3:80/"]
    verdict = verify_hosts(Fetches(fetched, []), expected)
    assert normalize("http://127.77.0.1:80") == "http://127.77.0.1:80/"
    assert verdict.missing == ["http://127.77.0.2:80/"]
    assert verdict.duplicates == ["http://127.77.0.1:80/"]
    assert verdict.unexpected == ["http://127.77.0.3:80/"]


@pytest.mark.skipif(
    find_nginx() is None or not lua_available(), reason="needs nginx and libnginx-mod-http-lua"
)
def test_server_answers_on_every_host_after_the_latency(tmp_path: Path) -> None:
    site, _ = ensure_site(SiteParams(pages=20), tmp_path)
    with open_broad_nginx(site, 3, 200) as server:
        for address in server.addresses:
            conn = http.client.HTTPConnection(address, server.port, timeout=5)
            try:
                for path, slow in (("/robots.txt", False), ("/", True), ("/p/3.html", True)):
                    start = time.perf_counter()
                    conn.request("GET", path)
                    response = conn.getresponse()
                    response.read()
                    took = time.perf_counter() - start
                    assert response.status == 200, (address, path)
                    # ngx.sleep once per page (not twice for "/"), never for robots.txt.
                    assert (0.19 < took < 0.39) if slow else took < 0.15, (path, took)
            finally:
                conn.close()
