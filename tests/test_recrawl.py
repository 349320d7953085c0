"""--recrawl end to end (issue #33): a real server whose site changes between
two crawls, the real command line, the real state file. What was requested
(with which validators), and each URL's one record and change."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from recrawl_site import BOTH, MODIFIED, NONE, ChangingSite

from trio_crawl.core.digest import sha1_digest
from trio_crawl.testing import serve_site

from cli_helpers import records_in, run_cli


def first_site() -> ChangingSite:
    site = ChangingSite()
    site.add("/", "/a", "/b", "/c", "/e")
    site.add("/a", "/a1")
    site.add("/a1", "/a2", validators=MODIFIED)
    site.add("/a2")
    site.add("/b", "/b1")
    site.add("/b1", validators=NONE)
    site.add("/c", validators=BOTH)
    site.add("/e", "/old", validators=MODIFIED)
    site.add("/old")
    return site


def change(site: ChangingSite) -> None:
    site.edit("/a2", links=("/a3",))  # deep behind three unchanged pages
    site.add("/a3")
    site.edit("/b", links=("/b1", "/b2"))  # a new page linked only from a changed one
    site.add("/b2")
    del site.pages["/c"]  # removed: 404
    site.edit("/e", links=())  # /old is linked from nowhere now (still served)


def conditional(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith("if-")}


def crawl(url: str, db: Path, out: Path, *more: str) -> tuple[int, str]:
    done = run_cli(url, "--state", str(db), "-o", str(out), "-w", "2", *more)
    return done.returncode, done.stderr


def by_url(path: Path) -> dict[str, dict[str, Any]]:
    records = records_in(path.read_text())
    urls = [r["url"] for r in records]
    assert len(urls) == len(set(urls)), "a URL recorded twice"
    return {r["url"]: r for r in records}


def test_a_recrawl_asks_with_validators_and_says_what_changed(tmp_path: Path) -> None:
    site = first_site()
    db, first, second = tmp_path / "s.db", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with serve_site(site.site()) as server:
        code, err = crawl(server.url("/"), db, first)
        assert code == 0, err
        before = by_url(first)
        n = len(server.log)
        etag = {path: dict(site.headers(path)).get("ETag") for path in site.pages}
        modified = {path: dict(site.headers(path)).get("Last-Modified") for path in site.pages}
        change(site)
        code, err = crawl(server.url("/"), db, second, "--recrawl")
        assert code == 0, err
        asked = {(e.target, json.dumps(conditional(e.headers))) for e in server.log[n:]}
        targets = [e.target for e in server.log[n:]]
    assert len(targets) == len(set(targets)), "a URL requested twice"
    inm = lambda p: {"if-none-match": etag[p]}  # noqa: E731
    ims = lambda p: {"if-modified-since": modified[p]}  # noqa: E731
    assert asked == {
        ("/robots.txt", "{}"),
        ("/", json.dumps(inm("/"))),
        ("/a", json.dumps(inm("/a"))),
        ("/a1", json.dumps(ims("/a1"))),
        ("/a2", json.dumps(inm("/a2"))),
        ("/a3", "{}"),
        ("/b", json.dumps(inm("/b"))),
        ("/b1", "{}"),  # no validator: asked plainly, the digest decides
        ("/b2", "{}"),
        ("/c", json.dumps({**inm("/c"), **ims("/c")})),
        ("/e", json.dumps(ims("/e"))),
    }  # /old: unlinked, never requested
    after = by_url(second)
    u = server.url
    got = {url[len(u("")) :]: (r["status"], r["change"], r["depth"]) for url, r in after.items()}
    assert got == {
        "/": (304, "unchanged", 0),
        "/a": (304, "unchanged", 1),
        "/a1": (304, "unchanged", 2),
        "/a2": (200, "changed", 3),
        "/a3": (200, "new", 4),  # found behind unchanged pages, at its link distance
        "/b": (200, "changed", 1),
        "/b1": (200, "unchanged", 2),
        "/b2": (200, "new", 2),
        "/c": (404, "gone", 1),
        "/e": (200, "changed", 1),
        "/old": (None, "unlinked", None),
    }
    root = after[u("/")]
    assert root["links"] == 4 and root["reused_bytes"] == before[u("/")]["size"]
    assert root["size"] == before[u("/")]["size"]
    assert root["digest"] == before[u("/")]["digest"]
    assert root["content_type"] == before[u("/")]["content_type"] is not None  # the kept body's
    assert after[u("/b1")]["digest"] == before[u("/b1")]["digest"]
    assert after[u("/a2")]["digest"] == sha1_digest(site.body("/a2"))
    assert after[u("/old")]["attempts"] == 0
    assert [r["url"] for r in records_in(second.read_text())][-1] == u("/old")  # last
    assert all("reused_bytes" not in r for r in after.values() if r["status"] != 304)
    assert "change" not in json.dumps(records_in(first.read_text()))  # a first crawl
    assert "unchanged 4" in err and "unlinked 1" in err and "not downloaded" in err


def test_a_server_that_ignores_validators_is_judged_by_digest(tmp_path: Path) -> None:
    site = first_site()
    db, first, second = tmp_path / "s.db", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with serve_site(site.site()) as server:
        assert crawl(server.url("/"), db, first)[0] == 0
        site.ignores_validators = True
        site.edit("/b", links=("/b1",))  # the same links, another body
        n = len(server.log)
        assert crawl(server.url("/"), db, second, "--recrawl")[0] == 0
        statuses = {e.target for e in server.log[n:] if conditional(e.headers)}
    assert statuses == {"/", "/a", "/a1", "/a2", "/b", "/c", "/e", "/old"}  # asked, got 200s
    after = by_url(second)
    changes = {url[len(server.url("")) :]: r["change"] for url, r in after.items()}
    assert changes.pop("/b") == "changed"
    assert set(changes.values()) == {"unchanged"}
    assert all(r["status"] == 200 and "reused_bytes" not in r for r in after.values())


def test_a_304_to_a_request_without_validators_is_a_protocol_error(tmp_path: Path) -> None:
    site = first_site()
    db, first, second = tmp_path / "s.db", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with serve_site(site.site()) as server:
        assert crawl(server.url("/"), db, first)[0] == 0
        site.blind_304.add("/b1")  # it sends no validator: asked plainly
        assert crawl(server.url("/"), db, second, "--recrawl")[0] == 0
    record = by_url(second)[server.url("/b1")]
    assert record["change"] == "error" and record["kept"] is True
    assert record["error"]["kind"] == "protocol"
    assert "reused_bytes" not in record


def test_refusals_are_one_line_and_exit_2(tmp_path: Path) -> None:
    out = str(tmp_path / "o.jsonl")
    for args, words in (
        (["--recrawl", "-o", out], "--recrawl needs --state"),
        (
            ["--recrawl", "--redis", "redis://127.0.0.1:1/0", "--crawl-id", "x", "-o", out],
            "--recrawl cannot be combined with --redis",
        ),
    ):
        done = run_cli("http://127.0.0.1:1/", *args)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], done.stderr
    assert not Path(out).exists()


def test_a_first_crawl_not_finished_is_not_recrawled(tmp_path: Path) -> None:
    from trio_crawl.frontiers.sqlite.state import CrawlState

    db = tmp_path / "s.db"
    with CrawlState.open(db) as state:  # a crawl with a URL still queued
        state.save_settings({"start_urls": ["http://127.0.0.1:1/"]})
        state.add_seeds(["http://127.0.0.1:1/"])
    done = run_cli(
        "http://127.0.0.1:1/", "--state", str(db), "--recrawl", "-o", str(tmp_path / "o")
    )
    assert done.returncode == 2, done.stderr
    assert "not finished" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_library_refuses_a_recrawl_without_a_state_file() -> None:
    import trio

    from trio_crawl import ConfigError, run_crawl

    with pytest.raises(ConfigError, match="recrawl=True needs state="):
        trio.run(lambda: run_crawl("http://127.0.0.1:1/", recrawl=True))


def test_unlinked_records_are_written_once_across_a_crash(tmp_path: Path) -> None:
    """Killed after the unlinked records were written, before the file said
    so: the same command writes none again, and ends the generation."""
    site = first_site()
    db, first, second = tmp_path / "s.db", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with serve_site(site.site()) as server:
        assert crawl(server.url("/"), db, first)[0] == 0
        change(site)
        assert crawl(server.url("/"), db, second, "--recrawl")[0] == 0
        with sqlite3.connect(db) as conn:  # as if killed between the two
            conn.execute("DELETE FROM unlinked")
            conn.execute("DELETE FROM meta WHERE key = 'generation_done'")
        n = len(server.log)
        code, err = crawl(server.url("/"), db, second, "--recrawl")
        assert code == 0, err
        assert server.log[n:] == []  # nothing left to fetch
    records = records_in(second.read_text())
    assert [r["url"] for r in records].count(server.url("/old")) == 1
    with sqlite3.connect(db) as conn:
        done = conn.execute("SELECT value FROM meta WHERE key = 'generation_done'").fetchone()
    assert done == ("2",)


def test_status_says_the_generation_and_a_recrawl_in_progress(tmp_path: Path) -> None:
    """``--status``: nothing about recrawls on a file never recrawled; the
    generation once recrawled, and whether that recrawl ended; the complete
    note of a finished file points at ``--recrawl``."""
    site = first_site()
    db, first, second = tmp_path / "s.db", tmp_path / "a.jsonl", tmp_path / "b.jsonl"

    def status() -> list[str]:
        done = run_cli("--state", str(db), "--status")
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if line.startswith("recrawl:")]

    with serve_site(site.site()) as server:
        assert crawl(server.url("/"), db, first)[0] == 0
        assert status() == []
        code, err = crawl(server.url("/"), db, first)
        assert code == 0 and "add --recrawl" in err, err
        assert crawl(server.url("/"), db, second, "--recrawl")[0] == 0
        assert status() == ["recrawl: generation 2, ended whole (--recrawl begins generation 3)"]
        with sqlite3.connect(db) as conn:  # as if killed before it ended
            conn.execute("DELETE FROM meta WHERE key = 'generation_done'")
        assert status() == [
            "recrawl: generation 2, in progress (run the same --recrawl command to resume it)"
        ]


def wide_site(pages: int = 60) -> ChangingSite:
    """A tree of ``pages`` pages: each links to two children and back home."""
    site = ChangingSite()
    for i in range(pages):
        kids = [f"/p/{k}" for k in (2 * i + 1, 2 * i + 2) if k < pages]
        site.add(f"/p/{i}", *kids, "/p/0", validators=(BOTH, MODIFIED, NONE)[i % 3])
    site.add("/", "/p/0")
    return site


def test_kill_9_mid_recrawl_then_resume_is_one_recrawl(tmp_path: Path) -> None:
    import shutil

    from cli_helpers import kill_after_records

    site = wide_site()
    db, first = tmp_path / "s.db", tmp_path / "a.jsonl"
    calm, calm_out = tmp_path / "calm.db", tmp_path / "calm.jsonl"
    hurt_out = tmp_path / "hurt.jsonl"
    with serve_site(site.site()) as server:
        assert crawl(server.url("/"), db, first)[0] == 0
        for suffix in ("", "-wal", "-shm"):  # the same finished file, twice
            if Path(f"{db}{suffix}").exists():
                shutil.copy(f"{db}{suffix}", f"{calm}{suffix}")
        for i in (5, 9, 20, 33):
            site.edit(f"/p/{i}")
        site.edit("/p/4", links=("/p/0", "/new/4"))  # /p/9, /p/10 and below: unlinked
        site.add("/new/4", "/p/9")  # ...but /p/9 comes back one link further
        del site.pages["/p/30"]
        args = ["--recrawl", "--rate", "40"]
        n = len(server.log)
        assert crawl(server.url("/"), calm, calm_out, *args)[0] == 0
        calm_log = server.log[n:]
        n = len(server.log)
        hurt = [server.url("/"), "--state", str(db), "-o", str(hurt_out), "-w", "2", *args]
        kill_after_records(hurt, hurt_out, 12)
        assert 12 <= hurt_out.read_text().count("\n") < len(calm_out.read_text().splitlines())
        landed = {r["url"] for r in records_in(hurt_out.read_text().rsplit("\n", 1)[0])}
        done = run_cli(*hurt)
        assert done.returncode == 0, done.stderr
        hurt_log = server.log[n:]
    calm_records, hurt_records = by_url(calm_out), by_url(hurt_out)  # each URL once
    shape = lambda r: (r["status"], r["change"], r["depth"], r.get("digest"))  # noqa: E731
    assert {u: shape(r) for u, r in hurt_records.items()} == {
        u: shape(r) for u, r in calm_records.items()
    }
    assert calm_records[server.url("/p/10")]["change"] == "unlinked"
    assert calm_records[server.url("/p/9")]["depth"] == 5  # / p/0 p/1 p/4 new/4 p/9
    asked = lambda log: [(e.target, json.dumps(conditional(e.headers))) for e in log]  # noqa: E731
    assert set(asked(hurt_log)) == set(asked(calm_log))
    # Asked twice: only what was in flight when the kill came (at most the two
    # workers' pages, never one whose record had landed), and robots.txt.
    twice = {t for t, _ in asked(hurt_log) if [x for x, _ in asked(hurt_log)].count(t) > 1}
    twice.discard("/robots.txt")
    assert len(twice) <= 2 and not {server.url(t) for t in twice} & landed, twice


def test_the_library_recrawls_a_state_file(tmp_path: Path) -> None:
    import trio

    from trio_crawl import CrawlRecord, run_crawl

    site = first_site()
    db = str(tmp_path / "s.db")
    with serve_site(site.site()) as server:
        first = trio.run(lambda: run_crawl(server.url("/"), state=db, workers=2))
        assert first.changes == {} and first.reused_bytes == 0
        change(site)
        records: list[CrawlRecord] = []
        again = trio.run(
            lambda: run_crawl(
                server.url("/"), state=db, recrawl=True, workers=2, on_record=records.append
            )
        )
    assert again.changes == {
        "unchanged": 4, "changed": 3, "new": 2, "gone": 1, "unlinked": 1,
    }  # fmt: skip
    root = next(r for r in records if r.url == server.url("/"))
    assert root.status == 304 and root.extra["reused_bytes"] == root.size
    assert sum(r.extra.get("reused_bytes", 0) for r in records) == again.reused_bytes


def test_validators_go_back_exactly_as_they_came(tmp_path: Path) -> None:
    """A weak ETag verbatim; a Last-Modified in the future not at all; a
    response with Vary: * asked plainly."""
    from email.utils import formatdate

    from trio_crawl.testing import Response, Site, page

    future = formatdate(4_000_000_000, usegmt=True)
    past = formatdate(1_500_000_000, usegmt=True)
    body = page("/weak", "/future", "/vary").body
    site = Site(
        {
            "/": Response(body=body),
            "/weak": Response(body=b"<p>w</p>", headers=(("ETag", 'W/"w1"'),)),
            "/future": Response(
                body=b"<p>f</p>", headers=(("ETag", '"f"'), ("Last-Modified", future))
            ),
            "/vary": Response(
                body=b"<p>v</p>", headers=(("ETag", '"v"'), ("Last-Modified", past), ("Vary", "*"))
            ),
        }
    )
    db, first, second = tmp_path / "s.db", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with serve_site(site) as server:
        assert crawl(server.url("/"), db, first)[0] == 0
        n = len(server.log)
        assert crawl(server.url("/"), db, second, "--recrawl")[0] == 0
        asked = {e.target: conditional(e.headers) for e in server.log[n:]}
    assert asked["/weak"] == {"if-none-match": 'W/"w1"'}
    assert asked["/future"] == {"if-none-match": '"f"'}  # no If-Modified-Since
    assert asked["/vary"] == {}
    changes = {u[len(server.url("")) :]: r["change"] for u, r in by_url(second).items()}
    assert changes == {"/": "unchanged", "/weak": "unchanged", "/future": "unchanged",
                       "/vary": "unchanged"}  # fmt: skip


def test_a_failed_fetch_keeps_the_previous_capture(tmp_path: Path) -> None:
    site = first_site()
    db = tmp_path / "s.db"
    with serve_site(site.site()) as server:
        assert crawl(server.url("/"), db, tmp_path / "1.jsonl")[0] == 0
        site.failing.add("/a")
        second = tmp_path / "2.jsonl"
        assert crawl(server.url("/"), db, second, "--recrawl", "--retries", "0")[0] == 0
        failed = by_url(second)[server.url("/a")]
        assert (failed["change"], failed["kept"], failed["status"]) == ("error", True, 503)
        # what lies behind it is still reached through its kept links, not unlinked
        behind = by_url(second)[server.url("/a1")]
        assert (behind["change"], behind["depth"]) == ("unchanged", 2)
        assert "unlinked" not in {r["change"] for r in by_url(second).values()}
        site.failing.clear()
        n = len(server.log)
        assert crawl(server.url("/"), db, tmp_path / "3.jsonl", "--recrawl")[0] == 0
        again = [e for e in server.log[n:] if e.target == "/a"]
    # asked with the validators of the capture kept (the first crawl's)
    assert [conditional(e.headers) for e in again] == [
        {"if-none-match": dict(site.headers("/a"))["ETag"]}
    ]
    assert by_url(tmp_path / "3.jsonl")[server.url("/a")]["change"] == "unchanged"


def test_a_recrawl_reads_previous_visits_ahead_not_in_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state file's thread reads each URL's previous visit as it hands
    the URL to memory (a query per page's links): the event loop's own
    one-URL read is left for what came no other way, here nothing."""
    import trio

    from trio_crawl import CrawlRecord, run_crawl
    from trio_crawl.recrawl import store

    one_at_a_time: list[str] = []
    read_one = store.previous

    def counted(conn: sqlite3.Connection, current: int, url: str) -> Any:
        one_at_a_time.append(url)
        return read_one(conn, current, url)

    site = first_site()
    db = str(tmp_path / "s.db")
    with serve_site(site.site()) as server:
        trio.run(lambda: run_crawl(server.url("/"), state=db, workers=2))
        change(site)
        monkeypatch.setattr(store, "previous", counted)
        records: list[CrawlRecord] = []
        again = trio.run(
            lambda: run_crawl(
                server.url("/"), state=db, recrawl=True, workers=2, on_record=records.append
            )
        )
    assert again.changes == {
        "unchanged": 4, "changed": 3, "new": 2, "gone": 1, "unlinked": 1,
    }  # fmt: skip
    assert one_at_a_time == []
    assert {r.url for r in records if r.status == 304} == {
        server.url(p) for p in ("/", "/a", "/a1")
    }  # their validators came from the visits read ahead
