"""A broad crawl closer to the real web: hosts found by links, long-tailed latency,
dead and black-holed hosts, cross-host redirects (issue #22).

Theory of operation:

1. The world (``World``, deterministic from ``--seed``): ``hosts`` loopback hosts
   (``127.77.A.B``, as in broad.py), ``pages`` pages each. Host ``j`` links to hosts
   ``seeds + j*fanout .. + fanout-1`` (a tree of hosts from the first ``seeds`` hosts,
   the only start URLs), each link on a different page of ``j``; every fifth host
   link goes through a redirect on ``j`` (``/r/ADDR/`` answers 302 to host ADDR's
   root). Inside a host, page ``k`` links to pages ``2k+1``, ``2k+2`` and to page 0.
2. Latency per host: most hosts 50-150 ms (uniform), ``slow`` of them 1-2 s, per
   page (robots.txt answers at once). ``dead`` hosts have no listening socket
   (connection refused); ``black_holes`` accept and never answer (nginx sleeps an
   hour on every request, robots.txt included). Dead and black-holed hosts are
   leaves of the host tree, so every live host stays reachable.
3. One nginx serves it: a ``listen`` line per live or black-holed address, ``root
   DIR/$server_addr`` (a directory of files per host), the delay from a ``map`` of
   the address, and ``ngx.sleep`` in ``access_by_lua_block``.
4. Exact: every page of every live host fetched exactly once (a redirect's own URL
   may be recorded once too: trio-crawl writes a record for the 302, Scrapy follows
   it silently); failures only for URLs on dead or black-holed hosts, at most one
   per such host and URL; nothing else.
5. The limit: a crawl cannot end before its critical path (``critical_path_s``:
   the earliest time the last page can be fetched with unlimited concurrency and
   no CPU cost, a shortest-path sum of page latencies from a seed, plus the
   timeout of the black holes met on the way), nor go faster than
   ``hosts x per-host concurrency / mean latency`` or its CPU-bound rate. The
   report gives wall time against the critical path and against the best run.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import math
import os
import random
import shlex
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bytecode import add_source_start, like_installed, trio_crawl_command
from exactness import Fetches, Verdict, normalize, read_scrapy, read_trio_crawl
from loopback_hosts import LUA_MODULES, host_addresses, lua_available, wait_hosts_ready
from measure import FdSampler, Measured, alternating, run_measured
from servers import (
    _nginx_version,
    find_nginx,
    free_port,
    nginx_conf,
    nginx_user,
    running_nginx,
)

HERE = Path(__file__).resolve().parent
FILLER = (
    "Broad crawls meet many hosts, most of them slow, some dead, a few silent. "
    "This paragraph only gives the page a realistic size for its parser. "
) * 12


@dataclass(frozen=True, slots=True)
class WorldParams:
    hosts: int = 1000
    pages: int = 20
    seeds: int = 10
    fanout: int = 3
    slow: float = 0.02  # fraction of hosts at 1-2 s
    dead: float = 0.02
    black_holes: int = 2
    seed: int = 1

    @property
    def name(self) -> str:
        return f"discovery-{self.hosts}x{self.pages}"


@dataclass(slots=True)
class World:
    params: WorldParams
    addresses: list[str]
    latency: dict[int, float]  # host index -> seconds per page
    dead: set[int]
    black_holes: set[int]
    #: host index -> [(page it is on, child host, through a redirect)]
    host_links: dict[int, list[tuple[int, int, bool]]] = field(default_factory=dict)

    def live(self, j: int) -> bool:
        return j not in self.dead and j not in self.black_holes

    def children(self, j: int) -> list[int]:
        p = self.params
        first = p.seeds + j * p.fanout
        return [c for c in range(first, first + p.fanout) if c < p.hosts]


def plan_world(params: WorldParams) -> World:
    rng = random.Random(params.seed)
    n = params.hosts
    addresses = host_addresses(n)
    latency = {j: rng.uniform(0.05, 0.15) for j in range(n)}
    for j in rng.sample(range(n), max(0, round(n * params.slow))):
        latency[j] = rng.uniform(1.0, 2.0)
    leaves = [j for j in range(params.seeds, n) if params.seeds + j * params.fanout >= n]
    odd = rng.sample(leaves, min(len(leaves), round(n * params.dead) + params.black_holes))
    black_holes = set(odd[: params.black_holes])
    dead = set(odd[params.black_holes :])
    world = World(params, addresses, latency, dead, black_holes)
    for j in range(n):
        links = []
        for t, child in enumerate(world.children(j)):
            page = (t + 1) % params.pages
            links.append((page, child, (j + t) % 5 == 0))
        world.host_links[j] = links
    return world


def page_links(world: World, j: int, k: int, port: int) -> list[str]:
    p = world.params
    links = [f"/p{c}.html" for c in (2 * k + 1, 2 * k + 2) if c < p.pages] + ["/"]
    for page, child, redirect in world.host_links[j]:
        if page == k:
            target = world.addresses[child]
            links.append(f"/r/{target}/" if redirect else f"http://{target}:{port}/")
    return links


def write_world(world: World, root: Path, port: int) -> None:
    """One directory per host address (live ones and black holes)."""
    for j, address in enumerate(world.addresses):
        if j in world.dead:
            continue
        host_dir = root / address
        host_dir.mkdir(parents=True, exist_ok=True)
        (host_dir / "robots.txt").write_text("User-agent: *\nDisallow:\n")
        for k in range(world.params.pages):
            anchors = "".join(
                f'<li><a href="{href}">link {i}</a></li>'
                for i, href in enumerate(page_links(world, j, k, port))
            )
            html = (
                f"<!doctype html><html><head><title>host {j} page {k}</title></head>"
                f"<body><h1>Host {j}, page {k}</h1><p>{FILLER}</p><ul>{anchors}</ul>"
                "</body></html>"
            )
            name = "index.html" if k == 0 else f"p{k}.html"
            (host_dir / name).write_text(html)
    os.chmod(root, 0o755)
    for child in root.iterdir():
        os.chmod(child, 0o755)


def page_url(world: World, j: int, k: int, port: int) -> str:
    path = "/" if k == 0 else f"/p{k}.html"
    return f"http://{world.addresses[j]}:{port}{path}"


def expected_pages(world: World, port: int) -> set[str]:
    return {
        page_url(world, j, k, port)
        for j in range(world.params.hosts)
        if world.live(j)
        for k in range(world.params.pages)
    }


def redirect_urls(world: World, port: int) -> set[str]:
    out = set()
    for j, links in world.host_links.items():
        for _page, child, redirect in links:
            if redirect and world.live(j):
                out.add(f"http://{world.addresses[j]}:{port}/r/{world.addresses[child]}/")
    return out


def critical_path_s(world: World, timeout: float) -> tuple[float, float]:
    """The earliest the last page can be fetched, concurrency unlimited, CPU free:
    Dijkstra over pages, each fetch costing its host's latency (a black hole costs
    ``timeout`` for its robots.txt). Returns (the bound, the page path alone)."""
    p = world.params
    best: dict[tuple[int, int], float] = {}
    heap = [(world.latency[j], j, 0) for j in range(p.seeds)]
    heapq.heapify(heap)
    while heap:
        t, j, k = heapq.heappop(heap)
        if (j, k) in best:
            continue
        best[(j, k)] = t
        children = [c for c in (2 * k + 1, 2 * k + 2) if c < p.pages]
        nxt = [(t + world.latency[j], j, c) for c in children]
        for page, child, _redirect in world.host_links[j]:
            if page == k and world.live(child):
                nxt.append((t + world.latency[child], child, 0))
        for item in nxt:
            if (item[1], item[2]) not in best:
                heapq.heappush(heap, item)
    return max(max(best.values()), timeout if world.black_holes else 0.0), max(best.values())


def verify_world(world: World, port: int, fetches: Fetches) -> Verdict:
    """Exact as stated in the module docstring (rule 4)."""
    expected = expected_pages(world, port)
    optional = redirect_urls(world, port)
    bad_hosts = {world.addresses[j] for j in world.dead | world.black_holes}
    counts = Counter(normalize(u) for u in fetches.fetched)
    errors = [e for e in fetches.errors if e.split("//", 1)[-1].split(":", 1)[0] not in bad_hosts]
    duplicates = sorted(u for u, n in counts.items() if n > 1)
    return Verdict(
        fetched=sum(counts.values()),
        distinct=len(counts),
        errors=len(errors),
        missing=sorted(expected - counts.keys()),
        duplicates=duplicates,
        unexpected=sorted(counts.keys() - expected - optional),
        error_samples=errors[:5],
    )


#: The world's http{} lines: each address's delays, then one server for all.
_HTTP = """\
    map $server_addr $page_delay {{
        default 0.1;
{delays}
    }}
    map $server_addr $robots_delay {{
        default 0;
{holes}
    }}
    server {{
{listen}
        server_name _;
        root {root}/$server_addr;
        location = /robots.txt {{
            access_by_lua_block {{
                local d = tonumber(ngx.var.robots_delay)
                if d > 0 then ngx.sleep(d) end
            }}
        }}
        location ~ ^/r/([0-9.]+)/$ {{
            access_by_lua_block {{ ngx.sleep(tonumber(ngx.var.page_delay)) }}
            return 302 http://$1:{port}/;
        }}
        location / {{
            access_by_lua_block {{ ngx.sleep(tonumber(ngx.var.page_delay)) }}
            try_files $uri $uri/index.html =404;
        }}
    }}
"""


@dataclass(frozen=True, slots=True)
class WorldServer:
    world: World
    port: int
    description: str
    master_pid: int

    def seeds(self) -> list[str]:
        return [page_url(self.world, j, 0, self.port) for j in range(self.world.params.seeds)]


@contextlib.contextmanager
def open_world(params: WorldParams) -> Iterator[WorldServer]:
    """Write the world's files and serve them with nginx until the block ends."""
    binary = find_nginx()
    if binary is None or not lua_available():
        raise RuntimeError("needs nginx and its Lua module (libnginx-mod-http-lua)")
    world = plan_world(params)
    with tempfile.TemporaryDirectory(prefix="trio-crawl-discovery-") as tmp:
        os.chmod(tmp, 0o755)
        root = Path(tmp) / "hosts"
        root.mkdir()
        port = free_port(world.addresses[0])
        write_world(world, root, port)
        served = [a for j, a in enumerate(world.addresses) if j not in world.dead]
        http = _HTTP.format(
            delays="\n".join(
                f"        {world.addresses[j]} {3600 if j in world.black_holes else d:.3f};"
                for j, d in world.latency.items()
            ),
            holes="\n".join(f"        {world.addresses[j]} 3600;" for j in world.black_holes),
            listen="\n".join(f"        listen {a}:{port};" for a in served),
            root=root,
            port=port,
        )
        conf = nginx_conf(
            tmp=tmp,
            http=http,
            user=nginx_user(root),
            modules=LUA_MODULES,
            connections=len(served) + 16384,
            nofile=len(served) + 16384 + 64,
        )
        with running_nginx(binary, tmp, conf) as (proc, error_log):
            slow = sum(1 for d in world.latency.values() if d >= 1)
            server = WorldServer(
                world=world,
                port=port,
                description=(
                    f"nginx {_nginx_version(binary)}, {params.hosts} hosts x {params.pages} "
                    f"pages from {params.seeds} seeds (fan-out {params.fanout}), "
                    f"{slow} hosts at 1-2 s and the rest 50-150 ms per page, "
                    f"{len(world.dead)} dead, {len(world.black_holes)} black holes"
                ),
                master_pid=proc.pid,
            )
            probe = _Probe(addresses=[world.addresses[0], world.addresses[1]], port=port)
            wait_hosts_ready(probe, proc, error_log)  # type: ignore[arg-type]
            yield server


@dataclass(frozen=True, slots=True)
class _Probe:
    """What ``loopback_hosts.wait_hosts_ready`` reads of a server: two addresses that answer."""

    addresses: list[str]
    port: int


# --- running it -----------------------------------------------------------------------


def trio_command(server: WorldServer, output: Path, workers: int | None, args: Any) -> list[str]:
    command = [*trio_crawl_command(args.trio_crawl_cmd), *server.seeds(), "--span-hosts"]
    command += ["--per-host-concurrency", str(args.per_host), "--timeout", str(args.timeout)]
    if workers is not None:
        command += ["-w", str(workers)]
    return [*command, "-o", str(output), "-q"]


def scrapy_command(seeds: Path, output: Path, args: Any) -> list[str]:
    return [
        args.scrapy_python,
        str(HERE / "scrapy_broad.py"),
        str(seeds),
        "--output",
        str(output),
        "--concurrency",
        str(args.scrapy_concurrency),
        "--per-host",
        str(args.per_host),
        "--follow-redirects",
        "--timeout",
        str(args.timeout),
    ]


@dataclass(slots=True)
class WorldRun:
    label: str
    round: int
    command: list[str]
    measured: Measured
    verdict: Verdict
    peak_fds: int
    output: Path

    @property
    def ok(self) -> bool:
        return self.measured.exit_code == 0 and self.verdict.exact


def run_one(label: str, rnd: int, server: WorldServer, command: list[str], out: Path) -> WorldRun:
    output = Path(command[command.index("-o") + 1]) if "-o" in command else None
    if output is None:
        output = Path(command[command.index("--output") + 1])
    sampler = FdSampler()
    try:
        measured = run_measured(
            command, timeout=900, log_path=out / f"{label}-r{rnd}.log", on_spawn=sampler.start
        )
    finally:
        sampler.stop()
    reader = read_scrapy if label == "scrapy" else read_trio_crawl
    verdict = verify_world(server.world, server.port, reader(output))
    return WorldRun(label, rnd, command, measured, verdict, sampler.peak, output)


def plot_workers(run: WorldRun, path: Path, title: str) -> None:
    """The worker target over time (the records' ``workers``) and pages/s."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times, workers, done = [], [], []
    for line in run.output.read_text().splitlines():
        record = json.loads(line)
        if "t" not in record:
            continue
        done.append(record["t"])
        if "workers" in record:
            times.append(record["t"])
            workers.append(record["workers"])
    end = max(done) if done else 1.0
    times.append(end)
    workers.append(workers[-1] if workers else 0)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.step(times, workers, where="post", color="tab:blue", label="worker target")
    ax.set_xlabel("seconds since the start")
    ax.set_ylabel("workers", color="tab:blue")
    rate = ax.twinx()
    bins = [0] * (int(end) + 1)
    for t in done:
        bins[int(t)] += 1
    rate.plot([i + 0.5 for i in range(len(bins))], bins, color="tab:orange", alpha=0.7)
    rate.set_ylabel("records per second", color="tab:orange")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--sweep", default="16,32,64,128,256,512", help="fixed -w values")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-scrapy", action="store_true")
    parser.add_argument("--per-host", type=int, default=8, help="per-host concurrency (both)")
    parser.add_argument("--timeout", type=float, default=15, help="request timeout (both)")
    parser.add_argument("--scrapy-concurrency", type=int, default=100)
    parser.add_argument("--scrapy-python", default=sys.executable)
    parser.add_argument("--trio-crawl-cmd", default=None)
    parser.add_argument("--plot", type=Path, default=None, help="PNG of the default run")
    parser.add_argument("--keep-output", type=Path, default=None)
    add_source_start(parser)
    args = parser.parse_args(argv)
    if not args.source_start:
        like_installed([args.trio_crawl_cmd or ""])
    params = WorldParams(hosts=args.hosts, pages=args.pages, seeds=args.seeds)
    sweep = [int(w) for w in args.sweep.split(",") if w.strip()]
    labels: list[tuple[str, int | None]] = [("default", None)]
    labels += [(f"-w {w}", w) for w in sweep]
    if not args.no_scrapy:
        labels.append(("scrapy", None))
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    runs: list[WorldRun] = []
    with contextlib.ExitStack() as stack:
        if args.keep_output:
            args.keep_output.mkdir(parents=True, exist_ok=True)
            out = args.keep_output
        else:
            out = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="disc-out-")))
        server = stack.enter_context(open_world(params))
        world = server.world
        expected = expected_pages(world, server.port)
        path_s, pages_path_s = critical_path_s(world, args.timeout)
        print(f"{params.name}: {len(expected)} pages on live hosts; {server.description}")
        print(
            f"critical path (unlimited concurrency, free CPU): {path_s:.1f} s "
            f"(pages {pages_path_s:.1f} s; a black hole's robots.txt timeout {args.timeout:g} s)"
        )
        seeds = out / "seeds.txt"
        seeds.write_text("".join(f"{u}\n" for u in server.seeds()))
        for rnd in range(1, args.rounds + 1):
            for label, workers in alternating(labels, rnd):
                slug = label.replace(" ", "").replace("-", "")
                output = out / f"{slug}-r{rnd}.jsonl"
                if label == "scrapy":
                    command = scrapy_command(seeds, output, args)
                else:
                    command = trio_command(server, output, workers, args)
                run = run_one(slug, rnd, server, command, out)
                runs.append(run)
                m = run.measured
                print(
                    f"  {label:<8} r{rnd}: {'OK' if run.ok else 'FAILED'} "
                    f"{len(expected) / m.wall_s:6.0f} pages/s, {m.wall_s:6.1f} s wall, "
                    f"{m.cpu_s:5.1f} CPU s, {m.peak_rss_mb:4.0f} MB, {run.peak_fds} fds, "
                    f"load {os.getloadavg()[0]:.2f}: {shlex.join(command)}",
                    flush=True,
                )
                if not run.ok:
                    v = run.verdict
                    print(
                        f"    exit {m.exit_code}, missing {len(v.missing)} {v.missing[:3]}, "
                        f"twice {len(v.duplicates)}, unexpected {len(v.unexpected)} "
                        f"{v.unexpected[:3]}, errors {v.errors} {v.error_samples[:2]}"
                    )
        best: dict[str, float] = {}
        for run in runs:
            best[run.label] = min(best.get(run.label, math.inf), run.measured.wall_s)
        fixed = {k: v for k, v in best.items() if k.startswith("w")}
        best_fixed = min(fixed.values()) if fixed else math.nan
        print()
        print("label     best wall s   pages/s   vs best fixed -w   vs critical path")
        for label, wall in best.items():
            print(
                f"{label:<9} {wall:11.1f} {len(expected) / wall:9.0f} "
                f"{wall / best_fixed:17.2f}x {wall / path_s:17.2f}x"
            )
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.plot:
            default = min(
                (r for r in runs if r.label == "default"), key=lambda r: r.measured.wall_s
            )
            plot_workers(default, args.plot, f"trio-crawl default on {params.name}")
            print(f"plot: {args.plot}")
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
