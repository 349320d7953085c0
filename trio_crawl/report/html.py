"""``trio-crawl report``, part 2: render ``ReportData`` as one self-contained HTML file.

Charts are drawn with matplotlib (the ``report`` extra) and inlined as SVG:
no JavaScript, no fonts, no requests. The page's Content-Security-Policy
forbids loading anything, so it views the same offline as online.

Chart elements that carry data get SVG ids (``status-0``, ``latency-3``...),
which the browser test looks for.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .aggregate import ReportData, Timeline
from .changes import NOT_FETCHED, RecrawlData, byte_size

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: bars at most in the pages/s chart (time bins are merged to fit)
MAX_TIMELINE_BARS = 150
LATENCY_BINS = 40

GREEN, BLUE, ORANGE, RED, GREY = "#2e7d32", "#1565c0", "#ef6c00", "#c62828", "#757575"

#: keys are matplotlib's rcParams names (a Literal type in its hints)
_RC: dict[Any, Any] = {
    "svg.fonttype": "none",  # text stays text: smaller, selectable, searchable
    "svg.hashsalt": "trio-crawl-report",  # stable ids: the same input, the same file
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10.0,
    "axes.titleweight": "bold",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.axisbelow": True,
}


def require_matplotlib() -> None:
    """Raise ImportError when the ``report`` extra is not installed."""
    import matplotlib  # noqa: F401


@contextmanager
def _figure(width: float = 6.4, height: float = 3.0) -> Iterator[tuple[Figure, Axes]]:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width, height), layout="constrained")
        yield fig, fig.add_subplot()


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)


def _chart(draw: Callable[[Figure, Axes], None], width: float = 6.4, height: float = 3.0) -> str:
    with _figure(width, height) as (fig, ax):
        draw(fig, ax)
        return _svg(fig)


def _status_colour(status: int | None) -> str:
    if status is None:
        return GREY
    return {2: GREEN, 3: BLUE, 4: ORANGE, 5: RED}.get(status // 100, GREY)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _path_of(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _seconds(value: float) -> str:
    if value < 120:
        return f"{value:,.1f} s"
    if value < 7200:
        return f"{value / 60:,.1f} min"
    return f"{value / 3600:,.1f} h"


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:,.3g} s"


def _short_ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f} ms"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _link(url: str | None) -> str:
    """A link for http(s) URLs only: a crafted file cannot inject javascript: links."""
    if not url:
        return "–"
    if urlsplit(url).scheme.lower() in ("http", "https"):
        return f'<a href="{_e(url)}" rel="nofollow noreferrer">{_e(url)}</a>'
    return _e(url)


# -- charts -------------------------------------------------------------------


def timeline_chart(timeline: Timeline) -> str:
    pages, errors, width = timeline.pages, timeline.errors, timeline.bin_seconds
    workers = timeline.workers
    factor = 1
    while len(pages) > MAX_TIMELINE_BARS * factor:
        factor *= 2
    if factor > 1:
        pages = [sum(pages[i : i + factor]) for i in range(0, len(pages), factor)]
        errors = [sum(errors[i : i + factor]) for i in range(0, len(errors), factor)]
        workers = [
            workers[min(i + factor, len(workers)) - 1] for i in range(0, len(workers), factor)
        ]
        width *= factor
    edges = [i * width for i in range(len(pages) + 1)]

    def draw(fig: Figure, ax: Axes) -> None:
        ok = ax.stairs([n / width for n in pages], edges, fill=True, color=BLUE, alpha=0.8)
        ok.set_gid("timeline-pages")
        ok.set_label("pages/s")
        if any(errors):
            bad = ax.stairs([n / width for n in errors], edges, fill=True, color=RED, alpha=0.9)
            bad.set_gid("timeline-errors")
            bad.set_label("failed/s")
        for i, start in enumerate(timeline.run_starts):
            ax.axvline(start, color=GREY, linestyle="--", linewidth=1)
            ax.annotate(
                "resumed" if i == 0 else "",
                (start, 1),
                xycoords=("data", "axes fraction"),
                xytext=(3, -10),
                textcoords="offset points",
                color=GREY,
            )
        if workers:  # a self-sized crawl: its worker count on a second axis
            twin = ax.twinx()
            line = twin.stairs(workers, edges[: len(workers) + 1], color=GREY, linewidth=1.5)
            line.set_gid("timeline-workers")
            line.set_label("workers")
            twin.set_ylabel("workers")
            twin.set_ylim(0, max(workers) * 1.15)
        ax.set_xlim(0, max(edges[-1], timeline.duration))
        ax.set_xlabel(f"seconds since the crawl started (bars of {_duration(width)})")
        ax.set_ylabel("records per second")
        ax.set_title("Pages per second" + (" and workers" if workers else "") + " over time")
        fig.legend(loc="outside upper right", ncols=2, frameon=False)

    return _chart(draw, 13.0, 3.0)


def status_chart(statuses: dict[int | None, int]) -> str:
    labels = ["none" if s is None else str(s) for s in statuses]
    counts = list(statuses.values())
    colours = [_status_colour(s) for s in statuses]

    def draw(_fig: Figure, ax: Axes) -> None:
        bars = ax.bar(labels, counts, color=colours)
        for i, bar in enumerate(bars):
            bar.set_gid(f"status-{i}")
        ax.bar_label(bars, labels=[f"{n:,}" for n in counts], padding=2)
        ax.set_title("HTTP status codes")
        ax.set_ylabel("records")
        ax.set_xlabel('status ("none": no HTTP response)')
        ax.margins(y=0.15)

    return _chart(draw)


def _barh(
    prefix: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    colour: str | Sequence[str],
    value_label: Callable[[float], str],
    xlabel: str,
    urls: Sequence[str | None] | None = None,
) -> str:
    height = 1.0 + 0.22 * max(len(labels), 3)

    def draw(_fig: Figure, ax: Axes) -> None:
        ys = list(range(len(labels)))
        bars = ax.barh(ys, values, color=colour)
        for i, bar in enumerate(bars):
            bar.set_gid(f"{prefix}-{i}")
            if urls is not None and urls[i] is not None:
                bar.set_url(urls[i])
        ax.set_yticks(ys, list(labels))
        ax.invert_yaxis()
        ax.bar_label(bars, labels=[value_label(v) for v in values], padding=2)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.margins(x=0.18)
        ax.grid(axis="y", visible=False)

    return _chart(draw, 6.4, height)


def error_chart(kinds: dict[str, int]) -> str:
    return _barh(
        "errors",
        "Failures by error kind",
        list(kinds),
        list(kinds.values()),
        RED,
        lambda v: f"{v:,.0f}",
        "records",
    )


#: a recrawl's change kinds: fetched and new or different, the same, lost, not fetched
CHANGE_COLOURS = {"new": BLUE, "changed": ORANGE, "unchanged": GREEN, "gone": RED, "error": RED}


def changes_chart(changes: dict[str, int]) -> str:
    return _barh(
        "changes",
        "Records by change since the previous crawl",
        [kind.replace("_", " ") for kind in changes],
        list(changes.values()),
        [CHANGE_COLOURS.get(kind, GREY) for kind in changes],
        lambda v: f"{v:,.0f}",
        "records",
    )


def latency_chart(data: ReportData) -> str:
    import numpy as np

    lat = data.latency
    values = np.asarray(lat.sample, dtype=float)
    low, high = float(values.min()), float(values.max())
    log = low > 0 and high / low > 20
    if log:
        edges = np.geomspace(low, high, LATENCY_BINS + 1)
    else:
        edges = np.linspace(low, high if high > low else low + 1.0, LATENCY_BINS + 1)
    counts, edges = np.histogram(values, bins=edges)
    scale = lat.count / len(values)  # a sample stands for all values

    def draw(_fig: Figure, ax: Axes) -> None:
        widths = np.diff(edges)
        bars = ax.bar(edges[:-1], counts * scale, width=widths, align="edge", color=BLUE)
        for i, bar in enumerate(bars):
            bar.set_gid(f"latency-{i}")
        for name, value, colour in (
            ("p50", lat.p50, GREEN),
            ("p95", lat.p95, ORANGE),
            ("p99", lat.p99, RED),
        ):
            if value is not None:
                line = ax.axvline(value, color=colour, linestyle="--", linewidth=1.2)
                line.set_label(f"{name} {value:,.1f} ms")
                line.set_gid(f"latency-{name}")
        if log:
            ax.set_xscale("log")
        ax.set_xlabel("response time (ms)" + (", log scale" if log else ""))
        ax.set_ylabel("records" + (" (estimated)" if lat.sampled else ""))
        ax.set_title("Latency")
        ax.legend(loc="upper right", frameon=False)

    return _chart(draw)


def depth_chart(depths: dict[int, int]) -> str:
    def draw(_fig: Figure, ax: Axes) -> None:
        bars = ax.bar(list(depths), list(depths.values()), color=BLUE)
        for i, bar in enumerate(bars):
            bar.set_gid(f"depth-{i}")
        if len(depths) <= 30:
            ax.set_xticks(list(depths))
            ax.bar_label(bars, labels=[f"{n:,}" for n in depths.values()], padding=2)
        ax.set_title("Depth (links from a start URL)")
        ax.set_xlabel("depth")
        ax.set_ylabel("records")
        ax.margins(y=0.15)

    return _chart(draw)


def hosts_chart(data: ReportData) -> str:
    rows = data.top_hosts
    height = 1.0 + 0.22 * max(len(rows), 3)

    def draw(fig: Figure, ax: Axes) -> None:
        ys = list(range(len(rows)))
        ok = [r.pages - r.errors for r in rows]
        bars = ax.barh(ys, ok, color=BLUE, label="ok")
        for i, bar in enumerate(bars):
            bar.set_gid(f"hosts-{i}")
        failed = ax.barh(ys, [r.errors for r in rows], left=ok, color=RED, label="failed")
        for i, bar in enumerate(failed):
            bar.set_gid(f"hosts-failed-{i}")
        ax.bar_label(failed, labels=[f"{r.pages:,}" for r in rows], padding=2)
        ax.set_yticks(ys, [_short(r.host, 40) for r in rows])
        ax.invert_yaxis()
        ax.set_title(f"Top {len(rows)} hosts by records")
        ax.set_xlabel("records")
        ax.margins(x=0.15)
        ax.grid(axis="y", visible=False)
        fig.legend(loc="outside upper right", ncols=2, frameon=False)

    return _chart(draw, 6.4, height + 0.3)


def slowest_chart(data: ReportData) -> str:
    pages = data.slowest
    return _barh(
        "slowest",
        f"Slowest {len(pages)} pages",
        [_short(_path_of(p.url), 45) for p in pages],
        [p.elapsed_ms for p in pages],
        ORANGE,
        lambda v: f"{v:,.0f} ms",
        "response time (ms)",
        urls=[p.url if urlsplit(p.url).scheme in ("http", "https") else None for p in pages],
    )


# -- the page -----------------------------------------------------------------

_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 1rem 1.5rem 3rem; color: #222; background: #fff; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
.sub { color: #666; margin-top: 0; }
.cards { display: flex; flex-wrap: wrap; gap: .6rem; margin: 1rem 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: .4rem .8rem; min-width: 7rem; }
.card b { display: block; font-size: 1.2rem; }
.card span { color: #666; font-size: .85rem; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(460px, 1fr));
        gap: 1rem; }
figure { margin: 0; }
figure svg { max-width: 100%; height: auto; display: block; }
.note { background: #fff8e1; border-left: 4px solid #ffb300; padding: .4rem .8rem; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid #eee;
         vertical-align: top; }
td.url { word-break: break-all; }
td.num, th.num { text-align: right; white-space: nowrap; }
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{_e(value)}</b><span>{_e(label)}</span></div>'


def _figure_html(chart_id: str, svg: str) -> str:
    return f'<figure id="chart-{chart_id}">{svg}</figure>'


def _notes(data: ReportData) -> list[str]:
    notes = list(data.warnings)
    if data.timeline is None:
        notes.append(
            'The records have no "t" field (they were written by a trio-crawl '
            "older than the report), so there is no pages/s-over-time chart."
        )
    elif data.records_without_t:
        notes.append(
            f'{data.records_without_t:,} records have no "t" field and are left out '
            "of the pages/s chart."
        )
    if data.latency.sampled:
        notes.append(
            f"Latency percentiles and histogram come from a uniform sample of "
            f"{len(data.latency.sample):,} of {data.latency.count:,} response times."
        )
    if data.hosts_seen is None:
        notes.append(
            "More hosts than the host table keeps: host counts are lower bounds "
            "(exact for hosts that stayed among the busiest)."
        )
    return notes


def _hosts_table(data: ReportData) -> str:
    rows = "".join(
        f'<tr><td class="url">{_e(r.host)}</td><td class="num">{r.pages:,}</td>'
        f'<td class="num">{r.errors:,}</td><td class="num">{_ms(r.mean_ms)}</td></tr>'
        for r in data.top_hosts
    )
    return (
        '<table id="hosts"><thead><tr><th>host</th><th class="num">records</th>'
        '<th class="num">failed</th><th class="num">mean latency</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _slowest_table(data: ReportData) -> str:
    rows = "".join(
        f'<tr><td class="num">{p.elapsed_ms:,.1f} ms</td><td>{_e(p.status or "–")}</td>'
        f"<td>{_e(p.kind or '')}</td>"
        f'<td class="url">{_link(p.url)}</td></tr>'
        for p in data.slowest
    )
    return (
        '<table id="slowest"><thead><tr><th class="num">time</th><th>status</th>'
        f"<th>error</th><th>URL</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _failures_section(data: ReportData) -> str:
    if not data.failures:
        return "<p>No failures.</p>"
    order = {kind: i for i, kind in enumerate(data.error_kinds)}
    failures = sorted(data.failures, key=lambda f: order.get(f.kind, len(order)))
    rows = "".join(
        f"<tr><td>{_e(f.kind)}</td><td>{_e('–' if f.status is None else f.status)}</td>"
        f'<td class="url">{_link(f.url)}</td><td>{_e(_short(f.message, 200))}</td>'
        f'<td class="url">{_link(f.referrer)}</td></tr>'
        for f in failures
    )
    omitted = ""
    if data.failures_omitted:
        parts = ", ".join(f"{n:,} {_e(kind)}" for kind, n in data.failures_omitted.items())
        omitted = (
            f'<p class="note">Not listed (the report keeps the first failures of each '
            f"kind): {parts}. <code>jq 'select(.error)'</code> on the JSON Lines "
            "lists them all.</p>"
        )
    return (
        f"<p>{len(data.failures):,} failing URLs, grouped by error kind, in crawl order.</p>"
        f"{omitted}"
        '<table id="failures"><thead><tr><th>error</th><th>status</th><th>URL</th>'
        "<th>message</th><th>linked from</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _recrawl_section(recrawl: RecrawlData | None) -> str:
    """What changed since the previous crawl; nothing for a first crawl."""
    if recrawl is None:
        return ""
    cards = [_card(f"{n:,}", kind.replace("_", " ")) for kind, n in recrawl.changes.items()]
    cards.append(_card(byte_size(recrawl.reused_bytes), "not downloaded"))
    if recrawl.kept:
        cards.append(_card(f"{recrawl.kept:,}", "failed, previous copy kept"))
    said = []
    if recrawl.reused:
        said.append(
            f"{recrawl.reused:,} pages answered 304 Not Modified: their "
            f"{byte_size(recrawl.reused_bytes)} were not downloaded again."
        )
    if recrawl.not_fetched:
        kinds = " and ".join(f"<i>{k.replace('_', ' ')}</i>" for k in sorted(NOT_FETCHED))
        said.append(
            f"The {kinds} records ({recrawl.not_fetched:,}) were not fetched in this "
            "crawl; they count among the records without an HTTP status."
        )
    return (
        '<h2 id="recrawl">Recrawl: what changed since the previous crawl</h2>'
        f'<div class="cards" id="recrawl-cards">{"".join(cards)}</div>'
        f"{''.join(f'<p>{text}</p>' for text in said)}"
        f"{_figure_html('changes', changes_chart(recrawl.changes))}"
    )


def render_html(data: ReportData, *, source: str, generated: dt.datetime | None = None) -> str:
    """The whole report page. Needs matplotlib (the ``report`` extra)."""
    generated = generated or dt.datetime.now(dt.UTC)
    lat = data.latency
    timeline = data.timeline
    cards = [
        _card(f"{data.records:,}", "records"),
        _card(f"{data.ok:,}", "ok"),
        _card(f"{data.failed:,}", "failed"),
    ]
    if timeline is not None and timeline.duration > 0:
        cards.append(_card(_seconds(timeline.duration), "crawl time"))
        counted = data.records - data.records_without_t
        cards.append(_card(f"{counted / timeline.duration:,.1f}", "pages/s overall"))
    percentiles = (lat.p50, lat.p95, lat.p99)
    cards += [
        _card(
            " / ".join(_short_ms(v) for v in percentiles),
            "p50 / p95 / p99 ms",
        ),
        _card("–" if data.hosts_seen is None else f"{data.hosts_seen:,}", "hosts"),
        _card(f"{data.redirects:,}", "redirects"),
        _card(f"{data.retried:,}", "retried"),
    ]
    if data.refetched:
        cards.append(_card(f"{data.refetched:,}", "refetched after resume"))

    charts = []
    if timeline is not None:
        charts.append(_figure_html("timeline", timeline_chart(timeline)))
    grid = [_figure_html("status", status_chart(data.statuses))]
    if data.error_kinds:
        grid.append(_figure_html("errors", error_chart(data.error_kinds)))
    if lat.count:
        grid.append(_figure_html("latency", latency_chart(data)))
    if data.depths:
        grid.append(_figure_html("depth", depth_chart(data.depths)))
    if data.top_hosts:
        grid.append(_figure_html("hosts", hosts_chart(data)))
    if data.slowest:
        grid.append(_figure_html("slowest", slowest_chart(data)))
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in _notes(data))
    name = _e(source)
    count = f"{data.records:,} record{'' if data.records == 1 else 's'}"
    latency_text = (
        f"p50 {_ms(lat.p50)}, p95 {_ms(lat.p95)}, p99 {_ms(lat.p99)}; "
        f"min {_ms(lat.min)}, mean {_ms(lat.mean)}, max {_ms(lat.max)} "
        f"over {lat.count:,} responses."
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trio-crawl report: {name}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>trio-crawl report</h1>
<p class="sub">{name}, {count}; generated {generated:%Y-%m-%d %H:%M} UTC</p>
<div class="cards">{"".join(cards)}</div>
{notes}
{_recrawl_section(data.recrawl)}
<h2>Throughput</h2>
{"".join(charts)}
<h2>Outcomes, latency and depth</h2>
<p>Latency: {latency_text}</p>
<div class="grid">{"".join(grid)}</div>
<h2>Slowest pages</h2>
{_slowest_table(data) if data.slowest else "<p>No response times recorded.</p>"}
<h2>Top hosts</h2>
{_hosts_table(data)}
<h2 id="failing">Failing URLs</h2>
{_failures_section(data)}
</body>
</html>
"""
