"""The error tree (``trio_crawl.errors``): one root, drawn in the docstring,
and foreign errors translated in their own layer."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import trio_crawl
from trio_crawl import errors
from trio_crawl.frontiers.sqlite import CrawlState


def test_every_error_is_a_crawl_error_and_is_drawn_in_the_tree() -> None:
    classes = [getattr(errors, name) for name in errors.__all__]
    assert all(inspect.isclass(c) and issubclass(c, errors.CrawlError) for c in classes)
    tree = errors.__doc__ or ""
    for cls in classes:
        assert f" {cls.__name__}" in tree, cls.__name__
    for cls in classes:  # the face exports the ones users meet
        if cls.__name__ in trio_crawl.__all__:
            assert getattr(trio_crawl, cls.__name__) is cls


def test_a_full_disk_under_the_state_file_is_a_state_write_error(tmp_path: Path) -> None:
    db = tmp_path / "crawl.db"
    state = CrawlState.open(db)
    try:
        conn = state._file.conn
        assert conn is not None
        used = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {used + 2}")  # a disk that fills up
        urls = (f"http://a.test/{'x' * 200}/{i}" for i in range(50_000))
        with pytest.raises(errors.StateWriteError) as caught:
            state.add_seeds(urls)
    finally:
        state.close()
    assert str(caught.value) == f"cannot write to {db}: database or disk is full"
    assert caught.value.__cause__ is not None  # sqlite3's own error, kept
    assert isinstance(caught.value, errors.OutputError)  # the CLI's exit 3
