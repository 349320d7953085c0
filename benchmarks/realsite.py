"""Real-site benchmark: trio-crawl, wget and Scrapy on the Python 3.11 documentation.

The second workload of ``nox -s bench`` beside the synthetic site (run.py): a real
documentation tree, Debian's ``python3.11-doc`` (/usr/share/doc/python3.11/html: ~530
Sphinx pages of 9 KB to 2.5 MB, ~96 KB on average, with thousands of links on the index
pages), served from 127.0.0.1 by the same nginx set-up as run.py (servers.py).

Theory of operation:

1. Find the documentation; if it is missing, install it (``apt-get install -y
   python3.11-doc``, as root only). When that fails, say so loudly and skip (exit 0):
   nothing of the documentation is in the repository.
2. Serve it: a temporary directory holds a ``robots.txt`` that allows everything (the
   server's readiness check and both crawlers ask for it) and a symlink to every entry
   of the documentation directory; nginx (or the Python fallback) serves that.
3. Work out the expected URL set without any crawler: a breadth-first walk over the
   files on disk from ``index.html``, with the standard library's ``html.parser`` (the
   ``href`` of ``<a>``/``<area>``, first attribute wins, ``<base href>`` honoured) and
   ``urljoin``; a target that is not a file is expected to answer 404 (the Debian
   package drops ``whatsnew/changelog.html`` but the pages still link to it).
   URLs are compared as path plus query of trio-crawl's canonical form
   (``core.url.canonicalize``), so ``%7E`` and ``~`` are one URL for every tool. The
   walk takes ~20 s (``html.parser`` over 50 MB), so its result is cached under
   ``$TMPDIR/trio-crawl-bench/`` by the tree's file names, sizes and times.
4. Run each tool once, as a child process measured by measure.py's ``run_measured``
   (wall time from spawn to exit, its own CPU time and peak RSS from ``os.wait4``),
   with one correction: Linux carries the parent's RSS at ``fork`` into the child's
   ``ru_maxrss`` (exec keeps the high-water mark of the forked copy), so a child
   smaller than this Python process (wget) would report the harness's RSS. A thread
   therefore also samples the child's own ``VmHWM`` (/proc/PID/status, every 10 ms;
   exec starts a new address space, so it is the child's own peak), and the table
   shows that when ``ru_maxrss`` is no more than the harness's own peak RSS
   (``sample_peak=True``):

   - trio-crawl: ``trio-crawl URL -w 16 -o OUT -q`` (as run.py runs it);
   - wget: ``wget -r -l inf --no-parent --follow-tags=a,area -e robots=on -nv
     --delete-after -P DIR URL``: recursive to any depth, following only the
     ``href`` of ``<a>``/``<area>`` (wget would otherwise also fetch images,
     stylesheets and scripts: requisites, not links), robots.txt honoured, every
     file downloaded, parsed when HTML, then deleted. One connection, kept alive;
     wget fetches each URL once. It exits 8 when a page answered 404, which the
     expected broken link makes normal;
   - Scrapy, when importable: benchmarks/scrapy_crawl.py with ``--workers 16``, as in
     run.py (its LinkExtractor skips some extensions, such as ``.py``: the report
     shows what it missed).

5. Check each run: every URL it got an answer for, exactly once; missing, repeated and
   unexpected URLs, and answers whose status differs from the expected (200, or 404
   for a missing file). Print one table and the URL-set comparison of trio-crawl
   against wget. Exit 1 if trio-crawl's run is not exact (wget's and Scrapy's verdicts
   are reported, not enforced: the point is to compare with them).

Usage: python benchmarks/realsite.py [--tools trio-crawl,wget,scrapy] [--workers 16]
       [--doc-dir DIR] [--server auto|nginx|python] [--keep-output DIR]
       [--trio-crawl-args "..."] [--profile] [--rounds N]
       [--tools ...,trio-crawl-base --base-cmd "env PYTHONPATH=OLD python -m trio_crawl"]

``--profile`` adds a run of trio-crawl under cProfile (not timed) and prints its CPU
time per page by layer.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pstats
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bytecode import add_source_start, like_installed, trio_crawl_command
from measure import (
    Measured,
    alternating,
    machine_info,
    machine_line,
    output_dir,
    run_measured,
    text_table,
)
from servers import Server, doc_tree_site, open_server, warm_page_cache

from trio_crawl.core.url import canonicalize

HERE = Path(__file__).resolve().parent
DOC_DIR = Path("/usr/share/doc/python3.11/html")
DOC_PACKAGE = "python3.11-doc"
TOOLS = ("trio-crawl", "wget", "scrapy")
#: Not run by default: trio-crawl started by ``--base-cmd`` (an older checkout, say),
#: to compare a change side by side with the commit before it.
BASE_TOOL = "trio-crawl-base"


def loud(message: str) -> None:
    bar = "!" * 78
    print(f"\n{bar}\n{message}\n{bar}\n", file=sys.stderr, flush=True)


# --- 1. the documentation ------------------------------------------------------------


def ensure_docs(doc_dir: Path) -> bool:
    """Whether ``doc_dir`` has the documentation, installing it with apt if not."""
    if (doc_dir / "index.html").is_file():
        return True
    if doc_dir != DOC_DIR:
        loud(f"SKIPPED: no index.html in {doc_dir}")
        return False
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        loud(
            f"SKIPPED the real-site benchmark: {doc_dir} is missing and this is not root "
            f"with apt-get; install it with: apt-get install -y {DOC_PACKAGE}"
        )
        return False
    print(f"installing {DOC_PACKAGE} (apt-get): {doc_dir} is missing", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", DOC_PACKAGE]
    for attempt in ([], [["apt-get", "update", "-q"]]):
        try:
            for command in [*attempt, install]:
                subprocess.run(command, env=env, check=True, timeout=600, capture_output=True)
        except (OSError, subprocess.SubprocessError) as exc:
            error = exc
            continue
        if (doc_dir / "index.html").is_file():
            return True
    loud(f"SKIPPED the real-site benchmark: apt-get install {DOC_PACKAGE} failed: {error!r}")
    return False


# --- 3. the expected URL set ---------------------------------------------------------


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("a", "area", "base"):
            value = next((v for k, v in attrs if k == "href"), None)
            if value is None:
                return
            if tag != "base":
                self.hrefs.append(value)
            elif self.base is None:
                self.base = value


#: Origin of the expected set's URLs before they are cut to path plus query.
_WALK_ORIGIN = "http://docs.invalid"


def key(url: str, origin: str) -> str:
    """The comparison key of a fetched URL: path plus query of trio-crawl's canonical
    form (so ``%7E`` and ``~`` are one URL), or the whole URL if on another origin."""
    canonical = canonicalize(urldefrag(url)[0]) or url
    if not canonical.startswith(origin + "/"):
        return f"<other origin> {canonical}"
    return canonical[len(origin) :]


def _walk(doc_dir: Path) -> dict[str, int]:
    start = _WALK_ORIGIN + "/"
    expected: dict[str, int] = {}
    queue = deque([start])
    while queue:
        url = queue.popleft()
        if url in expected:
            continue
        path = unquote(urlsplit(url).path).lstrip("/")
        file = doc_dir / path
        if path == "" or file.is_dir():
            file = file / "index.html"
        if not file.is_file():
            expected[url] = 404
            continue
        expected[url] = 200
        if file.suffix != ".html":
            continue
        parser = _Hrefs()
        parser.feed(file.read_text(errors="replace"))
        parser.close()
        base = urljoin(url, parser.base.strip()) if parser.base else url
        for href in parser.hrefs:
            canonical = canonicalize(urldefrag(urljoin(base, href.strip()))[0])
            if canonical is not None and canonical.startswith(start) and canonical not in expected:
                queue.append(canonical)
    return {key(url, _WALK_ORIGIN): status for url, status in expected.items()}


def expected_statuses(doc_dir: Path) -> tuple[dict[str, int], bool]:
    """Path plus query -> expected status, by a breadth-first walk over the files
    (``html.parser`` is slow: ~20 s here), cached under the temp dir by the tree's
    file names, sizes and times. And whether the cache answered."""
    digest = hashlib.sha256(str(doc_dir.resolve()).encode())
    for path in sorted(doc_dir.rglob("*")):
        info = path.stat()
        digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    cache = (
        Path(tempfile.gettempdir())
        / "trio-crawl-bench"
        / f"realsite-{digest.hexdigest()[:16]}.json"
    )
    with contextlib.suppress(OSError, ValueError):
        return json.loads(cache.read_text()), True
    expected = _walk(doc_dir)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(expected, indent=0, sort_keys=True))
    return expected, False


# --- 4. the tools --------------------------------------------------------------------

_WGET_OK = re.compile(r"URL:\s*(\S+) \[[^\]]*\] -> ")
_WGET_ERROR = re.compile(r"^(\S+):\n\S+ \S+ ERROR (\d{3})", re.M)


def read_wget(log: Path) -> list[tuple[str, int]]:
    """(URL, status) per answer from wget's ``-nv`` log; robots.txt left out."""
    text = log.read_text(errors="replace")
    answers = [(m.group(1), 200) for m in _WGET_OK.finditer(text)]
    answers += [(m.group(1), int(m.group(2))) for m in _WGET_ERROR.finditer(text)]
    return [(u, s) for u, s in answers if not u.endswith("/robots.txt")]


def read_jsonl_answers(path: Path) -> list[tuple[str, int]]:
    """(URL, status) of every record with a status (trio-crawl's and scrapy_crawl.py's)."""
    answers = []
    if path.exists():
        with path.open() as fh:
            for line in fh:
                if line.strip():
                    record = json.loads(line)
                    if record.get("status") is not None:
                        answers.append((record["url"], int(record["status"])))
    return answers


def command_for(tool: str, args: Any, server: Server, out: Path) -> list[str]:
    if tool in ("trio-crawl", BASE_TOOL):
        return [
            *trio_crawl_command(args.base_cmd if tool == BASE_TOOL else args.trio_crawl_cmd),
            server.base_url,
            *("-w", str(args.workers), "-o", str(out / f"{tool}.jsonl"), "-q"),
            *shlex.split(args.trio_crawl_args),
        ]
    if tool == "wget":
        return [
            "wget",
            *("-r", "-l", "inf", "--no-parent", "--follow-tags=a,area"),
            *("-e", "robots=on", "-nv", "--delete-after", "-P", str(out / "wget-files")),
            server.base_url,
        ]
    if tool == "scrapy":
        return [
            args.scrapy_python,
            str(HERE / "scrapy_crawl.py"),
            server.base_url,
            *("--workers", str(args.workers), "--output", str(out / "scrapy.jsonl")),
        ]
    raise ValueError(tool)


def answers_of(tool: str, out: Path) -> list[tuple[str, int]]:
    if tool == "wget":
        return read_wget(out / "wget.log")
    return read_jsonl_answers(out / f"{tool}.jsonl")


@dataclass
class Verdict:
    fetched: int
    missing: list[str]
    repeated: list[str]
    unexpected: list[str]
    wrong_status: list[str]
    keys: set[str] = field(default_factory=set)

    @property
    def exact(self) -> bool:
        return not (self.missing or self.repeated or self.unexpected or self.wrong_status)


def verify(answers: list[tuple[str, int]], expected: dict[str, int], origin: str) -> Verdict:
    keyed = [(key(u, origin), s) for u, s in answers]
    counts = Counter(k for k, _ in keyed)
    wrong = sorted(
        f"{k} {s} (expected {expected[k]})" for k, s in keyed if k in expected and expected[k] != s
    )
    return Verdict(
        fetched=len(answers),
        missing=sorted(expected.keys() - counts.keys()),
        repeated=sorted(u for u, n in counts.items() if n > 1),
        unexpected=sorted(counts.keys() - expected.keys()),
        wrong_status=wrong,
        keys=set(counts),
    )


@dataclass
class Run:
    tool: str
    command: list[str]
    measured: Measured
    verdict: Verdict

    @property
    def ok(self) -> bool:
        exit_ok = self.measured.exit_code == 0 or (
            self.tool == "wget" and self.measured.exit_code == 8  # 8: a 404 was answered
        )
        return exit_ok and self.verdict.exact


def tool_available(tool: str, args: Any) -> str | None:
    """Why ``tool`` cannot run here, or None."""
    if tool == BASE_TOOL and not args.base_cmd:
        return "--base-cmd is not given"
    if tool == "wget" and shutil.which("wget") is None:
        return "wget is not installed (apt-get install -y wget)"
    if tool == "scrapy":
        probe = subprocess.run(
            [args.scrapy_python, "-c", "import scrapy"], capture_output=True, timeout=60
        )
        if probe.returncode != 0:
            return f"Scrapy is not importable by {args.scrapy_python}"
    return None


# --- profile -------------------------------------------------------------------------

LAYERS = [
    ("HTTP", ("fetch/", "pycurl", "httpx", "httpcore", "h11", "anyio")),
    ("parse (lxml)", ("core/parse", "lxml", "etree", "html/parser")),
    ("URL handling", ("core/url", "ada_url")),
    ("robots", ("robots/", "protego")),
    ("output", ("sinks", "json", "encoder", "TextIOWrapper", "core/models")),
    ("bookkeeping", ("engine/", "frontier", "engine/schedule", "core/stats", "frontiers/bloom")),
    ("event loop", ("trio",)),
]


def layer_of(filename: str, function: str) -> str:
    where = f"{filename}:{function}"
    if "importlib" in where or "<frozen" in where or function.endswith("builtins.compile>"):
        return "start-up (imports)"
    for layer, needles in LAYERS:
        if any(n in where for n in needles):
            return layer
    return "other"


def split_by_layer(stats: pstats.Stats) -> dict[str, float]:
    """Own time per layer; a built-in's time goes to its callers' layers."""
    totals: dict[str, float] = defaultdict(float)
    table = stats.stats  # type: ignore[attr-defined]
    for (filename, _, function), (_, _, tottime, _, callers) in table.items():
        layer = layer_of(filename, function)
        if filename != "~" or layer != "other" or not callers:
            totals[layer] += tottime
            continue
        for (c_file, _, c_function), edge in callers.items():
            totals[layer_of(c_file, c_function)] += edge[2]
    return totals


#: Runs the CLI under cProfile with a CPU-time clock for the main thread
#: (``time.thread_time``): the default wall clock would charge whatever runs when
#: the machine is busy, or a parse thread holds the GIL, to the frame that waits.
_PROFILE_DRIVER = """
import cProfile, sys, time
from trio_crawl.cli.main import run_cli
profiler = cProfile.Profile(time.thread_time)
profiler.enable()
try:
    code = run_cli(sys.argv[2:])
finally:
    profiler.disable()
    profiler.dump_stats(sys.argv[1])
sys.exit(code)
"""


def profile_trio_crawl(server: Server, args: Any, out: Path, pages: int) -> None:
    """CPU time per page by layer, main thread only, imports excluded (the engine
    parses bodies of ``thread_parse_bytes`` and more in threads: not counted)."""
    prof = out / "trio-crawl.prof"
    command = [
        *(sys.executable, "-c", _PROFILE_DRIVER, str(prof), server.base_url),
        *("-w", str(args.workers), "-q", "-o", str(out / "profiled.jsonl")),
        *shlex.split(args.trio_crawl_args),
    ]
    subprocess.run(command, check=True, timeout=900, stdout=subprocess.DEVNULL)
    stats = pstats.Stats(str(prof))
    totals = split_by_layer(stats)
    whole = sum(totals.values())
    print(
        f"\ntrio-crawl under cProfile: {pages} pages, {whole:.2f} s CPU in the main thread "
        "(imports excluded; cProfile adds overhead)"
    )
    for layer, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {layer:20} {seconds / pages * 1e6:8.0f} us/page  {seconds / whole:6.1%}")
    print("  top functions by own time:")
    stats.sort_stats("tottime")
    for func in stats.fcn_list[:20]:  # type: ignore[attr-defined]
        calls, _, tottime, cumtime, _ = stats.stats[func]  # type: ignore[attr-defined]
        name = f"{Path(func[0]).name}:{func[1]}({func[2]})"
        print(f"    {tottime:7.3f} s own {cumtime:7.3f} s cum {calls:8d} calls  {name}")


# --- main ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark trio-crawl, wget and Scrapy on the Python documentation.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated tools")
    parser.add_argument("--workers", type=int, default=16, help="trio-crawl/Scrapy workers")
    parser.add_argument("--doc-dir", type=Path, default=DOC_DIR, help="the site to serve")
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per crawl")
    parser.add_argument("--trio-crawl-args", default="", help="extra trio-crawl arguments")
    parser.add_argument("--trio-crawl-cmd", default=None, help="command that starts trio-crawl")
    parser.add_argument(
        "--base-cmd",
        default=None,
        help=f"command that starts the trio-crawl of the {BASE_TOOL} tool (e.g. "
        '"env PYTHONPATH=/tmp/base python -m trio_crawl"; run from a directory '
        "that holds no trio_crawl: python -m puts the current one first)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs of each tool, the order alternating"
    )
    parser.add_argument("--scrapy-python", default=sys.executable)
    parser.add_argument("--keep-output", type=Path, default=None, help="keep outputs here")
    parser.add_argument("--profile", action="store_true", help="also profile trio-crawl")
    add_source_start(parser)
    args = parser.parse_args(argv)
    if not args.source_start:
        like_installed([args.trio_crawl_cmd or "", args.base_cmd or ""])
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(args.tools) - {*TOOLS, BASE_TOOL})
    if unknown or not args.tools:
        parser.error(f"--tools: unknown {unknown}; choose from {', '.join(TOOLS)}, {BASE_TOOL}")
    return args


def format_table(runs: list[Run], expected: dict[str, int]) -> str:
    header = ["tool", "fetched", "distinct", "wall s", "CPU s", "peak RSS MB", "result"]
    rows = []
    for run in runs:
        m, v = run.measured, run.verdict
        why = []
        if m.timed_out:
            why.append("timeout")
        elif run.measured.exit_code not in (0, 8 if run.tool == "wget" else 0):
            why.append(f"exit {m.exit_code}")
        for label, items in (
            ("missing", v.missing),
            ("repeated", v.repeated),
            ("unexpected", v.unexpected),
            ("wrong status", v.wrong_status),
        ):
            if items:
                why.append(f"{len(items)} {label}")
        result = "OK" if run.ok else "NOT EXACT"
        rows.append(
            [
                run.tool,
                str(v.fetched),
                str(len(v.keys)),
                f"{m.wall_s:.2f}",
                f"{m.cpu_s:.2f}",
                f"{m.peak_rss_mb:.0f}",
                result + (f" ({', '.join(why)})" if why else ""),
            ]
        )
    broken = sum(1 for s in expected.values() if s == 404)
    note = f"(expected URLs: {len(expected)}, of which {broken} broken links answering 404)"
    return text_table(header, rows) + "\n" + note


def medians_table(runs: list[Run]) -> str:
    """Median wall and CPU seconds of each tool over its rounds."""
    lines = ["medians:  tool             wall s  CPU s  rounds"]
    for tool in dict.fromkeys(r.tool for r in runs):
        mine = [r.measured for r in runs if r.tool == tool]
        wall = statistics.median(m.wall_s for m in mine)
        cpu = statistics.median(m.cpu_s for m in mine)
        lines.append(f"          {tool:15} {wall:7.2f} {cpu:6.2f}  {len(mine)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not ensure_docs(args.doc_dir):
        return 0
    machine = machine_info()
    print(machine_line(machine))
    html = list(args.doc_dir.rglob("*.html"))
    size = sum(p.stat().st_size for p in html)
    warm_page_cache(args.doc_dir, "*")
    print(f"site:    {args.doc_dir}: {len(html)} HTML files, {size / 1e6:.1f} MB")
    runs: list[Run] = []
    out_ctx = output_dir(args.keep_output, "trio-crawl-realsite-out-")
    with (
        out_ctx as out_name,
        doc_tree_site(args.doc_dir) as site,
        open_server(site, args.server) as server,
    ):
        out = Path(out_name)
        print(f"server:  {server.description} at {server.base_url}")
        if server.kind != "nginx":
            print("WARNING: fallback Python server: slower than nginx; figures understate all")
        t0 = time.perf_counter()
        expected, cached = expected_statuses(args.doc_dir)
        print(
            f"expected: {len(expected)} URLs from a walk over the files "
            f"({'cached, ' if cached else ''}{time.perf_counter() - t0:.1f} s)"
        )
        origin = server.base_url.rstrip("/")
        tools = []
        for tool in args.tools:
            why_not = tool_available(tool, args)
            if why_not:
                print(f"  {tool}: SKIPPED: {why_not}")
            else:
                tools.append(tool)
        for rnd in range(args.rounds):
            for tool in alternating(tools, rnd + 1):
                command = command_for(tool, args, server, out)
                print(f"  {tool} ...", end=" ", flush=True)
                measured = run_measured(
                    command, timeout=args.timeout, log_path=out / f"{tool}.log", sample_peak=True
                )
                run = Run(tool, command, measured, verify(answers_of(tool, out), expected, origin))
                runs.append(run)
                print(
                    f"{measured.wall_s:.2f} s, load {os.getloadavg()[0]:.2f}: "
                    f"{shlex.join(command)}",
                    flush=True,
                )
                shutil.rmtree(out / "wget-files", ignore_errors=True)
        print()
        print(format_table(runs, expected))
        for run in runs:
            v = run.verdict
            for label, items in (
                ("missing", v.missing),
                ("repeated", v.repeated),
                ("unexpected", v.unexpected),
                ("wrong status", v.wrong_status),
            ):
                if items:
                    print(f"  {run.tool} {label} ({len(items)}): {', '.join(items[:5])}")
        if args.rounds > 1:
            print(medians_table(runs))
        by_tool = {r.tool: r for r in runs}
        if "trio-crawl" in by_tool and "wget" in by_tool:
            mine, theirs = by_tool["trio-crawl"].verdict.keys, by_tool["wget"].verdict.keys
            only_mine, only_theirs = sorted(mine - theirs), sorted(theirs - mine)
            same = "identical" if not (only_mine or only_theirs) else "DIFFERENT"
            print(
                f"URL sets, trio-crawl vs wget: {same}: {len(mine & theirs)} in both, "
                f"{len(only_mine)} only trio-crawl {only_mine[:3]}, "
                f"{len(only_theirs)} only wget {only_theirs[:3]}"
            )
            # medians over the rounds (by_tool holds each tool's last run only)
            walls = {
                tool: statistics.median(r.measured.wall_s for r in runs if r.tool == tool)
                for tool in ("wget", "trio-crawl")
            }
            ratio = walls["wget"] / walls["trio-crawl"]
            print(f"wall time, wget / trio-crawl (medians): {ratio:.2f}x")
        if args.profile:
            profile_trio_crawl(server, args, out, len(expected))
    trio = by_tool.get("trio-crawl")
    return 1 if trio is not None and not trio.ok else 0


if __name__ == "__main__":
    sys.exit(main())
