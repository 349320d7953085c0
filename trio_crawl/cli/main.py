"""``trio-crawl``: the command line, a thin layer over the library.

``run_cli`` sends ``demo`` and ``report`` to their own modules, a
``--redis`` crawl to ``redis_cli``, and anything else to
``crawl.run_crawl_command``. The modules beneath do not import this one
(``tests/test_layering.py`` checks that the package has no import cycle).
Exit codes and messages: ``cli/common.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..core.url import parse_start_url
from ..errors import ConfigError, StateUsageError
from .common import EXIT_OK, EXIT_USAGE, UsageError, answer, fail
from .crawl import run_crawl_command
from .flags import in_flags
from .parser import build_parser


def run_cli(argv: Sequence[str]) -> int:
    if argv and argv[0] == "demo":
        from .demo import run_demo

        return run_demo(list(argv[1:]))
    if argv and argv[0] == "report":
        from .report import run_report

        return run_report(list(argv[1:]))
    try:
        args = build_parser().parse_args(list(argv))
        if args.redis or args.crawl_id or args.processes is not None:
            from .redis_cli import run_redis_cli  # the Redis frontier: for --redis only

            return run_redis_cli(args, argv, run_cli)
        if args.status:
            if not args.state:
                raise UsageError("--status needs --state FILE")
            from ..frontiers.sqlite.resume import status_text  # SQLite: for --state only

            answer(status_text(args.state))
            return EXIT_OK
        urls = [*getattr(args, "render_urls", []), *args.urls]  # --render URL ...
        start_urls = [parse_start_url(u) for u in urls]
        if not start_urls and args.state:
            from ..frontiers.sqlite.resume import stored_start_urls  # SQLite: for --state only

            start_urls = stored_start_urls(args.state) or []
        if not start_urls and not args.seeds:
            raise UsageError("the following arguments are required: URL (or --seeds FILE)")
    except ConfigError as exc:
        return fail(in_flags(exc), EXIT_USAGE)
    except (UsageError, ValueError, StateUsageError) as exc:
        return fail(str(exc), EXIT_USAGE)
    return run_crawl_command(args, start_urls)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    try:
        code = run_cli(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        # Ctrl-C before the crawl listens for it (start-up, opening outputs):
        # nothing was fetched yet, so stop at once, as the shell expects.
        code = fail("interrupted before the crawl started", 130)
    except BaseExceptionGroup as group:
        # The same Ctrl-C, come while trio was starting: trio delivers it at
        # the crawl task's next checkpoint, inside a nursery that wraps it.
        if group.split(KeyboardInterrupt)[1] is not None:
            raise
        code = fail("interrupted before the crawl started", 130)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader of `-o -` went away; don't let interpreter shutdown complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)
