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
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis_bench
from bytecode import add_source_start, like_installed
from generate_site import SiteParams, ensure_site, read_expected
from servers import Server, open_server

#: ``trio-crawl+warc`` is trio-crawl with ``--warc`` (issue #11: the archive may cost at
#: most 15% of pages/s), measured in the same run as plain trio-crawl.
TOOLS = ("trio-crawl", "trio-crawl+warc", "scrapy")
#: One crawl in Redis over N worker processes (redis_bench.py): ``redis:N``.
REDIS_TOOLS = ("redis:1", "redis:2", "redis:4")
HERE = Path(__file__).resolve().parent


# --- measuring one child process -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Measured:
    """How one child process ran: its own rusage, not the runner's nor a sibling's."""

    exit_code: int | None  # None when it was killed for the timeout
    wall_s: float
    cpu_s: float  # user + system
    peak_rss_mb: float
    timed_out: bool


def run_measured(
    command: Sequence[str],
    *,
    timeout: float,
    log_path: Path,
    on_spawn: Callable[[int], None] | None = None,
) -> Measured:
    """Run ``command`` with stdout/stderr to ``log_path``; measure it; kill it on timeout.

    ``on_spawn(pid)`` is called once the child exists (broad.py starts a sampler of its
    descriptors there).

    A thread blocks in ``os.wait4`` so the wall time stops at the exit, not at a polling
    tick. On timeout the whole process group gets SIGTERM, then SIGKILL 5 s later (the
    leader is not reaped yet, so the group id is still the child's).
    """
    reaped: dict[str, Any] = {}
    with log_path.open("wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if on_spawn is not None:
            on_spawn(proc.pid)

        done = threading.Event()

        def reap() -> None:
            _pid, status, usage = os.wait4(proc.pid, 0)
            reaped["wall"] = time.perf_counter() - start
            reaped["status"] = status
            reaped["usage"] = usage
            done.set()

        # An Event, not Thread.join: an interrupted join can mark a running thread as
        # stopped (CPython 3.11), and then Ctrl-C would leave the child running.
        threading.Thread(target=reap, daemon=True).start()
        try:
            timed_out = not done.wait(timeout)
        except BaseException:  # Ctrl-C: the child is in its own session, stop it too
            if not done.is_set():
                _killpg(proc.pid, signal.SIGKILL)
            raise
        if timed_out:
            _killpg(proc.pid, signal.SIGTERM)
            if not done.wait(5):
                _killpg(proc.pid, signal.SIGKILL)
                done.wait()
        # No group kill after a normal exit: once the leader is reaped its group id could
        # belong to someone else. Neither crawler starts child processes.
    exit_code = os.waitstatus_to_exitcode(reaped["status"])
    proc.returncode = exit_code  # reaped by hand: tell Popen so it never waits again
    usage: resource.struct_rusage = reaped["usage"]
    return Measured(
        exit_code=None if timed_out else exit_code,
        wall_s=reaped["wall"],
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # Linux: KiB
        timed_out=timed_out,
    )


def _killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# --- exactness ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fetches:
    """What a tool's output says it did: URLs with an HTTP answer, and error records."""

    fetched: list[str]  # as written by the tool, one per HTTP answer
    errors: list[str]  # one short description per error record


@dataclass(frozen=True, slots=True)
class Verdict:
    """The exact-once check of one run against the expected URL set."""

    fetched: int
    distinct: int
    errors: int
    missing: list[str]
    duplicates: list[str]
    unexpected: list[str]
    error_samples: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return not (self.missing or self.duplicates or self.unexpected or self.errors)


def verify(fetches: Fetches, expected: Iterable[str], base_url: str) -> Verdict:
    """Compare fetched URLs (mapped to path plus query) with ``expected``.

    A fetched URL on another scheme, host or port is unexpected whatever its path.
    """
    base = urlsplit(base_url)
    targets: list[str] = []
    for url in fetches.fetched:
        parts = urlsplit(urldefrag(url)[0])
        if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
            targets.append(f"<other host> {url}")
            continue
        targets.append((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    counts = Counter(targets)
    expected_set = set(expected)
    return Verdict(
        fetched=len(targets),
        distinct=len(counts),
        errors=len(fetches.errors),
        missing=sorted(expected_set - counts.keys()),
        duplicates=sorted(u for u, n in counts.items() if n > 1),
        unexpected=sorted(counts.keys() - expected_set),
        error_samples=fetches.errors[:5],
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    with path.open() as fh:
        for line in fh:
            if line.strip():
                records.append(json.loads(line))
    return records


def read_trio_crawl(path: Path) -> Fetches:
    """trio-crawl's records: a record with a ``status`` is a fetch; ``error`` or a status
    of 400 or more is an error. robots.txt is never a record."""
    fetched, errors = [], []
    for record in _read_jsonl(path):
        if record.get("status") is not None:
            fetched.append(record["url"])
        error = record.get("error")
        status = record.get("status")
        if error or (status is not None and status >= 400):
            kind = error.get("kind") if isinstance(error, dict) else error
            errors.append(f"{record['url']}: {kind or status}")
    return Fetches(fetched, errors)


def read_scrapy(path: Path) -> Fetches:
    """scrapy_crawl.py's items: same rules (an item with a status is a fetch)."""
    fetched, errors = [], []
    for item in _read_jsonl(path):
        status = item.get("status")
        if status is not None:
            fetched.append(item["url"])
        if item.get("error") or (status is not None and status >= 400):
            errors.append(f"{item['url']}: {item.get('error') or status}")
    return Fetches(fetched, errors)


# --- the crawlers ---------------------------------------------------------------------


def trio_crawl_command(override: str | None) -> list[str]:
    """How to start trio-crawl: ``--trio-crawl-cmd``, else the console script installed
    beside this interpreter, else on PATH, else ``python -m trio_crawl``."""
    if override:
        return shlex.split(override)
    beside = Path(sys.executable).parent / "trio-crawl"
    if beside.exists():
        return [str(beside)]
    on_path = shutil.which("trio-crawl")
    if on_path:
        return [on_path]
    return [sys.executable, "-m", "trio_crawl"]


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


def machine_info() -> dict[str, Any]:
    """nproc, CPU model, memory, load: the context every figure needs."""
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_gib = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = f"{int(line.split()[1]) / 1024 / 1024:.1f}"
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "mem_gib": mem_gib,
        "loadavg": os.getloadavg(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }


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


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(
        c.ljust(w) if i == 0 or i == len(cells) - 1 else c.rjust(w)
        for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    ).rstrip()


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
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [_row(header, widths), _row(["-" * w for w in widths], widths)]
    lines += [_row(r, widths) for r in rows]
    lines.append(f"(expected URLs: {expected_count}; pages/s = fetched / wall s)")
    return "\n".join(lines)


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


def _warm_page_cache(site_dir: Path) -> None:
    """Read every file once so neither tool pays for cold disk reads the other doesn't."""
    for path in site_dir.rglob("*.html"):
        path.read_bytes()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    versions = tool_versions(args)
    print(
        f"machine: {machine['nproc']} CPUs ({machine['cpu_model']}), {machine['mem_gib']} GiB, "
        f"load {' '.join(f'{x:.2f}' for x in machine['loadavg'])}, Python {machine['python']}"
    )
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
    _warm_page_cache(site_dir)

    out_ctx: contextlib.AbstractContextManager[str]
    if args.keep_output:
        args.keep_output.mkdir(parents=True, exist_ok=True)
        out_ctx = contextlib.nullcontext(str(args.keep_output))
    else:
        out_ctx = tempfile.TemporaryDirectory(prefix="trio-crawl-bench-out-")
    runs: list[Run] = []
    redis_ctx: contextlib.AbstractContextManager[redis_bench.BenchRedis | None]
    redis_ctx = contextlib.nullcontext()
    if any(redis_bench.parse_tool(t) is not None for t in args.tools):
        why = redis_bench.available()
        if why is None:
            redis_ctx = redis_bench.open_redis()
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
            # Alternate the order between rounds so neither tool always goes first.
            order = args.tools if rnd % 2 else list(reversed(args.tools))
            for tool in order:
                print(f"  {tool} (round {rnd}) ...", end=" ", flush=True)
                busy_before = redis_bench.machine_busy()
                run = crawl(tool, rnd, server, expected, args, out)
                run.notes.append(
                    f"other programs (nginx included) used "
                    f"{redis_bench.machine_busy() - busy_before - run.measured.cpu_s:.1f} CPU s"
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
