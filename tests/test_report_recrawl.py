"""``trio-crawl report`` of a recrawl (issue #33): records per ``change`` kind
and the bytes a 304 saved (``reused_bytes``), in the aggregate, the HTML page
and the command's line on stderr; a first crawl's report has none of it.
The records are written by hand in the format of the recrawl contract."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.report.aggregate import aggregate
from trio_crawl.report.changes import RecrawlCounts, RecrawlData, recrawl_line

from cli_helpers import run_cli

A = "http://a.test"
SHA = "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"


def rec(path: str, change: str | None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "url": f"{A}{path}",
        "status": 200,
        "depth": 1,
        "error": None,
        "redirect": None,
        "referrer": f"{A}/",
        "content_type": "text/html",
        "elapsed_ms": 5.0,
        "links": 2,
        "attempts": 1,
        "t": 0.5,
        "digest": SHA,
        "size": 1000,
    }
    if change is not None:
        out["change"] = change
    out.update(fields)
    return out


def not_fetched(path: str, change: str) -> dict[str, Any]:
    record = rec(path, change, status=None, attempts=0, elapsed_ms=None, links=0)
    del record["digest"], record["size"]
    return record


#: A recrawl written by hand: every number below follows from it.
RECRAWL = [
    rec("/", "unchanged", depth=0, referrer=None, status=304, reused_bytes=2048, size=2048),
    rec("/a", "unchanged", status=304, reused_bytes=1024, size=1024),
    rec("/b", "unchanged"),  # a 200 with the same digest: downloaded, nothing reused
    rec("/c", "changed", digest="sha1:ZZZZ", size=1500),
    rec("/d", "changed", digest="sha1:YYYY"),
    rec("/e", "new", depth=2, referrer=f"{A}/c"),
    rec("/f", "gone", status=404, error={"kind": "http_4xx", "message": "HTTP 404"}),
    rec("/g", "error", status=503, error={"kind": "http_5xx", "message": "HTTP 503"},
        attempts=3, kept=True),
    not_fetched("/h", "unlinked"),
    not_fetched("/i", "unlinked"),
    not_fetched("/j", "not_due"),
]  # fmt: skip

FIRST_CRAWL = [{k: v for k, v in r.items() if k not in ("change", "reused_bytes", "kept")}
               for r in RECRAWL]  # fmt: skip


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_recrawl_is_counted_per_change_kind_with_the_bytes_not_downloaded() -> None:
    data = aggregate(RECRAWL)
    assert data.recrawl == RecrawlData(
        changes={"new": 1, "changed": 2, "unchanged": 3, "gone": 1, "error": 1,
                 "unlinked": 2, "not_due": 1},
        reused_bytes=3072,
        reused=2,
        kept=1,
    )  # fmt: skip
    assert list(data.recrawl.changes) == [
        "new", "changed", "unchanged", "gone", "error", "unlinked", "not_due",
    ]  # fmt: skip
    assert data.recrawl.not_fetched == 3
    assert data.records == 11 and data.failed == 2  # the other counts are as for any crawl


def test_a_first_crawl_has_no_recrawl_counts() -> None:
    assert aggregate(FIRST_CRAWL).recrawl is None


def test_kinds_are_listed_in_their_order_and_strange_values_are_bounded() -> None:
    counts = RecrawlCounts()
    for record in [
        {"url": "u", "change": "unlinked"},
        {"url": "u", "change": "new"},
        {"url": "u", "change": "teleported"},  # a kind from elsewhere
        {"url": "u", "change": ["x"]},  # not even a string
        {"url": "u", "change": None},  # not a recrawl record
        {"url": "u", "change": "unchanged", "reused_bytes": True},
        {"url": "u", "change": "unchanged", "reused_bytes": -5},
        {"url": "u", "change": "unchanged", "reused_bytes": "9"},
        {"url": "u", "change": "unchanged", "reused_bytes": 7, "kept": "yes"},
    ]:
        counts.add(record)
    data = counts.result()
    assert data == RecrawlData(
        changes={"new": 1, "unchanged": 4, "unlinked": 1, "other": 2},
        reused_bytes=7,
        reused=1,
        kept=0,
    )


def test_the_line_for_the_terminal() -> None:
    data = aggregate(RECRAWL).recrawl
    assert data is not None
    assert recrawl_line(data) == (
        "recrawl: 1 new, 2 changed, 3 unchanged, 1 gone, 1 error, 2 unlinked, 1 not due; "
        "3.0 KB not downloaded; 1 failed kept their previous copy"
    )


needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None,
    reason="the report extra (matplotlib) is not installed",
)


@needs_matplotlib
def test_the_page_shows_what_changed() -> None:
    from trio_crawl.report.html import render_html

    page = render_html(aggregate(RECRAWL), source="again.jsonl")
    section = page[page.index('<h2 id="recrawl">') : page.index("<h2>Throughput</h2>")]
    cards = re.findall(r'<div class="card"><b>([^<]*)</b><span>([^<]*)</span></div>', section)
    assert cards == [
        ("1", "new"), ("2", "changed"), ("3", "unchanged"), ("1", "gone"), ("1", "error"),
        ("2", "unlinked"), ("1", "not due"), ("3.0 KB", "not downloaded"),
        ("1", "failed, previous copy kept"),
    ]  # fmt: skip
    assert "2 pages answered 304 Not Modified: their 3.0 KB were not downloaded" in section
    assert "(3) were not fetched" in section
    assert '<figure id="chart-changes"><svg' in section
    assert all(f'id="changes-{i}"' in section for i in range(7))
    assert 'id="changes-7"' not in section


@needs_matplotlib
def test_a_first_crawl_page_has_no_recrawl_section() -> None:
    from trio_crawl.report.html import render_html

    page = render_html(aggregate(FIRST_CRAWL), source="first.jsonl")
    assert 'id="recrawl"' not in page and "chart-changes" not in page
    assert "not downloaded" not in page


@needs_matplotlib
def test_the_command_says_what_changed(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run_cli("report", str(write_jsonl(tmp_path / "again.jsonl", RECRAWL)), "-o", str(out))
    assert result.returncode == 0, result.stderr
    wrote, said = result.stderr.splitlines()
    assert wrote.startswith(f"trio-crawl: wrote {out} (11 records, ")
    assert said == (
        "trio-crawl: recrawl: 1 new, 2 changed, 3 unchanged, 1 gone, 1 error, 2 unlinked, "
        "1 not due; 3.0 KB not downloaded; 1 failed kept their previous copy"
    )
    assert 'id="recrawl"' in out.read_text(encoding="utf-8")
    first = run_cli(
        "report", str(write_jsonl(tmp_path / "first.jsonl", FIRST_CRAWL)), "-o", str(out)
    )
    assert first.returncode == 0 and "recrawl" not in first.stderr, first.stderr
    assert len(first.stderr.splitlines()) == 1
