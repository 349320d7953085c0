"""The terminal face of a crawl: a live progress line and the final summary.

Rendering only: it reads ``Crawler.statistics()`` snapshots. The refresh
loop here is a display tick, not part of termination (the engine never polls).
rich draws both, and is imported by the functions that draw: a quiet crawl
(``-q``) never imports it (it takes a while to import).
"""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, TextIO

import trio

from ..core.stats import CrawlSummary
from ..engine.crawler import Crawler
from ..engine.statistics import EngineStatistics
from .common import counted, stderr_console

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..mirror.output import MirrorLink

REFRESH_SECONDS = 0.25


def progress_line(s: EngineStatistics) -> Text:
    from rich.text import Text

    rate = s.records / s.elapsed if s.elapsed > 0 else 0.0
    text = Text()
    text.append(f"{s.records:,} done", style="bold green")
    text.append(f"  {s.queued:,} queued  {s.active} in flight  {s.waiting:,} waiting")
    text.append(f"  {s.workers:,} workers")
    text.append(f"  {rate:,.1f} pages/s")
    text.append(f"  {s.failures:,} errors", style="red" if s.failures else "")
    text.append(f"  {s.elapsed:,.1f}s", style="dim")
    return text


async def show_progress(crawler: Crawler, console: Console) -> None:
    """Redraw the progress line until cancelled (the caller owns the task)."""
    from rich.live import Live

    with Live(
        progress_line(crawler.statistics()),
        console=console,
        transient=True,
        auto_refresh=False,
    ) as live:
        while True:
            await trio.sleep(REFRESH_SECONDS)
            live.update(progress_line(crawler.statistics()), refresh=True)


def conversion_line(link: MirrorLink, seconds: float) -> Text:
    """The line shown while ``-k`` converts the mirror (after the crawl):
    files read so far, and how many were rewritten."""
    from rich.text import Text

    run = link.converting
    files, converted = (0, 0) if run is None else (run.statistics.files, run.statistics.converted)
    text = Text()
    text.append("converting links (-k)", style="bold green")
    text.append(f"  {files:,} of the mirror's files read, {converted:,} rewritten")
    text.append(f"  {seconds:,.1f}s", style="dim")
    return text


async def show_conversion(link: MirrorLink, console: Console) -> None:
    """Redraw the conversion line until cancelled: without it the terminal is
    blank for as long as the conversion takes (a third of a mirror's time)."""
    from rich.live import Live

    started = trio.current_time()
    with Live(
        conversion_line(link, 0.0), console=console, transient=True, auto_refresh=False
    ) as live:
        while True:
            await trio.sleep(REFRESH_SECONDS)
            live.update(conversion_line(link, trio.current_time() - started), refresh=True)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f} ms"


def human_bytes(count: int) -> str:
    """``1234567`` -> ``1.2 MB`` (decimal units: 1 kB is 1,000 bytes)."""
    if count < 1000:
        return f"{count:,} bytes"
    value = float(count)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if round(value, 1) < 1000:
            return f"{value:,.1f} {unit}"
    return f"{value / 1000:,.1f} TB"


def status_counts(statuses: dict[int, int]) -> str:
    """``{200: 300, 404: 2}`` -> ``200 × 300, 404 × 2``."""
    return ", ".join(f"{status} × {count:,}" for status, count in sorted(statuses.items()))


def depth_updates_row(count: int, written_to: str | None) -> str:
    """The summary's ``depth updates`` cell: how many, and where they went
    (``written_to``: the ``--depth-updates`` file; None without one: then
    where they would have gone)."""
    where = (
        f"in {written_to}"
        if written_to is not None
        else "not written; --depth-updates FILE keeps them"
    )
    return f"{count:,} (shorter paths found after the record; {where})"


def summary_table(
    summary: CrawlSummary, depth_updates_to: str | None = None, converting: float | None = None
) -> Table:
    from rich.table import Table

    table = Table(title="trio-crawl summary", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("pages", f"{summary.records:,} ({summary.pages_ok:,} ok)")
    table.add_row("status codes", status_counts(summary.statuses) or "-")
    table.add_row("downloaded", human_bytes(summary.bytes))
    if summary.changes:  # a recrawl
        table.add_row("changes", ", ".join(f"{kind} {n:,}" for kind, n in summary.changes.items()))
        table.add_row("not downloaded", f"{human_bytes(summary.reused_bytes)} (304 Not Modified)")
    table.add_row("failed", f"{summary.failed:,}")
    for kind, count in summary.failures.items():
        table.add_row(f"  {kind}", f"{count:,}")
    if summary.retried:
        table.add_row(
            "retried",
            f"{counted(summary.retried, 'page')} ({counted(summary.retries, 'extra attempt')})",
        )
    if summary.items:
        table.add_row("items", f"{summary.items:,}")
    if summary.depth_updates:
        table.add_row("depth updates", depth_updates_row(summary.depth_updates, depth_updates_to))
    if converting is None:
        table.add_row("elapsed", f"{summary.elapsed:,.2f} s")
    else:  # the user waited for the conversion too; pages/s stays the crawl's
        table.add_row(
            "elapsed",
            f"{summary.elapsed + converting:,.2f} s (crawl {summary.elapsed:,.2f} s, "
            f"link conversion {converting:,.2f} s)",
        )
    if summary.worker_history:
        table.add_row("workers", workers_over_time(summary))
    table.add_row("pages/s", f"{summary.pages_per_second:,.1f}")
    if summary.parsed_in_process:
        table.add_row("parsed on a 2nd CPU", f"{summary.parsed_in_process:,} pages")
    table.add_row(
        "latency p50/p95/p99",
        " / ".join(
            _ms(v)
            for v in (summary.latency_p50_ms, summary.latency_p95_ms, summary.latency_p99_ms)
        ),
    )
    if summary.browsers:
        table.add_row("rendered", rendered(summary))
    for i, (pattern, why) in enumerate(summary.render_auto.items()):
        if i == 8:
            table.add_row("", f"... and {len(summary.render_auto) - 8:,} more patterns")
            break
        table.add_row("  rendered?" if i == 0 else "", f"{pattern}: {why}")
    if summary.render_blocked:
        blocked = sorted(summary.render_blocked.items(), key=lambda kv: (-kv[1], kv[0]))
        table.add_row(
            "refused to the browser", ", ".join(f"{why} × {count:,}" for why, count in blocked)
        )
    if any(summary.render_requests.values()):
        table.add_row("browser's requests", browser_requests(summary.render_requests))
    if summary.over_host_budget:
        table.add_row(
            "over host budgets",
            f"{counted(summary.over_host_budget, 'new link')} not followed "
            "(--max-pages-per-host, --max-hosts)",
        )
    if summary.missed_turns:
        table.add_row(
            "rate turns missed",
            f"{counted(summary.missed_turns, 'page')} given back to Redis unstarted: "
            "no crawler was free at its --rate turn",
        )
    if summary.capped_crawl_delays:
        table.add_row("Crawl-delay capped", capped_delays(summary.capped_crawl_delays))
    if summary.stopped:
        table.add_row("stopped", f"yes; {counted(summary.unfinished, 'URL')} left unfetched")
    return table


def rendered(summary: CrawlSummary) -> str:
    """``12 pages (1 render failed; browser restarted 1 time)``."""
    text = f"{summary.rendered:,} pages"
    notes = []
    if summary.render_failures:
        notes.append(f"{summary.render_failures:,} renders failed")
    if summary.browsers > 1:
        notes.append(f"browser restarted {summary.browsers - 1:,} times")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def browser_requests(counts: dict[str, int]) -> str:
    """``30 fetched by the crawl, 12 already fetched, 1 sent in turn``."""
    words = {
        "fetched": "fetched by the crawl",
        "reused": "already fetched",
        "sent": "sent in turn",
        "failed": "failed",
        "retried": "tried again",
    }
    return ", ".join(f"{counts[key]:,} {text}" for key, text in words.items() if counts.get(key))


def workers_over_time(summary: CrawlSummary, shown: int = 6) -> str:
    """``16 → 32 → 64 → 118 (sized by itself; at most 97 busy at once)``: the
    worker target at the start and after each resize (the first few and the
    last), and the most worker tasks that were alive at once."""
    steps = [n for _, n in summary.worker_history]
    if len(steps) > shown:
        steps = [*steps[: shown - 1], -1, steps[-1]]
    text = " → ".join("…" if n < 0 else f"{n:,}" for n in steps)
    how = "sized by itself" if summary.sized else "fixed by -w"
    return f"{text} ({how}; at most {summary.peak_workers:,} at once)"


def capped_delays(asked: dict[str, float], shown: int = 3) -> str:
    """``{"a.example:443": 86400.0}`` -> ``a.example:443 asked for 86,400 s; waited
    --max-crawl-delay instead`` (the first few hosts, then how many more)."""
    hosts = [f"{host} asked for {_seconds(delay)}" for host, delay in list(asked.items())[:shown]]
    if len(asked) > shown:
        hosts.append(f"{len(asked) - shown:,} more hosts too")
    return "; ".join(hosts) + "; waited --max-crawl-delay instead"


def _seconds(value: float) -> str:
    if value >= 1e12:
        return f"{value:.3g} s"
    return f"{value:,.0f} s" if value == int(value) else f"{value:,.2f} s"


def print_summary(
    summary: CrawlSummary,
    output: str | None = None,
    depth_updates_to: str | None = None,
    *,
    stream: TextIO | None = None,
    converting: float | None = None,
) -> None:
    """The summary table on stderr (or ``stream``); with ``output`` (the JSON
    Lines file), how to report on it (with the ``--depth-updates`` file when
    there is one), unless no server answered (nothing to report on) or the report's
    plotting library is not installed (the hint would only lead to an error)."""
    console = stderr_console(stream, highlight=False)
    console.print(summary_table(summary, depth_updates_to, converting))
    if output is not None and sum(summary.statuses.values()) > 0 and report_available():
        updates = depth_updates_to not in (None, "<stdout>")
        with_updates = f" --depth-updates {shlex.quote(str(depth_updates_to))}" if updates else ""
        hint = f"HTML report: trio-crawl report {shlex.quote(output)}{with_updates} -o report.html"
        console.print(hint, markup=False, soft_wrap=True)


def report_available() -> bool:
    """``trio-crawl report`` can run here: its plotting library is installed
    (looked up, not imported: this runs at the end of every crawl)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def time_limit_note(
    summary: CrawlSummary, max_time: float | None, *, state: bool, state_refused_by: str | None
) -> str | None:
    """What to say when ``--max-time`` stopped the crawl (None if it did not).
    ``state_refused_by``: the option that cannot be combined with ``--state``
    (``--page-requisites``, ``--handler``), if the crawl has one: then the
    note does not advise a ``--state`` the next run would refuse."""
    if max_time is None or not summary.stopped or summary.elapsed < max_time:
        return None
    if state:
        then = "run the same command again to resume"
    elif state_refused_by is not None:
        then = f"a crawl with {state_refused_by} cannot resume (it cannot use --state)"
    else:
        then = "add --state FILE to make a stopped crawl resumable"
    left = counted(summary.unfinished, "URL")
    return f"stopped at --max-time {max_time:g}s: {left} left; {then}"


def complete_note(state: str, done: int, output: str, recorded_in: str | None = None) -> str:
    """What a ``--state`` crawl that has nothing left to fetch says, instead
    of crawling nothing and printing a summary of 0 pages. The records are
    where that crawl wrote them (``recorded_in``, stored in the state file),
    which this run's ``-o`` (``output``) may not be."""
    records = output
    if recorded_in is not None and os.path.abspath(output) != recorded_in:
        records = recorded_in
        where = f"their records in {recorded_in}, where that crawl wrote them; {output} untouched"
    else:
        where = f"their records in {output}"
    return (
        f"the crawl in {state} is complete ({counted(done, 'URL')} done, {where}): "
        f"nothing left to fetch. Report on it: trio-crawl report {shlex.quote(records)} "
        "-o report.html; to crawl it again, asking only for what changed, add --recrawl"
        " (or remove or rename the state file to start afresh)"
    )
