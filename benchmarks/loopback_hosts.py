"""Many hosts on one machine: loopback addresses behind one nginx, with latency.

A broad crawl meets thousands of hosts, each slow; a benchmark of it must not need
thousands of machines, DNS, or the network. Linux routes all of 127.0.0.0/8 to
``lo``, so ``127.77.A.B`` (``host_addresses``) are as many hosts as wanted, and one
nginx (``open_broad_nginx``) listens on each of them (one ``listen ADDR:PORT`` line
per host, never a wildcard address), one worker, keep-alive, and adds the latency
with ``ngx.sleep`` in an ``access_by_lua_block`` (Debian's ``libnginx-mod-http-lua``):
a timer in nginx's event loop, so thousands of responses wait at once while the
worker stays idle. robots.txt is answered at once: the latency is the pages'.

broad.py serves one generated site on every host with it, profile_crawl.py its
``--site broad``; discovery.py writes a world of its own (other ``listen`` lines)
but waits for it and names its hosts the same way.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure import process_cpu_s
from servers import (
    _nginx_version,
    _tail,
    find_nginx,
    free_port,
    nginx_conf,
    nginx_user,
    running_nginx,
)

LUA_MODULES = (
    "/usr/lib/nginx/modules/ndk_http_module.so",
    "/usr/lib/nginx/modules/ngx_http_lua_module.so",
)
#: The first two octets of every host (one /16 of loopback: 62,500 hosts at most here).
HOST_PREFIX = "127.77"


def host_addresses(count: int) -> list[str]:
    """``count`` distinct loopback addresses, ``127.77.0.1`` upwards (last octet 1-250)."""
    return [f"{HOST_PREFIX}.{i // 250}.{i % 250 + 1}" for i in range(count)]


#: The one server block: every address, robots.txt at once, pages after ``{delay}``.
_SERVER = """\
    server {{
{listen}
        server_name _;
        root {root};
        location = /robots.txt {{
        }}
        location / {{
{delay}            try_files $uri $uri/index.html =404;
        }}
    }}
"""


def nginx_config(
    *, tmp: str, root: Path, addresses: Sequence[str], port: int, latency_ms: int, user: str
) -> str:
    """The config: one listen line per address, ``ngx.sleep`` before every page.

    ``try_files`` with ``$uri/index.html`` (not ``index``) serves ``/`` without an
    internal redirect, which would run the access phase, and so the sleep, twice.
    """
    if any(not a.startswith("127.") for a in addresses):
        raise ValueError("broad-crawl hosts must be loopback addresses (127.0.0.0/8)")
    delay = ""
    modules: Sequence[str] = ()
    if latency_ms > 0:
        modules = LUA_MODULES
        delay = f"            access_by_lua_block {{ ngx.sleep({latency_ms / 1000:.3f}) }}\n"
    connections = len(addresses) + 8192
    server = _SERVER.format(
        root=root,
        listen="\n".join(f"        listen {a}:{port};" for a in addresses),
        delay=delay,
    )
    return nginx_conf(
        tmp=tmp,
        http=server,
        user=user,
        modules=modules,
        connections=connections,
        nofile=connections + 64,
    )


@dataclass(frozen=True, slots=True)
class BroadServer:
    """A running nginx serving every address."""

    addresses: list[str]
    port: int
    description: str
    master_pid: int

    def urls(self, paths: Iterable[str]) -> set[str]:
        """Every (address, path) as an absolute URL."""
        paths = list(paths)
        return {f"http://{a}:{self.port}{p}" for a in self.addresses for p in paths}

    def cpu_seconds(self) -> float:
        """CPU time of the master and its workers so far (``/proc``; 0 if unreadable)."""
        pids = [self.master_pid]
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{self.master_pid}/task/{self.master_pid}/children")
            pids += [int(p) for p in children.read_text().split()]
        return sum(process_cpu_s(pid) for pid in pids)


def lua_available() -> bool:
    return all(os.path.exists(m) for m in LUA_MODULES)


def wait_hosts_ready(server: BroadServer, proc: Any, error_log: Path) -> None:
    """Until the first and last hosts answer robots.txt (nginx binds all or none)."""
    deadline = time.monotonic() + 20
    last = "no attempt"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited with {proc.returncode}: {_tail(error_log)}")
        try:
            for address in (server.addresses[0], server.addresses[-1]):
                conn = http.client.HTTPConnection(address, server.port, timeout=2)
                try:
                    conn.request("GET", "/robots.txt")
                    response = conn.getresponse()
                    response.read()
                    if response.status != 200:
                        raise RuntimeError(f"nginx answers {response.status}: {_tail(error_log)}")
                finally:
                    conn.close()
            return
        except OSError as exc:
            last = repr(exc)
            time.sleep(0.05)
    raise RuntimeError(f"nginx not ready after 20 s ({last}): {_tail(error_log)}")


@contextlib.contextmanager
def open_broad_nginx(site_dir: Path, hosts: int, latency_ms: int) -> Iterator[BroadServer]:
    """Run nginx on ``hosts`` loopback addresses, one port, ``latency_ms`` per page."""
    binary = find_nginx()
    if binary is None:
        raise RuntimeError("nginx is not installed (apt-get install -y nginx)")
    if latency_ms > 0 and not lua_available():
        raise RuntimeError(
            "latency needs nginx's Lua module (apt-get install -y libnginx-mod-http-lua)"
        )
    addresses = host_addresses(hosts)
    with tempfile.TemporaryDirectory(prefix="trio-crawl-broad-nginx-") as tmp:
        root = site_dir.resolve()
        user = nginx_user(root)
        port = free_port(addresses[0])
        conf = nginx_config(
            tmp=tmp, root=root, addresses=addresses, port=port, latency_ms=latency_ms, user=user
        )
        with running_nginx(binary, tmp, conf) as (proc, error_log):
            server = BroadServer(
                addresses=addresses,
                port=port,
                description=(
                    f"nginx {_nginx_version(binary)}, 1 worker, {hosts} addresses "
                    f"{addresses[0]}..{addresses[-1]}:{port}, "
                    + (f"ngx.sleep({latency_ms} ms) per page" if latency_ms else "no delay")
                ),
                master_pid=proc.pid,
            )
            wait_hosts_ready(server, proc, error_log)
            yield server
