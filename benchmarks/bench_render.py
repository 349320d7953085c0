"""Rendering speed and memory: trio-crawl ``--render`` against Playwright.

    python benchmarks/bench_render.py [--pages 500] [--tabs 1 4 8 16] [--rounds 1]
        [--playwright-python /path/to/venv/bin/python]

Serves a ``--pages``-page site on 127.0.0.1 whose links exist only after its
scripts ran (half written on ``DOMContentLoaded``, half from a ``fetch()`` of
JSON), then crawls it at each tab count with:

- ``trio-crawl``: ``run_crawl(render=True, workers=TABS)`` (one tab per worker);
- ``playwright``: a plain Playwright async script, ``TABS`` pages of one
  context, each ``goto(wait_until="networkidle")`` (no connection for 500 ms,
  our settle rule too), then every ``a[href]``; the same system Chromium
  (``executable_path``), the same scope (the site's host);
- ``static``: trio-crawl without ``--render`` on a copy of the site whose
  links are plain HTML: what a render costs per page against a static fetch.

With ``--mixed``, one page in ten is scripted (``/m/app/``, links written by
``document.write``), the rest plain (``/m/doc/``): ``render`` (``--render``)
against ``auto`` (``--render auto``), which must find the same pages.

Contenders run alternately, each in a fresh child process, timed from
before its browser starts to the end of its crawl (the interpreter's own
start is left out); the parent serves
the site and samples the child's whole process tree (the browser and its
renderers included) every 50 ms: peak memory is the largest sum of PSS (each
shared page split between its sharers; RSS where PSS is unreadable), CPU the
sum of the tree's user+system time last seen for each process
(``--processes``: also the peak split by kind of process, renderers, GPU,
browser, network service, with how many of each). Each run's
URL set is checked against the site's exact set of pages. Needs Chromium
(``--browser``, default ``chromium`` on PATH) and ``pip install playwright``
(its browser download is not needed: ``playwright install`` is never run),
best in a venv of its own: ``--playwright-python`` (or
``$PLAYWRIGHT_PYTHON``) names that venv's interpreter, which runs the
Playwright child (it needs nothing of trio-crawl's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from measure import process_cpu_s, process_tree  # the standard library only

try:
    from trio_crawl.sites.server import serve_site
    from trio_crawl.sites.site import Response, Site, SiteRequest
except ImportError:  # the Playwright child, in a venv of its own: it serves nothing
    pass

FAN_OUT = 4


def children_of(i: int, pages: int) -> list[int]:
    return [c for c in range(FAN_OUT * i + 1, FAN_OUT * i + FAN_OUT + 1) if c < pages]


def js_page(i: int, pages: int) -> Response:
    kids = children_of(i, pages)
    ready = kids[: len(kids) // 2]  # the rest come from /api/I.json
    script = f"""
document.addEventListener('DOMContentLoaded', () => {{
  for (const n of {json.dumps(ready)}) {{
    const a = document.createElement('a'); a.href = '/p/' + n; a.textContent = 'page ' + n;
    document.body.append(a);
  }}
}});
fetch('/api/{i}.json').then(r => r.json()).then(list => {{
  for (const n of list) {{
    const a = document.createElement('a'); a.href = '/p/' + n; document.body.append(a);
  }}
}});
"""
    text = f"<p>Page {i}. " + "Some text to render. " * 40 + "</p>"
    body = (
        f"<!doctype html><html><head><title>{i}</title></head>"
        f"<body>{text}<script>{script}</script></body></html>"
    )
    return Response(body=body.encode())


def static_page(i: int, pages: int) -> Response:
    links = "".join(f'<a href="/s/{n}">page {n}</a>' for n in children_of(i, pages))
    text = f"<p>Page {i}. " + "Some text to render. " * 40 + "</p>"
    body = f"<!doctype html><html><head><title>{i}</title></head><body>{text}{links}</body></html>"
    return Response(body=body.encode())


def mixed_url(n: int) -> str:
    """``--mixed``: one page in ten lives in the scripted section ``/m/app/``."""
    return f"/m/app/{n}" if n % 10 == 0 else f"/m/doc/{n}"


def mixed_page(i: int, pages: int) -> Response:
    kids = children_of(i, pages)
    text = f"<p>Page {i}. " + "Some text to render. " * 40 + "</p>"
    if i % 10 == 0:
        hrefs = json.dumps([mixed_url(n) for n in kids])
        write = "document.write('<a href=\"' + h + '\">x</a>')"
        links = f"<script>for (const h of {hrefs}) {write}</script>"
    else:
        links = "".join(f'<a href="{mixed_url(n)}">page {n}</a>' for n in kids)
    body = f"<!doctype html><html><head><title>{i}</title></head><body>{text}{links}</body></html>"
    return Response(body=body.encode())


def site(pages: int) -> Site:
    def route(request: SiteRequest) -> Response:
        path = request.target
        for prefix in ("/m/app/", "/m/doc/"):
            if path.startswith(prefix) and path[len(prefix) :].isdigit():
                i = int(path[len(prefix) :])
                if i < pages and path == mixed_url(i):
                    return mixed_page(i, pages)
        for prefix, make in (("/p/", js_page), ("/s/", static_page)):
            if path.startswith(prefix) and path[len(prefix) :].isdigit():
                i = int(path[len(prefix) :])
                if i < pages:
                    return make(i, pages)
        if path.startswith("/api/") and path.endswith(".json"):
            i = int(path[5:-5])
            kids = children_of(i, pages)
            return Response(
                body=json.dumps(kids[len(kids) // 2 :]).encode(), content_type="application/json"
            )
        return Response(status=404, body=b"", content_type="text/plain")

    return Site({}, fallback=route)


# -- the contenders (each runs in a child: --child NAME) ----------------------------


def child_trio(start: str, tabs: int, browser: str, render: bool | str) -> list[str]:
    import trio

    import trio_crawl

    found: list[str] = []

    async def main() -> None:
        await trio_crawl.run_crawl(
            start,
            workers=tabs,
            render=render,
            browser=browser if render else None,
            on_record=lambda r: found.append(r.url) if r.error is None else None,
        )

    trio.run(main)
    return found


def child_playwright(start: str, tabs: int, browser: str) -> list[str]:
    import asyncio
    from urllib.parse import urldefrag, urlsplit

    from playwright.async_api import async_playwright

    host = urlsplit(start).netloc

    async def main() -> list[str]:
        seen = {start}
        ok: list[str] = []
        queue: asyncio.Queue[str] = asyncio.Queue()
        queue.put_nowait(start)
        async with async_playwright() as p:
            chromium = await p.chromium.launch(
                executable_path=browser,
                headless=True,
                args=["--no-sandbox"] if os.geteuid() == 0 else [],
            )
            context = await chromium.new_context()

            async def worker() -> None:
                page = await context.new_page()
                while True:
                    url = await queue.get()
                    try:
                        response = await page.goto(url, wait_until="networkidle", timeout=30_000)
                        if response is not None and response.ok:
                            ok.append(url)
                        hrefs = await page.eval_on_selector_all(
                            "a[href]", "els => els.map(e => e.href)"
                        )
                        for href in hrefs:
                            link = urldefrag(href).url
                            if urlsplit(link).netloc == host and link not in seen:
                                seen.add(link)
                                queue.put_nowait(link)
                    except Exception as exc:
                        print(f"playwright: {url}: {exc}", file=sys.stderr)
                    finally:
                        queue.task_done()

            tasks = [asyncio.create_task(worker()) for _ in range(tabs)]
            await queue.join()
            for task in tasks:
                task.cancel()
            await chromium.close()
        return ok

    return asyncio.run(main())


# -- the parent: serve, run, sample -----------------------------------------------------


def memory_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except OSError:
        return 0


def process_kind(pid: int) -> str:
    """What a process of the tree is: Chromium's ``--type`` (``renderer``,
    ``gpu-process``, ``zygote``, ``utility:`` and its service), ``browser``
    for Chromium's main process, else the program's name (python, node)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return "gone"
    # Chromium rewrites its command line into one space-separated string.
    args = [part for arg in raw.decode(errors="replace").split("\0") for part in arg.split(" ")]
    options = dict(a[2:].partition("=")[::2] for a in args if a.startswith("--"))
    kind = options.get("type")
    if kind is None:
        program = os.path.basename(args[0]) if args and args[0] else "?"
        return "browser" if "chrom" in program else program
    if kind == "utility":
        return "utility:" + options.get("utility-sub-type", "?").rpartition(".")[2]
    return kind


class Sampler:
    """Peak PSS and CPU of a process tree, sampled every 50 ms in a thread;
    at the peak, the PSS and count of each kind of process (``--processes``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self.peak_kinds: dict[str, tuple[int, int]] = {}
        self.cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = process_tree(self.pid)
            sizes = {p: memory_kb(p) for p in pids}
            if sum(sizes.values()) > self.peak_kb:
                self.peak_kb = sum(sizes.values())
                kinds: dict[str, tuple[int, int]] = {}
                for p, kb in sizes.items():
                    total, count = kinds.get(process_kind(p), (0, 0))
                    kinds[process_kind(p)] = (total + kb, count + 1)
                self.peak_kinds = kinds
            for p in pids:
                self.cpu[p] = max(self.cpu.get(p, 0.0), process_cpu_s(p))
            self._stop.wait(0.05)

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return self.peak_kb / 1024, sum(self.cpu.values())


def run_child(
    name: str,
    start: str,
    tabs: int,
    browser: str,
    python: str = sys.executable,
    processes: bool = False,
) -> tuple[float, float, float, list[str]]:
    """(crawl seconds, peak MB, CPU s, URLs fetched ok) of one child, run by
    ``python``; ``processes``: print the tree at its peak, by kind of process."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        cmd = [python, __file__, "--child", name, "--start", start, "--tabs", str(tabs),
               "--browser", browser, "--out", out.name]  # fmt: skip
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        sampler = Sampler(child.pid)
        _, err = child.communicate(timeout=1800)
        peak_mb, cpu = sampler.stop()
        if processes:
            kinds = sorted(sampler.peak_kinds.items(), key=lambda item: -item[1][0])
            parts = [f"{kind} {kb / 1024:.0f} MB ({n})" for kind, (kb, n) in kinds]
            print(f"  {name} at {tabs} tabs, peak by process: " + ", ".join(parts))
        if child.returncode != 0:
            raise SystemExit(f"{name} failed:\n{err.decode(errors='replace')[-2000:]}")
        result = json.load(out)
    return result["elapsed"], peak_mb, cpu, result["found"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--tabs", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--browser", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--only", nargs="+", default=["trio-crawl", "playwright", "static"])
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="--render against --render auto on a site where one page in ten is scripted",
    )
    parser.add_argument(
        "--playwright-python",
        default=os.environ.get("PLAYWRIGHT_PYTHON", sys.executable),
        help="the interpreter of a venv with playwright installed (default: this one)",
    )
    parser.add_argument(
        "--processes",
        action="store_true",
        help="also print each run's peak by kind of process (renderers, GPU, browser...)",
    )
    parser.add_argument("--child")
    parser.add_argument("--start")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        tabs = args.tabs[0]
        t0 = time.perf_counter()
        if args.child == "playwright":
            found = child_playwright(args.start, tabs, args.browser)
        else:
            render = {"trio-crawl": True, "render": True, "auto": "auto"}.get(args.child, False)
            found = child_trio(args.start, tabs, args.browser, render=render)
        with open(args.out, "w") as f:
            json.dump({"found": found, "elapsed": time.perf_counter() - t0}, f)
        return

    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; cpus: {os.cpu_count()}")
    print(f"{'crawler':<11} {'tabs':>4} {'pages':>5} {'exact':>5} {'wall s':>7} {'pages/s':>8} "
          f"{'ms/page':>8} {'CPU s':>6} {'CPU ms/page':>11} {'peak MB':>8}")  # fmt: skip
    if args.mixed:
        args.only = ["render", "auto"]
    with serve_site(site(args.pages)) as server:
        for _ in range(args.rounds):
            for tabs in args.tabs:
                for name in args.only:
                    if args.mixed:
                        expected = {server.url(mixed_url(i)) for i in range(args.pages)}
                        start = server.url(mixed_url(0))
                    else:
                        prefix = "/s/" if name == "static" else "/p/"
                        expected = {server.url(f"{prefix}{i}") for i in range(args.pages)}
                        start = server.url(f"{prefix}0")
                    python = args.playwright_python if name == "playwright" else sys.executable
                    wall, peak, cpu, found = run_child(
                        name, start, tabs, args.browser, python, args.processes
                    )
                    exact = set(found) == expected and len(found) == len(expected)
                    n = len(found)
                    print(
                        f"{name:<11} {tabs:>4} {n:>5} {'yes' if exact else 'NO':>5} {wall:>7.1f} "
                        f"{n / wall:>8.1f} {1000 * wall / max(n, 1):>8.1f} {cpu:>6.1f} "
                        f"{1000 * cpu / max(n, 1):>11.1f} {peak:>8.0f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
