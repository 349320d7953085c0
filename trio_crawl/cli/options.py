"""The command line's arguments turned into a ``CrawlConfig``, with every
check that can be made before anything is opened or fetched (a bad
combination, a missing extra, an unwritable file: one line, exit 2).

The flags themselves, and which library option each sets, are in
``cli/option_table.py``; ``build_config`` reads them off it, so only the
options that need code of their own (``by_hand``) are named here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..core.config import CrawlConfig, CrawlOptions, option_default
from ..engine.resources import check_resources
from ..errors import ConfigError
from .common import UsageError
from .flags import in_flags
from .handlers import HandlerWatch, load_handler
from .identity import identity_options
from .limits import pinned_workers
from .option_table import library_flags
from .output_paths import output_clash, outputs_of

__all__ = [
    "build_config",
    "check_combinations",
    "check_directory",
    "check_fetcher",
    "check_limits",
    "check_writable",
    "parsed_options",
]


def parsed_options(args: argparse.Namespace) -> dict[str, Any]:
    """The library options the flags set as they were parsed (lists become
    tuples); a flag left unset where the library's default is not None is
    left out, so the library's default holds (``--user-agent``)."""
    options: dict[str, Any] = {}
    for flag in library_flags():
        if flag.by_hand or flag.sets is None or not hasattr(args, flag.dest):
            continue
        value = getattr(args, flag.dest)
        if value is None and option_default(flag.sets) is not None:
            continue
        options[flag.sets] = tuple(value) if isinstance(value, list) else value
    return options


def build_config(
    args: argparse.Namespace,
    start_urls: Sequence[str],
    watch: HandlerWatch | None = None,
) -> CrawlConfig:
    clash = output_clash(outputs_of(args))
    if clash is not None:
        raise UsageError(clash)
    check_limits(args)
    options: CrawlOptions = {
        **parsed_options(args),  # type: ignore[typeddict-item]
        "workers": pinned_workers(args.workers),
        "html_only": not (args.all_bodies or args.mirror),
    }
    if mirror_takes_requisites(args):
        options["page_requisites"] = True
    try:
        options.update(identity_options(args))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if getattr(args, "mirror", None):
        check_directory(args.mirror, "--mirror")
    if getattr(args, "save_cookies", None):
        check_writable(args.save_cookies, "cookie file")
    if getattr(args, "handler", None):
        handler = load_handler(args.handler)
        options["handler"] = watch.wrap(handler) if watch is not None else handler
        options["fail_fast"] = args.fail_fast
    try:
        config = CrawlConfig.from_options(list(start_urls), **options)
        check_resources(config)  # the CA bundle, netrc file and browser, before any output
    except ConfigError as exc:
        raise UsageError(in_flags(exc)) from None
    return config


#: The flags whose frontier (the SQLite file, Redis) keeps no page requisites.
NO_REQUISITES_WITH = ("state", "redis", "seeds", "max_queue")


def mirror_takes_requisites(args: argparse.Namespace) -> bool:
    """Whether ``--mirror`` fetches what its pages need (``--page-requisites``):
    a mirror is read offline, so its pages need their stylesheets, scripts and
    images, as ``wget -m`` fetches them in its recursion. Not where the
    frontier cannot hold requisites (``--state``, ``--redis``, ``--seeds``,
    ``--max-queue``): there the mirror saves what is followed, as before."""
    return bool(args.mirror) and not any(
        getattr(args, name, None) not in (None, False) for name in NO_REQUISITES_WITH
    )


def check_limits(args: argparse.Namespace) -> None:
    """Values that parse but would do nothing useful (no silent no-ops)."""
    if args.max_pages is not None and args.max_pages < 1:
        raise UsageError(
            f"--max-pages must be at least 1 (got {args.max_pages}); leave it out for no limit"
        )
    if args.random_wait and args.rate is None:
        raise UsageError("--random-wait needs --rate R: it varies the interval --rate sets")
    if args.random_wait and getattr(args, "redis", None):
        raise UsageError("--random-wait does not work with --redis yet (Redis spaces requests)")


def check_combinations(args: argparse.Namespace) -> None:
    """Options that only make sense together (no silent no-ops)."""
    handler = getattr(args, "handler", None)
    items = getattr(args, "items", None)
    if handler and not items:
        raise UsageError(
            "--handler needs --items FILE (or -) to keep the items it produces "
            "(--items /dev/null to drop them)"
        )
    if items and not handler:
        raise UsageError("--items needs --handler MODULE:FUNCTION: only handlers produce items")
    if getattr(args, "fail_fast", False) and not handler:
        raise UsageError("--fail-fast needs --handler: it stops at the first handler error")
    if (
        items == "-"
        and args.output in ("-", None)
        and not (args.output is None and sys.stdout.isatty())
    ):
        raise UsageError("--items - and -o - would both write to stdout: give one of them a file")
    updates = getattr(args, "depth_updates", None)
    records_to_stdout = args.output == "-" or (args.output is None and not sys.stdout.isatty())
    if updates == "-" and (records_to_stdout or items == "-"):
        other = (
            "--items -"
            if items == "-"
            else "-o -"
            if args.output == "-"
            else "the records (stdout, without -o FILE)"
        )
        raise UsageError(
            f"--depth-updates - and {other} would both write to stdout: give one of them a file"
        )
    if getattr(args, "state", None) and args.output in ("-", None):
        raise UsageError("--state needs an output file (-o FILE) to resume into")
    if getattr(args, "recrawl", False) and not (
        getattr(args, "state", None) or getattr(args, "mirror", None)
    ):
        # (with --redis: refused before, ``redis_cli``; a --mirror DIR keeps
        # its own visits: run twice, it is a recrawl by itself)
        raise UsageError("--recrawl needs --state FILE (or --mirror DIR): the crawl to do again")
    for flag in ("render_wait", "browser"):
        if getattr(args, flag, None) is not None and not getattr(args, "render", False):
            raise UsageError(f"--{flag.replace('_', '-')} needs --render")
    max_queue = getattr(args, "max_queue", None)
    if max_queue is not None and max_queue < 1:
        raise UsageError(f"--max-queue must be at least 1 (got {max_queue})")


def check_fetcher(backend: str) -> None:
    """The fetcher's library must import here (asks often cannot: docs/manual/fetchers.md)."""
    try:
        if backend == "asks":
            from ..fetch.asks import load_asks

            load_asks()
        else:
            importlib.import_module({"curl": "pycurl", "httpx": "httpx2"}[backend])
    except ImportError as exc:
        raise UsageError(f"--fetcher {backend}: {exc}") from None


def check_directory(path: str, flag: str) -> None:
    """``path`` is a directory, or can become one: no file is in the way
    (found now, before anything is fetched, not as "File exists" at the
    first save)."""
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        shown = path if existing == os.path.abspath(path) else existing
        raise UsageError(
            f"{flag} {path}: not a directory" + ("" if shown == path else f" ({shown} is a file)")
        )


def check_writable(path: str, what: str) -> str:
    """``path`` if it can be written (an existing file, or a new one in a
    writable folder); else ``UsageError``."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path):  # an existing file needs no writable folder (/dev/full)
        writable = not os.path.isdir(path) and os.access(path, os.W_OK)
    else:
        writable = os.path.isdir(folder) and os.access(folder, os.W_OK)
    if not writable:
        raise UsageError(f"cannot write {what} {path!r}")
    return path
