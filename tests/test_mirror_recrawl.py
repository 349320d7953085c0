"""A mirror kept current (issue #33 items 1 and 6): ``--mirror DIR`` run twice
is a recrawl, without ``--state``. A real server whose site changes between
the runs, the real command line, the real files: which files were rewritten
(inode, mtime, bytes), their mtimes from Last-Modified, the records' change
kinds, the validators the server was asked with, ``-k`` output against a
fresh mirror of the second site, ``--mirror-delete-gone``, and a ``kill -9``
in the second run."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

from recrawl_site import BOTH, DAY, EPOCH, MODIFIED, NONE, ChangingSite

from trio_crawl.testing import Response, serve_site

from cli_helpers import kill_after_records, records_in, run_cli

#: file stat fields that say "not touched"
Stamp = tuple[int, int, bytes]


def first_site() -> ChangingSite:
    site = ChangingSite()
    site.add("/", "/a", "/b", "/c", "/d", "/e")
    site.add("/a", "/a1")
    site.add("/a1", "/a2", validators=MODIFIED)
    site.add("/a2", validators=BOTH)
    site.add("/b", "/b1")
    site.add("/b1", validators=NONE)
    site.add("/c", validators=BOTH)
    site.add("/d", "/x")  # /x: 404 now, a page in the second version
    site.add("/e", "/old", validators=MODIFIED)
    site.add("/old")
    return site


def change(site: ChangingSite) -> None:
    site.edit("/a2", links=("/a3",))  # changed, deep behind unchanged pages
    site.add("/a3", validators=MODIFIED)  # new, only behind unchanged pages
    site.edit("/b", links=("/b1", "/b2"))  # a new page linked from a changed one
    site.add("/b2")
    del site.pages["/c"]  # removed, still linked: gone (404)
    site.add("/x")  # appears: /d (unchanged) now links to a saved file
    site.edit("/e", links=())  # /old: linked from nowhere now (unlinked)


def second_site() -> ChangingSite:
    site = first_site()
    change(site)
    return site


def mirror(url: str, root: Path, out: Path, *more: str) -> list[dict[str, Any]]:
    done = run_cli(url, "--mirror", str(root), "-o", str(out), "-w", "2", "-k", *more)
    assert done.returncode == 0, done.stderr
    records = records_in(out.read_text())
    urls = [r["url"] for r in records]
    assert len(urls) == len(set(urls)), "a URL recorded twice"
    return records


def tree(root: Path) -> dict[str, Path]:
    """The mirrored files (relative to the host directory), what the
    mirror keeps for itself left out."""
    (host,) = [p for p in root.iterdir() if p.name != ".trio-crawl"]
    return {str(p.relative_to(host)): p for p in sorted(host.rglob("*")) if p.is_file()}


def stamps(root: Path) -> dict[str, Stamp]:
    return {
        name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
        for name, p in tree(root).items()
    }


def contents(root: Path, port_of: str, port_to: str) -> dict[str, bytes]:
    """Each file's bytes, the server's port written as the fresh one's."""
    return {
        name: p.read_bytes().replace(port_of.encode(), port_to.encode())
        for name, p in tree(root).items()
    }


def conditional(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith("if-")}


def test_a_mirror_run_twice_is_a_recrawl_that_rewrites_only_what_changed(
    tmp_path: Path,
) -> None:
    site = first_site()
    root, first, second = tmp_path / "m", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with serve_site(site.site()) as server:
        one = mirror(server.url("/"), root, first)
        assert all("change" not in r for r in one)  # a first crawl
        lm = {p: dict(site.headers(p)).get("Last-Modified") for p in site.pages}
        etag = {p: dict(site.headers(p)).get("ETag") for p in site.pages}
        before = stamps(root)
        change(site)
        n = len(server.log)
        two = mirror(server.url("/"), root, second)
        asked = {e.target: conditional(e.headers) for e in server.log[n:]}
    # The server was asked with the validators it gave, nothing invented.
    assert asked["/"] == {"if-none-match": etag["/"]}
    assert asked["/a1"] == {"if-modified-since": lm["/a1"]}
    assert asked["/a2"] == {"if-none-match": etag["/a2"], "if-modified-since": lm["/a2"]}
    assert asked["/b1"] == {} and asked["/a3"] == {} and "/old" not in asked
    host = len(server.url("/")) - 1
    change_of = {r["url"][host:]: r["change"] for r in two}
    assert change_of == {
        "/": "unchanged",
        "/a": "unchanged",
        "/a1": "unchanged",
        "/a2": "changed",
        "/a3": "new",
        "/b": "changed",
        "/b1": "unchanged",  # no validator: a 200 with the same digest
        "/b2": "new",
        "/c": "gone",
        "/d": "unchanged",
        "/x": "changed",  # a 404 before
        "/e": "changed",
        "/old": "unlinked",
    }
    after = stamps(root)
    # Not touched (same inode, mtime, bytes): unchanged pages whose converted
    # links are the same; /b1 came as a 200 but with the body it had.
    for name in ("index.html", "a", "a1", "b1"):
        assert after[name] == before[name], name
    # Kept by default: the gone page's file and the unlinked one's.
    assert after["c"] == before["c"] and after["old"] == before["old"]
    # Rewritten: changed pages, and /d, whose link to /x now leads to a file.
    for name in ("a2", "b", "e", "d"):
        assert after[name][0] != before[name][0], name
    assert b'href="x"' in after["d"][2] and b'href="x"' not in before["d"][2]
    assert after["d"][1] == before["d"][1]  # a conversion keeps the mtime
    assert set(after) == set(before) | {"a3", "b2", "x"}
    # mtimes from Last-Modified, first run and second.
    files = tree(root)
    assert files["a1"].stat().st_mtime == EPOCH + DAY  # version 1, never rewritten
    assert files["a2"].stat().st_mtime == EPOCH + 2 * DAY  # version 2
    assert files["a3"].stat().st_mtime == EPOCH + DAY
    assert files["c"].stat().st_mtime == EPOCH + DAY
    # The visits live in the mirror, and are no mirrored file.
    assert (root / ".trio-crawl" / "visits.db").is_file()
    assert not any(".trio-crawl" in name for name in after)


def test_delete_gone_and_converted_links_equal_a_fresh_mirror(tmp_path: Path) -> None:
    site = first_site()
    root, fresh = tmp_path / "m", tmp_path / "fresh"
    with serve_site(site.site()) as server:
        mirror(server.url("/"), root, tmp_path / "a.jsonl", "--mirror-delete-gone")
        before = stamps(root)
        change(site)
        two = mirror(server.url("/"), root, tmp_path / "b.jsonl", "--mirror-delete-gone")
        port = server.url("/")
    with serve_site(second_site().site()) as other:
        mirror(other.url("/"), fresh, tmp_path / "f.jsonl")
        port_to = other.url("/")
    assert {r["change"] for r in two if r["url"].endswith("/c")} == {"gone"}
    kept = contents(root, port, port_to)
    assert "c" not in kept  # removed
    assert kept.pop("old") == before["old"][2]  # unlinked: not fetched, kept
    assert kept == contents(fresh, port_to, port_to)
    # "/" is unchanged but its link to /c no longer leads to a file: rewritten.
    assert stamps(root)["index.html"][0] != before["index.html"][0]
    fresh_times = {n: p.stat().st_mtime for n, p in tree(fresh).items()}
    for name, path in tree(root).items():
        if name in ("a1", "a2", "a3", "e"):  # Last-Modified pages
            assert path.stat().st_mtime == fresh_times[name], name


def test_delete_gone_removes_the_folders_it_emptied_and_no_other(tmp_path: Path) -> None:
    """A second run whose gone pages were the last files of one folder
    removes its folder and the one above; ``notes`` keeps the empty folder a
    user made in it, and the user's empty ``mine`` stays."""
    site = ChangingSite()
    site.add("/", "/docs/deep/a", "/docs/deep/b", "/notes/n")
    for path in ("/docs/deep/a", "/docs/deep/b", "/notes/n"):
        site.add(path)
    root = tmp_path / "m"
    with serve_site(site.site()) as server:
        mirror(server.url("/"), root, tmp_path / "a.jsonl", "--mirror-delete-gone")
        host = root / server.base_url.removeprefix("http://")
        assert (host / "docs" / "deep" / "a").is_file()
        (host / "notes" / "mine").mkdir()
        (host / "mine").mkdir()
        for path in ("/docs/deep/a", "/docs/deep/b", "/notes/n"):
            del site.pages[path]  # still linked: gone (404)
        two = mirror(server.url("/"), root, tmp_path / "b.jsonl", "--mirror-delete-gone")
    assert sorted(r["url"] for r in two if r.get("change") == "gone") == sorted(
        server.url(p) for p in ("/docs/deep/a", "/docs/deep/b", "/notes/n")
    )
    assert sorted(p.relative_to(host).as_posix() for p in host.rglob("*")) == [
        "index.html", "mine", "notes", "notes/mine",
    ]  # fmt: skip


def test_delete_gone_without_a_mirror_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("http://127.0.0.1:1/", "--mirror-delete-gone", "-o", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "--mirror-delete-gone" in done.stderr and "--mirror" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def wide_site(pages: int = 60) -> ChangingSite:
    site = ChangingSite()
    for i in range(pages):
        kids = [f"/p/{k}" for k in (2 * i + 1, 2 * i + 2) if k < pages]
        site.add(f"/p/{i}", *kids, "/p/0", validators=(BOTH, MODIFIED, NONE)[i % 3])
    site.add("/", "/p/0")
    return site


def test_kill_9_in_the_second_run_then_rerun_ends_as_one_second_run(tmp_path: Path) -> None:
    site = wide_site()
    hurt, calm = tmp_path / "hurt", tmp_path / "calm"
    first, calm_out, hurt_out = (tmp_path / f"{n}.jsonl" for n in ("a", "calm", "hurt"))
    args = ["-w", "2", "-k", "--mirror-delete-gone", "--rate", "40"]
    with serve_site(site.site()) as server:
        mirror(server.url("/"), hurt, first)
        shutil.copytree(hurt, calm, symlinks=True)  # the same finished mirror, twice
        for i in (5, 9, 20, 33):
            site.edit(f"/p/{i}")
        site.edit("/p/4", links=("/p/0", "/new/4"))
        site.add("/new/4", "/p/9")
        del site.pages["/p/30"]
        calm_records = mirror(server.url("/"), calm, calm_out, *args)
        command = [server.url("/"), "--mirror", str(hurt), "-o", str(hurt_out), *args]
        killed_at = kill_after_records(command, hurt_out, 12).count("\n")
        assert 12 <= killed_at < len(calm_records)
        with sqlite3.connect(hurt / ".trio-crawl" / "visits.db") as conn:
            done = conn.execute("SELECT value FROM meta WHERE key = 'generation_done'")
            assert done.fetchone() == ("1",)  # the second run did not end
        done_run = run_cli(*command)
        assert done_run.returncode == 0, done_run.stderr
    hurt_records = records_in(hurt_out.read_text())
    shape = lambda r: (r["url"], r["status"], r["change"], r.get("digest"))  # noqa: E731
    assert sorted(map(shape, hurt_records)) == sorted(map(shape, calm_records))
    assert {r["change"] for r in calm_records} >= {"changed", "unchanged", "gone", "unlinked"}
    calm_files, hurt_files = tree(calm), tree(hurt)
    assert set(calm_files) == set(hurt_files)
    assert "30" not in {name.rsplit("/", 1)[-1] for name in hurt_files}  # gone: removed
    last_modified = {f"p/{i}" for i in range(60) if i % 3 in (0, 1)}  # BOTH, MODIFIED
    for name, path in hurt_files.items():
        assert path.read_bytes() == calm_files[name].read_bytes(), name
        if name in last_modified:  # the same time in both trees: the server's
            assert path.stat().st_mtime == calm_files[name].stat().st_mtime, name
            assert EPOCH < path.stat().st_mtime < EPOCH + 10 * DAY, name
    with sqlite3.connect(hurt / ".trio-crawl" / "visits.db") as conn:
        rows = conn.execute("SELECT value FROM meta WHERE key = 'generation_done'").fetchone()
    assert rows == ("2",)


def test_a_file_deleted_from_the_mirror_is_fetched_again(tmp_path: Path) -> None:
    """A 304 would leave it missing: the page is asked without validators,
    its body saved again (its record: unchanged, the same digest)."""
    site = first_site()
    root = tmp_path / "m"
    with serve_site(site.site()) as server:
        one = mirror(server.url("/"), root, tmp_path / "a.jsonl")
        body = tree(root)["a1"].read_bytes()
        tree(root)["a1"].unlink()
        n = len(server.log)
        two = mirror(server.url("/"), root, tmp_path / "b.jsonl")
        asked = {e.target: conditional(e.headers) for e in server.log[n:]}
    assert asked["/a1"] == {} and asked["/a"] != {}
    assert tree(root)["a1"].read_bytes() == body
    assert tree(root)["a1"].stat().st_mtime == EPOCH + DAY
    (record,) = [r for r in two if r["url"] == server.url("/a1")]
    (earlier,) = [r for r in one if r["url"] == server.url("/a1")]
    assert (record["status"], record["change"]) == (200, "unchanged")
    assert record["digest"] == earlier["digest"]


def test_with_a_state_file_the_state_file_is_the_one_truth(tmp_path: Path) -> None:
    """--state and --mirror: the state file keeps the visits (no
    DIR/.trio-crawl), --recrawl makes the second run a recrawl; a first crawl
    made without --mirror leaves no file to keep, so the recrawl fetches
    those bodies (asked without validators) and saves them."""
    site = first_site()
    root, db = tmp_path / "m", tmp_path / "s.db"
    with serve_site(site.site()) as server:
        first = ["--state", str(db), "-o", str(tmp_path / "a.jsonl"), "-w", "2"]
        assert run_cli(server.url("/"), *first).returncode == 0  # no --mirror
        change(site)
        n = len(server.log)
        second = ["--state", str(db), "-o", str(tmp_path / "b.jsonl"), "-w", "2", "--recrawl"]
        done = run_cli(server.url("/"), *second, "--mirror", str(root), "-k")
        assert done.returncode == 0, done.stderr
        asked = {e.target: conditional(e.headers) for e in server.log[n:]}
    assert not (root / ".trio-crawl").exists()
    assert asked["/"] == {} and asked["/a1"] == {}  # no copy to keep: bodies fetched
    changes = {r["url"]: r["change"] for r in records_in((tmp_path / "b.jsonl").read_text())}
    assert changes[server.url("/a1")] == "unchanged" and changes[server.url("/a3")] == "new"
    assert {"index.html", "a", "a1", "a2", "a3", "b2", "d", "x"} <= set(tree(root))
    assert tree(root)["a1"].stat().st_mtime == EPOCH + DAY


class MovingSite(ChangingSite):
    """A ChangingSite whose ``moved`` paths answer 301 to their target."""

    def __init__(self) -> None:
        super().__init__()
        self.moved: dict[str, str] = {}

    def answer(self, request: object) -> Response:
        target: str = request.target  # type: ignore[attr-defined]
        if target in self.moved:
            return Response(status=301, body=b"", headers=(("Location", self.moved[target]),))
        return super().answer(request)


def test_the_library_keeps_a_mirror_current_and_a_redirect_is_gone(tmp_path: Path) -> None:
    """``run_crawl(mirror=...)`` twice: the second run's records say their
    change; a page that became a redirect is ``gone`` and, with
    ``mirror_delete_gone=True``, its file is removed."""
    import trio

    from trio_crawl import run_crawl

    site = MovingSite()
    site.add("/", "/a", "/r")
    site.add("/a")
    site.add("/r", validators=MODIFIED)
    root = tmp_path / "m"

    async def crawl(url: str) -> list[Any]:
        records: list[Any] = []
        with trio.fail_after(60):
            await run_crawl(
                url, mirror=str(root), mirror_delete_gone=True, on_record=records.append
            )
        return records

    with serve_site(site.site()) as server:
        one = trio.run(crawl, server.url("/"))
        assert "r" in tree(root) and all("change" not in r.extra for r in one)
        site.moved["/r"] = "/a"
        two = trio.run(crawl, server.url("/"))
    changes = {r.url[len(server.url("/")) - 1 :]: r.extra.get("change") for r in two}
    assert changes == {"/": "unchanged", "/a": "unchanged", "/r": "gone"}
    assert set(tree(root)) == {"index.html", "a"}


def test_recrawl_due_over_a_mirror_asks_only_what_is_due(tmp_path: Path) -> None:
    """A mirror's own visits keep the revisit schedule: run again with
    ``recrawl="due"``, it requests nothing that is not due (not even
    robots.txt), except a page whose saved file is gone; a day later the
    due pages are asked with their validators and the changed one is
    rewritten. Days pass on a MockClock (the crawl's calendar)."""
    import trio
    import trio.testing

    from trio_crawl import run_crawl

    site = ChangingSite()
    site.add("/", "/a", "/b")
    site.add("/a")
    site.add("/b")
    root = tmp_path / "m"
    runs: list[tuple[dict[str, Any], list[str]]] = []

    with serve_site(site.site()) as server:

        async def crawl(recrawl: bool | str) -> None:
            records: list[Any] = []
            n = len(server.log)
            await run_crawl(
                server.url("/"), mirror=str(root), recrawl=recrawl, on_record=records.append
            )
            changes = {r.url[len(server.url("/")) - 1 :]: r.extra.get("change") for r in records}
            runs.append((changes, sorted(e.target for e in server.log[n:])))

        async def main() -> None:
            clock = trio.lowlevel.current_clock()
            assert isinstance(clock, trio.testing.MockClock)
            await crawl(False)  # day 0: each page due again on day 1
            saved = stamps(root)
            clock.jump(DAY / 2)
            site.edit("/a")
            await crawl("due")  # nothing due
            assert stamps(root) == saved
            tree(root)["b"].unlink()
            await crawl("due")  # its file is gone: fetched, due or not
            clock.jump(DAY)
            await crawl("due")  # day 1.5: all due

        trio.run(main, clock=trio.testing.MockClock())
    (_, first), (quiet, none), (lost, refetched), (due, asked) = runs
    assert first == ["/", "/a", "/b", "/robots.txt"]
    assert none == [] and set(quiet.values()) == {"not_due"}
    assert refetched == ["/b", "/robots.txt"]
    assert lost == {"/": "not_due", "/a": "not_due", "/b": "unchanged"}
    assert asked == ["/", "/a", "/b", "/robots.txt"]
    assert due == {"/": "unchanged", "/a": "changed", "/b": "unchanged"}
    assert tree(root)["a"].read_bytes() == site.body("/a")
