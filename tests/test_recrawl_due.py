"""``--recrawl due`` (issue #33 item 7): each URL's revisit schedule kept in
its visit, and a recrawl that requests only what is due, plus what is new.

A real server, real state files. The calendar is the crawl's clock
(``RunClock.epoch``: the wall clock read once per ``trio.run``, moved on by
trio's clock), so one ``trio.run`` under a ``MockClock`` that ``jump``s
between crawls makes them days apart without waiting.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from recrawl_site import ETAG, ChangingSite

from trio_crawl import CrawlRecord, run_crawl
from trio_crawl.core.revisit_schedule import RevisitPolicy
from trio_crawl.errors import ConfigError
from trio_crawl.testing import serve_site

from cli_helpers import records_in, run_cli

DAY = 86_400.0
HOUR = 3_600.0


def schedules(db: Path, generation: int | None = None) -> dict[str, dict[str, Any]]:
    """A generation's revisit history of each URL, by path (default: the newest)."""
    with sqlite3.connect(db) as conn:
        newest = conn.execute("SELECT max(generation) FROM visits").fetchone()[0]
        rows = conn.execute(
            "SELECT url, schedule FROM visits WHERE generation = ?", (generation or newest,)
        ).fetchall()
    return {"/" + url.split("/", 3)[3]: json.loads(s) for url, s in rows if s is not None}


@pytest.mark.timeout(120)
def test_recrawl_due_requests_what_is_due_and_what_is_new(tmp_path: Path) -> None:
    assert RevisitPolicy().initial == DAY  # the timeline below is built on it
    site = ChangingSite()
    site.add("/", "/often", "/never", validators=ETAG)
    site.add("/often", validators=ETAG)
    site.add("/never", validators=ETAG)
    db = str(tmp_path / "s.db")
    crawls: list[tuple[dict[str, CrawlRecord], list[str]]] = []

    with serve_site(site.site()) as server:

        async def crawl(*more: str, recrawl: bool | str) -> None:
            records: list[CrawlRecord] = []
            n = len(server.log)
            await run_crawl(
                [server.url(p) for p in ("/", *more)], state=db, workers=2,
                recrawl=recrawl, on_record=records.append,
            )  # fmt: skip
            by_path = {"/" + r.url.split("/", 3)[3]: r for r in records}
            assert len(by_path) == len(records), "a URL recorded twice"
            asked = [e.target for e in server.log[n:] if e.target != "/robots.txt"]
            crawls.append((by_path, sorted(asked)))

        async def main() -> None:
            clock = trio.lowlevel.current_clock()
            assert isinstance(clock, trio.testing.MockClock)
            await crawl(recrawl=False)  # day 0: every page due again on day 1
            clock.jump(DAY)
            site.edit("/often")
            await crawl(recrawl=True)  # day 1: a full recrawl, histories updated
            # Right after it, nothing is due: only a new start URL is fetched,
            # the rest recorded not_due (their kept links still followed).
            site.add("/fresh")
            await crawl("/fresh", recrawl="due")
            clock.jump(0.6 * DAY)  # day 1.6: the changed page is due, not the others
            site.edit("/often", links=("/new",))
            site.add("/new")
            await crawl(recrawl="due")
            clock.jump(0.7 * DAY)  # day 2.3: the unchanged ones are due too
            await crawl(recrawl="due")

        trio.run(main, clock=trio.testing.MockClock())

    (_, first), (second, full), (third, fresh), (fourth, due), (fifth, later) = crawls
    assert first == ["/", "/never", "/often"] and full == first
    assert {p: r.extra["change"] for p, r in second.items()} == {
        "/": "unchanged", "/often": "changed", "/never": "unchanged",
    }  # fmt: skip
    assert fresh == ["/fresh"]
    assert {p: r.extra["change"] for p, r in third.items()} == {
        "/": "not_due", "/often": "not_due", "/never": "not_due", "/fresh": "new",
    }  # fmt: skip
    root = third["/"]
    assert (root.status, root.attempts, root.links) == (None, 0, 2)
    assert due == ["/new", "/often"]
    assert {p: r.extra["change"] for p, r in fourth.items()} == {
        "/": "not_due", "/often": "changed", "/never": "not_due", "/new": "new",
        "/fresh": "unlinked",
    }  # fmt: skip
    assert later == ["/", "/never", "/often"]  # /new, first seen on day 1.6: due on day 2.6
    assert fifth["/new"].extra["change"] == "not_due"
    assert fifth["/never"].extra["change"] == "unchanged" and fifth["/never"].status == 304
    history = schedules(Path(db))
    # Changed on every visit: due sooner and sooner; never changed: later.
    assert history["/often"]["interval"] < DAY < history["/never"]["interval"]
    assert history["/often"]["visits"] == 4 and history["/never"]["visits"] == 3


def test_recrawl_due_on_the_command_line(tmp_path: Path) -> None:
    site = ChangingSite()
    site.add("/", "/a", validators=ETAG)
    site.add("/a", validators=ETAG)
    db, out = tmp_path / "s.db", tmp_path / "out.jsonl"
    with serve_site(site.site()) as server:
        first = run_cli(server.url("/"), "--state", str(db), "-o", str(out))
        assert first.returncode == 0, first.stderr
        n = len(server.log)
        # "--recrawl URL": the URL is a start URL, not the option's value.
        again = run_cli("--state", str(db), "-o", str(out), "--recrawl", "due", server.url("/"))
        assert again.returncode == 0, again.stderr
        assert [e.target for e in server.log[n:]] == []
        plain = run_cli("--state", str(db), "-o", str(out), "--recrawl", server.url("/"))
        assert plain.returncode == 0, plain.stderr
        assert sorted(e.target for e in server.log[n:]) == ["/", "/a", "/robots.txt"]
    changes = {r["url"]: r["change"] for r in records_in(out.read_text())}
    assert set(changes.values()) == {"unchanged"}


def test_a_failed_fetch_is_not_a_visit(tmp_path: Path) -> None:
    site = ChangingSite()
    site.add("/", "/a", validators=ETAG)
    site.add("/a", validators=ETAG)
    db = tmp_path / "s.db"
    with serve_site(site.site()) as server:
        trio.run(lambda: run_crawl(server.url("/"), state=str(db), workers=2))
        site.failing.add("/a")
        trio.run(lambda: run_crawl(server.url("/"), state=str(db), workers=2, recrawl=True))
    before, after = schedules(db, 1), schedules(db, 2)
    assert after["/a"] == before["/a"] and before["/a"]["visits"] == 1
    assert after["/"]["visits"] == 2  # the page that answered is a visit


def test_recrawl_takes_true_false_or_due() -> None:
    with pytest.raises(ConfigError, match='recrawl= must be True, False or "due"'):
        trio.run(lambda: run_crawl("http://127.0.0.1:9/", state="x.db", recrawl="often"))


def test_kill_9_mid_recrawl_due_then_resume_is_one_recrawl_due(tmp_path: Path) -> None:
    """``--recrawl due`` killed mid-crawl and run again gives the records
    and the requests of one uninterrupted ``--recrawl due``: the pages not
    due stay unrequested, the due ones are asked once (but for what was in
    flight), each URL recorded once with the same change. Half the pages
    are made due by moving their next-due time into the past in the file
    (the wall clock is a subprocess's calendar)."""
    import shutil

    from cli_helpers import kill_after_records

    site = ChangingSite()
    pages = 60
    for i in range(pages):
        kids = [f"/p/{k}" for k in (2 * i + 1, 2 * i + 2) if k < pages]
        site.add(f"/p/{i}", *kids, "/p/0", validators=ETAG)
    site.add("/", "/p/0")
    db, calm = tmp_path / "s.db", tmp_path / "calm.db"
    calm_out, hurt_out = tmp_path / "calm.jsonl", tmp_path / "hurt.jsonl"
    with serve_site(site.site()) as server:
        trio.run(lambda: run_crawl(server.url("/"), state=str(db), workers=2))
        with sqlite3.connect(db) as conn:  # even pages (and /) due since 1970
            due = [server.url("/")] + [server.url(f"/p/{i}") for i in range(0, pages, 2)]
            conn.executemany(
                "UPDATE visits SET schedule = json_set(schedule, '$.next_due', 0.0) WHERE url = ?",
                [(url,) for url in due],
            )
        for suffix in ("", "-wal", "-shm"):  # the same file, twice
            if Path(f"{db}{suffix}").exists():
                shutil.copy(f"{db}{suffix}", f"{calm}{suffix}")
        for i in (4, 9, 20, 33):  # two due, two not: only the due ones are seen
            site.edit(f"/p/{i}")
        site.edit("/p/6", links=("/p/0", "/p/13", "/p/14", "/new"))  # due: finds /new
        site.add("/new")
        args = ["-w", "2", "--rate", "40", "--recrawl", "due"]
        n = len(server.log)
        done = run_cli(server.url("/"), "--state", str(calm), "-o", str(calm_out), *args)
        assert done.returncode == 0, done.stderr
        calm_log = server.log[n:]
        n = len(server.log)
        hurt = [server.url("/"), "--state", str(db), "-o", str(hurt_out), *args]
        kill_after_records(hurt, hurt_out, 12)
        assert 12 <= hurt_out.read_text().count("\n") < len(calm_out.read_text().splitlines())
        landed = {r["url"] for r in records_in(hurt_out.read_text().rsplit("\n", 1)[0])}
        done = run_cli(*hurt)
        assert done.returncode == 0, done.stderr
        hurt_log = server.log[n:]

    def by_url(path: Path) -> dict[str, tuple[Any, ...]]:
        records = records_in(path.read_text())
        assert len(records) == len({r["url"] for r in records}), "a URL recorded twice"
        return {r["url"]: (r["status"], r["change"], r["depth"], r.get("digest")) for r in records}

    calm_records, hurt_records = by_url(calm_out), by_url(hurt_out)
    assert hurt_records == calm_records
    changes = {url: shape[1] for url, shape in calm_records.items()}
    assert changes[server.url("/p/4")] == changes[server.url("/p/6")] == "changed"
    assert changes[server.url("/p/9")] == changes[server.url("/p/33")] == "not_due"
    assert changes[server.url("/new")] == "new"
    asked = lambda log: [(e.target, e.headers.get("if-none-match")) for e in log]  # noqa: E731
    assert {t for t, _ in asked(calm_log)} == {
        "/robots.txt", "/", "/new", *(f"/p/{i}" for i in range(0, pages, 2)),
    }  # fmt: skip
    assert set(asked(hurt_log)) == set(asked(calm_log))
    # Asked twice: only what was in flight when the kill came (at most the two
    # workers' pages, never one whose record had landed), and robots.txt.
    targets = [t for t, _ in asked(hurt_log)]
    twice = {t for t in targets if targets.count(t) > 1} - {"/robots.txt"}
    assert len(twice) <= 2 and not {server.url(t) for t in twice} & landed, twice
