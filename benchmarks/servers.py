"""The local servers the benchmarks run against, on loopback only: the web server (nginx
when installed, else Python) and a redis-server. One copy here, so that every benchmark
serves its site, and starts its Redis, the same way.

Both web servers bind 127.0.0.1 only, on a free ephemeral port, serve the generated site
directory as static files (``/`` is ``index.html``; a query string is ignored when
mapping to a file, so ``/p/7.html?x=1`` serves ``p/7.html``), keep connections alive, log
nothing per request, and run as a child process in its own process group that
``open_server`` stops on exit, whatever happens (a SIGTERM to the benchmark too:
``measure.end_children_on_sigterm``). Every benchmark's nginx.conf comes from one
builder, ``nginx_conf``, and differs from the others only in what it passes.

nginx is the reference: one worker, event-driven, sendfile, so the server costs a small,
constant fraction of one core and the crawlers are what is measured. No
``open_file_cache``: with the usual 1024-descriptor limit a large cache makes nginx
answer 404 when ``open()`` fails with EMFILE (the exactness check caught exactly that).

The fallback (``pyserver.py``: ``http.server`` with a thread per connection) is several
times slower per request and competes with the crawler for the machine's cores; figures
taken with it compare the crawlers to each other but understate both, and a fast
crawler is capped by the server (trio-crawl: ~340 pages/s against ~2,000 with nginx).

``doc_tree_site`` serves a documentation tree on disk as it is (realsite.py,
bench_mirror.py, profile_crawl.py); ``warm_page_cache`` reads a site once first.

``open_redis``: a redis-server on a free 127.0.0.1 port, persistence off, in a
temporary directory, killed on exit; a crawl in Redis (run.py's ``redis:N`` rows,
bench_redis_memory.py, bench_slow_page.py ``--redis``) gets a fresh one per benchmark run.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from measure import end_children_on_sigterm

HOST = "127.0.0.1"

#: The http{} settings every benchmark nginx uses (keep-alive for ever, no
#: logs, temp paths in the run's own folder).
_NGINX_HTTP_SETTINGS = """\
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
"""

#: MIME types (``type extension...``) of a page-only site, and of a whole one.
PAGE_TYPES = ("text/html html", "text/plain txt")
SITE_TYPES = (
    *PAGE_TYPES,
    "application/json json",
    "text/css css",
    "application/javascript js",
    "image/png png",
    "image/svg+xml svg",
    "image/gif gif",
    "image/jpeg jpg jpeg",
    "image/x-icon ico",
)


def nginx_conf(
    *,
    tmp: str,
    http: str,
    user: str = "",
    modules: Sequence[str] = (),
    connections: int = 512,
    nofile: int | None = None,
    types: Sequence[str] = PAGE_TYPES,
) -> str:
    """The whole ``nginx.conf`` of a benchmark: one worker in the foreground,
    its pid, error log and temp files in ``tmp``, keep-alive for ever and no
    access log; ``http``: the benchmark's own lines in ``http {}`` (its maps,
    upstreams and server blocks, indented four spaces). ``user``: run the
    worker as this user (``nginx_user``); ``modules``: ``load_module`` paths;
    ``nofile``: the worker's descriptor limit (None: the inherited one). One
    builder, so every benchmark's nginx differs from the others only where it
    says so."""
    lines = [f"load_module {module};" for module in modules]
    lines += [f"user {user};"] if user else []
    lines += ["worker_processes 1;"]
    lines += [f"worker_rlimit_nofile {nofile};"] if nofile is not None else []
    lines += [f"pid {tmp}/nginx.pid;", f"error_log {tmp}/error.log warn;"]
    lines += ["daemon off;", "master_process on;"]
    lines += ["events {", f"    worker_connections {connections};", "}", "http {"]
    lines += ["    types {", *(f"        {entry};" for entry in types), "    }"]
    return "\n".join(lines) + "\n" + _NGINX_HTTP_SETTINGS.format(tmp=tmp) + http + "}\n"


def nginx_user(root: Path) -> str:
    """Who nginx's worker runs as: started as root, it would switch to
    "nobody", who may not be able to read the site (a 0700 temp dir), so the
    owner of ``root``; "" when not root (the worker stays this user)."""
    return pwd.getpwuid(root.stat().st_uid).pw_name if os.geteuid() == 0 else ""


#: ``open_nginx``'s one server: the site as static files.
_SITE_SERVER = """\
    server {{
        listen {host}:{port};
        server_name localhost;
        root {root};
        index index.html;
        location / {{
            try_files $uri $uri/ =404;
        }}
    }}
"""


@dataclass(frozen=True, slots=True)
class Server:
    """A running server: its base URL and a human description."""

    base_url: str  # "http://127.0.0.1:PORT/"
    port: int
    kind: str  # "nginx" or "python"
    description: str


def free_port(address: str = HOST) -> int:
    """A port that was free on ``address`` a moment ago (the server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def find_nginx() -> str | None:
    """The nginx binary, if installed (PATH, then the usual sbin directories)."""
    found = shutil.which("nginx")
    if found:
        return found
    for candidate in ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _nginx_version(binary: str) -> str:
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10)
    return (out.stderr or out.stdout).strip().removeprefix("nginx version: ")


def _wait_ready(port: int, proc: subprocess.Popen[bytes], hint: Callable[[], str]) -> None:
    """Poll until ``/robots.txt`` and ``/`` answer 200; raise with a hint otherwise."""
    deadline = time.monotonic() + 15
    last_error = "no attempt"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} at startup; {hint()}")
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=2)
            try:
                for path in ("/robots.txt", "/"):
                    conn.request("GET", path)
                    response = conn.getresponse()
                    response.read()
                    if response.status != 200:
                        raise RuntimeError(
                            f"server answers {response.status} for {path} (is the site "
                            f"directory readable by the server's user?); {hint()}"
                        )
                return
            finally:
                conn.close()
        except OSError as exc:
            last_error = repr(exc)
            time.sleep(0.05)
    raise RuntimeError(f"server not ready after 15 s ({last_error}); {hint()}")


@contextlib.contextmanager
def running_nginx(
    binary: str, tmp: str, conf: str
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """nginx on the config ``conf`` (``nginx_conf``; written to
    ``tmp/nginx.conf``) in a process group of its own, its prefix ``tmp``, until
    the block ends (``_stop`` ends the group). Yields the process and its error
    log (``-e``: before the config is read; else nginx opens /var/log/...)."""
    path, error_log = Path(tmp) / "nginx.conf", Path(tmp) / "error.log"
    path.write_text(conf)
    end_children_on_sigterm()
    proc = subprocess.Popen(
        [binary, "-p", tmp, "-c", str(path), "-e", str(error_log)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield proc, error_log
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server's process group: SIGTERM (nginx: fast shutdown), then SIGKILL.

    Interrupted (a second Ctrl-C), it kills the group at once rather than leave it.
    """
    if proc.poll() is not None:
        return
    try:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if not isinstance(sys.exc_info()[1], subprocess.TimeoutExpired):
            raise


@contextlib.contextmanager
def open_nginx(site_dir: Path, binary: str) -> Iterator[Server]:
    """Run nginx on ``site_dir`` with a generated config in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="trio-crawl-bench-nginx-") as tmp:
        port = free_port()
        root = site_dir.resolve()
        site = _SITE_SERVER.format(host=HOST, port=port, root=root)
        conf = nginx_conf(tmp=tmp, http=site, user=nginx_user(root), types=SITE_TYPES)
        with running_nginx(binary, tmp, conf) as (proc, error_log):
            _wait_ready(port, proc, lambda: f"nginx error log: {_tail(error_log)}")
            yield Server(
                base_url=f"http://{HOST}:{port}/",
                port=port,
                kind="nginx",
                description=f"nginx {_nginx_version(binary)} (1 worker, keep-alive, sendfile)",
            )


@contextlib.contextmanager
def open_python_server(site_dir: Path) -> Iterator[Server]:
    """Run the fallback ``pyserver.py`` (threaded ``http.server``) on ``site_dir``."""
    port = free_port()
    script = Path(__file__).with_name("pyserver.py")
    end_children_on_sigterm()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(site_dir), "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_ready(port, proc, lambda: "see pyserver.py's stderr above")
        yield Server(
            base_url=f"http://{HOST}:{port}/",
            port=port,
            kind="python",
            description=(
                f"Python {sys.version.split()[0]} http.server, a thread per connection "
                "(FALLBACK: several times slower than nginx; install nginx for real figures)"
            ),
        )
    finally:
        _stop(proc)


@contextlib.contextmanager
def open_server(site_dir: Path, kind: str = "auto") -> Iterator[Server]:
    """Serve ``site_dir``: ``kind`` is "nginx", "python", or "auto" (nginx if installed)."""
    if kind not in ("auto", "nginx", "python"):
        raise ValueError(f"unknown server kind {kind!r}")
    binary = find_nginx() if kind in ("auto", "nginx") else None
    if kind == "nginx" and binary is None:
        raise RuntimeError("nginx requested but not installed (apt-get install -y nginx)")
    if binary is not None:
        with open_nginx(site_dir, binary) as server:
            yield server
    else:
        with open_python_server(site_dir) as server:
            yield server


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no error log)"


@contextlib.contextmanager
def doc_tree_site(doc_dir: Path) -> Iterator[Path]:
    """A directory to serve a documentation tree from: ``robots.txt`` (allowing all)
    plus a symlink to each entry of ``doc_dir``, so the tree itself is never written."""
    with tempfile.TemporaryDirectory(prefix="trio-crawl-doc-site-") as tmp:
        root = Path(tmp) / "site"
        root.mkdir()
        root.chmod(0o755)
        (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
        for entry in doc_dir.iterdir():
            if entry.name != "robots.txt":
                (root / entry.name).symlink_to(entry.resolve())
        yield root


def warm_page_cache(directory: Path, pattern: str = "*.html") -> None:
    """Read every file once, so that no tool pays for cold disk reads another does not."""
    for path in directory.rglob(pattern):
        if path.is_file():
            path.read_bytes()


# --- redis-server ---------------------------------------------------------------------


def redis_available() -> str | None:
    """Why a crawl in Redis cannot run here (None: it can)."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server)"
    try:
        import coredis  # noqa: F401
    except ImportError:
        return "coredis is not installed (pip install 'trio-crawl[redis]')"
    return None


@dataclass
class BenchRedis:
    """A running redis-server: its URL, and the few commands a benchmark reads it with
    (raw RESP over a socket, so that no Redis client is needed for them)."""

    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self, *args: str) -> bytes:
        parts = [a.encode() for a in args]
        wire = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(wire)
            chunks = []
            conn.settimeout(0.5)
            with contextlib.suppress(TimeoutError):
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    if chunk.endswith(b"\r\n") and len(chunk) < 65536:
                        break
        return b"".join(chunks)

    def cpu_seconds(self) -> float:
        """The server's user + system CPU so far (``INFO cpu``)."""
        info = self.command("INFO", "cpu").decode(errors="replace")
        total = 0.0
        for line in info.splitlines():
            name, _, value = line.partition(":")
            if name in ("used_cpu_sys", "used_cpu_user"):
                total += float(value)
        return total

    def used_memory(self) -> int:
        info = self.command("INFO", "memory").decode(errors="replace")
        for line in info.splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":")[1])
        return 0


@contextlib.contextmanager
def open_redis() -> Iterator[BenchRedis]:
    """A redis-server of our own (see the module docstring); ``redis_available`` first."""
    binary = shutil.which("redis-server")
    assert binary is not None
    with tempfile.TemporaryDirectory(prefix="trio-crawl-bench-redis-") as tmp:
        port = free_port()
        end_children_on_sigterm()
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp, "--logfile", str(Path(tmp) / "redis.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        server = BenchRedis(port, process)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    if server.command("PING").startswith(b"+PONG"):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            yield server
        finally:
            process.kill()
            process.wait()
