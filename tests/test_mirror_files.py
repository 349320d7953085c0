"""``--mirror``'s writes on a real directory (``mirror/files.py``):
symlinks already inside the mirror are never followed, a file and a
directory wanting one name are both kept, and errors are sorted into "skip
this file" and "the mirror failed"."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from trio_crawl.mirror.files import MirrorFiles, MirrorSkip
from trio_crawl.mirror.layout import MirrorLayout

LAYOUT = MirrorLayout()


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_a_file_and_a_directory_wanting_one_name_are_both_kept(tmp_path: Path) -> None:
    files = MirrorFiles(str(tmp_path))
    assert files.save(LAYOUT.path("http://h/a"), b"A") == ("h", "a")
    assert files.save(LAYOUT.path("http://h/a/b"), b"B") == ("h", "a", "b")
    # The other order: the directory is there first.
    files.save(LAYOUT.path("http://h/c/d"), b"D")
    assert files.save(LAYOUT.path("http://h/c"), b"C") == ("h", "c", "index.html")
    assert tree(tmp_path) == {
        "h/a/index.html": b"A",
        "h/a/b": b"B",
        "h/c/d": b"D",
        "h/c/index.html": b"C",
    }
    # The link converter finds both through the candidates.
    for url, where in (
        ("http://h/a", ("h", "a", "index.html")),
        ("http://h/c", ("h", "c", "index.html")),
    ):
        assert next(c for c in LAYOUT.candidates(url) if files.is_file(c)) == where
    assert not files.is_file(("h", "a"))  # a directory is not a saved page


def test_a_symlinked_directory_inside_the_mirror_is_never_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "mirror", tmp_path / "outside"
    outside.mkdir()
    (root / "h").mkdir(parents=True)
    (root / "h" / "docs").symlink_to(outside)
    (root / "evil").symlink_to(outside)  # a host directory that is a symlink
    files = MirrorFiles(str(root))
    with pytest.raises(MirrorSkip, match=r"^h/docs is a symlink: not followed$"):
        files.save(LAYOUT.path("http://h/docs/x.html"), b"X")
    with pytest.raises(MirrorSkip, match="symlink"):
        files.save(("evil", "x"), b"X")
    assert list(outside.iterdir()) == []
    assert (root / "h" / "docs").is_symlink()  # left as it was
    assert not files.is_file(("h", "docs", "x.html"))
    assert list(files.walk()) == []  # the converter's walk does not enter it either


def test_a_symlink_in_place_of_the_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    root, target = tmp_path / "mirror", tmp_path / "precious.txt"
    target.write_bytes(b"precious")
    (root / "h").mkdir(parents=True)
    (root / "h" / "index.html").symlink_to(target)
    files = MirrorFiles(str(root))
    assert not files.is_file(("h", "index.html"))  # a symlink is not a saved file
    files.save(LAYOUT.path("http://h/"), b"page")
    assert target.read_bytes() == b"precious"
    assert not (root / "h" / "index.html").is_symlink()
    assert (root / "h" / "index.html").read_bytes() == b"page"


def test_the_mirror_root_may_itself_be_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    MirrorFiles(str(tmp_path / "link")).save(("h", "x"), b"X")
    assert (real / "h" / "x").read_bytes() == b"X"


def test_a_name_the_file_system_refuses_skips_that_file(tmp_path: Path) -> None:
    files = MirrorFiles(str(tmp_path))
    with pytest.raises(MirrorSkip, match="File name too long"):
        files.save(("h", "x" * 300), b"X")  # not from the layout, which cuts names
    files.save(("h", "ok"), b"ok")  # the mirror still works
    assert tree(tmp_path) == {"h/ok": b"ok"}


def test_a_full_disk_is_the_mirror_failing_and_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = MirrorFiles(str(tmp_path))
    files.save(("h", "a"), b"old")

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as caught:
        files.save(("h", "a"), b"new")
    assert caught.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert tree(tmp_path) == {"h/a": b"old"}  # no temporary file left, the old copy kept
    assert sorted(os.listdir(tmp_path / "h")) == ["a"]


def test_case_probe_reports_this_file_system(tmp_path: Path) -> None:
    files = MirrorFiles(str(tmp_path))
    assert files.case_insensitive() is False  # ext4/tmpfs/overlay: case-sensitive
    assert os.listdir(tmp_path) == []  # the probe cleans up


def test_times_removal_and_what_the_walk_leaves_out(tmp_path: Path) -> None:
    """A recrawled mirror's writes: a file's time set (never through a
    symlink), a rewrite keeps the time it had, a gone page's file removed
    (also as ``name/index.html``), and ``.trio-crawl/`` never walked."""
    files = MirrorFiles(str(tmp_path))
    try:
        saved = files.save(("h", "a"), b"<p>a</p>")
        files.set_time(saved, 1_700_000_000.0)
        assert os.stat(tmp_path / "h" / "a").st_mtime == 1_700_000_000.0
        files.rewrite(("h", "a"), b"<p>converted</p>")
        assert os.stat(tmp_path / "h" / "a").st_mtime == 1_700_000_000.0
        assert (tmp_path / "h" / "a").read_bytes() == b"<p>converted</p>"
        files.save(("h", "d"), b"d")
        files.save(("h", "d", "e"), b"e")  # d moves to d/index.html
        assert files.saved_as(("h", "d")) == ("h", "d", "index.html")
        assert files.remove(("h", "d")) and files.saved_as(("h", "d")) is None
        assert (tmp_path / "h" / "d" / "e").read_bytes() == b"e"
        assert not files.remove(("h", "nothing"))
        (tmp_path / ".trio-crawl").mkdir()
        (tmp_path / ".trio-crawl" / "visits.db").write_bytes(b"<html>")
        assert sorted(files.walk()) == [("h", "a"), ("h", "d", "e")]
        os.symlink(tmp_path / "h" / "a", tmp_path / "h" / "link")
        files.set_time(("h", "link"), 1.0)  # the link's own time, if any
        assert os.stat(tmp_path / "h" / "a").st_mtime == 1_700_000_000.0
    finally:
        files.close()


def test_removing_a_folders_last_file_removes_the_folders_it_emptied(tmp_path: Path) -> None:
    """Up to the first folder with something left in it (a file, or an
    empty folder a user made), never the mirror's own directory."""
    files = MirrorFiles(str(tmp_path))
    try:
        files.save(("h", "docs", "deep", "a"), b"a")
        files.save(("h", "docs", "deep", "b"), b"b")
        files.save(("h", "notes", "n"), b"n")
        files.save(("h", "index.html"), b"i")
        (tmp_path / "h" / "notes" / "mine").mkdir()  # a user's, empty
        (tmp_path / "h" / "empty").mkdir()  # a user's, empty before
        assert files.remove(("h", "docs", "deep", "a"))
        assert (tmp_path / "h" / "docs" / "deep").is_dir()  # b is left
        assert files.remove(("h", "docs", "deep", "b"))
        assert not (tmp_path / "h" / "docs").exists()
        assert files.remove(("h", "notes", "n"))
        assert (tmp_path / "h" / "notes" / "mine").is_dir()
        assert (tmp_path / "h" / "empty").is_dir()
        files.save(("h", "docs", "deep", "c"), b"c")  # made again: no stale descriptor
        assert (tmp_path / "h" / "docs" / "deep" / "c").read_bytes() == b"c"
        for name in (("h", "docs", "deep", "c"), ("h", "index.html")):
            assert files.remove(name)
        assert sorted(p.name for p in (tmp_path / "h").iterdir()) == ["empty", "notes"]
        shutil.rmtree(tmp_path / "h" / "notes")
        shutil.rmtree(tmp_path / "h" / "empty")
        files.save(("h", "last"), b"l")
        assert files.remove(("h", "last"))
        assert not (tmp_path / "h").exists() and tmp_path.is_dir()  # the root stays
    finally:
        files.close()
