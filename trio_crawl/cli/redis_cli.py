"""``--redis``: one crawl shared by worker processes on one or many machines.

    trio-crawl URL --redis redis://host:6379/0 --crawl-id NAME -o out-$HOST.jsonl
    trio-crawl --redis redis://host:6379/0 --crawl-id NAME -o out2.jsonl   # join it
    trio-crawl --redis redis://host:6379/0 --crawl-id NAME --status
    trio-crawl --redis redis://host:6379/0 --crawl-id NAME --delete-crawl  # its keys
    trio-crawl URL --redis ... --crawl-id NAME --processes 4 -o out.jsonl  # out.1.jsonl ...

Each worker appends to its own output file (a torn last line is cut first),
and exits 0 when the whole crawl is done, at the same moment as the others.
Exit codes beyond the usual ones: 2 when the Redis URL is bad, Redis cannot
be reached at the start, may evict keys (its maxmemory-policy is not
noeviction), or the crawl id names a crawl with other settings; 75 when
Redis is lost or refuses a call (out of memory: at the start too), the
crawl's keys vanish (deleted, FLUSHALL), or a ``--processes`` worker was
killed by a signal (said in words); 141 when the reader of ``--status``
went away (``| head``), as a Unix tool killed by SIGPIPE. A Redis URL's
password is never printed; it may come from ``TRIO_CRAWL_REDIS_PASSWORD``
instead (``--processes`` hands it to its workers that way, never in argv).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

import trio

from ..core.config import CrawlConfig
from ..errors import CrawlMismatch, RedisFrontierError, RedisLost, RedisUnavailable
from ..frontiers.base import FrontierBackend
from ..frontiers.redis import (
    PASSWORD_ENV,
    RedisFrontier,
    check_server,
    crawl_status,
    default_worker_name,
    delete_crawl,
    redact_url,
    status_lines,
    url_problem,
    url_without_password,
)
from ..frontiers.resumed_output import repair_output
from ..frontiers.specs import redis_frontier
from .common import (
    EXIT_OK,
    EXIT_REDIS_LOST,
    EXIT_SOFTWARE,
    EXIT_USAGE,
    SIGNAL_EXIT,
    UsageError,
    answer,
    fail,
    say,
    tell,
)
from .crawl import Outputs, check_warc_path, crawl_with_ui, open_output
from .options import build_config

#: ``--status`` whose reader went away: as a Unix tool killed by SIGPIPE.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE

#: The whole command line (``main.run_cli``), for a forked worker to run.
RunCli = Callable[[Sequence[str]], int]


#: Settings a joining worker takes from the crawl when it gives no URL.
_ADOPTED = {
    "allow_domains": "allow_domain",
    "max_depth": "max_depth",
    "max_pages": "max_pages",
    "rate": "rate",
    "per_host_concurrency": "per_host_concurrency",
    "ignore_robots": "ignore_robots",
    "span_hosts": "span_hosts",  # True, or None (stored so without it)
    "max_pages_per_host": "max_pages_per_host",
    "max_hosts": "max_hosts",
}


def _quiet_coredis() -> None:
    # coredis logs failed connection attempts with tracebacks; we say it in one line.
    logging.getLogger("coredis").addHandler(logging.NullHandler())
    logging.getLogger("coredis").propagate = False


def _check_usage(args: argparse.Namespace) -> str | None:
    if not args.redis:
        return "--processes and --crawl-id need --redis URL"
    if not args.crawl_id:
        return "--redis needs --crawl-id NAME (the crawl to start or join)"
    problem = url_problem(args.redis)
    if problem is not None:
        return f"--redis: {problem}"
    if getattr(args, "page_requisites", False):
        return "--redis cannot be combined with --page-requisites yet"
    if getattr(args, "recrawl", False):
        return (
            "--recrawl cannot be combined with --redis: a recrawl compares with the "
            "visits a --state file keeps, and Redis keeps none"
        )
    for option in ("state", "seeds", "max_queue", "save_cookies"):
        if getattr(args, option, None) is not None:
            return f"--redis cannot be combined with --{option.replace('_', '-')}"
    if getattr(args, "depth_updates", None) == "-":
        if args.processes is not None:
            return "--processes needs --depth-updates FILE, not -: each worker writes its own"
        if args.output in ("-", None):
            return "--depth-updates - and the records (-o -) would both write to stdout"
    if args.processes is not None and args.processes < 1:
        return f"--processes must be at least 1 (got {args.processes})"
    if args.lease <= 0:
        return f"--lease must be > 0 (got {args.lease})"
    return None


def run_redis_cli(args: argparse.Namespace, argv: Sequence[str], run_cli: RunCli) -> int:
    """``trio-crawl ... --redis``: a status, N local workers, or one worker.
    ``run_cli`` is the whole command line, which a forked worker runs on its
    own arguments (passed in: this module does not import ``main``)."""
    _quiet_coredis()
    problem = _check_usage(args)
    if problem:
        return fail(problem, EXIT_USAGE)
    if args.delete_crawl:
        return _delete(args)
    try:
        stored = trio.run(crawl_status, args.redis, args.crawl_id)
        if not args.status:
            trio.run(check_server, args.redis)
    except RedisLost as exc:  # refused (out of memory) or lost: as mid-crawl
        return fail(str(exc), EXIT_REDIS_LOST)
    except RedisFrontierError as exc:
        return fail(str(exc), EXIT_USAGE)
    if args.status:
        if stored is None:
            where = redact_url(args.redis)
            return fail(f"no crawl {args.crawl_id!r} in Redis at {where}", EXIT_USAGE)
        return _print_status("\n".join(status_lines(args.crawl_id, stored)))
    if args.processes is not None:
        return run_processes(args, argv, run_cli)
    start_urls = [*getattr(args, "render_urls", []), *args.urls]  # --render URL ...
    if not start_urls:
        if stored is None:
            return fail(
                f"no crawl {args.crawl_id!r} in Redis yet: give its start URL(s) to create it",
                EXIT_USAGE,
            )
        settings = stored["settings"]
        start_urls = list(settings["start_urls"])
        for key, option in _ADOPTED.items():
            setattr(args, option, settings[key])
        filters = settings.get("filters") or {}
        args.include = filters.get("include", [])
        args.exclude = filters.get("exclude", [])
        args.no_parent = filters.get("no_parent", False)
        args.accept = filters.get("accept", [])
        args.reject = filters.get("reject", [])
    try:
        config = build_config(args, start_urls)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    return run_worker(args, config)


def _print_status(text: str) -> int:
    """Print ``--status`` on stdout; a reader gone away (``| head -c0``) ends
    it quietly with 141, as a Unix tool killed by SIGPIPE."""
    try:
        answer(text)
    except BrokenPipeError:
        # Interpreter shutdown flushes stdout again: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return EXIT_OK


def _earlier_records(output: str) -> int:
    """Records already in ``output`` (an earlier run's), 0 for stdout."""
    if output == "-" or not os.path.exists(output):
        return 0
    with open(output, "rb") as lines:
        return sum(1 for line in lines if line.strip() and b'"depth_update"' not in line)


def _delete(args: argparse.Namespace) -> int:
    """``--delete-crawl``: the crawl's keys go; its records stay where they are."""
    try:
        deleted = trio.run(delete_crawl, args.redis, args.crawl_id)
    except RedisLost as exc:
        return fail(str(exc), EXIT_REDIS_LOST)
    except RedisFrontierError as exc:
        return fail(str(exc), EXIT_USAGE)
    if deleted:
        say(f"deleted crawl {args.crawl_id!r} ({deleted} keys)")
    else:
        say(f"no crawl {args.crawl_id!r} in Redis: nothing to delete")
    return EXIT_OK


def _warn(message: str) -> None:
    say(f"warning: {message}")


def run_worker(args: argparse.Namespace, config: CrawlConfig) -> int:
    """One worker of the crawl, in this process."""
    output = args.output or "-"
    updates = getattr(args, "depth_updates", None)
    for path in (output, updates):
        if path not in (None, "-"):
            repair_output(path)  # a kill mid-write leaves a torn line
    try:
        warc = check_warc_path(getattr(args, "warc", None))
        records = open_output(output)
        depth_updates = None if updates is None else open_output(updates)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    # Every worker run appends, to its records and to its depth corrections.
    outputs = Outputs(records, append=True, depth_updates=depth_updates)
    earlier = _earlier_records(output)

    joined: RedisFrontier | None = None

    def opened(frontier: FrontierBackend | None) -> None:
        """The crawl builder has opened the frontier: say whose crawl this is."""
        nonlocal joined
        assert isinstance(frontier, RedisFrontier)
        joined = frontier
        if not args.quiet:
            verb = "started" if frontier.created else "joined"
            say(f"{verb} crawl {args.crawl_id!r} as worker {frontier.owner}")
        if frontier.created and earlier:
            # Redis lost the crawl (a restart without persistence), or
            # the output is reused for a new crawl id: say what happens.
            _warn(
                f"crawl {args.crawl_id!r} was not in Redis, so this run started it "
                f"anew: the {earlier:,} records already in {output} are from an "
                "earlier crawl, and their pages are fetched again"
            )
        elif earlier and not frontier.known_name:
            # Joining a crawl that never had this worker: another worker
            # started it anew after Redis lost the one these records are of.
            _warn(
                f"the {earlier:,} records already in {output} are not of crawl "
                f"{args.crawl_id!r} as Redis knows it (Redis lost that crawl and "
                "another worker started it anew, or the output is another crawl's): "
                "their pages are fetched again"
            )

    async def work() -> int:
        # Opened by the crawl builder, as the library's run_crawl(frontier=) does.
        spec = redis_frontier(
            args.redis,
            args.crawl_id,
            name=default_worker_name(output),
            lease=args.lease,
            notice=_warn,
        )
        show = not args.quiet and sys.stderr.isatty()
        try:
            ending = await crawl_with_ui(
                config,
                outputs,
                show=show,
                quiet=args.quiet,
                frontier=spec,
                output=None if records.is_stdout else records.path,
                warc=warc,  # appended to, like the output: a rerun resumes
                opened=opened,
            )
        except BaseExceptionGroup as group:
            # One error (Redis unreachable, lost, another crawl's settings, a
            # refusal) comes out of the display's nurseries wrapped: say it bare.
            single: BaseException = group
            while isinstance(single, BaseExceptionGroup) and len(single.exceptions) == 1:
                single = single.exceptions[0]
            if single is group:
                raise
            raise single from None
        if not args.quiet and joined is not None and joined.done:
            say(f"crawl {args.crawl_id!r} is done")
        if ending.message is not None:
            return fail(ending.message, ending.code)
        return ending.code

    try:
        return trio.run(work)
    except (RedisUnavailable, CrawlMismatch) as exc:
        return fail(str(exc), EXIT_USAGE)
    except RedisLost as exc:
        if not joined:  # nothing was fetched
            return fail(str(exc), EXIT_REDIS_LOST)
        return fail(
            f"{exc}: stopped; pages in flight were abandoned, records written so far are "
            f"complete. {exc.remedy}",
            EXIT_REDIS_LOST,
        )
    finally:
        outputs.close()


# -- --processes N ------------------------------------------------------------


def worker_commands(
    args: argparse.Namespace, argv: Sequence[str]
) -> tuple[list[list[str]], dict[str, str]]:
    """Each ``--processes`` worker's arguments, and what goes into their
    environment: a password in the ``--redis`` URL moves to
    ``TRIO_CRAWL_REDIS_PASSWORD`` (another user can read a process's argv)."""
    url, password = url_without_password(args.redis)
    base = [
        url if arg == args.redis else f"--redis={url}" if arg == f"--redis={args.redis}" else arg
        for arg in _strip_options(
            argv,
            {"--processes": True, "-o": True, "--output": True, "--warc": True}
            | {"--depth-updates": True, "-q": False, "--quiet": False},
        )
    ]
    # Each worker writes its own files: out.jsonl -> out.1.jsonl, and so on.
    numbered = {"--warc": getattr(args, "warc", None)}
    numbered["--depth-updates"] = getattr(args, "depth_updates", None)
    # Several workers already keep the cores busy: a parse co-process each
    # would only add processes (unless the user asked for them).
    if args.processes > 1 and getattr(args, "parse_process", None) is None:
        base.append("--no-parse-process")
    commands = [
        [*base, "-q", "-o", numbered_output(args.output, i)]
        + [
            part
            for flag, path in numbered.items()
            if path
            for part in (flag, numbered_output(path, i))
        ]
        for i in range(1, args.processes + 1)
    ]
    return commands, ({PASSWORD_ENV: password} if password else {})


def _fork_worker(
    argv: list[str],
    handlers: Mapping[signal.Signals, Any],
    run_cli: RunCli,
    env: Mapping[str, str],
) -> int:
    """A forked worker running ``trio-crawl argv``; its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = EXIT_SOFTWARE
    try:  # the child: never returns into the parent's code
        # Its own process group: a Ctrl-C at the terminal reaches the parent
        # alone, which passes it on once (a second signal means "quit now").
        os.setpgid(0, 0)
        os.environ.update(env)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        code = run_cli(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except BaseException as exc:  # os._exit below would swallow it unsaid
        with contextlib.suppress(Exception):
            detail = " ".join(str(exc).split())
            fail(f"worker {os.getpid()} failed: {type(exc).__name__}: {detail}", code)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


_SPAWNED: list[subprocess.Popen[bytes]] = []


def _spawn_worker(argv: list[str], env: Mapping[str, str]) -> int:
    child = subprocess.Popen(
        [sys.executable, "-m", "trio_crawl", *argv], process_group=0, env={**os.environ, **env}
    )
    _SPAWNED.append(child)  # kept: reaped by _wait, not garbage-collected running
    return child.pid


def _wait(pid: int) -> int:
    """A child's exit code (-N if signal N killed it)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        return os.waitstatus_to_exitcode(status)


#: Two-part extensions that a worker's number goes in front of.
_DOUBLE_EXTENSIONS = (".warc.gz", ".jsonl.gz", ".csv.gz")


def numbered_output(path: str, index: int) -> str:
    """``out.jsonl`` -> ``out.1.jsonl``; ``out`` -> ``out.1``;
    ``crawl.warc.gz`` -> ``crawl.1.warc.gz``."""
    head, tail = os.path.split(path)
    for double in _DOUBLE_EXTENSIONS:
        if tail.endswith(double) and len(tail) > len(double):
            return os.path.join(head, f"{tail[: -len(double)]}.{index}{double}")
    stem, dot, ext = tail.rpartition(".")
    name = f"{stem}.{index}.{ext}" if dot and stem else f"{tail}.{index}"
    return os.path.join(head, name)


def _strip_options(argv: Sequence[str], options: dict[str, bool]) -> list[str]:
    """``argv`` without the given options (name -> takes a value)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = options[name] and "=" not in arg
            continue
        out.append(arg)
    return out


def run_processes(args: argparse.Namespace, argv: Sequence[str], run_cli: RunCli) -> int:
    """Start ``--processes N`` workers of the crawl here and wait for them all.

    Workers are forked from this process when it can (POSIX, no thread
    running, no password in the ``--redis`` URL): they start crawling at
    once, without importing everything again (about 0.5 s of CPU each).
    Otherwise each is a ``python -m trio_crawl`` subprocess, whose command
    line never holds the password. SIGINT and SIGTERM are passed on to them."""
    if args.output in ("-", None):  # stdout, said or meant: N workers cannot share it
        return fail(
            "--processes needs an output file (-o FILE): each worker writes its own", EXIT_USAGE
        )
    worker_args, env = worker_commands(args, argv)
    pids: list[int] = []
    started = time.monotonic()

    def forward(signum: int, frame: FrameType | None) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # A forked worker keeps the parent's command line (ps, /proc/PID/cmdline):
        # with a password in the URL each worker is a fresh process instead,
        # whose arguments hold the URL without it (the password: ``env``).
        fork = hasattr(os, "fork") and threading.active_count() == 1 and not env
        for one in worker_args:
            pids.append(
                _fork_worker(one, previous, run_cli, env) if fork else _spawn_worker(one, env)
            )
        codes = [_wait(pid) for pid in pids]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    children = pids
    elapsed = time.monotonic() - started
    if not args.quiet:
        outputs = ", ".join(numbered_output(args.output, i) for i in range(1, len(children) + 1))
        say(
            f"{len(children)} workers ended in {elapsed:.1f}s "
            f"({', '.join(map(_ended, codes))}); records in {outputs}"
        )
        try:
            stored = trio.run(crawl_status, args.redis, args.crawl_id)
        except RedisFrontierError:
            stored = None
        if stored is not None:
            tell("\n".join(status_lines(args.crawl_id, stored, ended_here=True)))
    return _parent_code(codes)


def _ended(code: int) -> str:
    """How a worker ended, in words: ``exit 0``, ``killed by SIGKILL``."""
    if code < 0:
        return f"killed by {_signal_name(-code)}"
    return f"exit {code}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _parent_code(codes: Sequence[int]) -> int:
    """The parent's exit code from its workers' (-N: killed by signal N).

    SIGINT and SIGTERM are the parent's own stop passed on: 130 and 143, as
    for one process. A worker killed by any other signal (SIGKILL, the OOM
    killer, a crash) is said in words and ends the parent with 75, as a lost
    Redis does: its pages go back to the crawl when its lease runs out, and
    the same command run again resumes. Otherwise the highest code, which
    is a documented one since each worker exits with one."""
    stopped = [SIGNAL_EXIT[signal.Signals(-c)] for c in codes if -c in (2, 15)]
    stopped += [c for c in codes if c in SIGNAL_EXIT.values()]
    if stopped:
        return stopped[0]
    killed = [(i, -c) for i, c in enumerate(codes, 1) if c < 0]
    for index, number in killed:
        fail(
            f"worker {index} was killed by {_signal_name(number)}: its pages go back to the "
            "crawl when its lease runs out; run the same command again to resume",
            EXIT_REDIS_LOST,
        )
    if killed:
        return EXIT_REDIS_LOST
    return max(codes, default=EXIT_OK)
