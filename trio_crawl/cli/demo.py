"""``trio-crawl demo``: serve the built-in demo site on 127.0.0.1 and crawl it.

For a new user with no internet: one command shows the crawler working,
faults included (a retried 503, a redirect loop, robots.txt, a slow page).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..sites.demo import demo_site
from ..sites.server import serve_site
from .common import EXIT_USAGE, UsageError, fail, tell
from .crawl import run_crawl_command
from .parser import build_parser

DEFAULT_OUTPUT = "demo-crawl.jsonl"


def run_demo(argv: Sequence[str]) -> int:
    parser = build_parser("trio-crawl demo", with_urls=False, default_output=DEFAULT_OUTPUT)
    parser.description = "Serve a built-in site on 127.0.0.1 and crawl it."
    parser.add_argument(
        "--pages", type=int, default=300, help="size of the demo site (default 300)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the demo site's random seed (default 0)"
    )
    try:
        args = parser.parse_args(list(argv))
        if args.pages < 1:
            raise UsageError(f"--pages must be at least 1 (got {args.pages})")
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    with serve_site(demo_site(pages=args.pages, seed=args.seed)) as server:
        start = server.base_url + "/"
        if not args.quiet:
            tell(f"demo site serving at {start}; records go to {args.output}")
        return run_crawl_command(args, [start])
