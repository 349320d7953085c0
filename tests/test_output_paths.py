"""No two outputs on one file (issue #25, item 2).

The pure check (``cli/output_paths.py``) against real files, links and
symlinks in a temporary folder; and the command line, which refuses a clash
with one line and exit 2 before it writes anything (the old file is intact,
no server is asked for anything).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_cli import small_site

from trio_crawl.cli.output_paths import OUTPUT_OPTIONS, file_key, output_clash
from trio_crawl.sites.server import serve_site

from cli_helpers import run_cli


def test_distinct_files_do_not_clash(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    assert output_clash([("-o", str(tmp_path / "a")), ("--items", str(tmp_path / "b"))]) is None


def test_stdout_and_the_null_device_never_clash() -> None:
    assert output_clash([("-o", "-"), ("--items", "-")]) is None
    assert output_clash([("-o", os.devnull), ("--items", os.devnull)]) is None
    assert file_key("-") is None


def test_unset_options_are_skipped(tmp_path: Path) -> None:
    assert output_clash([("-o", str(tmp_path / "a")), ("--warc", None), ("--state", "")]) is None


def test_a_hard_link_is_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    message = output_clash([("-o", str(tmp_path / "a")), ("--save-cookies", str(tmp_path / "b"))])
    assert message == (
        f"-o and --save-cookies would write to the same file ({str(tmp_path / 'a')!r} and "
        f"{str(tmp_path / 'b')!r}): give each output its own file"
    )


def test_a_symlink_is_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert output_clash([("--warc", str(tmp_path / "link")), ("-o", str(tmp_path / "a"))])


def test_new_files_compare_by_resolved_path(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "d")
    new = tmp_path / "d" / "new.jsonl"
    same = str(tmp_path / "alias" / ".." / "d" / "new.jsonl")
    assert output_clash([("-o", str(new)), ("--state", str(tmp_path / "alias" / "new.jsonl"))])
    assert output_clash([("-o", str(new)), ("--items", same)])
    assert not output_clash([("-o", str(new)), ("--items", str(tmp_path / "d" / "other"))])


def test_a_dangling_symlink_names_its_future_target(tmp_path: Path) -> None:
    (tmp_path / "later").symlink_to(tmp_path / "target")
    assert output_clash([("-o", str(tmp_path / "target")), ("--warc", str(tmp_path / "later"))])


def test_every_output_option_of_the_parser_is_in_the_table() -> None:
    """An option that writes a file and is missing from the table could clash unseen."""
    from trio_crawl.cli.parser import build_parser

    known = {dest for dest, _ in OUTPUT_OPTIONS}
    writers = {"output", "items", "warc", "save_cookies", "state", "mirror", "depth_updates"}
    dests = {action.dest for action in build_parser()._actions}
    assert (writers & dests) <= known


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("-o", "--save-cookies"),
        ("--items", "-o"),
        ("--warc", "-o"),
        ("--state", "-o"),
    ],
)
def test_the_cli_refuses_a_clash_before_writing(tmp_path: Path, first: str, second: str) -> None:
    target = tmp_path / "x.jsonl"
    target.write_text("old content\n")
    (tmp_path / "h.py").write_text("async def h(page):\n    yield {}\n")
    extra = ["--handler", "h:h"] if "--items" in (first, second) else []
    with serve_site(small_site(3)) as server:
        result = run_cli(
            server.base_url + "/", first, str(target), second, str(target), *extra, "-q"
        )
        asked = server.targets()
    assert result.returncode == 2, result.stderr
    a, b = sorted((first, second), key=[flag for _, flag in OUTPUT_OPTIONS].index)
    assert result.stderr == (
        f"trio-crawl: error: {a} and {b} would write to the same file "
        f"({str(target)!r}): give each output its own file\n"
    )
    assert target.read_text() == "old content\n"
    assert asked == []


def test_the_cli_refuses_a_symlinked_output(tmp_path: Path) -> None:
    (tmp_path / "out.jsonl").write_text("old\n")
    (tmp_path / "cookies.txt").symlink_to(tmp_path / "out.jsonl")
    result = run_cli(
        "http://127.0.0.1:1/", "-o", str(tmp_path / "out.jsonl"),
        "--save-cookies", str(tmp_path / "cookies.txt"),
    )  # fmt: skip
    assert result.returncode == 2
    assert "would write to the same file" in result.stderr
    assert (tmp_path / "out.jsonl").read_text() == "old\n"
