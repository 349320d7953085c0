"""Peak RSS of a crawl whose start page has 1,000,000 distinct in-scope links.

    python benchmarks/bench_huge_page.py [--links 1000000] [--modes memory,max-queue,state]

Writes a page of LINKS links (``<a href="/p/0000000.html">``, ~37 bytes each,
so 37 MB for a million) to a local server (nginx when installed, else a
Python server), then crawls it with ``trio-crawl URL --max-pages 2
--max-bytes 64 MiB``: the start page is fetched and all its links are
admitted (the page budget is not spent yet), then one child is fetched and
the rest are dropped, so the run measures the page, not a million fetches.
Modes: ``memory`` (no flag: everything in memory), ``max-queue``
(``--max-queue 1000``: a temporary SQLite file) and ``state`` (``--state
FILE``). Prints each run's wall time, peak RSS (the child's own ru_maxrss),
the start page's record ``links`` count and, for the SQLite modes, how many
URLs the state file holds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from measure import run_measured
from servers import open_server

MODES = {"memory": [], "max-queue": ["--max-queue", "1000"], "state": ["--state"]}


def run(cmd: list[str], log: Path) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MB, exit code, output) of one child process."""
    measured = run_measured(cmd, timeout=None, log_path=log)
    output = log.read_text(errors="replace")
    return measured.wall_s, measured.peak_rss_mb, measured.exit_code or 0, output


def write_page(path: Path, links: int) -> None:
    with path.open("w") as f:
        f.write("<html><head><title>huge</title></head><body>\n")
        for i in range(links):
            f.write(f'<a href="/p/{i:07d}.html">{i}</a>\n')
        f.write("</body></html>\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--links", type=int, default=1_000_000)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="trio-crawl-huge-"))
    site = work / "site"
    (site / "p").mkdir(parents=True)
    (site / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    write_page(site / "index.html", args.links)
    (site / "p" / "0000000.html").write_text("<html><body>a child</body></html>")
    size = (site / "index.html").stat().st_size
    crawl = [sys.executable, "-m", "trio_crawl"]
    try:
        with open_server(site) as server:
            print(f"server: {server.description}; page: {args.links:,} links, {size:,} bytes")
            print(f"{'mode':>10} {'wall s':>8} {'peak RSS MB':>12} {'links':>10} {'in state':>10}")
            for mode in args.modes.split(","):
                out = work / "out.jsonl"
                state = work / "state.db"
                for leftover in (out, state):
                    leftover.unlink(missing_ok=True)
                cmd = [*crawl, f"{server.base_url}/", "-o", str(out), "-q", "--ignore-robots"]
                cmd += ["--max-pages", "2", "--workers", "1", "--max-bytes", str(64 * 1024 * 1024)]
                cmd += [*MODES[mode], *([str(state)] if mode == "state" else [])]
                wall, rss, code, err = run(cmd, work / "crawl.log")
                records = [json.loads(line) for line in out.open()] if out.exists() else []
                start = [r for r in records if r["url"] == f"{server.base_url}/"]
                found = f"{start[0]['links']:,}" if start else "-"
                stored = "-"
                if mode == "state" and state.exists():
                    with sqlite3.connect(state) as db:
                        (rows,) = db.execute("SELECT count(*) FROM urls").fetchone()
                    stored = f"{rows:,}"
                flag = "" if code == 0 else f"  (exit {code}: {err.strip()[-200:]})"
                print(f"{mode:>10} {wall:>8.1f} {rss:>12.1f} {found:>10} {stored:>10}{flag}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
