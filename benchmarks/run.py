"""Side-by-side benchmark: trio-crawl against Scrapy on the same generated static site.

Theory of operation:

1. Generate the site (generate_site.py; cached under the temp dir by its parameters) and
   read its list of expected URLs.
2. Serve it from 127.0.0.1 on a free port: nginx if installed, else a Python fallback
   (servers.py). The same server serves every run.
3. Run each crawler as a child process in its own session, exactly as a user would
   (trio-crawl through its console script; Scrapy through scrapy_crawl.py, a CrawlSpider
   with the same concurrency). The child is reaped with ``os.wait4``, which returns that
   child's own resource usage: peak RSS (``ru_maxrss``) and CPU time. Wall time runs from
   just before the spawn to the reap, so interpreter start-up and imports count for both.
   A run that exceeds ``--timeout`` has its process group killed and fails.
4. Check exactness: from each tool's JSON Lines output, the URLs it fetched (got an HTTP
   answer for) are mapped to path plus query (fragment dropped; another host is an
   "unexpected" fetch). A run is OK only if it exited 0, every expected URL was fetched
   exactly once, nothing else was fetched, and no record is an error. A fast run that
   misses or repeats a page is FAILED.
5. Print one table, the trio-crawl/Scrapy throughput ratio, what ``--warc`` costs
   (``trio-crawl+warc`` against ``trio-crawl``) and the Redis ratios; exit 1 if any run
   failed.

Usage: python benchmarks/run.py [--pages N] [--workers W] [--rounds R] [--tools a,b] ...
(``--help`` lists them all). See README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis_bench
from bytecode import add_source_start, like_installed, trio_crawl_command
from exactness import Fetches, Verdict, read_scrapy, read_trio_crawl, verify
from generate_site import SiteParams, ensure_site, read_expected
from measure import (
    Measured,
    alternating,
    machine_busy_s,
    machine_info,
    machine_line,
    output_dir,
    run_measured,
    text_table,
)
from servers import (
    BenchRedis,
    Server,
    open_redis,
    open_server,
    redis_available,
    warm_page_cache,
)

#: ``trio-crawl+warc`` is trio-crawl with ``--warc`` (issue #11: the archive may cost at
#: most 15% of pages/s), measured in the same run as plain trio-crawl.
TOOLS = ("trio-crawl", "trio-crawl+warc", "scrapy")
#: One crawl in Redis over N worker processes (redis_bench.py): ``redis:N``.
REDIS_TOOLS = ("redis:1", "redis:2", "redis:4")
HERE = Path(__file__).resolve().parent


# --- the crawlers ---------------------------------------------------------------------


@dataclass(slots=True)
class Run:
    """One crawl of one tool: command, measurement and verdict."""

    tool: str
    round: int
    command: list[str]
    measured: Measured
    verdict: Verdict
    log_tail: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.measured.exit_code == 0 and self.verdict.exact

    @property
    def pages_per_s(self) -> float:
        return self.verdict.fetched / self.measured.wall_s if self.measured.wall_s else 0.0


def crawl(tool: str, rnd: int, server: Server, expected: list[str], args: Any, out: Path) -> Run:
    """Run one tool once against ``server`` and check its output."""
    output = out / f"{tool}-r{rnd}.jsonl"
    log = out / f"{tool}-r{rnd}.log"
    if tool in ("trio-crawl", "trio-crawl+warc"):
        command = [
            *trio_crawl_command(args.trio_crawl_cmd),
            server.base_url,
            *(["-w", str(args.workers)] if args.workers else []),
            "-o",
            str(output),
            "-q",
            *shlex.split(args.trio_crawl_args),
        ]
        if tool == "trio-crawl+warc":
            command += ["--warc", str(out / f"{tool}-r{rnd}.warc.gz")]
        reader = read_trio_crawl
    elif tool == "scrapy":
        command = [
            args.scrapy_python,
            str(HERE / "scrapy_crawl.py"),
            server.base_url,
            "--workers",
            str(args.workers or 16),
            "--output",
            str(output),
            "--stats",
            str(out / f"{tool}-r{rnd}.stats.json"),
        ]
        reader = read_scrapy
    elif redis_bench.parse_tool(tool) is not None:
        return crawl_redis(tool, rnd, server, expected, args, out)
    else:
        raise ValueError(f"unknown tool {tool!r}")
    measured = run_measured(command, timeout=args.timeout, log_path=log)
    verdict = verify(reader(output), expected, server.base_url)
    run = Run(tool, rnd, command, measured, verdict)
    if not run.ok:
        run.log_tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    return run


def crawl_redis(
    tool: str, rnd: int, server: Server, expected: list[str], args: Any, out: Path
) -> Run:
    """``redis:N``: one crawl in Redis over N worker processes (redis_bench.py)."""
    processes = redis_bench.parse_tool(tool)
    assert processes is not None
    name = tool.replace(":", "")
    output = out / f"{name}-r{rnd}.jsonl"
    log = out / f"{name}-r{rnd}.log"
    base = [
        *trio_crawl_command(args.trio_crawl_cmd),
        server.base_url,
        *(["-w", str(args.workers)] if args.workers else []),
        "-q",
        *shlex.split(args.trio_crawl_args),
    ]
    redis = args.redis_server
    command = redis_bench.command(base, redis, processes, output)
    cpu_before = redis.cpu_seconds()
    measured = run_measured(command, timeout=args.timeout, log_path=log)
    redis_cpu = redis.cpu_seconds() - cpu_before
    fetched: list[str] = []
    errors: list[str] = []
    for part in redis_bench.outputs(output, processes):
        fetches = read_trio_crawl(part)
        fetched += fetches.fetched
        errors += fetches.errors
    verdict = verify(Fetches(fetched, errors), expected, server.base_url)
    run = Run(tool, rnd, command, measured, verdict)
    run.notes.append(f"redis-server CPU {redis_cpu:.1f} s")
    if not run.ok:
        run.log_tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    return run


# --- reporting ------------------------------------------------------------------------


def tool_versions(args: Any) -> dict[str, str]:
    versions = {}
    probe = "import importlib.metadata as m; print(m.version('{}'))"
    for name, python in (("trio-crawl", sys.executable), ("scrapy", args.scrapy_python)):
        try:
            out = subprocess.run(
                [python, "-c", probe.format(name)], capture_output=True, text=True, timeout=30
            )
            versions[name] = out.stdout.strip() or "not installed"
        except (OSError, subprocess.TimeoutExpired):
            versions[name] = "?"
    return versions


def format_table(runs: list[Run], expected_count: int) -> str:
    """The result table, one row per run, plus the median row per tool when rounds > 1."""
    header = [
        "tool",
        "round",
        "fetched",
        "errors",
        "wall s",
        "pages/s",
        "CPU s",
        "peak RSS MB",
        "result",
    ]
    rows = []
    for run in runs:
        m, v = run.measured, run.verdict
        result = "OK" if run.ok else "FAILED"
        if not run.ok:
            why = []
            if m.timed_out:
                why.append("timeout")
            elif m.exit_code != 0:
                why.append(f"exit {m.exit_code}")
            if v.missing:
                why.append(f"{len(v.missing)} missing")
            if v.duplicates:
                why.append(f"{len(v.duplicates)} fetched twice")
            if v.unexpected:
                why.append(f"{len(v.unexpected)} unexpected")
            if v.errors:
                why.append(f"{v.errors} errors")
            result += f" ({', '.join(why)})"
        rows.append(
            [
                run.tool,
                str(run.round),
                str(v.fetched),
                str(v.errors),
                f"{m.wall_s:.2f}",
                f"{run.pages_per_s:.0f}",
                f"{m.cpu_s:.1f}",
                f"{m.peak_rss_mb:.0f}",
                result,
            ]
        )
    note = f"(expected URLs: {expected_count}; pages/s = fetched / wall s)"
    return text_table(header, rows) + "\n" + note


def summary(runs: list[Run]) -> dict[str, dict[str, float | bool]]:
    """Per tool: median pages/s and wall, max peak RSS, all rounds OK."""
    out: dict[str, dict[str, float | bool]] = {}
    for tool in dict.fromkeys(r.tool for r in runs):
        mine = [r for r in runs if r.tool == tool]
        out[tool] = {
            "pages_per_s": statistics.median(r.pages_per_s for r in mine),
            "wall_s": statistics.median(r.measured.wall_s for r in mine),
            "peak_rss_mb": max(r.measured.peak_rss_mb for r in mine),
            "ok": all(r.ok for r in mine),
        }
    return out


# --- main -----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark trio-crawl against Scrapy on a generated static site.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--pages", type=int, default=20_000, help="HTML pages in the site")
    parser.add_argument(
        "--workers",
        type=int,
        default=16,
        help="concurrency of both tools; 0: trio-crawl sizes its pool itself (Scrapy 16)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of each tool")
    parser.add_argument(
        "--tools",
        default=",".join((*TOOLS, *REDIS_TOOLS)),
        help="comma-separated tools; redis:N is one crawl in Redis over N processes "
        "(skipped, with a note, where redis-server or coredis is missing)",
    )
    parser.add_argument("--seed", type=int, default=1, help="site generator seed")
    parser.add_argument(
        "--server", choices=("auto", "nginx", "python"), default="auto", help="static server"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds per crawl")
    parser.add_argument(
        "--trio-crawl-args", default="", help='extra trio-crawl arguments, e.g. "--fetcher curl"'
    )
    parser.add_argument(
        "--trio-crawl-cmd", default=None, help="command that starts trio-crawl (shell words)"
    )
    parser.add_argument(
        "--scrapy-python", default=sys.executable, help="interpreter that has Scrapy"
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="generated sites cache")
    parser.add_argument("--keep-output", type=Path, default=None, help="keep outputs here")
    parser.add_argument("--json", type=Path, default=None, help="also write results as JSON")
    add_source_start(parser)
    args = parser.parse_args(argv)
    if not args.source_start:
        like_installed([args.trio_crawl_cmd or ""])
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(t for t in set(tools) - set(TOOLS) if redis_bench.parse_tool(t) is None)
    if unknown or not tools:
        parser.error(f"--tools: unknown {unknown}; choose from {', '.join(TOOLS)}")
    args.tools = tools
    if args.rounds < 1 or args.workers < 0:
        parser.error("--rounds must be >= 1 and --workers >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    versions = tool_versions(args)
    print(machine_line(machine))
    print(f"tools:   trio-crawl {versions['trio-crawl']}, Scrapy {versions['scrapy']}")

    params = SiteParams(pages=args.pages, seed=args.seed)
    t0 = time.perf_counter()
    site_dir, generated = ensure_site(params, args.cache_dir)
    manifest = json.loads((site_dir / "manifest.json").read_text())
    expected = read_expected(site_dir)
    print(
        f"site:    {site_dir} ({'generated in' if generated else 'cached, checked in'} "
        f"{time.perf_counter() - t0:.1f} s): {manifest['pages']} pages of ~{params.page_bytes} B,"
        f" {params.links} links each, {len(expected)} expected URLs "
        f"({manifest['query_variants']} query variants), max depth {manifest['max_depth']}"
    )
    warm_page_cache(site_dir)

    out_ctx = output_dir(args.keep_output, "trio-crawl-bench-out-")
    runs: list[Run] = []
    redis_ctx: contextlib.AbstractContextManager[BenchRedis | None]
    redis_ctx = contextlib.nullcontext()
    if any(redis_bench.parse_tool(t) is not None for t in args.tools):
        why = redis_available()
        if why is None:
            redis_ctx = open_redis()
        else:
            print(f"note:    no redis:N rows: {why}")
            args.tools = [t for t in args.tools if redis_bench.parse_tool(t) is None]
    with (
        out_ctx as out_name,
        open_server(site_dir, args.server) as server,
        redis_ctx as args.redis_server,
    ):
        out = Path(out_name)
        print(f"server:  {server.description} at {server.base_url}")
        if server.kind != "nginx":
            print("WARNING: fallback Python server: slower than nginx; figures understate both")
        for rnd in range(1, args.rounds + 1):
            for tool in alternating(args.tools, rnd):
                print(f"  {tool} (round {rnd}) ...", end=" ", flush=True)
                busy_before = machine_busy_s()
                run = crawl(tool, rnd, server, expected, args, out)
                run.notes.append(
                    f"other programs (nginx included) used "
                    f"{machine_busy_s() - busy_before - run.measured.cpu_s:.1f} CPU s"
                )
                runs.append(run)
                print(
                    f"{'OK' if run.ok else 'FAILED'} in {run.measured.wall_s:.1f} s: "
                    f"{shlex.join(run.command)}"
                    + (f" ({'; '.join(run.notes)})" if run.notes else ""),
                    flush=True,
                )
                if not run.ok:
                    print_failure(run)

    print()
    print(format_table(runs, len(expected)))
    per_tool = summary(runs)
    if "trio-crawl" in per_tool and "scrapy" in per_tool:
        ratio = float(per_tool["trio-crawl"]["pages_per_s"]) / max(
            float(per_tool["scrapy"]["pages_per_s"]), 1e-9
        )
        medians = " (medians)" if args.rounds > 1 else ""
        caveat = "" if all(r.ok for r in runs) else " (not meaningful: a run FAILED)"
        print(f"trio-crawl / Scrapy pages/s{medians}: {ratio:.2f}x{caveat}")
    if "trio-crawl" in per_tool and "trio-crawl+warc" in per_tool:
        plain = max(float(per_tool["trio-crawl"]["pages_per_s"]), 1e-9)
        cost = 1 - float(per_tool["trio-crawl+warc"]["pages_per_s"]) / plain
        medians = " (medians)" if args.rounds > 1 else ""
        print(f"--warc cost{medians}: {cost:.1%} of trio-crawl's pages/s (target: under 15%)")
    redis_rows = [t for t in per_tool if redis_bench.parse_tool(t) is not None]
    if "redis:1" in per_tool:
        one = max(float(per_tool["redis:1"]["pages_per_s"]), 1e-9)
        for tool in redis_rows:
            if tool != "redis:1":
                ratio = float(per_tool[tool]["pages_per_s"]) / one
                exact = "exact" if per_tool[tool]["ok"] else "NOT exact"
                print(f"{tool} / redis:1 pages/s: {ratio:.2f}x ({exact})")
    if "trio-crawl" in per_tool:
        alone = max(float(per_tool["trio-crawl"]["pages_per_s"]), 1e-9)
        for tool in redis_rows:
            ratio = float(per_tool[tool]["pages_per_s"]) / alone
            print(f"{tool} / trio-crawl (one process, in memory) pages/s: {ratio:.2f}x")
    if args.json:
        payload = {
            "machine": machine,
            "versions": versions,
            "server": asdict(server),
            "site": manifest,
            "args": {k: str(v) for k, v in vars(args).items()},
            "runs": [
                {
                    "tool": r.tool,
                    "round": r.round,
                    "command": r.command,
                    "ok": r.ok,
                    "pages_per_s": r.pages_per_s,
                    **asdict(r.measured),
                    **{k: v for k, v in asdict(r.verdict).items() if not isinstance(v, list)},
                    "missing": len(r.verdict.missing),
                    "duplicates": len(r.verdict.duplicates),
                    "unexpected": len(r.verdict.unexpected),
                }
                for r in runs
            ],
            "summary": per_tool,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if all(r.ok for r in runs) else 1


def print_failure(run: Run) -> None:
    """What went wrong in a run that was not exact (broad.py's runs too)."""
    v = run.verdict
    for label, items in (
        ("missing", v.missing),
        ("fetched twice", v.duplicates),
        ("unexpected", v.unexpected),
        ("errors", v.error_samples),
    ):
        if items:
            print(f"    {label} ({len(items)}): {', '.join(items[:5])}")
    if run.log_tail:
        print("    last lines of its output:")
        print("\n".join(f"      {line}" for line in run.log_tail.splitlines()))


if __name__ == "__main__":
    sys.exit(main())
