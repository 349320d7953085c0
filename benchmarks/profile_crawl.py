"""Per-page CPU breakdown of a trio-crawl run, by layer.

    python benchmarks/profile_crawl.py [--pages 5000] [--fetcher curl|httpx]

Generates (or reuses) the benchmark site, serves it with nginx (or the Python
fallback), runs ``trio-crawl`` under cProfile in a child process, and splits the
profile's own time ("tottime") into layers by the file each function lives in:
HTTP (the fetcher and libcurl/httpx), parse (lxml), URL handling (ada and
core/url.py), output (JSON and the sink), bookkeeping (engine, frontier, schedule,
robots), the trio event loop, and the rest. Prints microseconds per page.
"""

from __future__ import annotations

import argparse
import pstats
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from generate_site import SiteParams, ensure_site, read_expected
from servers import open_server

LAYERS = [
    ("HTTP", ("fetch/", "pycurl", "httpx", "httpcore", "h11", "anyio")),
    ("parse", ("core/parse", "core/requisites", "lxml", "etree")),
    ("URL handling", ("core/url", "ada_url")),
    ("output", ("outputs/jsonl", "engine/delivery", "json", "encoder", "TextIOWrapper")),
    (
        "bookkeeping",
        (
            "engine/",
            "workpool",
            "frontiers/",
            "core/frontier",
            "core/schedule",
            "core/robots",
            "core/outcome",
            "core/stats",
            "core/models",
        ),
    ),
    ("event loop", ("trio",)),
]


def layer_of(filename: str, function: str) -> str:
    where = f"{filename}:{function}"
    if "importlib" in where or function in ("<built-in method builtins.compile>",):
        return "start-up (imports)"
    for layer, needles in LAYERS:
        if any(n in where for n in needles):
            return layer
    return "other"


def split_by_layer(stats: pstats.Stats) -> dict[str, float]:
    """Own time per layer; a built-in's time goes to the layers of its callers
    (``dict.get`` called by the URL code is URL handling)."""
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--fetcher", default="curl")
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()
    site_dir, _ = ensure_site(SiteParams(pages=args.pages), args.cache_dir)
    prof = Path(tempfile.mkdtemp()) / "crawl.prof"
    with open_server(site_dir) as server:
        crawl = [server.base_url + "/", "-q", "-o", "/dev/null", "--fetcher", args.fetcher]
        cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "trio_crawl", *crawl]
        subprocess.run(cmd, check=True, timeout=900)
    totals = split_by_layer(pstats.Stats(str(prof)))
    pages = len(read_expected(site_dir))
    whole = sum(totals.values())
    print(f"{pages} pages, fetcher {args.fetcher}, {whole:.2f} s CPU under cProfile")
    for layer, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {layer:14} {seconds / pages * 1e6:7.0f} us/page  {seconds / whole:6.1%}")
    print(f"  {'total':14} {whole / pages * 1e6:7.0f} us/page (cProfile adds overhead)")


if __name__ == "__main__":
    main()
