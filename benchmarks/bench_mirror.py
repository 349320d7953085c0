"""``trio-crawl --mirror DIR -k --page-requisites`` against ``wget -m -k -p`` on
one generated site served on 127.0.0.1 (nginx when installed).

    python benchmarks/bench_mirror.py [--pages 20000] [--rounds 2] [--workers 16]
    python benchmarks/bench_mirror.py --doc-dir /usr/share/doc/python3.11/html
    python benchmarks/bench_mirror.py --pages 100000 --page-bytes 2048 --rounds 1 \
        --tools trio-crawl,trio-crawl-plain,trio-crawl-then-k

Each round runs the two tools one after the other (alternating which goes
first), each into a fresh directory, and prints per run: wall time, peak RSS
(the child's own ``ru_maxrss``, from ``wait4``) and the number of files
saved. Then it compares the two trees: the set of relative file paths (the
differences listed, at most 10 each way) and how many files the two agree on
byte for byte (they differ where the two converters write a link differently).
State the machine's load (``uptime``) next to the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from generate_site import SiteParams, ensure_site
from measure import alternating, run_measured
from servers import doc_tree_site, open_server


@dataclass
class Result:
    tool: str
    wall: float
    rss_mb: float
    code: int
    files: dict[str, Path]


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit code) of one child process.

    The peak is the child's own ``VmHWM`` where its ``ru_maxrss`` would be this
    harness's (measure.py's ``sample_peak``: Linux carries the parent's RSS at
    ``fork`` into the child's, more than wget's whole peak)."""
    measured = run_measured(cmd, timeout=None, env=env, sample_peak=True)
    return measured.wall_s, measured.peak_rss_mb, measured.exit_code or 0


def tree(root: Path) -> dict[str, Path]:
    """Relative path (below the host directory) -> file."""
    out: dict[str, Path] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            parts = path.relative_to(root).parts
            out["/".join(parts[1:])] = path
    return out


def crawl(tool: str, url: str, out: Path, workers: int) -> Result:
    if tool == "wget":
        cmd = ["wget", "-m", "-k", "-p", "-q", "-P", str(out), url]
        wall, rss, code = run(cmd)
    else:
        cmd = [
            sys.executable, "-m", "trio_crawl", url, "-q", "-o", str(out) + ".jsonl",
            "--page-requisites", "-w", str(workers),
        ]  # fmt: skip
        if tool == "trio-crawl":
            cmd += ["--mirror", str(out), "-k"]
        elif tool == "trio-crawl-then-k":
            cmd += ["--mirror", str(out)]
        wall, rss, code = run(cmd, ENV)
        if tool == "trio-crawl-then-k":
            convert_wall, convert_rss, convert_code = run(
                [sys.executable, "-c", CONVERT, str(out)], ENV
            )
            print(
                f"  convert links alone: {convert_wall:7.1f} s  peak RSS {convert_rss:6.1f} MB  "
                f"exit {convert_code}"
            )
    return Result(tool, wall, rss, code, tree(out))


ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
#: The conversion of a saved mirror, alone in a process (what -k does at the end).
CONVERT = """
import sys
from trio_crawl.mirror.layout import MirrorLayout
from trio_crawl.mirror.convert import ConvertRun
from trio_crawl.mirror.files import MirrorFiles
run = ConvertRun(MirrorFiles(sys.argv[1]), MirrorLayout(), {}, print)
while run.step(64):
    pass
print(run.statistics, file=sys.stderr)
"""


def compare(a: Result, b: Result) -> list[str]:
    only_a = sorted(set(a.files) - set(b.files))
    only_b = sorted(set(b.files) - set(a.files))
    common = set(a.files) & set(b.files)
    same = sum(1 for name in common if a.files[name].read_bytes() == b.files[name].read_bytes())
    lines = [
        f"files: {a.tool} {len(a.files)}, {b.tool} {len(b.files)}, in both {len(common)}, "
        f"byte-identical {same}",
        f"only in {a.tool} ({len(only_a)}): {only_a[:10]}",
        f"only in {b.tool} ({len(only_b)}): {only_b[:10]}",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--page-bytes", type=int, default=15 * 1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument(
        "--doc-dir",
        help="serve this documentation directory instead of a generated site (e.g. "
        "/usr/share/doc/python3.11/html from python3.11-doc: Sphinx pages with stylesheets, "
        "images and scripts)",
    )
    parser.add_argument("--server", default="auto", choices=["auto", "nginx", "python"])
    parser.add_argument(
        "--tools",
        default="wget,trio-crawl",
        help="comma list of wget, trio-crawl, trio-crawl-plain (the same crawl without "
        "--mirror: what the mirror adds), trio-crawl-then-k (--mirror without -k, then the "
        "link conversion alone in its own process: its own peak RSS)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the two trees of the last round")
    args = parser.parse_args()
    if shutil.which("wget") is None:
        sys.exit("wget is not installed (apt-get install -y wget)")
    work = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    site: contextlib.AbstractContextManager[Path]
    if args.doc_dir:
        site = doc_tree_site(Path(args.doc_dir))
        print(f"site: {args.doc_dir} (with its stylesheets, images and scripts)")
    else:
        site_dir, _ = ensure_site(SiteParams(pages=args.pages, page_bytes=args.page_bytes))
        site = contextlib.nullcontext(site_dir)
        print(f"site: {args.pages} pages of ~{args.page_bytes} B ({site_dir})")
    print("load:", os.getloadavg())
    try:
        with site as site_dir, open_server(site_dir, args.server) as server:
            print(f"server: {server.description}")
            for rnd in range(args.rounds):
                order = alternating(args.tools.split(","), rnd + 1)
                results: dict[str, Result] = {}
                for tool in order:
                    out = work / f"{tool}-{rnd}"
                    result = crawl(tool, server.base_url, out, args.workers)
                    results[tool] = result
                    print(
                        f"round {rnd} {tool:>16}: {result.wall:7.1f} s  peak RSS "
                        f"{result.rss_mb:6.1f} MB  files {len(result.files):6d}  "
                        f"exit {result.code}"
                    )
                if "wget" in results and "trio-crawl" in results:
                    for line in compare(results["wget"], results["trio-crawl"]):
                        print("   ", line)
                if not args.keep or rnd < args.rounds - 1:
                    for tool in order:
                        shutil.rmtree(work / f"{tool}-{rnd}", ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept: {work}")
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
