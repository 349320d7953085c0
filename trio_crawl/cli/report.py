"""``trio-crawl report FILE [--depth-updates FILE] -o report.html``: a crawl's
JSON Lines (and the corrections of its depths) as one HTML page.

Exit codes: 0 written; 2 bad arguments, an input that is not a crawl's JSON
Lines, an output that cannot be written, or the ``report`` extra missing
(one line on stderr each time).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence

from ..errors import ReportInputError
from ..report.aggregate import aggregate_file
from ..report.changes import byte_size, recrawl_line
from .common import UsageError, UsageParser, answer_bytes, counted, fail, say, tell
from .output_paths import overwrites_input

EXIT_OK = 0
EXIT_USAGE = 2
DEFAULT_OUTPUT = "report.html"
#: Names matplotlib itself: ``pip install 'trio-crawl[report]'`` fails where
#: trio-crawl was installed from a checkout (pip looks for it on the index).
MISSING_EXTRA = (
    "trio-crawl report needs the optional plotting library matplotlib: pip install matplotlib"
)


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = UsageParser(
        prog="trio-crawl report",
        description="Write one self-contained HTML page (charts as inline SVG, "
        "viewable offline) about a crawl's JSON Lines output.",
    )
    p.add_argument(
        "input", metavar="FILE", help="JSON Lines written by trio-crawl -o FILE ('-' = stdin)"
    )
    p.add_argument(
        "--depth-updates",
        metavar="FILE",
        help="the crawl's --depth-updates file: its corrections are applied "
        "(depth chart, failing URLs' depth and referrer)",
    )
    p.add_argument(
        "-o",
        "--output",
        default=DEFAULT_OUTPUT,
        help=f"HTML file to write ('-' = stdout; default {DEFAULT_OUTPUT})",
    )
    p.add_argument(
        "--top", type=_at_least_one, default=20, help="hosts and slowest pages shown (default 20)"
    )
    p.add_argument(
        "--failures-per-kind",
        type=_at_least_one,
        default=500,
        metavar="N",
        help="failing URLs listed per error kind (default 500)",
    )
    return p


def _fail(message: str) -> int:
    return fail(message, EXIT_USAGE)


def _write(path: str, text: str) -> int:
    """Write ``text`` to ``path`` whole or not at all; return its size in bytes."""
    data = text.encode("utf-8")
    if path == "-":
        answer_bytes(data)
        return len(data)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html.tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; be an ordinary file
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return len(data)


def run_report(argv: Sequence[str]) -> int:
    try:
        args = build_parser().parse_args(list(argv))
        if args.input == "-" and args.depth_updates == "-":
            raise UsageError("FILE and --depth-updates cannot both be stdin (-)")
        clash = overwrites_input(
            ("-o", args.output), [("FILE", args.input), ("--depth-updates", args.depth_updates)]
        )
        if clash is not None:
            raise UsageError(clash)
    except UsageError as exc:
        return _fail(str(exc))
    try:
        from ..report.html import render_html, require_matplotlib

        require_matplotlib()
    except ImportError:
        tell(MISSING_EXTRA)
        return EXIT_USAGE
    started = time.perf_counter()
    try:
        data = aggregate_file(
            args.input,
            args.depth_updates,
            top=args.top,
            failures_per_kind=args.failures_per_kind,
        )
    except ReportInputError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130
    for warning in data.warnings:
        say(f"warning: {warning}")
    source = "stdin" if args.input == "-" else os.path.basename(args.input)
    page = render_html(data, source=source)
    try:
        size = _write(args.output, page)
    except OSError as exc:
        return _fail(f"cannot write {args.output!r}: {exc.strerror or exc}")
    if args.output != "-":
        say(
            f"wrote {args.output} ({counted(data.records, 'record')}, {byte_size(size)}) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        if data.recrawl is not None:
            say(recrawl_line(data.recrawl))
    return EXIT_OK
