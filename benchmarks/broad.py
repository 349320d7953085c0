"""Broad crawls: many hosts with network latency, trio-crawl against Scrapy (issue #19).

Theory of operation:

1. Hosts are loopback addresses, ``127.77.A.B`` (``host_addresses``): Linux routes all of
   127.0.0.0/8 to ``lo``, so 1,000 "hosts" need no DNS and no network. Each host serves
   the same small generated site (generate_site.py, ``P`` pages), whose links stay on
   the host; one seed per host, ``http://127.77.A.B:PORT/``, in a ``--seeds`` file.
2. One nginx serves them all (``open_broad_nginx``, loopback_hosts.py): one ``listen
   ADDR:PORT`` line per host, one worker, keep-alive, and the latency added to every
   page by ``ngx.sleep``, a timer in nginx's event loop, so thousands of responses
   wait at once while the worker stays idle. robots.txt is answered at once, so the
   latency applies to pages only and the limit below counts pages only.
3. A configuration is ``HOSTSxLATENCY_MSxPAGES`` (``--configs``); each runs every tool
   ``--rounds`` times (order alternating), measured as in run.py (the child's own CPU
   time and peak RSS from ``wait4``, wall time from spawn to exit) plus its peak number
   of open descriptors (sampled from ``/proc/PID/fd`` every 20 ms) and nginx's CPU time.
4. Exactness as in run.py, across hosts: every page of every host fetched exactly once,
   nothing else, no error record.
5. The limit of a configuration is ``min(hosts x per-host concurrency / latency, the
   tool's zero-latency rate)``: no crawler can have more requests in flight than the
   hosts allow, and none can go faster than its own CPU-bound rate, measured here as
   the median of the same tool on the same hosts and pages at 0 ms. The report gives
   each median as a fraction of that limit (issue #19's target: at least 80% at
   1,000 hosts x 100 ms).

Usage: python benchmarks/broad.py [--configs 1000x100x20,...] [--rounds 2] ...
(``--help`` lists them all). See README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shlex
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bytecode import add_source_start, like_installed, trio_crawl_command
from exactness import read_scrapy, read_trio_crawl, verify_hosts
from generate_site import SiteParams, ensure_site, read_expected
from loopback_hosts import BroadServer, lua_available, open_broad_nginx
from measure import (
    FdSampler,
    alternating,
    machine_busy_s,
    machine_info,
    machine_line,
    output_dir,
    run_measured,
    text_table,
)
from run import Run, print_failure, tool_versions
from servers import (
    find_nginx,
    warm_page_cache,
)

HERE = Path(__file__).resolve().parent
TOOLS = ("trio-crawl", "scrapy")
DEFAULT_CONFIGS = "1000x100x20,1000x0x20,100x100x50,100x0x50"


@dataclass(frozen=True, slots=True)
class Config:
    """One workload: ``hosts`` hosts answering each page after ``latency_ms``."""

    hosts: int
    latency_ms: int
    pages: int  # per host

    @property
    def name(self) -> str:
        return f"{self.hosts}x{self.latency_ms}ms"

    @property
    def zero_latency(self) -> Config:
        return Config(self.hosts, 0, self.pages)


def parse_configs(text: str) -> list[Config]:
    """``"1000x100x20,100x0x100"`` -> configs; a clear ValueError otherwise."""
    configs = []
    for part in text.split(","):
        fields = part.strip().lower().split("x")
        if len(fields) != 3 or not all(f.isdigit() for f in fields):
            raise ValueError(f"--configs: {part!r} is not HOSTSxLATENCY_MSxPAGES")
        hosts, latency, pages = map(int, fields)
        if not 1 <= hosts <= 250 * 250 or pages < 10:
            raise ValueError(f"--configs: {part!r}: 1-62500 hosts, at least 10 pages")
        configs.append(Config(hosts, latency, pages))
    return configs


def limit_pages_per_s(config: Config, per_host: int | None, cpu_rate: float | None) -> float:
    """min(hosts x per-host concurrency / latency, the zero-latency rate); inf if unknown."""
    latency_bound = math.inf
    if config.latency_ms > 0 and per_host:
        latency_bound = config.hosts * per_host / (config.latency_ms / 1000)
    return min(latency_bound, cpu_rate if cpu_rate else math.inf)


# --- one run --------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class BroadRun(Run):
    """One crawl of the broad benchmark: a ``Run`` with its configuration and
    what was watched beside it."""

    config: Config
    peak_fds: int
    server_cpu_s: float
    others_cpu_s: float


def tool_command(tool: str, seeds: Path, output: Path, args: Any, out: Path) -> list[str]:
    if tool == "trio-crawl":
        command = [*trio_crawl_command(args.trio_crawl_cmd), "--seeds", str(seeds)]
        if args.workers:
            command += ["-w", str(args.workers)]
        if args.per_host:
            command += ["--per-host-concurrency", str(args.per_host)]
        return [*command, "-o", str(output), "-q", *shlex.split(args.trio_crawl_args)]
    if tool == "scrapy":
        return [
            args.scrapy_python,
            str(HERE / "scrapy_broad.py"),
            str(seeds),
            "--output",
            str(output),
            "--concurrency",
            str(args.scrapy_concurrency),
            "--per-host",
            str(args.per_host or 8),
            "--stats",
            str(output.with_suffix(".stats.json")),
        ]
    raise ValueError(f"unknown tool {tool!r}")


def crawl(
    config: Config, tool: str, rnd: int, server: BroadServer, expected: set[str], args: Any
) -> BroadRun:
    out: Path = args.out
    stem = f"{config.name}-{tool}-r{rnd}"
    seeds = out / f"seeds-{config.name}.txt"
    output = out / f"{stem}.jsonl"
    command = tool_command(tool, seeds, output, args, out)
    sampler = FdSampler()
    busy, nginx_cpu = machine_busy_s(), server.cpu_seconds()
    try:
        measured = run_measured(
            command, timeout=args.timeout, log_path=out / f"{stem}.log", on_spawn=sampler.start
        )
    finally:
        sampler.stop()
    server_cpu = server.cpu_seconds() - nginx_cpu
    others = machine_busy_s() - busy - measured.cpu_s - server_cpu
    reader = read_trio_crawl if tool == "trio-crawl" else read_scrapy
    run = BroadRun(
        config=config,
        tool=tool,
        round=rnd,
        command=command,
        measured=measured,
        verdict=verify_hosts(reader(output), expected),
        peak_fds=sampler.peak,
        server_cpu_s=server_cpu,
        others_cpu_s=others,
    )
    if not run.ok:
        lines = (out / f"{stem}.log").read_text(errors="replace").splitlines()
        run.log_tail = "\n".join(lines[-15:])
    return run


# --- reporting ------------------------------------------------------------------------


def result_text(run: BroadRun) -> str:
    if run.ok:
        return "OK"
    m, v = run.measured, run.verdict
    why = ["timeout"] if m.timed_out else [f"exit {m.exit_code}"] if m.exit_code else []
    for count, label in (
        (len(v.missing), "missing"),
        (len(v.duplicates), "fetched twice"),
        (len(v.unexpected), "unexpected"),
        (v.errors, "errors"),
    ):
        if count:
            why.append(f"{count} {label}")
    return f"FAILED ({', '.join(why)})"


def runs_table(runs: list[BroadRun]) -> str:
    header = ["config", "tool", "round", "fetched", "wall s", "pages/s", "CPU s"]
    header += ["peak RSS MB", "peak fds", "nginx CPU s", "others CPU s", "result"]
    rows = [
        [
            r.config.name,
            r.tool,
            str(r.round),
            str(r.verdict.fetched),
            f"{r.measured.wall_s:.2f}",
            f"{r.pages_per_s:.0f}",
            f"{r.measured.cpu_s:.1f}",
            f"{r.measured.peak_rss_mb:.0f}",
            str(r.peak_fds),
            f"{r.server_cpu_s:.1f}",
            f"{r.others_cpu_s:.1f}",
            result_text(r),
        ]
        for r in runs
    ]
    return text_table(header, rows, left=(0, 1, -1))


def summarize(runs: list[BroadRun], per_host: dict[str, int | None]) -> list[dict[str, Any]]:
    """Per config and tool: median pages/s, the limit, the fraction, all rounds OK."""
    medians: dict[tuple[Config, str], float] = {}
    for key in dict.fromkeys((r.config, r.tool) for r in runs):
        medians[key] = statistics.median(r.pages_per_s for r in runs if (r.config, r.tool) == key)
    rows = []
    for (config, tool), rate in medians.items():
        mine = [r for r in runs if (r.config, r.tool) == (config, tool)]
        cpu_rate = medians.get((config.zero_latency, tool))
        limit = (
            limit_pages_per_s(config, per_host[tool], cpu_rate) if config.latency_ms else math.inf
        )
        rows.append(
            {
                "config": config.name,
                "hosts": config.hosts,
                "latency_ms": config.latency_ms,
                "pages_per_host": config.pages,
                "tool": tool,
                "pages_per_s": rate,
                "zero_latency_pages_per_s": cpu_rate,
                "limit_pages_per_s": None if math.isinf(limit) else limit,
                "fraction_of_limit": None if math.isinf(limit) else rate / limit,
                "peak_fds": max(r.peak_fds for r in mine),
                "peak_rss_mb": max(r.measured.peak_rss_mb for r in mine),
                "ok": all(r.ok for r in mine),
            }
        )
    return rows


def summary_table(rows: list[dict[str, Any]]) -> str:
    header = ["config", "tool", "pages/s", "limit", "of limit", "peak fds", "peak RSS MB"]
    header.append("exact")
    body = []
    for s in rows:
        limit, fraction = s["limit_pages_per_s"], s["fraction_of_limit"]
        body.append(
            [
                s["config"],
                s["tool"],
                f"{s['pages_per_s']:.0f}",
                "-" if limit is None else f"{limit:.0f}",
                "-" if fraction is None else f"{fraction:.0%}",
                str(s["peak_fds"]),
                f"{s['peak_rss_mb']:.0f}",
                "yes" if s["ok"] else "NO",
            ]
        )
    return text_table(header, body, left=(0, 1, -1))


# --- main -----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Broad crawls: trio-crawl against Scrapy over many latent loopback hosts.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--configs",
        default=DEFAULT_CONFIGS,
        help="comma-separated HOSTSxLATENCY_MSxPAGES (pages per host); the limit of a "
        "latent config needs the same HOSTS and PAGES at 0 ms in the list",
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs of each tool and config")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated tools")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="trio-crawl's -w (default: not passed, so trio-crawl's own default)",
    )
    parser.add_argument(
        "--per-host",
        type=int,
        default=8,
        help="per-host concurrency of both tools (Scrapy's default 8); 0: each tool's "
        "default (trio-crawl: unlimited)",
    )
    parser.add_argument(
        "--scrapy-concurrency", type=int, default=100, help="Scrapy's CONCURRENT_REQUESTS"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds per crawl")
    parser.add_argument("--trio-crawl-args", default="", help="extra trio-crawl arguments")
    parser.add_argument("--trio-crawl-cmd", default=None, help="command that starts trio-crawl")
    parser.add_argument(
        "--scrapy-python", default=sys.executable, help="interpreter that has Scrapy"
    )
    parser.add_argument("--seed", type=int, default=1, help="site generator seed")
    parser.add_argument("--cache-dir", type=Path, default=None, help="generated sites cache")
    parser.add_argument("--keep-output", type=Path, default=None, help="keep outputs here")
    parser.add_argument("--json", type=Path, default=None, help="also write results as JSON")
    add_source_start(parser)
    args = parser.parse_args(argv)
    if not args.source_start:
        like_installed([args.trio_crawl_cmd or ""])
    try:
        args.configs = parse_configs(args.configs)
    except ValueError as exc:
        parser.error(str(exc))
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if not args.tools or set(args.tools) - set(TOOLS):
        parser.error(f"--tools: choose from {', '.join(TOOLS)}")
    if args.rounds < 1 or (args.workers is not None and args.workers < 1) or args.per_host < 0:
        parser.error("--rounds and --workers must be >= 1, --per-host >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    versions = tool_versions(args)
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    print(f"{machine_line(machine)}, ulimit -n {nofile}")
    print(f"tools:   trio-crawl {versions['trio-crawl']}, Scrapy {versions['scrapy']}")
    if find_nginx() is None or (any(c.latency_ms for c in args.configs) and not lua_available()):
        print(
            "SKIPPED: the broad-crawl benchmark needs nginx and its Lua module "
            "(apt-get install -y nginx libnginx-mod-http-lua)"
        )
        return 0
    per_host = {
        "trio-crawl": args.per_host or None,
        "scrapy": args.per_host or 8,
    }
    print(
        f"per-host concurrency: {args.per_host or 'each tool default'}; trio-crawl -w "
        f"{args.workers or '(its default)'}; Scrapy CONCURRENT_REQUESTS "
        f"{args.scrapy_concurrency}"
    )
    sites: dict[int, tuple[Path, list[str]]] = {}
    for pages in sorted({c.pages for c in args.configs}):
        site_dir, _ = ensure_site(SiteParams(pages=pages, seed=args.seed), args.cache_dir)
        sites[pages] = (site_dir, read_expected(site_dir))
        warm_page_cache(site_dir)

    out_ctx = output_dir(args.keep_output, "trio-crawl-broad-out-")
    runs: list[BroadRun] = []
    with out_ctx as out_name:
        args.out = Path(out_name)
        for config in args.configs:
            site_dir, paths = sites[config.pages]
            with open_broad_nginx(site_dir, config.hosts, config.latency_ms) as server:
                expected = server.urls(paths)
                print(f"{config.name}: {len(expected)} pages; server: {server.description}")
                seeds = args.out / f"seeds-{config.name}.txt"
                seeds.write_text("".join(f"http://{a}:{server.port}/\n" for a in server.addresses))
                for rnd in range(1, args.rounds + 1):
                    for tool in alternating(args.tools, rnd):
                        run = crawl(config, tool, rnd, server, expected, args)
                        runs.append(run)
                        print(
                            f"  {tool} round {rnd}: {result_text(run)}, "
                            f"{run.pages_per_s:.0f} pages/s in {run.measured.wall_s:.1f} s, "
                            f"peak fds {run.peak_fds}, nginx CPU {run.server_cpu_s:.1f} s, "
                            f"load {os.getloadavg()[0]:.2f}: {shlex.join(run.command)}",
                            flush=True,
                        )
                        if not run.ok:
                            print_failure(run)

    print()
    print(runs_table(runs))
    print()
    rows = summarize(runs, per_host)
    print(summary_table(rows))
    medians = "medians of " if args.rounds > 1 else ""
    print(
        f"({medians}{args.rounds} round(s); limit = min(hosts x per-host concurrency / "
        "latency, the same tool's 0 ms rate on the same hosts and pages))"
    )
    by_key = {(s["config"], s["tool"]): s for s in rows}
    for s in rows:
        other = by_key.get((s["config"], "scrapy"))
        if s["tool"] == "trio-crawl" and other and other["pages_per_s"]:
            ratio = s["pages_per_s"] / other["pages_per_s"]
            print(f"{s['config']}: trio-crawl / Scrapy pages/s: {ratio:.2f}x")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        payload = {
            "machine": machine,
            "versions": versions,
            "args": {k: str(v) for k, v in vars(args).items()},
            "runs": [
                {
                    "config": r.config.name,
                    "tool": r.tool,
                    "round": r.round,
                    "command": r.command,
                    "ok": r.ok,
                    "pages_per_s": r.pages_per_s,
                    "peak_fds": r.peak_fds,
                    "nginx_cpu_s": r.server_cpu_s,
                    "others_cpu_s": r.others_cpu_s,
                    **asdict(r.measured),
                }
                for r in runs
            ],
            "summary": rows,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
