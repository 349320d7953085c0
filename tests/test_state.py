"""The on-disk crawl state (``frontiers/sqlite/state.py``) and its prefilters
(``frontiers/bloom.py``).

Rules of this suite: synchronous, no trio, no network; every test uses real SQLite
files under ``tmp_path`` (hypothesis examples use their own temporary directory).
Crashes are real: a child process killed with SIGKILL, and files copied while a
transaction is open. The state machine test checks every op against a plain model
and the ``counts`` table against a recount of the rows.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from trio_crawl.core.config import CrawlConfig
from trio_crawl.frontiers.bloom import BloomFilter, GrowingBloom, RecentSet
from trio_crawl.frontiers.crawl_identity import StateIdentity
from trio_crawl.frontiers.sqlite import (
    Admit,
    CrawlState,
    Finish,
    Op,
    Row,
    Start,
    State,
)
from trio_crawl.frontiers.sqlite.resume import prepare_state
from trio_crawl.frontiers.sqlite.schema import APPLICATION_ID

STATE_NAMES = [s.name.lower() for s in State]


def rows(path: Path) -> dict[str, tuple[int, int, str | None, int]]:
    """url -> (state, depth, referrer, attempts), read with a separate connection."""
    with sqlite3.connect(path) as conn:
        return {
            url: (state, depth, referrer, attempts)
            for url, state, depth, referrer, attempts in conn.execute(
                "SELECT url, state, depth, referrer, attempts FROM urls"
            )
        }


def recount(path: Path) -> dict[str, int]:
    """Counts by state from the rows themselves, shaped like ``progress()``."""
    counts = dict.fromkeys(STATE_NAMES, 0)
    with sqlite3.connect(path) as conn:
        for state, n in conn.execute("SELECT state, count(*) FROM urls GROUP BY state"):
            counts[State(state).name.lower()] = n
    counts["total"] = sum(counts.values())
    return counts


def stored_counts(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        counts = {State(s).name.lower(): n for s, n in conn.execute("SELECT state, n FROM counts")}
    counts["total"] = sum(counts.values())
    return counts


def u(i: int) -> str:
    return f"http://a.test/{i}"


# -- opening, refusing, settings ----------------------------------------------


def test_new_file_is_marked_ours_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    with CrawlState.open(path) as state:
        assert state.progress() == dict.fromkeys([*STATE_NAMES, "total"], 0)
        assert state.load_settings() is None
        assert state.queued_on_disk() == 0
        assert (tmp_path / "crawl.db-wal").exists()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            "1",
        )
    with CrawlState.open(str(path), create=False) as state:  # reopens; str paths work
        assert "queued_disk=0" in repr(state)


def test_connection_is_synchronous_normal(tmp_path: Path) -> None:
    state = CrawlState.open(tmp_path / "c.db")
    assert state._file.conn is not None
    assert state._file.conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    state.close()


def test_missing_file_without_create(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"^.*nope\.db: no such state file$"):
        CrawlState.open(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()


def test_an_empty_file_becomes_a_state_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with CrawlState.open(path) as state:
        state.add_seeds([u(1)])
    with CrawlState.open(path) as state:
        assert state.queued_on_disk() == 1


def _other_program_db(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.close()


def _newer_schema(path: Path) -> None:
    CrawlState.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()


def _no_counts_table(path: Path) -> None:
    CrawlState.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE counts")
    conn.close()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda p: p.write_text("url1\nurl2\n" * 100),
            r"not a trio-crawl state file \(file is not a database\)",
        ),
        (
            _other_program_db,
            r"not a trio-crawl state file \(an SQLite database of another program\)",
        ),
        (
            _newer_schema,
            r"trio-crawl state file of schema version 2; this trio-crawl reads version 1",
        ),
        (_no_counts_table, r"damaged trio-crawl state file \(no such table: counts\)"),
    ],
    ids=["text", "other-sqlite", "newer-schema", "damaged"],
)
def test_a_file_that_is_not_ours_is_refused_untouched(
    tmp_path: Path, make: Callable[[Path], object], message: str
) -> None:
    path = tmp_path / "x.db"
    make(path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=rf"^{path}: {message}$") as info:
        CrawlState.open(path)
    assert "\n" not in str(info.value)
    assert path.read_bytes() == before
    assert not (tmp_path / "x.db-wal").exists()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^.*: cannot open the state file \(.*\)$"):
        CrawlState.open(tmp_path)


#: The schema before issue #9, as trio-crawl wrote it: one more column, never used.
OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE counts (state INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE urls (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    depth INTEGER NOT NULL,
    referrer TEXT,
    state INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before REAL
);
CREATE INDEX urls_disk_queue ON urls (id) WHERE state = 0;
"""


def _old_schema_file(path: Path, settings: dict[str, object]) -> None:
    """A state file as the version before issue #9 left it, mid-crawl."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for statement in OLD_SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [
            ("schema_version", "1"),
            ("format", "trio-crawl state"),
            ("settings", json.dumps(settings)),
        ],
    )
    conn.executemany(
        "INSERT INTO urls (url, depth, referrer, state, attempts) VALUES (?, ?, ?, ?, ?)",
        [
            (u(0), 0, None, State.DONE, 1),
            (u(1), 1, u(0), State.FETCHING, 1),
            (u(2), 1, u(0), State.QUEUED_MEM, 0),
            (u(3), 1, u(0), State.QUEUED_DISK, 0),
        ],
    )
    conn.executemany(
        "INSERT INTO counts (state, n) VALUES (?, ?)",
        [(0, 1), (1, 1), (2, 1), (3, 1), (4, 0)],
    )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("COMMIT")
    conn.close()


def test_a_file_of_the_old_schema_resumes_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    config = CrawlConfig.from_options(start_urls=[u(0)])
    _old_schema_file(
        path, {**StateIdentity.of(config, None).settings(), "scope_origins": ["http://a.test/"]}
    )
    prepared = prepare_state(config, state_path=str(path), seeds=None, output=None, force=False)
    try:
        state = prepared.state
        assert prepared.resumed and prepared.refetched == [u(1)]
        assert prepared.already_started == 1
        assert [(r.url, r.attempts) for r in state.take_queued(10)] == [
            (u(1), 1),
            (u(2), 0),
            (u(3), 0),
        ]
        assert state.filter_unseen([u(2), u(4)]) == [u(4)]
        state.apply([Admit(u(4), 2, u(2)), Start(u(1)), Finish(u(1)), Finish(u(2))])
        assert state.progress() == recount(path) == stored_counts(path)
    finally:
        prepared.close()
    assert rows(path)[u(4)] == (State.QUEUED_DISK, 2, u(2), 0)
    with sqlite3.connect(path) as conn:
        columns = [name for _, name, *_ in conn.execute("PRAGMA table_info(urls)")]
        assert columns[-1] == "not_before"  # left as it was, never written
        assert (
            conn.execute("SELECT count(*) FROM urls WHERE not_before IS NOT NULL").fetchone()[0]
            == 0
        )
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_new_file_has_no_unused_column(tmp_path: Path) -> None:
    CrawlState.open(tmp_path / "c.db").close()
    with sqlite3.connect(tmp_path / "c.db") as conn:
        columns = [name for _, name, *_ in conn.execute("PRAGMA table_info(urls)")]
    assert columns == ["id", "url", "depth", "referrer", "state", "attempts"]


def test_settings_round_trip_and_replace(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    settings = {"start_urls": ["http://a.test/"], "max_depth": 3, "max_pages": None}
    with CrawlState.open(path) as state:
        state.save_settings(settings)
        with pytest.raises(TypeError):
            state.save_settings({"bad": object()})
        with pytest.raises(ValueError):
            state.save_settings({"bad": float("nan")})
        assert state.load_settings() == settings
    with CrawlState.open(path) as state:
        assert state.load_settings() == settings
        state.save_settings({"max_pages": 5})
        assert state.load_settings() == {"max_pages": 5}


# -- operations ---------------------------------------------------------------


def test_admit_on_disk_or_in_memory_and_ignore_known(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.apply(
            [
                Admit(u(1), 0),
                Admit(u(2), 1, u(1)),
                Admit(u(3), 2, u(2), in_memory=True),
                Admit(u(2), 0, None, in_memory=True),  # known: ignored entirely
                Admit(u(1), 5, u(9)),
            ]
        )
        assert state.progress() == {
            "queued_disk": 2,
            "queued_mem": 1,
            "fetching": 0,
            "done": 0,
            "dropped": 0,
            "total": 3,
        }
        assert state.queued_on_disk() == 2
    assert rows(path) == {
        u(1): (State.QUEUED_DISK, 0, None, 0),
        u(2): (State.QUEUED_DISK, 1, u(1), 0),
        u(3): (State.QUEUED_MEM, 2, u(2), 0),
    }


def test_start_and_finish(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.apply([Admit(u(i), 4, in_memory=True) for i in range(6)])
        state.apply([Admit(u(9), 4)])
        state.apply([Start(u(0)), Start(u(1)), Start(u(1)), Start(u(2))])
        state.apply([Start(u(2))])  # a retry in a later batch
        state.apply([Finish(u(0)), Finish(u(3))])  # from FETCHING, from QUEUED_MEM
        assert state.progress() == recount(path) == stored_counts(path)
    assert rows(path) == {
        u(0): (State.DONE, 4, None, 1),
        u(1): (State.FETCHING, 4, None, 2),
        u(2): (State.FETCHING, 4, None, 2),
        u(3): (State.DONE, 4, None, 0),
        u(4): (State.QUEUED_MEM, 4, None, 0),
        u(5): (State.QUEUED_MEM, 4, None, 0),
        u(9): (State.QUEUED_DISK, 4, None, 0),
    }


def test_a_start_said_to_be_first_finds_its_queued_row_and_no_other(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.apply([Admit(u(i), 4, in_memory=True) for i in range(3)])
        state.apply([Start(u(0), first=True), Start(u(1), first=True), Start(u(2))])
        state.apply([Start(u(1)), Finish(u(0)), Finish(u(2))])  # u(1): a retry
        assert state.progress() == recount(path) == stored_counts(path)
        with pytest.raises(RuntimeError, match=r"Start .* is already FETCHING"):
            state.apply([Start(u(1), first=True)])  # not its first attempt: a bug
    assert rows(path) == {
        u(0): (State.DONE, 4, None, 1),
        u(1): (State.FETCHING, 4, None, 2),
        u(2): (State.DONE, 4, None, 1),
    }


def test_ops_apply_in_order_within_one_batch(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.apply(
            [
                Admit(u(1), 3, in_memory=True),
                Start(u(1)),
                Start(u(1)),
                Finish(u(1)),
                Admit(u(2), 2, u(1)),
                Admit(u(3), 2, u(1), in_memory=True),
                Start(u(3)),
            ]
        )
    assert rows(path) == {
        u(1): (State.DONE, 3, None, 2),
        u(2): (State.QUEUED_DISK, 2, u(1), 0),
        u(3): (State.FETCHING, 2, u(1), 1),
    }


@pytest.mark.parametrize(
    ("bad", "detail"),
    [
        (Start(u(8)), r"Start .*'http://a.test/8' is QUEUED_DISK"),
        (Finish(u(8)), r"Finish .*'http://a.test/8' is QUEUED_DISK"),
        (Finish(u(99)), r"Finish .*'http://a.test/99' is unknown"),
        (Start(u(7)), r"Start .*'http://a.test/7' is DONE"),
        (Finish(u(7)), r"Finish .*a URL was named twice or is already DONE"),
    ],
)
def test_start_or_finish_of_a_row_not_in_memory_rolls_back_the_batch(
    tmp_path: Path, bad: Op, detail: str
) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.apply([Admit(u(7), 0, in_memory=True), Finish(u(7)), Admit(u(8), 0)])
        before = rows(path)
        progress = state.progress()
        with pytest.raises(RuntimeError, match=rf"^crawl state invariant broken: {detail}$"):
            state.apply([Admit(u(1), 1, in_memory=True), Start(u(1)), bad, Admit(u(2), 1)])
        assert rows(path) == before
        assert state.progress() == progress == recount(path)
        # Nothing of the failed batch reached the prefilters either.
        assert state.filter_unseen([u(1), u(2), u(7)]) == [u(1), u(2)]


def test_finish_twice_in_one_batch_is_a_bug(tmp_path: Path) -> None:
    with CrawlState.open(tmp_path / "c.db") as state:
        state.apply([Admit(u(1), 0, in_memory=True)])
        with pytest.raises(RuntimeError, match=r"^crawl state invariant broken: Finish"):
            state.apply([Finish(u(1)), Finish(u(1))])
        assert state.progress()["queued_mem"] == 1


def test_apply_refuses_what_is_not_an_op(tmp_path: Path) -> None:
    with (
        CrawlState.open(tmp_path / "c.db") as state,
        pytest.raises(TypeError, match=r"^not a crawl state operation: "),
    ):
        state.apply([Admit(u(1), 0), ("Start", u(1))])  # type: ignore[list-item]


def test_take_queued_is_fifo_and_never_hands_a_row_twice(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.add_seeds([u(i) for i in range(5)])
        state.apply([Admit(u(i), 1, u(0)) for i in range(5, 8)])
        assert state.take_queued(0) == []
        first = state.take_queued(3)
        assert first == [Row(u(0), 0, None, 0), Row(u(1), 0, None, 0), Row(u(2), 0, None, 0)]
        state.apply([Admit(u(8), 2, u(5)), Admit(u(9), 2, u(5), in_memory=True)])
        rest = state.take_queued(100)
        assert [r.url for r in rest] == [u(3), u(4), u(5), u(6), u(7), u(8)]
        assert rest[2] == Row(u(5), 1, u(0), 0)
        assert state.take_queued(100) == []
        assert state.queued_on_disk() == 0
        assert state.progress()["queued_mem"] == 10
        state.apply([Start(u(0)), Finish(u(0)), Start(u(4))])
    with CrawlState.open(path) as state:
        assert state.recover() == [u(4)]
        again = state.take_queued(100)
        # Back in their original order; the in-flight one says it was started.
        assert [r.url for r in again] == [u(i) for i in range(1, 10)]
        assert [r.attempts for r in again] == [0, 0, 0, 1, 0, 0, 0, 0, 0]


def test_recover_requeues_memory_and_reports_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        assert state.recover() == []  # nothing to do on a new file
        state.add_seeds([u(i) for i in range(6)])
        state.take_queued(4)
        state.apply([Start(u(2)), Start(u(0)), Start(u(0)), Finish(u(1))])
        # Closed as if the process had stopped: u(0), u(2) in flight, u(3) in memory.
    with CrawlState.open(path) as state:
        assert state.progress()["fetching"] == 2
        message = r"^.*c\.db: the last crawl left URLs in memory or in flight; call recover\(\)"
        with pytest.raises(RuntimeError, match=message):
            state.take_queued(1)
        with pytest.raises(RuntimeError, match=message):
            state.apply([Admit(u(50), 1)])
        assert state.filter_unseen([u(0), u(50)]) == [u(50)]  # reading is fine
        assert state.progress()["total"] == 6  # and so is asking
        assert state.recover() == [u(0), u(2)]  # oldest first
        assert state.recover() == []
        assert state.progress() == {**recount(path), "queued_disk": 5, "done": 1}
        assert state.queued_on_disk() == 5
        assert [(r.url, r.attempts) for r in state.take_queued(10)] == [
            (u(0), 2),
            (u(2), 1),
            (u(3), 0),
            (u(4), 0),
            (u(5), 0),
        ]


# -- seeds ----------------------------------------------------------------------


def test_add_seeds_streams_in_committed_batches(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    pulled_vs_committed: list[tuple[int, int]] = []

    def seeds() -> Iterator[str]:
        reader = sqlite3.connect(path)
        for i in range(50):
            if i % 10 == 0:
                (n,) = reader.execute("SELECT count(*) FROM urls").fetchone()
                pulled_vs_committed.append((i, n))
            yield u(i % 45)  # five duplicates
        reader.close()

    with CrawlState.open(path) as state:
        assert state.add_seeds(seeds(), batch=10) == 45
        assert pulled_vs_committed == [(0, 0), (10, 10), (20, 20), (30, 30), (40, 40)]
        assert state.queued_on_disk() == 45
        with pytest.raises(ValueError):
            state.add_seeds([], batch=0)


def test_add_seeds_again_adds_nothing_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.apply([Admit(u(3), 2, u(0)), Admit(u(4), 1, u(0), in_memory=True)])
        assert state.add_seeds(u(i) for i in range(5)) == 3
        state.apply([Start(u(4)), Finish(u(4))])
        before = rows(path)
        assert state.add_seeds(u(i) for i in range(5)) == 0
        assert rows(path) == before  # u(3) keeps depth 2, u(4) stays done
        assert state.progress() == recount(path)


def test_add_seeds_interrupted_keeps_whole_batches_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "c.db"

    def seeds(fail_at: int | None) -> Iterator[str]:
        for i in range(50):
            if i == fail_at:
                raise OSError("disk read error")
            yield u(i)

    with CrawlState.open(path) as state:
        with pytest.raises(OSError, match="disk read error"):
            state.add_seeds(seeds(25), batch=10)
        assert state.queued_on_disk() == 20
        assert state.add_seeds(seeds(None), batch=10) == 30
        assert [r.url for r in state.take_queued(100)] == [u(i) for i in range(50)]


# -- filter_unseen ----------------------------------------------------------------


def test_filter_unseen_keeps_order_drops_duplicates_and_known(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.add_seeds([u(1), u(2)])
        state.apply([Admit(u(3), 1, u(1))])
        links = [u(5), u(1), u(4), u(5), u(3), u(6), u(2), u(4)]
        assert state.filter_unseen(links) == [u(5), u(4), u(6)]
        assert state.filter_unseen([]) == []
    with CrawlState.open(path) as state:  # the filter is rebuilt from the file
        assert state.filter_unseen(links) == [u(5), u(4), u(6)]


def test_recent_urls_and_new_urls_cost_no_database_check(tmp_path: Path) -> None:
    with CrawlState.open(tmp_path / "c.db") as state:
        nav = [u(i) for i in range(20)]
        state.apply([Admit(x, 1) for x in nav])
        assert state.filter_unseen(nav) == []  # just admitted: in the recent set
        fresh = [u(i) for i in range(100, 130)]
        assert state.filter_unseen(nav + fresh) == fresh
        stats = state.statistics()
        # 20 known URLs in a filter of 100,000: a false positive is ~impossible.
        assert (stats.db_checks, stats.db_queries) == (0, 0)
        assert stats.prefilter_bytes == (20 + 100_000) * 16 // 8  # rows + expected_urls
        assert stats.prefilter_filters == 1
        assert stats.recent_urls == 20


def test_known_urls_not_recent_are_checked_in_one_query(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CrawlState.open(path) as state:
        state.add_seeds(u(i) for i in range(600))  # seeds do not enter the recent set
        links = [u(i) for i in range(0, 600, 20)] + [u(1000)]
        assert state.filter_unseen(links) == [u(1000)]
        stats = state.statistics()
        assert (stats.db_checks, stats.db_queries, stats.false_positives) == (30, 1, 0)
        assert state.filter_unseen(links) == [u(1000)]  # now they are recent
        assert state.statistics().db_checks == 30
        # More "maybe"s than one query holds: several queries, same answer.
        assert state.filter_unseen([u(i) for i in range(600)] + [u(1001)]) == [u(1001)]
        assert state.statistics().db_queries == 1 + 3


def test_false_positives_are_checked_and_not_lost(tmp_path: Path) -> None:
    # 1 bit per URL for 1,024 URLs: 16 words, hopelessly full after 2,000 URLs.
    with CrawlState.open(
        tmp_path / "c.db", expected_urls=1, bits_per_url=1, recent_urls=0
    ) as state:
        assert state.filter_unseen([]) == []  # loads an empty filter for 1,024 URLs
        state.add_seeds(u(i) for i in range(2000))  # seeds feed it: it must grow
        new = [u(i) for i in range(5000, 5200)]
        assert state.filter_unseen([*new, u(7)]) == new
        stats = state.statistics()
        assert stats.false_positives > 100
        assert stats.db_checks == stats.false_positives + 1
        assert stats.prefilter_filters == 2  # it grew past 1,024


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(
                st.just("filter"),
                st.lists(st.integers(0, 60), max_size=25),
                st.booleans(),
            ),
            st.tuples(st.just("seeds"), st.lists(st.integers(0, 60), max_size=15), st.just(0)),
            st.tuples(st.just("reopen"), st.just([]), st.just(0)),
        ),
        max_size=25,
    )
)
def test_filter_unseen_agrees_with_a_set(steps: list[tuple[str, list[int], object]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.db"
        state = CrawlState.open(path, expected_urls=1, bits_per_url=2, recent_urls=3)
        seen: set[str] = set()
        try:
            for kind, numbers, flag in steps:
                urls = [u(n) for n in numbers]
                if kind == "filter":
                    expected = list(dict.fromkeys(x for x in urls if x not in seen))
                    assert state.filter_unseen(urls) == expected
                    # The caller admits what it was told is new (some in memory).
                    state.apply([Admit(x, 1, in_memory=bool(flag)) for x in expected])
                    seen.update(expected)
                elif kind == "seeds":
                    added = state.add_seeds(urls)
                    assert added == len(set(urls) - seen)
                    seen.update(urls)
                else:
                    state.close()
                    state = CrawlState.open(path, expected_urls=1, bits_per_url=2, recent_urls=3)
                    state.recover()
            assert state.progress()["total"] == len(seen)
        finally:
            state.close()


# -- a model-checked state machine ----------------------------------------------


@dataclass
class ModelRow:
    state: State
    depth: int
    referrer: str | None
    attempts: int = 0


class StateModel(RuleBasedStateMachine):
    """Every op, take, recover and reopen against a dict model of the rows."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.path = Path(self.tmp.name) / "c.db"
        self.state = CrawlState.open(self.path, expected_urls=1, bits_per_url=2, recent_urls=2)
        # dict order == insertion order == rowid order.
        self.model: dict[str, ModelRow] = {}
        self.pending: list[Op] = []
        #: URLs of the pending Admits: the caller remembers them until apply().
        self.pending_urls: set[str] = set()

    def teardown(self) -> None:
        self.state.close()
        self.tmp.cleanup()

    def in_states(self, *states: State) -> list[str]:
        return [url for url, row in self.model.items() if row.state in states]

    @initialize(n=st.integers(0, 6))
    def seed(self, n: int) -> None:
        urls = [f"http://s.test/{i}" for i in range(n)]
        assert self.state.add_seeds(urls) == n
        for url in urls:
            self.model[url] = ModelRow(State.QUEUED_DISK, 0, None)

    @rule(
        numbers=st.lists(st.integers(0, 30), max_size=6),
        depth=st.integers(0, 5),
        in_memory=st.booleans(),
    )
    def discover(self, numbers: list[int], depth: int, in_memory: bool) -> None:
        links = [u(n) for n in numbers]
        unseen = self.state.filter_unseen(links)
        committed = set(self.model) - self.pending_urls
        assert unseen == list(dict.fromkeys(x for x in links if x not in committed))
        new = [x for x in unseen if x not in self.pending_urls]
        self.pending_urls.update(new)
        for url in new:
            self.pending.append(Admit(url, depth, "http://ref.test/", in_memory))
            state = State.QUEUED_MEM if in_memory else State.QUEUED_DISK
            self.model[url] = ModelRow(state, depth, "http://ref.test/")

    @rule(data=st.data())
    def start(self, data: st.DataObject) -> None:
        candidates = self.in_states(State.QUEUED_MEM, State.FETCHING)
        if candidates:
            url = data.draw(st.sampled_from(candidates))
            # As the engine says it: a first attempt names its state (one UPDATE).
            first = self.model[url].state is State.QUEUED_MEM and data.draw(st.booleans())
            self.pending.append(Start(url, first=first or None))
            self.model[url].state = State.FETCHING
            self.model[url].attempts += 1

    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        candidates = self.in_states(State.QUEUED_MEM, State.FETCHING)
        if candidates:
            url = data.draw(st.sampled_from(candidates))
            self.pending.append(Finish(url))
            self.model[url].state = State.DONE

    @rule()
    def flush(self) -> None:
        self.state.apply(self.pending)
        self.pending = []
        self.pending_urls.clear()

    @precondition(lambda self: not self.pending)
    @rule(limit=st.integers(0, 4))
    def take(self, limit: int) -> None:
        expected = self.in_states(State.QUEUED_DISK)[:limit]
        taken = self.state.take_queued(limit)
        rows = [self.model[url] for url in expected]
        assert taken == [
            Row(url, r.depth, r.referrer, r.attempts)
            for url, r in zip(expected, rows, strict=True)
        ]
        for row in rows:
            row.state = State.QUEUED_MEM

    @precondition(lambda self: not self.pending)
    @rule()
    def reopen(self) -> None:
        self.state.close()
        self.state = CrawlState.open(self.path, expected_urls=1, bits_per_url=2, recent_urls=2)
        in_flight = self.in_states(State.FETCHING)
        assert self.state.recover() == in_flight
        for url in self.in_states(State.QUEUED_MEM, State.FETCHING):
            self.model[url].state = State.QUEUED_DISK

    @invariant()
    def counts_match(self) -> None:
        if self.pending:
            return
        expected = dict.fromkeys(STATE_NAMES, 0)
        for row in self.model.values():
            expected[row.state.name.lower()] += 1
        expected["total"] = len(self.model)
        assert self.state.progress() == expected == recount(self.path)
        assert stored_counts(self.path) == expected
        assert self.state.queued_on_disk() == expected["queued_disk"]
        assert rows(self.path) == {
            url: (r.state, r.depth, r.referrer, r.attempts) for url, r in self.model.items()
        }


StateModel.TestCase.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
test_state_machine = StateModel.TestCase


# -- crashes ------------------------------------------------------------------------


class CopyingOps(Sequence[Op]):
    """A batch that copies the state files while ``apply`` is half-way through it."""

    def __init__(self, ops: list[Op], copy_at: int, src: Path, dst: Path) -> None:
        self.ops, self.copy_at, self.src, self.dst = ops, copy_at, src, dst

    def __len__(self) -> int:
        return len(self.ops)

    @overload
    def __getitem__(self, i: int) -> Op: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Op]: ...
    def __getitem__(self, i: int | slice) -> Op | Sequence[Op]:
        return self.ops[i]

    def __iter__(self) -> Iterator[Op]:
        for i, op in enumerate(self.ops):
            if i == self.copy_at:
                copy_state_files(self.src, self.dst)
            yield op


def copy_state_files(src: Path, dst: Path) -> None:
    """What a backup tool (or a crash) sees: the database and its WAL, as they are."""
    shutil.copyfile(src, dst)
    wal = Path(f"{src}-wal")
    if wal.exists():
        shutil.copyfile(wal, f"{dst}-wal")


def test_files_copied_mid_transaction_open_at_the_last_commit(tmp_path: Path) -> None:
    path, copy = tmp_path / "c.db", tmp_path / "copy.db"
    wal = Path(f"{path}-wal")
    with CrawlState.open(path) as state:
        state.add_seeds(u(i) for i in range(100))
        state.take_queued(10)
        state.apply([Start(u(i)) for i in range(5)] + [Admit(u(i), 1) for i in range(100, 200)])
        committed = rows(path)
        wal_at_commit = wal.stat().st_size
        # A tiny page cache makes SQLite spill the open transaction into the WAL,
        # so the copy holds uncommitted frames: what a kill -9 leaves behind.
        assert state._file.conn is not None
        state._file.conn.execute("PRAGMA cache_size = 8")
        big = [Admit(u(i), 2, in_memory=True) for i in range(200, 3000)]
        # runs() hands the Admit run to SQLite when it meets the Finish, then the
        # copy happens before the Start (op 2801) is read: mid-transaction.
        ops: list[Op] = [*big, Finish(u(0)), Start(u(5))]
        state.apply(CopyingOps(ops, copy_at=2801, src=path, dst=copy))
        assert len(rows(path)) == 3000
    assert Path(f"{copy}-wal").stat().st_size > wal_at_commit  # uncommitted frames
    with CrawlState.open(copy) as copied:
        assert rows(copy) == committed
        assert copied.progress() == recount(copy)
        assert copied.recover() == [u(i) for i in range(5)]
        assert copied.filter_unseen([u(150), u(250)]) == [u(250)]
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


CHILD = r"""
import sys
from trio_crawl.frontiers.sqlite import Admit, CrawlState, Finish, Start
state = CrawlState.open(sys.argv[1])
i = 0
while True:
    ops = [Admit(f"http://k.test/{i}/{j}", 1, in_memory=j % 2 == 0) for j in range(300)]
    ops += [Start(f"http://k.test/{i}/{j}") for j in range(0, 300, 4)]
    ops += [Finish(f"http://k.test/{i}/{j}") for j in range(0, 300, 8)]
    state.apply(ops)
    state.take_queued(50)
    print(i, flush=True)
    i += 1
"""


def test_kill_9_loses_no_committed_batch_and_never_corrupts(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    try:
        printed = -1
        for line in child.stdout:  # the child prints after each commit
            printed = int(line)
            if printed == 20:
                break
        child.send_signal(signal.SIGKILL)  # most likely inside apply() or take_queued()
        printed = max([printed, *(int(line) for line in child.stdout)])
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    assert printed >= 20, "the child died before 20 batches"
    batches: dict[int, list[tuple[int, int, str | None, int]]] = {}
    for url, row in rows(path).items():
        batches.setdefault(int(url.split("/")[3]), []).append(row)
    assert sorted(batches) == list(range(len(batches)))
    # Every batch reported committed is there, and at most one more: whole.
    assert len(batches) in (printed + 1, printed + 2)
    assert all(len(b) == 300 for b in batches.values())
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert stored_counts(path) == recount(path)
    with CrawlState.open(path) as state:
        in_flight = state.recover()
        assert len(in_flight) == 37 * len(batches)  # started, not finished: 75 - 38
        assert state.progress() == recount(path)
        assert state.progress()["queued_mem"] == state.progress()["fetching"] == 0


# -- threads and life cycle -----------------------------------------------------------


def test_usable_from_another_thread_but_never_two_at_once(tmp_path: Path) -> None:
    state = CrawlState.open(tmp_path / "c.db")  # opened here, used in a worker thread
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            state.add_seeds([u(1), u(2)])
            state.take_queued(1)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert errors == []
    assert state.queued_on_disk() == 1

    other_thread: list[BaseException | None] = []

    def seeds() -> Iterator[str]:
        # add_seeds is running: another thread, or this one, must be refused.
        t = threading.Thread(target=lambda: other_thread.append(catch(state.progress)))
        t.start()
        t.join()
        yield u(3)
        with pytest.raises(RuntimeError, match=r"^CrawlState used from two threads at once"):
            state.filter_unseen([u(4)])

    state.add_seeds(seeds())
    assert len(other_thread) == 1 and isinstance(other_thread[0], RuntimeError)
    assert state.queued_on_disk() == 2
    state.close()


def catch(fn: Callable[[], object]) -> BaseException | None:
    try:
        fn()
    except BaseException as exc:
        return exc
    return None


def test_closed_state_refuses_use_and_close_is_idempotent(tmp_path: Path) -> None:
    state = CrawlState.open(tmp_path / "c.db")
    state.close()
    state.close()
    assert "closed" in repr(state)
    for call in (
        lambda: state.progress(),
        lambda: state.apply([]),
        lambda: state.filter_unseen([]),
        lambda: state.take_queued(1),
    ):
        with pytest.raises(RuntimeError, match=r"^CrawlState is closed$"):
            call()


# -- the prefilters on their own ------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    keys=st.lists(st.text(max_size=12), max_size=300),
    capacity=st.integers(1, 64),
    bits=st.integers(1, 20),
)
def test_growing_bloom_never_forgets_a_key(keys: list[str], capacity: int, bits: int) -> None:
    one_by_one, in_bulk = GrowingBloom(capacity, bits), GrowingBloom(capacity, bits)
    for key in keys:
        one_by_one.add(key)
    in_bulk.update(keys)
    assert all(one_by_one.might_contain(k) and in_bulk.might_contain(k) for k in keys)
    assert [f._words for f in one_by_one.filters] == [f._words for f in in_bulk.filters]
    assert one_by_one.count == in_bulk.count == len(keys)
    filters = 1  # each new filter is twice as large: c, 2c, 4c, ...
    while capacity * (2**filters - 1) < len(keys):
        filters += 1
    assert len(one_by_one.filters) == filters


def test_bloom_false_positive_rate_at_16_bits_per_key() -> None:
    bloom = BloomFilter(20_000, 16)
    for i in range(20_000):
        bloom.add(u(i))
    assert bloom.full and bloom.nbytes == 40_000
    false_positives = sum(bloom.might_contain(f"http://b.test/{i}") for i in range(20_000))
    assert false_positives < 200  # measured ~0.4 %; 1 % is far out


def test_bloom_masks_are_k_bits_spread_over_the_word() -> None:
    """The fixed mask table: each mask sets exactly K bits, and every bit of
    the word is used about as often as any other (a table drawn badly, e.g.
    from too few random bits, would crowd some bits and raise the rate)."""
    from collections import Counter

    from trio_crawl.frontiers.bloom import K, _masks

    masks = _masks()
    assert len(masks) == 1 << 14 and all(m.bit_count() == K for m in masks)
    assert len(set(masks)) > len(masks) - 20
    used = Counter(bit for m in masks for bit in range(64) if m >> bit & 1)
    expected = len(masks) * K / 64
    assert len(used) == 64 and all(0.85 * expected < n < 1.15 * expected for n in used.values())


def test_bloom_rejects_nonsense_sizes() -> None:
    with pytest.raises(ValueError):
        BloomFilter(0)
    with pytest.raises(ValueError):
        BloomFilter(10, 0)
    with pytest.raises(ValueError):
        RecentSet(-1)


def test_recent_set_is_exact_bounded_and_keeps_keys_in_use() -> None:
    recent = RecentSet(3)
    for key in "abc":
        recent.add(key)
    recent.add("d")  # a, b, c become the old generation
    assert all(recent.check(k) for k in "abcd")  # a, b promoted; c rotates young->old
    recent.add("e")
    recent.add("f")
    assert len(recent) <= 6
    assert not recent.check("zz")
    for key in "ghijkl":
        recent.add(key)
    assert "a" not in recent and len(recent) <= 6
    assert all(recent.check(k) for k in "jkl")
    zero = RecentSet(0)
    zero.add("x")
    assert not zero.check("x") and len(zero) == 0
