"""A second visit of a changed site (issue #33): trio-crawl ``--recrawl`` against
``wget -r -N``, ``wget2 -r -N`` and Scrapy's RFC2616 HTTP cache, all in one run.

    python benchmarks/recrawl.py [--pages 20000] [--tools trio-crawl,wget,wget2,scrapy]
                                 [--scrapy-python /work/scrapyvenv/bin/python]

The site (``recrawl_site.py``) is written as static files and served by nginx on
several loopback hosts (``recrawl_server.py``: 40 % of the pages send an ETag, 40 %
only Last-Modified, 20 % neither; the last host ignores conditional requests).
Every tool crawls the first version (into its own state: a ``--state`` file, a
``-P`` folder, an HTTPCACHE_DIR); then the files change on disk (10 % of pages
change, 2 % are removed, 2 % are new, unchanged files keep their mtimes); then every
tool crawls again with the same state, as its user would:

* trio-crawl: ``trio-crawl URL --state S.db -o first.jsonl``, then the same with
  ``--recrawl -o second.jsonl`` (the recrawl contract, ``change`` in each record);
* ``wget -r -N -l inf -H -D HOSTS`` and ``wget2 -r -N -l inf -H --domains=HOSTS``
  (their default connections) into the same folder twice; ``wget-head`` is wget
  with ``--no-if-modified-since`` (a HEAD, then a GET when the page is newer: how
  wget -N worked before 1.16), because wget's default stops at the first 304: it
  does not read the links of the copy it kept;
* Scrapy (``scrapy_crawl.py --httpcache DIR``: ``HTTPCACHE_ENABLED``,
  ``RFC2616Policy``) twice with the same cache folder.

For the second crawl it prints one row per tool: wall and CPU time (the child's
rusage), requests and bytes received counted in nginx's access log (``$bytes_sent``,
headers included, the same for every tool), and exactness against the plan: changed,
removed and new pages found, URLs recorded more than once, expected URLs missing.
What "found" means per tool: trio-crawl, the record's ``change`` (and its ``digest``,
where it has one, is the current text's); wget and wget2, a 200 (or a 404 for a
removed page) in the server's log and the new text in the file on disk; Scrapy, the
``sha1`` of the body its spider was given. Then the ideal (the bytes an exact recrawl
must receive: bodies of changed and new pages, of pages with no validator or on the
host that ignores them, and the 404s) and issue #33's goals.
A tool that fails (trio-crawl before ``--recrawl`` exists: exit 2) is a FAILED row;
the others go on. Exit status 1 if any run failed.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bytecode import add_source_start, like_installed, trio_crawl_command
from loopback_hosts import host_addresses
from measure import Measured, machine_info, machine_line, run_measured, text_table
from recrawl_server import LogLine, RecrawlServer, open_recrawl_nginx
from recrawl_site import RecrawlParams, RecrawlPlan, apply_changes, plan, sha1_hex, write_first
from servers import find_nginx, free_port

TOOLS = ("trio-crawl", "wget", "wget-head", "wget2", "scrapy")
SCRAPY_SPIDER = Path(__file__).with_name("scrapy_crawl.py")
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Context:
    site: RecrawlPlan
    server: RecrawlServer
    work: Path
    workers: int
    trio_cmd: list[str]
    scrapy_python: str
    timeout: float

    def url(self, number: int) -> str:
        page = self.site.second.get(number) or self.site.first[number]
        return f"http://{self.server.addresses[page.host]}:{self.server.port}{page.path}"

    @property
    def start(self) -> str:
        return self.url(0)


def command(tool: str, phase: int, ctx: Context) -> list[str]:
    """How a user runs ``tool`` for crawl ``phase`` (1 or 2) with the same state."""
    home = ctx.work / tool
    addresses = ctx.server.addresses
    if tool == "trio-crawl":
        allow = [w for a in addresses[1:] for w in ("--allow-domain", a)]
        recrawl = ["--recrawl"] if phase == 2 else []
        return [
            *ctx.trio_cmd, ctx.start, "--state", str(home / "S.db"),
            "-o", str(home / f"{'first' if phase == 1 else 'second'}.jsonl"),
            "-q", "-w", str(ctx.workers), *allow, *recrawl,
        ]  # fmt: skip
    if tool in ("wget", "wget-head"):
        head = ["--no-if-modified-since"] if tool == "wget-head" else []
        return ["wget", "-r", "-N", *head, "-l", "inf", "-H", "-D", ",".join(addresses), "-nv",
                "-P", str(home / "tree"), ctx.start]  # fmt: skip
    if tool == "wget2":
        return ["wget2", "-r", "-N", "-l", "inf", "-H", f"--domains={','.join(addresses)}",
                "-nv", "-P", str(home / "tree"), ctx.start]  # fmt: skip
    if tool == "scrapy":
        hosts = [w for a in addresses[1:] for w in ("--allow-host", f"{a}:{ctx.server.port}")]
        return [
            ctx.scrapy_python, str(SCRAPY_SPIDER), ctx.start, "--workers", str(ctx.workers),
            "--output", str(home / f"items{phase}.jsonl"),
            "--stats", str(home / f"stats{phase}.json"),
            "--httpcache", str(home / "cache"), *hosts,
        ]  # fmt: skip
    raise ValueError(tool)


@dataclass
class Run:
    tool: str
    phase: int
    measured: Measured
    lines: list[LogLine]
    log: Path

    @property
    def failed(self) -> str:
        """Why the run failed ("" if it did not)."""
        if self.measured.timed_out:
            return "timed out"
        code = self.measured.exit_code
        # wget: 8 is "the server answered an error" (our 404s), not a failure.
        if code in (0, None) or (self.tool in ("wget", "wget-head", "wget2") and code == 8):
            return ""
        tail = (
            self.log.read_text(errors="replace").strip().splitlines()[-1:]
            if self.log.exists()
            else []
        )
        return f"exit {code}: {tail[0][:100] if tail else ''}"

    @property
    def bytes_sent(self) -> int:
        return sum(line.bytes_sent for line in self.lines)


def crawl(tool: str, phase: int, ctx: Context) -> Run:
    home = ctx.work / tool
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"log{phase}.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    mark = ctx.server.mark()
    measured = run_measured(command(tool, phase, ctx), timeout=ctx.timeout, log_path=log, env=env)
    lines = ctx.server.lines_since(mark)
    (home / f"access{phase}.log").write_text("".join(f"{line}\n" for line in lines))
    return Run(tool, phase, measured, lines, log)


# --- what each tool found ---------------------------------------------------------------


@dataclass
class Found:
    """A tool's second crawl against the plan's outcomes."""

    changed: int = 0
    removed: int = 0
    new: int = 0
    duplicates: int = 0
    missing: int = 0
    wrong: int = 0  # trio-crawl: a wrong ``change``; others: a stale body given or kept
    notes: list[str] = field(default_factory=list)


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def judge_trio_crawl(ctx: Context, outcomes: dict[int, str]) -> Found:
    records = _records(ctx.work / "trio-crawl" / "second.jsonl")
    by_url: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_url[record["url"]].append(record)
    found = Found()
    wrong: list[str] = []
    for number, kind in outcomes.items():
        got = by_url.pop(ctx.url(number), [])
        if not got:
            found.missing += 1
            continue
        found.duplicates += len(got) > 1
        change = got[0].get("change")
        digest = got[0].get("digest")
        if digest is not None and kind not in ("gone", "unlinked"):
            current = ctx.site.body(number, ctx.site.version(number), *_site_address(ctx))
            if digest != payload_digest(current):
                found.wrong += 1
                wrong.append(f"{number}: digest {digest} is not the current text's")
                continue
        found.changed += kind == "changed" and change == "changed"
        found.new += kind == "new" and change == "new"
        if number in ctx.site.removed and change in ("gone", "unlinked"):
            found.removed += 1
        if change != kind:
            found.wrong += 1
            wrong.append(f"{number}: {change} (expected {kind})")
    found.wrong += len(by_url)
    if wrong:
        found.notes.append(f"wrong change: {wrong[:3]}")
    if by_url:
        found.notes.append(f"unexpected URLs: {sorted(by_url)[:3]}")
    return found


def payload_digest(body: bytes) -> str:
    """The record's ``digest``: ``sha1:`` and the base32 SHA-1, as in WARC-Payload-Digest."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()


def _site_address(ctx: Context) -> tuple[list[str], int]:
    return ctx.server.addresses, ctx.server.port


def judge_wget(tool: str, ctx: Context, run: Run, outcomes: dict[int, str]) -> Found:
    """From the server's log (what was asked, what was answered) and the folder."""
    gets: dict[str, list[int]] = defaultdict(list)
    asked: dict[str, list[int]] = defaultdict(list)  # any method: HEAD too
    for line in run.lines:
        asked[line.url].append(line.status)
        if line.method == "GET":
            gets[line.url].append(line.status)
    tree = ctx.work / tool / "tree"
    found = Found()
    stale_removed = 0
    for number, kind in outcomes.items():
        url = ctx.url(number)
        found.duplicates += len(gets.get(url, [])) > 1
        page = ctx.site.second.get(number) or ctx.site.first[number]
        address = ctx.server.addresses[page.host]
        file = tree / f"{address}:{ctx.server.port}" / page.path.lstrip("/")
        if not file.exists():  # wget2 names the folder without the port
            file = tree / address / page.path.lstrip("/")
        if number in ctx.site.removed:
            found.removed += 404 in asked.get(url, [])
            stale_removed += file.exists()
        if kind in ("unlinked", "gone"):
            found.missing += kind == "gone" and url not in asked
            continue
        found.missing += url not in asked
        want = ctx.site.body(
            number, ctx.site.version(number), ctx.server.addresses, ctx.server.port
        )
        current = file.exists() and file.read_bytes() == want
        found.wrong += not current
        if kind in ("changed", "new") and 200 in gets.get(url, []) and current:
            setattr(found, kind, getattr(found, kind) + 1)
    if found.wrong:
        found.notes.append(f"{found.wrong} pages are not on disk with their current text")
    found.notes.append(f"{stale_removed} removed pages still on disk")
    return found


def judge_scrapy(ctx: Context, outcomes: dict[int, str]) -> Found:
    items: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in _records(ctx.work / "scrapy" / "items2.jsonl"):
        items[item["url"]].append(item)
    found = Found()
    for number, kind in outcomes.items():
        got = items.get(ctx.url(number), [])
        if kind == "unlinked":
            continue
        if not got:
            found.missing += 1
            continue
        found.duplicates += len(got) > 1
        if number in ctx.site.removed:
            found.removed += any(i.get("status") == 404 for i in got)
            continue
        want = sha1_hex(
            ctx.site.body(number, ctx.site.version(number), ctx.server.addresses, ctx.server.port)
        )
        current = got[0].get("sha1") == want
        found.wrong += not current
        if kind in ("changed", "new") and current:
            setattr(found, kind, getattr(found, kind) + 1)
    stats = ctx.work / "scrapy" / "stats2.json"
    if stats.exists():
        data = json.loads(stats.read_text())
        cache = {k.split("/", 1)[1]: v for k, v in data.items() if k.startswith("httpcache/")}
        found.notes.append(f"cache: {cache}")
    if found.wrong:
        found.notes.append(f"{found.wrong} pages given to the spider with their old text (cached)")
    return found


# --- the ideal and the report ----------------------------------------------------------------


def not_found_bytes(server: RecrawlServer) -> int:
    """What nginx sends for one 404 (headers and body), asked once."""
    import http.client

    conn = http.client.HTTPConnection(server.addresses[0], server.port, timeout=5)
    try:
        conn.request("GET", "/e/no-such-page.html")
        response = conn.getresponse()
        body = response.read()
        head = sum(len(k) + len(v) + 4 for k, v in response.getheaders()) + 17 + 2
        return len(body) + head
    finally:
        conn.close()


def ideal_bytes(ctx: Context, outcomes: dict[int, str], gone_bytes: int) -> int:
    """Bodies an exact recrawl cannot avoid receiving (see the module docstring)."""
    total = 0
    for number, kind in outcomes.items():
        if kind == "gone":
            total += gone_bytes
            continue
        if kind == "unlinked":
            continue
        page = ctx.site.second[number]
        must = (
            kind in ("changed", "new") or page.group == "n" or page.host == ctx.site.ignoring_host
        )
        if must:
            total += len(
                ctx.site.body(
                    number, ctx.site.version(number), ctx.server.addresses, ctx.server.port
                )
            )
    return total


def available(tool: str, scrapy_python: str) -> str:
    """Why ``tool`` cannot run here ("" if it can)."""
    binary = tool.removesuffix("-head")
    if binary in ("wget", "wget2") and shutil.which(binary) is None:
        return f"{binary} is not installed (apt-get install -y {binary})"
    if tool == "scrapy":
        done = subprocess.run(
            [scrapy_python, "-c", "import scrapy"], capture_output=True, check=False
        )
        if done.returncode:
            return f"no scrapy in {scrapy_python} (--scrapy-python PATH)"
    return ""


def report(ctx: Context, runs: dict[tuple[str, int], Run], tools: list[str]) -> int:
    outcomes = ctx.site.outcomes()
    kinds = Counter(outcomes.values())
    gone = not_found_bytes(ctx.server)
    ideal = ideal_bytes(ctx, outcomes, gone)
    removed_total = len(ctx.site.removed)
    print(
        f"\nsecond visit: {kinds['changed']} changed, {removed_total} removed ({kinds['gone']} "
        f"still linked: 404), {kinds['new']} new ({len(ctx.site.deep_new)} behind unchanged "
        f"pages), {kinds['unchanged']} unchanged, {kinds['unlinked']} unlinked"
    )
    header = ["tool", "crawl", "wall s", "CPU s", "requests", "304s", "MB received", "x ideal",
              "changed", "removed", "new", "dupes", "missing", "wrong", "result"]  # fmt: skip
    rows, notes = [], []
    failed = 0
    for tool in tools:
        for phase in (1, 2):
            run = runs.get((tool, phase))
            if run is None:
                continue
            why = run.failed
            failed += bool(why)
            cells = [
                tool, "first" if phase == 1 else "second", f"{run.measured.wall_s:.1f}",
                f"{run.measured.cpu_s:.1f}", str(len(run.lines)),
                str(sum(line.status == 304 for line in run.lines)),
                f"{run.bytes_sent / 1e6:.1f}",
                f"{run.bytes_sent / ideal:.2f}" if phase == 2 else "",
            ]  # fmt: skip
            if phase == 1 or why:
                rows.append([*cells, "", "", "", "", "", "", f"FAILED ({why})" if why else "OK"])
                continue
            if tool == "trio-crawl":
                found = judge_trio_crawl(ctx, outcomes)
            elif tool == "scrapy":
                found = judge_scrapy(ctx, outcomes)
            else:
                found = judge_wget(tool, ctx, run, outcomes)
            exact = (
                found.changed == kinds["changed"]
                and found.removed == removed_total
                and found.new == kinds["new"]
                and not (found.duplicates or found.missing or found.wrong)
            )
            rows.append([
                *cells, f"{found.changed}/{kinds['changed']}", f"{found.removed}/{removed_total}",
                f"{found.new}/{kinds['new']}", str(found.duplicates), str(found.missing),
                str(found.wrong), "exact" if exact else "NOT exact",
            ])  # fmt: skip
            notes += [f"{tool}: {n}" for n in found.notes]
    print(text_table(header, rows, left=(0, 1, -1)))
    print(f"ideal recrawl: {ideal / 1e6:.1f} MB (a full crawl of the second version receives "
          f"{full_bytes(ctx, outcomes) / 1e6:.1f} MB of bodies)")  # fmt: skip
    for note in notes:
        print("  " + note)
    goals(runs, ideal)
    return 1 if failed else 0


def full_bytes(ctx: Context, outcomes: dict[int, str]) -> int:
    return sum(
        len(ctx.site.body(n, ctx.site.version(n), ctx.server.addresses, ctx.server.port))
        for n, kind in outcomes.items()
        if kind not in ("gone", "unlinked")
    )


def goals(runs: dict[tuple[str, int], Run], ideal: int) -> None:
    """Issue #33's goals for trio-crawl, measured in this run."""
    second = runs.get(("trio-crawl", 2))
    first = runs.get(("trio-crawl", 1))
    if second is None or first is None or second.failed or first.failed:
        print("goals: n/a (no trio-crawl recrawl in this run)")
        return

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    share = second.bytes_sent / ideal
    print(f"goal bytes <= 1.1x ideal: {share:.2f}x, {verdict(share <= 1.1)}")
    ratio = second.measured.wall_s / first.measured.wall_s
    print(
        f"goal second crawl <= 1/3 of the full crawl's wall time: {ratio:.2f}, "
        f"{verdict(ratio <= 1 / 3)}"
    )
    for tool in ("wget", "wget-head", "wget2"):
        other = runs.get((tool, 2))
        if other is not None and not other.failed:
            ok = second.measured.wall_s < other.measured.wall_s
            print(f"goal faster than {tool} -N: {second.measured.wall_s:.1f} s against "
                  f"{other.measured.wall_s:.1f} s, {verdict(ok)}")  # fmt: skip
    scrapy = runs.get(("scrapy", 2))
    if scrapy is not None and not scrapy.failed:
        ok = second.bytes_sent < scrapy.bytes_sent
        print(f"goal fewer bytes than Scrapy's cache: {second.bytes_sent / 1e6:.1f} MB against "
              f"{scrapy.bytes_sent / 1e6:.1f} MB, {verdict(ok)}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pages", type=int, default=20_000, help="pages of the first version (>= 50)"
    )
    parser.add_argument(
        "--hosts", type=int, default=4, help="loopback hosts; the last ignores validators"
    )
    parser.add_argument("--page-bytes", type=int, default=8192)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--workers", type=int, default=16, help="trio-crawl -w and Scrapy's concurrency"
    )
    parser.add_argument(
        "--tools", default=",".join(TOOLS), help=f"comma list of {', '.join(TOOLS)}"
    )
    parser.add_argument(
        "--scrapy-python", default=sys.executable, help="the Python that has Scrapy"
    )
    parser.add_argument(
        "--trio-crawl-cmd", help="how to start trio-crawl (default: its console script)"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per crawl")
    parser.add_argument("--keep-output", type=Path, help="keep every tool's state and output here")
    add_source_start(parser)
    args = parser.parse_args(argv)
    tools = [t for t in args.tools.split(",") if t]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tools {unknown}; choose from {', '.join(TOOLS)}")
    if find_nginx() is None:
        print("recrawl needs nginx (apt-get install -y nginx)", file=sys.stderr)
        return 2
    for tool in list(tools):
        why = available(tool, args.scrapy_python)
        if why:
            print(f"skipped {tool}: {why}")
            tools.remove(tool)
    if not args.source_start:
        like_installed([args.trio_crawl_cmd or ""])
    print(machine_line(machine_info()))
    params = RecrawlParams(
        pages=args.pages, hosts=args.hosts, page_bytes=args.page_bytes, seed=args.seed
    )
    work = args.keep_output or Path(tempfile.mkdtemp(prefix="bench-recrawl-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        site = plan(params)
        addresses = host_addresses(params.hosts)
        port = free_port(addresses[0])
        root = work / "site"
        write_first(site, root, addresses, port)
        print(f"site: {len(site.first)} pages of ~{params.page_bytes} B on {params.hosts} hosts, "
              f"written in {time.perf_counter() - started:.1f} s")  # fmt: skip
        with open_recrawl_nginx(root, params.hosts, port) as server:
            print(f"server: {server.broad.description}")
            trio_cmd = trio_crawl_command(args.trio_crawl_cmd)
            ctx = Context(
                site, server, work, args.workers, trio_cmd, args.scrapy_python, args.timeout
            )
            runs: dict[tuple[str, int], Run] = {}
            for phase in (1, 2):
                if phase == 2:
                    apply_changes(site, root, addresses, port)
                for tool in tools:
                    run = crawl(tool, phase, ctx)
                    runs[(tool, phase)] = run
                    failed = f", FAILED ({run.failed})" if run.failed else ""
                    print(
                        f"crawl {phase} {tool}: {run.measured.wall_s:.1f} s, "
                        f"{len(run.lines)} requests{failed}",
                        flush=True,
                    )
            print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            return report(ctx, runs, tools)
    finally:
        if args.keep_output is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept: {work}")


if __name__ == "__main__":
    sys.exit(main())
