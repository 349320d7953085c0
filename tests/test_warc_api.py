"""``warc=`` in the library (``run_crawl``, ``open_crawler``): the same archive
as ``--warc``, with the same rule, no record of a page the WARC lacks.

A real local server, the real writer process, and the archive read back with
warcio. Every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio

from trio_crawl import CrawlRecord, open_crawler, run_crawl
from trio_crawl.errors import OutputError
from trio_crawl.testing import Site, page, serve_site

pytest.importorskip("warcio")

from test_warc_process import children

from trio_crawl.outputs.warc import read_warc_responses, repair_warc

PAGES = 60


def warc_writers(pid: int) -> list[int]:
    """``pid``'s children that are WARC writer processes (the suite may have
    other children running, such as a redis-server)."""
    found = []
    for child in children(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if b"trio_crawl.outputs.warc_process" in command:
            found.append(child)
    return found


def chain_site(pages: int) -> Site:
    return Site({f"/p/{i}": page(*(f"/p/{j}" for j in range(i + 1, min(i + 4, pages))))
                 for i in range(pages)})  # fmt: skip


async def test_run_crawl_archives_every_page_it_records(tmp_path: Path) -> None:
    warc = tmp_path / "lib.warc.gz"
    records: list[CrawlRecord] = []
    with serve_site(chain_site(PAGES)) as server:
        with trio.fail_after(30):
            summary = await run_crawl(
                server.url("/p/0"), workers=4, warc=str(warc), on_record=records.append
            )
    assert summary.records == PAGES == len(records)
    stored = read_warc_responses(str(warc))
    assert set(stored) == {r.url for r in records}
    assert all(stored[r.url].status == r.status == 200 for r in records)


async def test_a_resumed_state_crawl_appends_to_its_archive(tmp_path: Path) -> None:
    warc, db = tmp_path / "lib.warc.gz", tmp_path / "crawl.db"
    first: list[str] = []
    second: list[str] = []
    with serve_site(chain_site(PAGES)) as server:
        with trio.fail_after(30):
            async with open_crawler(
                server.url("/p/0"), workers=2, state=str(db), warc=str(warc)
            ) as crawl:
                async for record in crawl:
                    first.append(record.url)
                    if len(first) == 10:
                        break  # leaving the block cancels the crawl
            await run_crawl(
                server.url("/p/0"),
                workers=2,
                state=str(db),
                warc=str(warc),
                on_record=lambda r: second.append(r.url),
            )
    repair_warc(warc)
    stored = read_warc_responses(str(warc))
    assert len(set(first) | set(second)) == PAGES
    assert set(first) | set(second) <= set(stored)  # the first run's pages were kept


async def test_an_unwritable_archive_fails_before_anything_is_fetched(tmp_path: Path) -> None:
    warc = tmp_path / "missing-folder" / "lib.warc.gz"
    with serve_site(chain_site(PAGES)) as server:
        with trio.fail_after(30), pytest.raises(OutputError, match=r"^cannot write to .*lib"):
            await run_crawl(server.url("/p/0"), warc=str(warc))
        assert server.targets() == []


async def test_a_killed_writer_ends_the_crawl_and_no_record_lacks_its_exchange(
    tmp_path: Path,
) -> None:
    warc = tmp_path / "lib.warc.gz"
    listed: list[str] = []

    def on_record(record: CrawlRecord) -> None:
        listed.append(record.url)
        if len(listed) == 20:
            (writer,) = warc_writers(os.getpid())
            # Stopped first, so pages pile up waiting for their acks: none
            # of them may be delivered once the writer is gone.
            os.kill(writer, signal.SIGSTOP)
            os.kill(writer, signal.SIGKILL)

    with (
        serve_site(chain_site(400)) as server,
        trio.fail_after(30),
        pytest.raises(OutputError, match="WARC writer stopped"),
    ):
        await run_crawl(
            server.url("/p/0"), workers=4, rate=200, warc=str(warc), on_record=on_record
        )
    repair_warc(warc)
    stored = read_warc_responses(str(warc))
    assert 20 <= len(listed) < 400
    assert set(listed) <= set(stored)
