"""recrawl/store.py and frontiers/sqlite/visits.py: the visit tables, their
generations, and what an older state file (no visit tables) becomes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.errors import StateUsageError
from trio_crawl.frontiers.sqlite.marks import Finish, Start
from trio_crawl.frontiers.sqlite.state import CrawlState
from trio_crawl.frontiers.sqlite.visits import (
    prepare_visits,
    reconcile_unlinked,
    start_generation,
)
from trio_crawl.recrawl import store
from trio_crawl.recrawl.store import VisitStore
from trio_crawl.recrawl.visit import Visit


def visit(url: str, **kw: object) -> Visit:
    return Visit(url=url, status=200, digest="sha1:" + url, links=(), **kw)  # type: ignore[arg-type]


def test_generations_read_the_previous_and_write_their_own(tmp_path: Path) -> None:
    visits = VisitStore.open(tmp_path / "v.db")
    assert visits.generation == 1
    visits.put(visit("http://a/", etag='"1"'))
    visits.put(visit("http://b/"))
    assert visits.previous("http://a/") is None  # generation 0 has nothing
    assert visits.begin_generation() == 2
    assert visits.previous("http://a/") == visit("http://a/", etag='"1"')
    assert [v.url for v in visits.unreached()] == ["http://a/", "http://b/"]
    visits.put(visit("http://a/", etag='"2"'))  # reached again
    assert [v.url for v in visits.unreached()] == ["http://b/"]
    assert visits.previous("http://a/").etag == '"1"'  # type: ignore[union-attr]
    visits.begin_generation()  # 3: generation 1 is deleted, 2 is the previous
    assert visits.previous("http://a/").etag == '"2"'  # type: ignore[union-attr]
    assert visits.previous("http://b/") is None  # not visited in generation 2
    visits.close()
    reopened = VisitStore.open(tmp_path / "v.db")
    assert reopened.generation == 3
    reopened.close()


def test_a_failed_reset_leaves_the_generation_as_it_was(tmp_path: Path) -> None:
    visits = VisitStore.open(tmp_path / "v.db")
    visits.put(visit("http://a/"))

    def reset(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM visits")
        raise OSError("disk gone")

    with pytest.raises(OSError):
        visits.begin_generation(reset)
    conn = sqlite3.connect(tmp_path / "v.db")
    assert store.generation(conn) == 1
    assert conn.execute("SELECT count(*) FROM visits").fetchone() == (1,)


@settings(max_examples=30, deadline=None)
@given(st.sets(st.integers(0, 50)), st.sets(st.integers(0, 50)), st.sets(st.integers(0, 50)))
def test_unreached_is_the_previous_minus_reached_minus_recorded(
    before: set[int], reached: set[int], recorded: set[int]
) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    store.ensure_schema(conn)
    url = "http://h/{:02}".format
    store.put_rows(conn, [(1, visit(url(i))) for i in before])
    store.begin_generation(conn, lambda c: None)
    store.put_rows(conn, [(2, visit(url(i))) for i in reached])
    store.mark_unlinked(conn, 2, [url(i) for i in recorded])
    got = [v.url for v in store.unreached(conn, 2, limit=1000)]
    assert got == [url(i) for i in sorted(before - reached - recorded)]


def finished_old_file(path: Path) -> None:
    """A state file as versions before recrawls left it: no visit tables."""
    with CrawlState.open(path) as state:
        state.save_settings({"start_urls": ["http://a.test/"]})
        state.add_seeds(["http://a.test/"])
        state.recover()
        (row,) = state.take_queued(1)
        state.apply([Start(row.url, first=True), Finish(row.url)])
    conn = sqlite3.connect(path)
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    assert "visits" not in tables
    conn.close()


def test_an_older_finished_file_begins_a_generation(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    finished_old_file(db)
    with CrawlState.open(db) as state:
        assert start_generation(state) is True
    with CrawlState.open(db) as state:
        assert state.progress()["total"] == 0  # the URL rows start afresh
        assert state.load_settings() is None  # a new crawl: its own arguments
        assert prepare_visits(state) == (2, False)
        # no visits were kept: nothing to compare with, nothing unlinked
        assert state.run(lambda conn: store.unreached(conn, 2)) == []
    with CrawlState.open(db) as state:  # the recrawl not finished: resumed, not begun again
        state.save_settings({"start_urls": ["http://a.test/"]})
        assert start_generation(state) is False
        assert prepare_visits(state) == (2, False)


def test_an_unfinished_first_crawl_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with CrawlState.open(db) as state:
        state.save_settings({"start_urls": ["http://a.test/"]})
        state.add_seeds(["http://a.test/", "http://a.test/x"])
        with pytest.raises(StateUsageError, match="not finished"):
            start_generation(state)
        assert state.progress()["total"] == 2  # untouched


def test_reconcile_marks_the_unlinked_records_of_the_output(tmp_path: Path) -> None:
    db, out = tmp_path / "s.db", tmp_path / "o.jsonl"
    finished_old_file(db)
    with CrawlState.open(db) as state:
        start_generation(state)
    out.write_text(
        '{"url": "http://a.test/gone", "status": null, "change": "unlinked"}\n'
        '{"url": "http://a.test/", "status": 200, "change": "unchanged"}\n'
        '{"url": "http://a.test/torn", "status": null, "change": "unlin'
    )
    with CrawlState.open(db) as state:
        prepare_visits(state)
        assert reconcile_unlinked(state, str(out)) == 1
        marked = state.run(lambda conn: conn.execute("SELECT url FROM unlinked").fetchall())
    assert marked == [("http://a.test/gone",)]


def test_a_standalone_file_restarts_an_unfinished_generation(tmp_path: Path) -> None:
    """A mirror's visit file (no frontier to resume from): an unfinished
    generation is forgotten and done again against the same previous one;
    a finished one lets the next begin."""
    visits = VisitStore.open(tmp_path / "v.db")
    visits.put_many([visit("http://a/"), visit("http://b/")])
    assert not visits.done()
    visits.finish()
    assert visits.done()
    assert visits.begin_generation() == 2
    visits.put(visit("http://a/", etag='"new"'))  # then killed: never finished
    visits.mark_unlinked(["http://b/"])
    visits.close()
    again = VisitStore.open(tmp_path / "v.db")
    assert again.generation == 2 and not again.done()
    again.restart_generation()
    assert [v.url for v in again.unreached()] == ["http://a/", "http://b/"]  # all of it again
    assert again.previous("http://a/") == visit("http://a/")  # generation 1 kept
    again.close()


def test_previous_many_is_previous_for_each_url(tmp_path: Path) -> None:
    """The read ahead's query gives what the one-URL read gives, across its
    chunks, and leaves out URLs with no previous visit."""
    visits = VisitStore.open(tmp_path / "v.db")
    urls = [f"http://a/{n}" for n in range(1203)]
    visits.put_many(visit(url, etag=f'"{n}"') for n, url in enumerate(urls) if n % 3)
    visits.begin_generation()
    visits.put(visit(urls[1], etag='"new"'))  # this generation's: not the previous
    asked = [*urls, "http://b/"]
    conn = sqlite3.connect(tmp_path / "v.db")
    many = store.previous_many(conn, visits.generation, asked)
    assert many == {u: v for u in asked if (v := visits.previous(u)) is not None}
    assert len(many) == 802 and many[urls[1]].etag == '"1"'
    conn.close()
    visits.close()
