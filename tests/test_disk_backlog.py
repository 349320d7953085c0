"""``DiskBacklog.admit`` skips the thread and the database when every URL is
recent (``CrawlState.all_recent``): the answer is the same as through SQLite."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.frontiers.disk_backlog import DiskBacklog
from trio_crawl.frontiers.sqlite_state import CrawlState

urls = st.sampled_from([f"http://h.test/{i}" for i in range(12)])
batches = st.lists(st.lists(urls, max_size=6), max_size=12)


@settings(max_examples=40, deadline=None)
@given(batches, st.integers(0, 6))
def test_admit_answers_as_the_database_does(batches: list[list[str]], recent: int) -> None:
    """Whatever the recent set holds (a small one forgets), each admit keeps
    exactly the URLs never admitted before, once, in first-seen order."""
    with tempfile.TemporaryDirectory() as tmp:
        state = CrawlState.open(Path(tmp) / "s.db", recent_urls=recent)
        try:
            backlog = DiskBacklog(state)
            admitted: set[str] = set()

            async def main() -> None:
                for batch in batches:
                    kept = await backlog.admit(batch, 1, "http://h.test/", room=100)
                    expected = [u for u in dict.fromkeys(batch) if u not in admitted]
                    assert kept == expected
                    admitted.update(kept)

            trio.run(main)
            assert state.progress()["total"] == len(admitted)  # one row per URL
        finally:
            state.close()


async def test_links_seen_lately_need_no_thread_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = CrawlState.open(tmp_path / "s.db")
    try:
        backlog = DiskBacklog(state)
        calls = 0
        to_thread = trio.to_thread.run_sync

        async def counted(*args: object, **kwargs: object) -> object:
            nonlocal calls
            calls += 1
            return await to_thread(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(trio.to_thread, "run_sync", counted)
        links = ["http://h.test/a", "http://h.test/b"]
        assert await backlog.admit(links, 1, "http://h.test/", room=10) == links
        assert calls == 1
        assert await backlog.admit(links[::-1], 2, "http://h.test/x", room=10) == []
        assert calls == 1  # both are recent: no thread, no database
        assert await backlog.admit([*links, "http://h.test/c"], 2, "http://h.test/x", room=10) == [
            "http://h.test/c"
        ]
        assert calls == 2
    finally:
        state.close()
