"""Every command-line option in one table: its flags, its help text, the
``--help`` group it is shown in, and the library option it sets.

The parser (``cli/parser.py``), the mapping from parsed arguments to the
library's options (``cli/options.py``, ``build_config``) and the flag each
library argument is worded as in errors (``cli/flags.py``) are all read off
this table, so a new crawl option is its group's field
(``core/settings.py``), its ``CrawlOptions`` line and one ``Flag`` here.
An option's default is the library's (``CrawlConfig``'s group field)
unless its ``Flag`` says otherwise. Entries are in ``--help`` order.
"""

from __future__ import annotations

import argparse

from ..core.http import DEFAULT_USER_AGENT
from ..core.settings import FETCHERS
from ..frontiers.base import DEFAULT_LEASE
from .option_kinds import COUNT, DURATION, NUMBER, SIZE, Flag, RecrawlOption, RenderOption

__all__ = ["library_flags", "sections"]


def _scope() -> list[Flag]:
    filters = [
        Flag(
            (f"--{flag}",),
            f"follow {what} REGEX (searched in the canonical URL; repeatable; "
            "--exclude wins; start URLs are always fetched)",
            sets=flag,
            metavar="REGEX",
            action="append",
        )
        for flag, what in (("include", "only links matching"), ("exclude", "no links matching"))
    ]
    return [
        Flag(
            ("--max-depth",),
            "follow links at most D hops from a start URL (default: no limit)",
            sets="max_depth",
            parse=COUNT,
            metavar="D",
        ),
        Flag(
            ("--max-pages",),
            "fetch at most P pages, P >= 1 (default: no limit)",
            sets="max_pages",
            parse=COUNT,
            metavar="P",
        ),
        Flag(
            ("--max-time",),
            "stop gracefully after this long (90s, 2m, 1h), as on Ctrl+C; "
            "resumable with --state (default: no limit)",
            sets="max_time",
            parse=DURATION,
            metavar="DURATION",
        ),
        Flag(
            ("--allow-domain",),
            "also crawl HOST and its subdomains (repeatable)",
            sets="allow_domains",
            action="append",
            metavar="HOST",
        ),
        Flag(
            ("--span-hosts",),
            "follow links to any host (like wget -H); robots.txt and politeness per host",
            sets="span_hosts",
            action="store_true",
        ),
        Flag(
            ("--max-pages-per-host",),
            "admit at most N URLs of one host (default: no limit)",
            sets="max_pages_per_host",
            parse=COUNT,
            metavar="N",
        ),
        Flag(
            ("--max-hosts",),
            "crawl at most N distinct hosts (host:port), the start URLs' included "
            "(default: no limit)",
            sets="max_hosts",
            parse=COUNT,
            metavar="N",
        ),
        *filters,
        Flag(
            ("--no-parent",),
            "follow no link above a start URL's directory on its host (like wget -np)",
            sets="no_parent",
            action="store_true",
        ),
        Flag(
            ("-A", "--accept"),
            "follow only files whose name ends with one of these comma-separated suffixes "
            "or matches one of these shell patterns (pdf,jpg; like wget -A); .html pages and "
            "directories are still read for links",
            sets="accept",
            action="append",
            metavar="LIST",
        ),
        Flag(
            ("-R", "--reject"),
            "follow no file whose name ends with one of these suffixes or matches one of "
            "these patterns (like wget -R); .html pages and directories are still read for "
            "links",
            sets="reject",
            action="append",
            metavar="LIST",
        ),
        Flag(
            ("--sitemaps",),
            "also seed from the sitemaps robots.txt lists",
            sets="sitemaps",
            action="store_true",
        ),
        Flag(
            ("--page-requisites",),
            "also fetch the images, scripts, stylesheets (and their url()s), frames and media "
            "each HTML page needs, within scope (like wget -p); they are recorded, not followed",
            sets="page_requisites",
            action="store_true",
        ),
    ]


def _politeness() -> list[Flag]:
    return [
        Flag(
            ("--rate",),
            "at most R requests per second to each host (default: no limit beyond "
            "robots.txt Crawl-delay)",
            sets="rate",
            parse=NUMBER,
            metavar="R",
        ),
        Flag(
            ("--random-wait",),
            "with --rate: space a host's requests 0.5 to 1.5 times 1/R at random "
            "(like wget --random-wait)",
            sets="random_wait",
            action="store_true",
        ),
        Flag(
            ("--per-host-concurrency",),
            "at most C requests in flight to each host (default: no limit but -w)",
            sets="per_host_concurrency",
            parse=COUNT,
            metavar="C",
        ),
        Flag(
            ("--ignore-robots",),
            "do not fetch or obey robots.txt",
            sets="ignore_robots",
            action="store_true",
        ),
        Flag(
            ("--max-crawl-delay",),
            "longest robots.txt Crawl-delay obeyed; larger ones are cut to it (default 60s)",
            sets="max_crawl_delay",
            parse=DURATION,
            metavar="DURATION",
        ),
        Flag(
            ("--max-retry-after",),
            "longest wait a Retry-After header can ask for before a retry (default 60s)",
            sets="max_retry_after",
            parse=DURATION,
            metavar="DURATION",
        ),
    ]


def _identity() -> list[Flag]:
    """Headers, cookies, basic auth and proxy (docs/manual/identity.md): the values
    reach the config through ``identity.identity_options``."""
    return [
        Flag(
            ("--user-agent",),
            "User-Agent header, also the robots.txt token (default: "
            f"{DEFAULT_USER_AGENT.split(' ')[0]} ...)",
            sets="user_agent",
            metavar="UA",
            default=None,  # unset: the library's
        ),
        Flag(
            ("-H", "--header"),
            "send this header (repeatable); Authorization and Cookie only to the start "
            "URLs' hosts",
            sets="headers",
            by_hand=True,
            action="append",
            metavar="'NAME: VALUE'",
        ),
        Flag(
            ("--cookies",),
            "send and keep cookies, starting from this Netscape cookie file (as curl -b / "
            "wget --load-cookies read it)",
            sets="cookies",
            by_hand=True,
            metavar="FILE",
        ),
        Flag(
            ("--save-cookies",),
            "keep cookies during the crawl and write them all to this Netscape cookie file "
            "at the end",
            metavar="FILE",
        ),
        Flag(("--user",), "HTTP basic auth user for the start URLs' hosts only"),
        Flag(("--password",), "HTTP basic auth password (with --user)"),
        Flag(("--netrc",), "basic auth for the start hosts from ~/.netrc", action="store_true"),
        Flag(
            ("--netrc-file",),
            "like --netrc, from FILE",
            sets="netrc_file",
            by_hand=True,
            metavar="FILE",
        ),
        Flag(
            ("--proxy",),
            "send every request through this http(s) proxy ('' for none; default: "
            "$HTTP_PROXY / $HTTPS_PROXY / $NO_PROXY, never for localhost)",
            sets="proxy",
            by_hand=True,
            metavar="URL",
        ),
    ]


def _output(default_output: str | None) -> list[Flag]:
    return [
        Flag(
            ("-o", "--output"),
            "JSON Lines output file ('-' = stdout; default: "
            + (
                "stdout, or crawl-DATE-TIME.jsonl when stdout is a terminal)"
                if default_output is None
                else f"{default_output})"
            ),
            default=default_output,
            metavar="FILE",
        ),
        Flag(("--append",), "append to the output file", action="store_true"),
        Flag(
            ("--depth-updates",),
            "write depth corrections here as JSON Lines (a shorter path to a URL found "
            "after its record was written); the output keeps one line per URL whatever "
            "happens. '-' = stdout, when -o is a file. `trio-crawl report OUT "
            "--depth-updates FILE` applies them (default: counted in the summary, not "
            "written)",
            metavar="FILE",
        ),
        Flag(
            ("--warc",),
            "also archive every request and response as WARC 1.1 (gzip per record; no "
            "extra needed); appended to when a --state crawl resumes",
            metavar="FILE",
        ),
        Flag(
            ("--mirror",),
            "save every fetched body under DIR/host[:port]/path, an offline copy like "
            "wget -m; implies --all-bodies and --page-requisites (not with --state, --seeds, "
            "--max-queue or --redis); -k -E make it browsable; -A/-R choose the files kept",
            sets="mirror",
            metavar="DIR",
        ),
        Flag(
            ("-k", "--convert-links"),
            "with --mirror: when the crawl ends, links to saved files become relative "
            "paths, other links absolute URLs (like wget -k)",
            sets="convert_links",
            action="store_true",
        ),
        Flag(
            ("-E", "--adjust-extension"),
            "with --mirror: add .html / .css to saved names that lack them (like wget -E)",
            sets="adjust_extension",
            action="store_true",
        ),
        Flag(
            ("--mirror-delete-gone",),
            "with --mirror: when the mirror is crawled again, remove the files of pages "
            "now gone (404/410, or a redirect where there was a page); kept by default, "
            "as wget keeps them",
            sets="mirror_delete_gone",
            action="store_true",
        ),
        Flag(
            ("--handler",),
            "async handler for every page (yields items and Requests) instead of link-following",
            sets="handler",
            by_hand=True,
            metavar="MODULE:FUNCTION",
        ),
        Flag(
            ("--items",),
            "write handlers' items here ('-' = stdout; .csv for CSV, else JSON Lines); "
            "required with --handler",
            metavar="FILE",
        ),
        Flag(
            ("--fail-fast",),
            "stop at the first handler error (exit 1)",
            sets="fail_fast",
            by_hand=True,
            action="store_true",
        ),
    ]


def _state(with_urls: bool) -> list[Flag]:
    flags = [
        Flag(
            ("-w", "--workers"),
            "crawler tasks, fixed (default: sized by itself from CPU time and latency, "
            "starting at 64)",
            sets="workers",
            by_hand=True,  # clamped to what the machine can serve
            parse=COUNT,
            metavar="N",
        ),
        Flag(
            ("--max-workers",),
            "the most crawler tasks a self-sized crawl grows to (default: what the "
            "descriptor limit and memory allow)",
            sets="max_workers",
            parse=COUNT,
            metavar="N",
        ),
        Flag(
            ("--parse-process",),
            "extract links in a child process, on another CPU (default: on when 2 or more "
            "CPUs are usable and pages are read for links alone; --no-parse-process: never)",
            sets="parse_process",
            action=argparse.BooleanOptionalAction,
        ),
        Flag(
            ("--grace",),
            "on a stop (Ctrl+C, --max-time), how long in-flight pages may take to finish "
            "(default 10s)",
            sets="grace",
            parse=DURATION,
            metavar="DURATION",
        ),
        Flag(
            ("--state",),
            "keep the frontier in this SQLite file; run the same command again to resume",
            metavar="FILE",
        ),
        Flag(("--status",), "with --state: print progress, exit", action="store_true"),
        Flag(
            ("--recrawl",),
            "with --state: crawl a finished state file again (a --mirror DIR run twice "
            "is a recrawl by itself), asking each known URL whether it changed "
            "(If-None-Match / If-Modified-Since); every record says its change "
            "(new, changed, unchanged, gone, error, unlinked); --recrawl due: only URLs "
            "due by their revisit schedule, and new ones (the others: not_due)",
            sets="recrawl",
            action=RecrawlOption,
            nargs="?",
            metavar="due",
        ),
        Flag(("--force",), "resume a --state file with new args", action="store_true"),
        Flag(("--seeds",), "start URLs from a file, one per line", metavar="FILE"),
        Flag(
            ("--max-queue",),
            "queued URLs kept in memory; the rest wait in SQLite (default with "
            "--state, or --seeds of more than 10000 URLs: 10000; else all in memory)",
            parse=COUNT,
            metavar="N",
        ),
    ]
    if not with_urls:
        return flags
    return [
        *flags,
        Flag(
            ("--redis",),
            "keep the crawl in Redis (redis://host:port/db; a Redis Cluster: "
            "redis+cluster://host:port, or any node's redis:// URL) so that several "
            "processes and machines share it; its password may come from the "
            "environment variable TRIO_CRAWL_REDIS_PASSWORD instead of the URL, which "
            "keeps it out of the command line (ps shows that to every user)",
            metavar="URL",
        ),
        Flag(("--crawl-id",), "with --redis: the crawl to start or join", metavar="NAME"),
        Flag(
            ("--processes",),
            "with --redis: run N worker processes here (-o FILE becomes FILE.1 ... FILE.N)",
            parse=COUNT,
            metavar="N",
        ),
        Flag(
            ("--lease",),
            "with --redis: a worker silent this long is taken for dead and its "
            f"pages are fetched again (default {DEFAULT_LEASE:g}s)",
            parse=DURATION,
            default=DEFAULT_LEASE,
            metavar="DURATION",
        ),
        Flag(
            ("--delete-crawl",),
            "with --redis: delete every key of the crawl from Redis and exit "
            "(refused while it runs; a finished crawl's keys stay until then)",
            action="store_true",
        ),
    ]


def _fetcher() -> list[Flag]:
    return [
        Flag(
            ("--fetcher",),
            "HTTP backend (default curl). asks cannot be installed beside the current trio"
            " (it needs trio < 0.24 and anyio 3): see docs/manual/fetchers.md and `nox -s asks`",
            sets="backend",
            choices=FETCHERS,
        ),
        Flag(
            ("--timeout",),
            "per request (default 30s)",
            sets="timeout",
            parse=DURATION,
            metavar="DURATION",
        ),
        Flag(
            ("--retries",),
            "retries of transient failures: timeouts, refused connections, resets, 429, "
            "502-504 (default 2)",
            sets="retries",
            parse=COUNT,
            metavar="K",
        ),
        Flag(
            ("--max-bytes",),
            "largest body read; a larger one is a too_large record (default 10M)",
            sets="max_bytes",
            parse=SIZE,
            metavar="SIZE",
        ),
        Flag(
            ("--all-bodies",),
            "download non-HTML bodies too (default: HTML only, others are recorded unread)",
            action="store_true",  # html_only=False (--mirror too): build_config
        ),
        Flag(
            ("--ca-bundle",),
            "verify https peers against the CAs in this PEM file (or hashed directory) "
            "instead of the system's (default: $SSL_CERT_FILE / $SSL_CERT_DIR if set)",
            sets="ca_bundle",
            metavar="FILE",
        ),
        Flag(
            ("--http2",),
            "offer HTTP/2 on https connections (default: 1.1)",
            sets="http2",
            action="store_true",
        ),
    ]


def _rendering() -> list[Flag]:
    return [
        Flag(
            ("--render",),
            "render HTML pages in headless Chromium and read links from the rendered DOM;"
            " --render auto: only where rendering adds links (default: no rendering)",
            sets="render",
            action=RenderOption,
            nargs="?",
            metavar="auto",
        ),
        Flag(
            ("--render-wait",),
            "with --render: longest wait for a page to settle, i.e. its load event and"
            " 500 ms with no request in flight (default 5s)",
            sets="render_wait",
            parse=DURATION,
            metavar="DURATION",
            default=None,  # unset: the library's; set without --render: refused
        ),
        Flag(
            ("--browser",),
            "with --render: the Chromium executable (default: $TRIO_CRAWL_BROWSER, else"
            " chromium on PATH)",
            sets="browser",
            metavar="PATH",
        ),
    ]


def _general() -> list[Flag]:
    return [
        Flag(("-q", "--quiet"), "no progress, no summary", action="store_true"),
        Flag(("--debug",), "tracebacks in records and errors", sets="debug", action="store_true"),
    ]


def sections(
    *, default_output: str | None = None, with_urls: bool = True
) -> list[tuple[str | None, list[Flag]]]:
    """The options, by ``--help`` group (None: the parser's own options),
    in ``--help`` order. ``with_urls`` adds the Redis options (not for
    ``trio-crawl demo``)."""
    return [
        ("scope and filters", _scope()),
        ("politeness", _politeness()),
        ("identity", _identity()),
        ("output", _output(default_output)),
        ("state and scale-out", _state(with_urls)),
        ("fetcher", _fetcher()),
        ("rendering (docs/manual/render.md)", _rendering()),
        (None, _general()),
    ]


def library_flags() -> list[Flag]:
    """Every flag that sets a library option."""
    return [flag for _, flags in sections() for flag in flags if flag.sets is not None]
