"""Peak RSS of a crawl seeded with many URLs: memory stays flat with --state.

    python benchmarks/bench_state_rss.py [--counts 100000,1000000] [--max-pages 20000]

For each count, writes a seeds file of that many distinct URLs on a local
server (nginx when installed, else a Python server; every URL answers, most
with 404), then runs ``trio-crawl --seeds FILE --max-pages P`` with
``--state FILE`` and without it (the seeds then go to a temporary SQLite file),
and prints each run's wall time and peak RSS (the child's own ru_maxrss).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from measure import run_measured
from servers import open_server


def run(cmd: list[str]) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit code) of one child process."""
    measured = run_measured(cmd, timeout=None)
    return measured.wall_s, measured.peak_rss_mb, measured.exit_code or 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="100000,1000000")
    parser.add_argument("--max-pages", type=int, default=20_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="trio-crawl-rss-"))
    site = work / "site"
    site.mkdir()
    (site / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    (site / "index.html").write_text("<html><body>seeded crawl</body></html>")
    crawl = [sys.executable, "-m", "trio_crawl"]
    try:
        with open_server(site) as server:
            print(f"server: {server.description}")
            print(f"{'seeds':>10} {'mode':>16} {'wall s':>8} {'peak RSS MB':>12}  records")
            for count in (int(c) for c in args.counts.split(",")):
                seeds = work / f"seeds-{count}.txt"
                with seeds.open("w") as f:
                    for i in range(count):
                        f.write(f"{server.base_url}/item/{i:08d}/details.html\n")
                for mode in ("--state", "(temporary)"):
                    out = work / "out.jsonl"
                    state = work / "state.db"
                    for leftover in (out, state):
                        leftover.unlink(missing_ok=True)
                    cmd = [*crawl, "--seeds", str(seeds), "--max-pages", str(args.max_pages)]
                    cmd += ["-o", str(out), "-q", "--ignore-robots"]
                    if mode == "--state":
                        cmd += ["--state", str(state)]
                    wall, rss, code = run(cmd)
                    lines = sum(1 for _ in out.open()) if out.exists() else 0
                    flag = "" if code == 0 else f"  (exit {code})"
                    print(f"{count:>10,} {mode:>16} {wall:>8.1f} {rss:>12.1f}  {lines:,}{flag}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
