"""``trio-crawl --mirror DIR -k --page-requisites`` against ``wget -m -k -p`` on
one generated site served on 127.0.0.1 (nginx when installed).

    python benchmarks/bench_mirror.py [--pages 20000] [--rounds 2] [--workers 16]
    python benchmarks/bench_mirror.py --doc-dir /usr/share/doc/python3.11/html
    python benchmarks/bench_mirror.py --pages 100000 --page-bytes 2048 --rounds 1 \
        --tools trio-crawl,trio-crawl-plain,trio-crawl-then-k

Each round runs the tools one after the other (alternating which goes
first), each into a fresh directory, and prints per run: wall time, CPU time
(user + system, from ``wait4``), peak RSS (the child's own ``VmHWM``), the
number of files saved and the link conversion's time as the tool itself
reports it (wget's "Converted links in N files in S seconds.", trio-crawl's
summary line "links converted in ... (S s)"). With ``wget-no-k`` and
``trio-crawl-no-k`` in ``--tools`` it also prints each tool's -k CPU as the
difference of the two runs (the same crawl with and without -k).

Then it compares wget's tree with trio-crawl's: the set of relative file paths
(the differences listed, at most 10 each way), how many files the two agree on
byte for byte, and how many once the two spellings of a link the converters
choose differently are undone in wget's copy (``known_spellings``): the byte
count alone is 0 on any site whose every page has a ``#top`` link. The files
that still differ are named with their first differing line.
State the machine's load (``uptime``) next to the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import posixpath
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bytecode import add_source_start, like_installed
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
    cpu: float = 0.0
    #: The conversion's seconds as the tool reports them (None: not reported).
    convert_s: float | None = None


def run(
    cmd: list[str], env: dict[str, str] | None = None, log: Path | None = None
) -> tuple[float, float, int, float]:
    """(wall s, peak RSS MB, exit code, CPU s) of one child process.

    The peak is the child's own ``VmHWM`` where its ``ru_maxrss`` would be this
    harness's (measure.py's ``sample_peak``: Linux carries the parent's RSS at
    ``fork`` into the child's, more than wget's whole peak)."""
    measured = run_measured(cmd, timeout=None, env=env, sample_peak=True, log_path=log)
    return measured.wall_s, measured.peak_rss_mb, measured.exit_code or 0, measured.cpu_s


#: What each tool prints about its link conversion, with the seconds it took.
WGET_CONVERTED = re.compile(r"Converted links in \d+ files in ([\d.]+) seconds")
TRIO_CONVERTED = re.compile(r"links converted in [\d,]+ of [\d,]+ files \(([\d.,]+) s\)")


def reported_seconds(log: Path, pattern: re.Pattern[str]) -> float | None:
    match = pattern.search(log.read_text(errors="replace"))
    return None if match is None else float(match.group(1).replace(",", ""))


def tree(root: Path) -> dict[str, Path]:
    """Relative path (below the host directory) -> file."""
    out: dict[str, Path] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            parts = path.relative_to(root).parts
            out["/".join(parts[1:])] = path
    return out


def crawl(tool: str, url: str, out: Path, workers: int) -> Result:
    log = out.with_suffix(".log")
    convert_s = None
    if tool.startswith("wget"):
        # The default verbosity, into a log: -q and -nv hide wget's conversion time.
        cmd = ["wget", "-m", "-p", "-o", str(log), "-P", str(out), url]
        if tool == "wget":
            cmd.insert(2, "-k")
        wall, rss, code, cpu = run(cmd)
        convert_s = reported_seconds(log, WGET_CONVERTED)
    else:
        cmd = [
            sys.executable, "-m", "trio_crawl", url, "-o", str(out) + ".jsonl",
            "--page-requisites", "-w", str(workers),
        ]  # fmt: skip
        if tool == "trio-crawl":
            cmd += ["--mirror", str(out), "-k"]  # no -q: the summary has the conversion's time
        elif tool == "trio-crawl-no-k":
            cmd += ["--mirror", str(out)]  # the same output as with -k: the difference is -k
        elif tool == "trio-crawl-then-k":
            cmd += ["--mirror", str(out), "-q"]
        else:
            cmd += ["-q"]
        wall, rss, code, cpu = run(cmd, env(), log)
        convert_s = reported_seconds(log, TRIO_CONVERTED)
        if tool == "trio-crawl-then-k":
            convert_wall, convert_rss, convert_code, convert_cpu = run(
                [sys.executable, "-c", CONVERT, str(out)], env()
            )
            print(
                f"  convert links alone: {convert_wall:7.1f} s  CPU {convert_cpu:6.2f} s  "
                f"peak RSS {convert_rss:6.1f} MB  exit {convert_code}"
            )
    return Result(tool, wall, rss, code, tree(out), cpu, convert_s)


def env() -> dict[str, str]:
    """trio-crawl's environment: this checkout first, and (after ``like_installed``)
    its bytecode cache."""
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}


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


#: An attribute value in a converted page (the converters quote every link they write).
_LINK_VALUE = re.compile(rb"""((?:href|src)=")([^"]*)(")""")


def known_spellings(name: str, data: bytes) -> bytes:
    """A converted page with the links that the two converters spell
    differently written one way (benchmarks/README.md), applied to both
    trees: a link to the page itself plus a fragment (wget writes
    ``page.html#top`` for ``#top``) is ``#top``; a ``?`` in a link to a saved
    file (a relative link: no scheme) is ``%3F``, as a browser reading
    ``file://`` needs it (wget writes ``?``)."""
    own = posixpath.basename(name).encode()

    def respell(match: re.Match[bytes]) -> bytes:
        value = match.group(2)
        if b":" in value.split(b"/", 1)[0]:
            return match.group(0)  # absolute: a link back to the site
        path, hash_, fragment = value.partition(b"#")
        path = path.replace(b"?", b"%3F")
        if hash_ and path.replace(b"%3F", b"?").replace(b"&amp;", b"&") == own:
            path = b""
        return match.group(1) + path + hash_ + fragment + match.group(3)

    return _LINK_VALUE.sub(respell, data)


def first_difference(a: bytes, b: bytes) -> str:
    """The bytes around the first place where ``a`` and ``b`` differ."""
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return f"at byte {at}: {a[max(0, at - 40) : at + 40]!r} / {b[max(0, at - 40) : at + 40]!r}"


def compare(a: Result, b: Result) -> list[str]:
    """``a`` is wget's tree, ``b`` trio-crawl's."""
    only_a = sorted(set(a.files) - set(b.files))
    only_b = sorted(set(b.files) - set(a.files))
    common = sorted(set(a.files) & set(b.files))
    same = respelled = 0
    differing: list[str] = []
    for name in common:
        data_a, data_b = a.files[name].read_bytes(), b.files[name].read_bytes()
        if data_a == data_b:
            same += 1
        elif known_spellings(name, data_a) == known_spellings(name, data_b):
            respelled += 1
        else:
            differing.append(name)
    lines = [
        f"files: {a.tool} {len(a.files)}, {b.tool} {len(b.files)}, in both {len(common)}, "
        f"byte-identical {same}, identical once two link spellings are written one way "
        f"{same + respelled}, still different {len(differing)}",
        f"only in {a.tool} ({len(only_a)}): {only_a[:10]}",
        f"only in {b.tool} ({len(only_b)}): {only_b[:10]}",
    ]
    for name in differing[:5]:
        data_a, data_b = (
            known_spellings(name, a.files[name].read_bytes()),
            b.files[name].read_bytes(),
        )
        lines.append(f"  differs: {name}: {first_difference(data_a, data_b)}")
    return lines


def conversion_cpu(results: dict[str, Result]) -> list[str]:
    """Each tool's -k CPU: the run with -k minus the same crawl without."""
    lines = []
    for with_k, without in (("wget", "wget-no-k"), ("trio-crawl", "trio-crawl-no-k")):
        if with_k in results and without in results:
            extra = results[with_k].cpu - results[without].cpu
            lines.append(
                f"{with_k}: -k CPU {extra:6.2f} s ({results[with_k].cpu:.2f} - "
                f"{results[without].cpu:.2f}); reported conversion {results[with_k].convert_s} s"
            )
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
        help="comma list of wget, trio-crawl, wget-no-k and trio-crawl-no-k (the same "
        "mirror without -k: the difference is -k's CPU), trio-crawl-plain (the same crawl "
        "without --mirror: what the mirror adds), trio-crawl-then-k (--mirror without -k, "
        "then the link conversion alone in its own process: its own peak RSS)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the two trees of the last round")
    add_source_start(parser)
    args = parser.parse_args()
    if not args.source_start:
        like_installed([], extra=[str(Path(__file__).parents[1])])
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
                    converting = (
                        "" if result.convert_s is None else f"  convert {result.convert_s} s"
                    )
                    print(
                        f"round {rnd} {tool:>16}: {result.wall:7.1f} s  CPU {result.cpu:6.2f} s  "
                        f"peak RSS {result.rss_mb:6.1f} MB  files {len(result.files):6d}  "
                        f"exit {result.code}{converting}"
                    )
                if "wget" in results and "trio-crawl" in results:
                    for line in compare(results["wget"], results["trio-crawl"]):
                        print("   ", line)
                for line in conversion_cpu(results):
                    print("   ", line)
                if not args.keep or rnd < args.rounds - 1:
                    for tool in order:
                        shutil.rmtree(work / f"{tool}-{rnd}", ignore_errors=True)
                        for suffix in (".log", ".jsonl"):
                            (work / f"{tool}-{rnd}{suffix}").unlink(missing_ok=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept: {work}")
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
