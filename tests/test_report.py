"""``trio-crawl report``: aggregation (exact numbers), the HTML, the CLI, and the
page in a real headless browser (Debian's chromium; skipped with the reason
when it is not installed). Nothing here talks to any host but 127.0.0.1 and
file://.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.cli.report import MISSING_EXTRA
from trio_crawl.errors import ReportInputError
from trio_crawl.report.aggregate import FIRST_BIN_SECONDS, aggregate, aggregate_file, read_records
from trio_crawl.testing import Response, Site, page, serve_site

from cli_helpers import run_cli

TIMEOUT = 60

A = "http://a.test"
B = "http://b.test:8080"


def rec(url: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "url": url,
        "status": 200,
        "depth": 1,
        "error": None,
        "redirect": None,
        "referrer": f"{A}/",
        "content_type": "text/html",
        "elapsed_ms": 10.0,
        "links": 0,
        "attempts": 1,
    }
    out.update(fields)
    return out


def err(kind: str, message: str) -> dict[str, str]:
    return {"kind": kind, "message": message}


#: A small crawl written by hand; every number the tests assert follows from it.
RECORDS = [
    rec(f"{A}/", depth=0, referrer=None, elapsed_ms=12.0, links=5, t=0.010),
    rec(f"{A}/x", elapsed_ms=20.0, attempts=2, t=0.500),
    rec(f"{A}/missing", status=404, error=err("http_4xx", "HTTP 404"), elapsed_ms=5.0, t=1.200),
    rec(f"{A}/private", status=None, error=err("robots", "disallowed"), elapsed_ms=None,
        attempts=0, t=1.300),
    rec(f"{A}/old", status=301, depth=2, redirect=f"{A}/new", elapsed_ms=3.0, t=1.500),
    rec(f"{A}/new", depth=2, elapsed_ms=40.0, referrer=f"{A}/old", t=2.000),
    rec(f"{A}/broken", status=503, depth=2, error=err("http_5xx", "HTTP 503"), elapsed_ms=7.0,
        attempts=3, t=2.500),
    rec(f"{B}/", status=None, error=err("timeout", "read timed out"), elapsed_ms=30000.0,
        attempts=3, t=31.000),
    rec(f"{B}/ok", depth=2, elapsed_ms=15.0, t=31.010),
    rec(f"{A}/again", status=None, error=err("robots", "disallowed"), elapsed_ms=None,
        attempts=0, t=31.020, refetched=True),
]  # fmt: skip


def write_jsonl(path: Path, records: list[dict[str, Any]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")
    return path


# -- aggregation --------------------------------------------------------------


def test_aggregate_counts_exactly() -> None:
    data = aggregate(RECORDS)
    assert (data.records, data.ok, data.failed) == (10, 5, 5)
    assert (data.redirects, data.retried, data.refetched) == (1, 3, 1)
    assert data.statuses == {200: 4, 301: 1, 404: 1, 503: 1, None: 3}
    assert list(data.statuses) == [200, 301, 404, 503, None]
    assert data.error_kinds == {"robots": 2, "http_4xx": 1, "http_5xx": 1, "timeout": 1}
    assert next(iter(data.error_kinds)) == "robots"
    assert data.depths == {0: 1, 1: 5, 2: 4}
    assert data.records_without_t == 0


def test_depth_updates_move_a_url_in_the_depth_chart_and_are_not_records() -> None:
    """Issue #18: a line with "depth_update" corrects an earlier record's depth
    and referrer (a shorter path found after it was written)."""
    updates = [
        {"url": f"{A}/broken", "depth": 1, "referrer": f"{A}/x", "depth_update": True,
         "previous_depth": 2, "t": 3.0},
        {"url": f"{A}/new", "depth": 1, "referrer": f"{A}/old", "depth_update": True,
         "previous_depth": 2, "t": 3.1},
    ]  # fmt: skip
    data = aggregate([*RECORDS, *updates])
    assert (data.records, data.ok, data.failed) == (10, 5, 5)
    assert data.depths == {0: 1, 1: 7, 2: 2}
    (broken,) = [f for f in data.failures if f.url == f"{A}/broken"]
    assert (broken.depth, broken.referrer) == (1, f"{A}/x")
    assert data.latency.count == 8 and data.hosts_seen == 2


UPDATES = [
    {"url": f"{A}/broken", "depth": 1, "referrer": f"{A}/x", "depth_update": True,
     "previous_depth": 2, "t": 3.0},
    {"url": f"{A}/new", "depth": 1, "referrer": f"{A}/old", "depth_update": True,
     "previous_depth": 2, "t": 3.1},
]  # fmt: skip


def test_a_depth_updates_file_is_applied_as_inline_lines_were(tmp_path: Path) -> None:
    """Issue #25: the corrections come in their own file (--depth-updates);
    the report reads it after the records, and agrees with the inline form
    that files of earlier versions have."""
    records = write_jsonl(tmp_path / "out.jsonl", RECORDS)
    updates = write_jsonl(tmp_path / "updates.jsonl", UPDATES)
    data = aggregate_file(str(records), str(updates))
    inline = aggregate(RECORDS + UPDATES)
    assert data.depths == inline.depths == {0: 1, 1: 7, 2: 2}
    assert data.failures == inline.failures
    assert (data.records, data.failed) == (10, 5)
    assert aggregate_file(str(records)).depths == {0: 1, 1: 5, 2: 4}


def test_corrections_in_any_order_give_the_lowest_depth(tmp_path: Path) -> None:
    """--redis workers write their corrections to separate files, concatenated
    in any order: 2 -> 1 may come before 3 -> 2 for the same URL."""
    deep = rec(f"{A}/deep", depth=3, status=404, error=err("http_4xx", "HTTP 404"))
    first = {"url": f"{A}/deep", "depth": 2, "referrer": f"{A}/x", "depth_update": True,
             "previous_depth": 3}  # fmt: skip
    second = {"url": f"{A}/deep", "depth": 1, "referrer": f"{A}/", "depth_update": True,
              "previous_depth": 2}  # fmt: skip
    for order in ([first, second], [second, first]):
        data = aggregate([rec(f"{A}/", depth=0, referrer=None), deep, *order])
        assert data.depths == {0: 1, 1: 1}, order
        (failure,) = data.failures
        assert (failure.depth, failure.referrer) == (1, f"{A}/")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (json.dumps(RECORDS[0]) + "\n", r"u.jsonl:1: not a depth_update line; is this the file"),
        ("nope\n", r"u.jsonl:1: not JSON"),
    ],
)
def test_a_depth_updates_file_of_something_else_raises(
    tmp_path: Path, content: str, message: str
) -> None:
    records = write_jsonl(tmp_path / "out.jsonl", RECORDS)
    (tmp_path / "u.jsonl").write_text(content)
    with pytest.raises(ReportInputError, match=message):
        aggregate_file(str(records), str(tmp_path / "u.jsonl"))


def test_latency_percentiles_and_extremes() -> None:
    lat = aggregate(RECORDS).latency
    # 8 response times: 3 5 7 12 15 20 40 30000 (robots records have none)
    assert lat.count == 8
    assert lat.sample == [3.0, 5.0, 7.0, 12.0, 15.0, 20.0, 40.0, 30000.0]
    assert not lat.sampled
    # nearest rank, as in the end-of-crawl summary: ranks 4, 8, 8
    assert (lat.p50, lat.p95, lat.p99) == (12.0, 30000.0, 30000.0)
    assert (lat.min, lat.max) == (3.0, 30000.0)
    assert lat.mean == pytest.approx(30102.0 / 8)


def test_hosts_slowest_and_failures() -> None:
    data = aggregate(RECORDS, top=3)
    assert [(h.host, h.pages, h.errors) for h in data.top_hosts] == [
        ("a.test", 8, 4),
        ("b.test:8080", 2, 1),
    ]
    assert data.top_hosts[0].mean_ms == pytest.approx((12 + 20 + 5 + 3 + 40 + 7) / 6)
    assert data.hosts_seen == 2
    assert [(p.elapsed_ms, p.url, p.kind) for p in data.slowest] == [
        (30000.0, f"{B}/", "timeout"),
        (40.0, f"{A}/new", None),
        (20.0, f"{A}/x", None),
    ]
    assert [(f.kind, f.url, f.status, f.referrer) for f in data.failures] == [
        ("http_4xx", f"{A}/missing", 404, f"{A}/"),
        ("robots", f"{A}/private", None, f"{A}/"),
        ("http_5xx", f"{A}/broken", 503, f"{A}/"),
        ("timeout", f"{B}/", None, f"{A}/"),
        ("robots", f"{A}/again", None, f"{A}/"),
    ]
    assert data.failures[3].message == "read timed out"
    assert data.failures_omitted == {}


def test_failures_are_capped_per_kind() -> None:
    data = aggregate(RECORDS, failures_per_kind=1)
    assert [f.url for f in data.failures if f.kind == "robots"] == [f"{A}/private"]
    assert len(data.failures) == 4
    assert data.failures_omitted == {"robots": 1}


def test_slowest_ties_keep_the_earlier_record() -> None:
    records = [rec(f"{A}/{i}", elapsed_ms=5.0) for i in range(5)]
    assert [p.url for p in aggregate(records, top=2).slowest] == [f"{A}/0", f"{A}/1"]


def test_timeline_bins() -> None:
    timeline = aggregate(RECORDS).timeline
    assert timeline is not None
    assert timeline.bin_seconds == FIRST_BIN_SECONDS == 1 / 64
    assert timeline.duration == 31.020
    assert timeline.run_starts == []
    assert sum(timeline.pages) == 10 and sum(timeline.errors) == 5
    assert len(timeline.pages) == int(31.020 * 64) + 1
    assert timeline.pages[int(1.2 * 64)] == 1 and timeline.errors[int(1.2 * 64)] == 1
    # 31.000 and 31.010 fall in bin 1984 (31.000-31.016 s), 31.020 in bin 1985
    assert (timeline.pages[1984], timeline.errors[1984]) == (2, 1)
    assert (timeline.pages[1985], timeline.errors[1985]) == (1, 1)
    assert timeline.pages_per_second()[1984] == 2 * 64


def test_timeline_coarsens_to_stay_bounded() -> None:
    records = [rec(f"{A}/{i}", t=i * 0.5) for i in range(400)]  # up to 199.5 s
    timeline = aggregate(records).timeline
    assert timeline is not None
    # 199.5 s needs 12,768 bins of 1/64 s: doubled twice, 3,192 bins of 1/16 s
    assert timeline.bin_seconds == 1 / 16
    assert len(timeline.pages) == int(199.5 * 16) + 1 <= 4096
    assert sum(timeline.pages) == 400
    assert timeline.pages[int(100.0 * 16)] == 1


def test_timeline_joins_resumed_runs() -> None:
    ts = [0.5, 10.0, 20.0, 19.5, 0.2, 5.0, 3.0]  # 19.5: a little out of order, same run
    timeline = aggregate([rec(f"{A}/{i}", t=t) for i, t in enumerate(ts)]).timeline
    assert timeline is not None
    assert timeline.run_starts == [20.0]
    assert timeline.duration == 25.0
    assert sum(timeline.pages) == 7
    assert timeline.pages[int(25.0 * 64)] == 1  # the resumed run's t=5.0


def test_the_worker_count_over_time_is_carried_between_changes() -> None:
    """A self-sized crawl writes ``workers`` on its first record and the first
    after each resize; the time line has the count in force in every bin,
    through coarsening, and the HTML draws it."""
    records = [rec(f"{A}/{i}", t=i * 0.5) for i in range(400)]  # coarsened to 1/16 s
    records[0]["workers"] = 16
    records[10]["workers"] = 32  # t = 5.0
    records[300]["workers"] = 24  # t = 150.0
    timeline = aggregate(records).timeline
    assert timeline is not None and len(timeline.workers) == len(timeline.pages)
    per_second = 1 / timeline.bin_seconds
    assert timeline.workers[0] == 16 and timeline.workers[int(4.9 * per_second)] == 16
    assert timeline.workers[int(5.0 * per_second)] == 32
    assert timeline.workers[int(149.9 * per_second)] == 32
    assert timeline.workers[-1] == 24
    assert aggregate(records[1:10] + records[11:300]).timeline.workers == []  # type: ignore[union-attr]
    pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")
    from trio_crawl.report.html import render_html

    assert 'id="timeline-workers"' in render_html(aggregate(records), source="w.jsonl")


def test_records_without_t_have_no_timeline() -> None:
    old = [{k: v for k, v in r.items() if k != "t"} for r in RECORDS]
    data = aggregate(old)
    assert data.timeline is None and data.records_without_t == 10
    mixed = aggregate(old[:4] + RECORDS[4:])
    assert mixed.records_without_t == 4
    assert mixed.timeline is not None and sum(mixed.timeline.pages) == 6


def test_latency_reservoir_is_bounded() -> None:
    records = [rec(f"{A}/{i}", elapsed_ms=float(i)) for i in range(1, 1001)]
    lat = aggregate(records, latency_sample=50).latency
    assert lat.count == 1000 and len(lat.sample) == 50 and lat.sampled
    assert (lat.min, lat.max, lat.mean) == (1.0, 1000.0, 500.5)
    assert lat.sample == sorted(lat.sample) and set(lat.sample) <= set(range(1, 1001))
    assert lat.p50 is not None and 250 < lat.p50 < 750  # a uniform sample, seeded


def test_host_table_is_pruned_to_the_busiest() -> None:
    records = [rec(f"http://big.test/{i}") for i in range(50)]
    records += [rec(f"http://h{i}.test/") for i in range(30)]
    records += [rec("http://big.test/last", error=err("timeout", "x"))]
    data = aggregate(records, top=2, max_hosts=3)
    assert data.hosts_seen is None  # more than 2 * max_hosts: counts are lower bounds
    assert (data.top_hosts[0].host, data.top_hosts[0].pages) == ("big.test", 51)
    assert data.top_hosts[0].errors == 1


# -- reading files ------------------------------------------------------------


def test_read_file_and_torn_last_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", RECORDS, tail='{"url": "http://a.te')
    data = aggregate_file(str(path))
    assert data.records == 10
    assert data.warnings == [f"{path}:11: skipped a torn last line (no newline, not JSON)"]


def test_last_line_without_newline_that_parses_is_kept(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", RECORDS[:2], tail=json.dumps(RECORDS[2]))
    data = aggregate_file(str(path))
    assert data.records == 3 and data.warnings == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", r"has no records"),
        ("\n\n", r"has no records"),
        (json.dumps(RECORDS[0]) + "\nnot json\n" + json.dumps(RECORDS[1]) + "\n", r":2: not JSON"),
        ("not json at all\n", r":1: not JSON"),
        ("[1, 2]\n", r":1: not a trio-crawl record"),
        ('{"status": 200}\n', r":1: not a trio-crawl record"),
        ("\x00\xff\xfe garbage\n", r":1: not JSON"),
    ],
)
def test_bad_files_raise(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(ReportInputError, match=message):
        aggregate_file(str(path))


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match=r"cannot read .*nope.jsonl.*No such file"):
        list(read_records(str(tmp_path / "nope.jsonl"), print))


# -- the HTML -----------------------------------------------------------------


def test_render_html_is_self_contained(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")
    from trio_crawl.report.html import render_html

    records = [*RECORDS, rec("javascript:alert(1)", error=err("internal", "<b>x</b>"))]
    page_html = render_html(aggregate(records), source="c.jsonl")
    for chart in ("timeline", "status", "errors", "latency", "depth", "hosts", "slowest"):
        assert f'<figure id="chart-{chart}"><svg' in page_html
    for failing in (f"{A}/missing", f"{A}/private", f"{A}/broken", f"{B}/", f"{A}/again"):
        assert f'<a href="{failing}" rel="nofollow noreferrer">' in page_html
    assert "Content-Security-Policy" in page_html
    assert "<script" not in page_html and "<link" not in page_html
    assert 'href="javascript:' not in page_html and "<b>x</b>" not in page_html
    assert "&lt;b&gt;x&lt;/b&gt;" in page_html
    # nothing to fetch: every src/href is a failing (or slow) page's link or a local #id
    for ref in re.findall(r'(?:src|href)="([^"]*)"', page_html):
        assert ref.startswith(("#", A, B)), ref


def test_render_html_notes_missing_t() -> None:
    pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")
    from trio_crawl.report.html import render_html

    old = [{k: v for k, v in r.items() if k != "t"} for r in RECORDS]
    page_html = render_html(aggregate(old), source="old.jsonl")
    assert "no &quot;t&quot; field" in page_html and 'id="chart-timeline"' not in page_html
    assert 'id="chart-status"' in page_html


# -- the command line ---------------------------------------------------------


needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None,
    reason="the report extra (matplotlib) is not installed",
)


@needs_matplotlib
def test_cli_writes_the_report(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "crawl.jsonl", RECORDS)
    out = tmp_path / "report.html"
    result = run_cli("report", str(src), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(
        rf"trio-crawl: wrote {re.escape(str(out))} \(10 records, [\d.,]+ KB\) in [\d.]+ s\n",
        result.stderr,
    ), result.stderr
    assert result.stdout == ""
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and f'href="{A}/missing"' in text
    assert not list(tmp_path.glob(".report-*"))  # the temporary file was renamed


@needs_matplotlib
def undated(html: str) -> str:
    """The page without its "generated YYYY-MM-DD HH:MM UTC" stamp."""
    return re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated", html)


def test_cli_applies_a_depth_updates_file(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "crawl.jsonl", RECORDS)
    updates = write_jsonl(tmp_path / "updates.jsonl", UPDATES)
    out, plain = tmp_path / "report.html", tmp_path / "plain.html"
    result = run_cli("report", str(src), "--depth-updates", str(updates), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert run_cli("report", str(src), "-o", str(plain)).returncode == 0
    again = tmp_path / "again.html"
    assert run_cli("report", str(src), "-o", str(again)).returncode == 0
    # The page is a function of its input (but for the minute it was made)...
    assert undated(plain.read_text()) == undated(again.read_text())
    # ...and the corrections moved the depths.
    assert undated(out.read_text()) != undated(plain.read_text())
    both_stdin = run_cli("report", "-", "--depth-updates", "-")
    assert both_stdin.returncode == 2
    assert both_stdin.stderr == (
        "trio-crawl: error: FILE and --depth-updates cannot both be stdin (-)\n"
    )


@needs_matplotlib
def test_cli_torn_last_line_warns_and_writes(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "crawl.jsonl", RECORDS, tail='{"url":')
    out = tmp_path / "r.html"
    result = run_cli("report", str(src), "-o", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert (
        lines[0]
        == f"trio-crawl: warning: {src}:11: skipped a torn last line (no newline, not JSON)"
    )
    assert lines[1].startswith(f"trio-crawl: wrote {out} (10 records")
    assert out.exists()


@needs_matplotlib
def test_cli_reads_stdin_and_writes_stdout(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "crawl.jsonl", RECORDS[:1])
    with src.open("rb") as stdin:
        result = subprocess.run(
            [sys.executable, "-m", "trio_crawl", "report", "-", "-o", "-"],
            capture_output=True,
            timeout=TIMEOUT,
            stdin=stdin,
        )
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    page_html = result.stdout.decode("utf-8")
    assert page_html.startswith("<!DOCTYPE html>") and "stdin, 1 record;" in page_html
    assert "<title>trio-crawl report: stdin</title>" in page_html


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], r"cannot read '.*missing.jsonl': No such file or directory"),
        (["{notjsonl}"], r"notjsonl.jsonl:1: not JSON; is this a trio-crawl JSON Lines file\?"),
        (["{empty}"], r"'.*empty.jsonl' has no records"),
        (["{good}", "-o", "{nodir}"], r"cannot write '.*/no/such/dir/r.html'"),
        (["{good}", "--top", "0"], r"argument --top: must be at least 1 \(got 0\)"),
        (["{good}", "-o", "{good}"], r"^trio-crawl: error: -o '.*/good.jsonl' is the FILE this "),
        (
            ["{missing}", "--depth-updates", "{good}", "-o", "{good}"],
            r"-o '.*/good.jsonl' is the --depth-updates this command reads: writing it would "
            r"destroy it; give the output its own file$",
        ),
        ([], r"the following arguments are required: FILE"),
    ],
)
@needs_matplotlib
def test_cli_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    paths = {
        "missing": tmp_path / "missing.jsonl",
        "notjsonl": tmp_path / "notjsonl.jsonl",
        "empty": tmp_path / "empty.jsonl",
        "good": write_jsonl(tmp_path / "good.jsonl", RECORDS),
        "nodir": tmp_path / "no" / "such" / "dir" / "r.html",
    }
    paths["notjsonl"].write_text("<html>not a crawl</html>\n")
    paths["empty"].write_text("")
    result = run_cli("report", *[a.format(**paths) for a in args])
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("trio-crawl: error: ")
    assert re.search(message, lines[0]), lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert paths["good"].read_text() == "".join(json.dumps(r) + "\n" for r in RECORDS)


def test_cli_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "crawl.jsonl", RECORDS)
    # None in sys.modules makes `import matplotlib` raise ImportError, as if not installed
    code = (
        "import sys; sys.modules['matplotlib'] = None; "
        "from trio_crawl.cli.main import main; main(sys.argv[1:])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "report", str(src), "-o", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert result.stderr == MISSING_EXTRA + "\n"
    assert MISSING_EXTRA == (
        "trio-crawl report needs the optional plotting library matplotlib: pip install matplotlib"
    )
    assert not (tmp_path / "r.html").exists()


def small_site() -> Site:
    routes: dict[str, Response] = {
        "/": page("/a", "/b", "/missing"),
        "/a": page("/"),
        "/b": page("/a"),
    }
    return Site(routes)


def test_summary_mentions_the_report_command(tmp_path: Path) -> None:
    out = tmp_path / "my crawl.jsonl"
    with serve_site(small_site()) as server:
        result = run_cli(server.base_url + "/", "-o", str(out), "--ignore-robots")
        to_stdout = run_cli(server.base_url + "/", "-o", "-", "--ignore-robots")
    assert result.returncode == 0, result.stderr
    assert f"HTML report: trio-crawl report '{out}' -o report.html\n" in result.stderr
    assert to_stdout.returncode == 0 and "trio-crawl report" not in to_stdout.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4
    ts = [r["t"] for r in records]
    assert all(isinstance(t, float) and 0 <= t < TIMEOUT for t in ts)


def test_the_report_hint_is_left_out_where_it_would_lead_nowhere(tmp_path: Path) -> None:
    out = tmp_path / "crawl.jsonl"
    # None in sys.modules makes matplotlib look uninstalled (find_spec gives None)
    hidden = (
        "import sys; sys.modules['matplotlib'] = None; "
        "from trio_crawl.cli.main import main; main(sys.argv[1:])"
    )
    with serve_site(small_site()) as server:
        without_extra = subprocess.run(
            [sys.executable, "-c", hidden, server.base_url + "/", "-o", str(out),
             "--ignore-robots"],
            capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    nobody_answered = run_cli("http://127.0.0.1:1/", "-o", str(tmp_path / "none.jsonl"))
    assert without_extra.returncode == 0, without_extra.stderr
    assert len(out.read_text().splitlines()) == 4
    assert "trio-crawl summary" in without_extra.stderr
    assert "trio-crawl report" not in without_extra.stderr
    assert "trio-crawl summary" in nobody_answered.stderr
    assert "trio-crawl report" not in nobody_answered.stderr


# -- in a real browser ----------------------------------------------------------


def chromium(tmp_path: Path, target: Path, *extra: str) -> tuple[str, str]:
    """Load ``target`` in headless chromium; return (dumped DOM, console lines)."""
    exe = shutil.which("chromium")
    assert exe is not None
    profile = tmp_path / f"profile-{target.stem}"
    result = subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *extra,
            "--dump-dom",
            target.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    console = "\n".join(line for line in result.stderr.splitlines() if ":CONSOLE" in line)
    return result.stdout, console


@needs_matplotlib
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not on PATH (apt-get install chromium); no browser test")
    from lxml import html as lxml_html

    # The console capture works: a page that breaks its own CSP logs to it.
    control = tmp_path / "control.html"
    control.write_text(
        '<!DOCTYPE html><meta http-equiv="Content-Security-Policy" '
        'content="default-src \'none\'"><img src="http://127.0.0.1:9/x.png">'
        "<script>console.error('boom')</script><p>control</p>"
    )
    _, control_console = chromium(tmp_path, control)
    assert "Content Security Policy" in control_console, "chromium logs no console lines"

    records = [
        *RECORDS,
        *(rec(f"{A}/p/{i}", elapsed_ms=1.0 + i % 97, t=2.0 + i / 100) for i in range(500)),
    ]
    src = write_jsonl(tmp_path / "crawl.jsonl", records)
    out = tmp_path / "report.html"
    result = run_cli("report", str(src), "-o", str(out))
    assert result.returncode == 0, result.stderr

    dom, console = chromium(tmp_path, out)
    assert console == "", f"console messages:\n{console}"
    doc = lxml_html.fromstring(dom)
    assert doc.findtext(".//h1") == "trio-crawl report"

    def data_marks(chart: str, prefix: str) -> list[Any]:
        """Elements with ids ``prefix...`` in the chart's SVG that draw something."""
        (svg,) = doc.xpath(f'//figure[@id="chart-{chart}"]/*[local-name()="svg"]')
        groups = svg.xpath(f'.//*[local-name()="g"][starts-with(@id, "{prefix}")]')
        return [g for g in groups if g.xpath('.//*[local-name()="path"][string-length(@d) > 10]')]

    assert len(data_marks("timeline", "timeline-pages")) == 1
    assert len(data_marks("timeline", "timeline-errors")) == 1
    assert len(data_marks("status", "status-")) == 5  # 200 301 404 503 none
    assert len(data_marks("errors", "errors-")) == 4
    assert len(data_marks("latency", "latency-")) >= 10
    assert len(data_marks("latency", "latency-p")) == 3  # p50 p95 p99 lines
    assert len(data_marks("depth", "depth-")) == 3
    assert len(data_marks("hosts", "hosts-")) >= 2
    assert len(data_marks("slowest", "slowest-")) == 20
    svg_text = " ".join(doc.xpath('//figure[@id="chart-latency"]//*[local-name()="text"]//text()'))
    assert "p99" in svg_text
    failing = doc.xpath('//table[@id="failures"]//a/@href')
    for url in (f"{A}/missing", f"{A}/private", f"{A}/broken", f"{B}/", f"{A}/again"):
        assert url in failing
