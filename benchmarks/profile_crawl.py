"""Where a page's CPU goes: trio-crawl's CPU time per page, split by layer.

    python benchmarks/profile_crawl.py [--site synthetic|broad|DOC_DIR] [--pages 5000]
        [--broad 1000x0x20] [--src NAME=DIR ...] [--rounds 2] [--rate 1000]
        [--trio-crawl-args "..."]

Theory of operation:

1. Serve a workload on 127.0.0.1: the generated site of run.py (``synthetic``,
   ``--pages``), a documentation tree as realsite.py serves it (a directory), or
   broad.py's many hosts (``broad``, ``--broad HOSTSxLATENCY_MSxPAGES``, seeds file,
   ``--per-host-concurrency 8``).
2. Start trio-crawl from each source tree (``--src NAME=DIR``: ``PYTHONPATH=DIR``;
   default the checkout this script is in) through a small driver that imports the
   CLI, measures the CPU time of those imports, and stops itself (SIGSTOP). py-spy
   attaches (``record --pid --nonblocking``: a sampling profiler outside the
   process, so the crawl runs at full speed and no function call is taxed, unlike
   cProfile), then the driver continues and crawls. Its own CPU time (user + system)
   comes from ``wait4``.
3. Each sample (a Python stack, idle threads left out) goes to the layer of its
   innermost frame that belongs to one (``LAYERS``): time inside a C call (libcurl
   and the kernel under ``socket_action``, libxml2 under ``fromstring``, ada under
   ``ada_parse_with_base``) counts for the Python frame that called it. A layer's CPU
   is its share of the samples times the crawl's CPU (total minus imports).
4. Rounds alternate the sources; the table shows each layer's median microseconds
   per fetched page for each source, so a change can be compared side by side with
   the commit before it in one invocation.

Needs py-spy (``pip install py-spy``; it is not a project dependency). Without it
the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bytecode import add_source_start, like_installed  # noqa: E402
from generate_site import SiteParams, ensure_site, read_expected  # noqa: E402
from measure import alternating  # noqa: E402

#: (layer, needles): a frame belongs to the first layer one of whose needles is in
#: "function (file:line)". Checked from the innermost frame outwards.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("decode (Content-Encoding)", ("fetch/decode.py", "zlib", "brotli")),
    ("fetch + curl collector", ("trio_crawl/fetch/", "pycurl")),
    (
        "parse (lexbor, lxml)",
        (
            *("core/parse.py", "core/html_links.py", "core/tokenized.py", "core/requisites.py"),
            *("selectolax", "lxml", "html/parser.py"),
        ),
    ),
    (
        "scope + filters",
        ("Scope.allows", "Scope.judge", "is_path_trap", "core/filters.py"),
    ),
    ("resolve + canonicalize links", ("core/url.py", "ada_url")),
    ("robots.txt", ("robots/", "engine/robots_gate.py", "protego")),
    (
        "frontier + depth",
        ("core/frontier.py", "trio_crawl/frontiers/", "engine/distinct.py"),
    ),
    (
        "records + JSON",
        ("trio_crawl/outputs/", "engine/delivery.py", "json/", "core/models.py"),
    ),
    (
        "engine (crawler, pool, hosts, stats)",
        ("trio_crawl/engine/", "trio_crawl/workpool.py", "trio_crawl/core/", "trio_crawl/cli/"),
    ),
    ("event loop (trio)", ("trio/", "outcome/", "sniffio")),
]
OTHER = "other"
IMPORTS = "start-up (imports)"

#: Imports the CLI (timing them), then crawls with a CPU-time sampler: SIGPROF
#: comes every ``interval`` seconds of the process's CPU time (user + system, all
#: threads). At each one, every Python thread's CPU time since the last sample
#: (its own clock, ``pthread_getcpuclockid``) goes to the stack it is in now, so a
#: parse thread's time is the parser's, not that of what the main thread waits on.
#: A worker thread caught idle (trio's thread cache) is charged to the last job it
#: was seen doing: its short jobs (SQLite calls) mostly end between two samples.
#: A signal is handled between two bytecodes, so the time of a C call (libcurl and
#: the kernel under ``socket_action``, libxml2 under ``fromstring``) goes to the
#: Python frame that made it.
_DRIVER = """
import collections, os, signal, sys, threading, time
t0 = time.process_time()
from trio_crawl.cli.main import run_cli
imports = time.process_time() - t0
stacks = collections.Counter()
clocks = {}
last = {}
busy = {}
main = threading.main_thread().ident
def stack_of(frame):
    names = []
    while frame is not None:
        code = frame.f_code
        names.append(code.co_filename + ":" + code.co_qualname)
        frame = frame.f_back
    return ";".join(reversed(names))
def sample(signum, frame):
    for ident, top in sys._current_frames().items():
        try:
            clock = clocks.get(ident)
            if clock is None:
                clock = clocks[ident] = time.pthread_getcpuclockid(ident)
            now = time.clock_gettime(clock)
        except OSError:  # the thread has ended
            continue
        spent = now - last.get(ident, 0.0)
        last[ident] = now
        if spent <= 0:
            continue
        if ident == main:
            stacks[stack_of(frame)] += spent
            continue
        stack = stack_of(top)
        if stack.endswith("WorkerThread._work"):  # idle now: charge its last job
            stack = busy.get(ident, stack)
        else:
            busy[ident] = stack
        stacks[stack] += spent
last[main] = time.thread_time()
signal.signal(signal.SIGPROF, sample)
signal.setitimer(signal.ITIMER_PROF, float(sys.argv[2]), float(sys.argv[2]))
try:
    code = run_cli(sys.argv[3:])
finally:
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    with open(sys.argv[1], "w") as f:
        f.write(f"{imports!r}\\n")
        for stack, seconds in stacks.items():
            f.write(f"{seconds!r} {stack}\\n")
sys.exit(code)
"""


def layer_of_stack(frames: list[str]) -> str:
    """The layer of a sample: that of its innermost frame that has one."""
    for frame in reversed(frames):
        for layer, needles in LAYERS:
            if any(n in frame for n in needles):
                return layer
    return OTHER


def read_samples(path: Path) -> tuple[float, Counter[str], Counter[str]]:
    """(CPU seconds of the imports, CPU seconds per layer, CPU seconds per
    innermost frame with its layer) from the driver's file."""
    lines = path.read_text(errors="replace").splitlines()
    seconds: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for line in lines[1:]:
        weight, _, stack = line.partition(" ")
        frames = stack.split(";")
        layer = layer_of_stack(frames)
        seconds[layer] += float(weight)
        leaves[f"{layer}: {frames[-1].rpartition('site-packages/')[2]}"] += float(weight)
    return float(lines[0]), seconds, leaves


@dataclass
class Profile:
    """One profiled crawl."""

    source: str
    pages: int
    cpu_s: float
    wall_s: float
    import_cpu_s: float
    layers: Counter[str] = field(default_factory=Counter)
    leaves: Counter[str] = field(default_factory=Counter)

    def us_per_page(self) -> dict[str, float]:
        """Each layer's share of the sampled time, times the crawl's CPU time."""
        crawl = max(self.cpu_s - self.import_cpu_s, 0.0)
        sampled = sum(self.layers.values())
        out = {IMPORTS: self.import_cpu_s / self.pages * 1e6}
        for layer, seconds in self.layers.items():
            if sampled:
                out[layer] = crawl * seconds / sampled / self.pages * 1e6
        return out


def count_pages(output: Path) -> int:
    """Records with a status (depth_update lines and errors without one are not pages)."""
    with output.open() as f:
        return sum(1 for line in f if '"status":' in line)


def profile_once(
    source: str, src_dir: Path, crawl_args: list[str], out: Path, args: argparse.Namespace
) -> Profile:
    output = out / f"{source}.jsonl"
    samples = out / f"{source}.samples"
    env = {**os.environ, "PYTHONPATH": str(src_dir)}
    command = [
        *(sys.executable, "-c", _DRIVER, str(samples), str(args.interval)),
        *(*crawl_args, "-o", str(output)),
    ]
    start = time.perf_counter()
    # Not in the caller's directory: ``python -c`` puts it first on sys.path,
    # before PYTHONPATH, and a checkout there would be imported instead.
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=out)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"exit {code}: {shlex.join(command)}")
    imports, layers, leaves = read_samples(samples)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        samples.replace(args.keep / f"{source}-{time.time_ns()}.samples")
    return Profile(
        source=source,
        pages=count_pages(output),
        cpu_s=usage.ru_utime + usage.ru_stime,
        wall_s=wall,
        import_cpu_s=imports,
        layers=layers,
        leaves=leaves,
    )


@contextlib.contextmanager
def workload(args: argparse.Namespace, out: Path) -> Iterator[tuple[str, list[str]]]:
    """(description, trio-crawl arguments) of a served workload."""
    from servers import doc_tree_site, open_server

    if args.site == "synthetic":
        site_dir, _ = ensure_site(SiteParams(pages=args.pages), args.cache_dir)
        pages = len(read_expected(site_dir))
        with open_server(site_dir) as server:
            yield f"synthetic site, {pages} pages", [server.base_url, "-w", "16", "-q"]
    elif args.site == "broad":
        import broad
        from loopback_hosts import open_broad_nginx

        config = broad.parse_configs(args.broad)[0]
        site_dir, _ = ensure_site(SiteParams(pages=config.pages), args.cache_dir)
        with open_broad_nginx(site_dir, config.hosts, config.latency_ms) as server:
            urls = [f"http://{a}:{server.port}/" for a in server.addresses]
            seeds = out / "seeds.txt"
            seeds.write_text("".join(f"{url}\n" for url in urls))
            # A seeds file of at most 10,000 URLs is crawled in memory, as
            # start URLs given as arguments are; --seeds-on-disk adds
            # --max-queue, which keeps it in a temporary SQLite file.
            start = urls if args.seeds_as_args else ["--seeds", str(seeds)]
            if args.seeds_on_disk:
                start = [*start, "--max-queue", "10000"]
            yield (
                f"broad {args.broad}: {server.description}",
                [*start, "--per-host-concurrency", "8", "-q"],
            )
    else:
        doc_dir = Path(args.site)
        with doc_tree_site(doc_dir) as site, open_server(site) as server:
            yield f"{doc_dir}", [server.base_url, "-w", "16", "-q"]


def table(profiles: dict[str, list[Profile]]) -> str:
    sources = list(profiles)
    medians: dict[str, dict[str, float]] = {}
    for source, runs in profiles.items():
        layers = {layer for run in runs for layer in run.us_per_page()}
        medians[source] = {
            layer: statistics.median(run.us_per_page().get(layer, 0.0) for run in runs)
            for layer in layers
        }
    order = [name for name, _ in LAYERS] + [OTHER, IMPORTS]
    header = ["layer (us/page)", *sources]
    rows = [
        [layer, *(f"{medians[s].get(layer, 0.0):.0f}" for s in sources)]
        for layer in order
        if any(medians[s].get(layer, 0.0) >= 0.5 for s in sources)
    ]

    def total(s: str, key: str) -> float:
        return statistics.median(getattr(run, key) / run.pages * 1e6 for run in profiles[s])

    rows.append(["total CPU (us/page)", *(f"{total(s, 'cpu_s'):.0f}" for s in sources)])
    rows.append(
        ["wall (s)", *(f"{statistics.median(r.wall_s for r in profiles[s]):.2f}" for s in sources)]
    )
    rows.append(["pages", *(str(profiles[s][0].pages) for s in sources)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in [header, ["-" * w for w in widths], *rows]
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--site", default="synthetic", help="synthetic, broad or a doc dir")
    parser.add_argument("--pages", type=int, default=5000, help="synthetic site's pages")
    parser.add_argument("--broad", default="1000x0x20", help="HOSTSxLATENCY_MSxPAGES")
    parser.add_argument(
        "--seeds-as-args",
        action="store_true",
        help="broad: start URLs as arguments, not a --seeds file",
    )
    parser.add_argument(
        "--seeds-on-disk",
        action="store_true",
        help="broad: --max-queue 10000 too (the SQLite frontier, a temporary file)",
    )
    parser.add_argument(
        "--src",
        action="append",
        default=[],
        help="NAME=DIR: a source tree to profile (repeatable; default this checkout)",
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--interval", type=float, default=0.001, help="CPU seconds between two samples"
    )
    parser.add_argument("--top", type=int, default=0, help="also print the N hottest frames")
    parser.add_argument("--keep", type=Path, default=None, help="keep the raw samples here")
    parser.add_argument("--trio-crawl-args", default="")
    parser.add_argument("--cache-dir", type=Path, default=None)
    add_source_start(parser)
    args = parser.parse_args(argv)
    sources = dict(s.split("=", 1) for s in args.src) or {"this": str(HERE.parent)}
    if not args.source_start:
        like_installed([], extra=sources.values())
    profiles: dict[str, list[Profile]] = {name: [] for name in sources}
    with (
        tempfile.TemporaryDirectory(prefix="trio-crawl-profile-") as tmp,
        workload(args, Path(tmp)) as (description, crawl_args),
    ):
        print(f"workload: {description}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        crawl_args += shlex.split(args.trio_crawl_args)
        for rnd in range(args.rounds):
            for name in alternating(list(sources), rnd + 1):
                run = profile_once(name, Path(sources[name]), crawl_args, Path(tmp), args)
                profiles[name].append(run)
                print(
                    f"  {name} round {rnd + 1}: {run.pages} pages, {run.cpu_s:.2f} s CPU, "
                    f"{run.wall_s:.2f} s wall, "
                    f"load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
    print(table(profiles))
    for name, runs in profiles.items() if args.top else ():
        leaves = sum((run.leaves for run in runs), Counter())
        whole = sum(leaves.values())
        print(f"{name}: the {args.top} innermost frames with the most CPU time")
        for leaf, seconds in leaves.most_common(args.top):
            print(f"  {seconds / whole:6.1%}  {leaf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
