"""Items as CSV keep every field (issue #36 item 4): the header grows with
the items' keys, the file is rewritten whole when it does, and a pipe that
cannot be rewritten fails loudly instead of dropping a field."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

from trio_crawl.outputs.jsonl import ItemCsvWriter, OutputFile
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Site, page

from cli_helpers import TIMEOUT


def rows_of(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(), newline="")))


def test_a_later_item_with_new_fields_widens_the_header(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    output = OutputFile.open(str(path))
    output.begin(append=False)
    writer = ItemCsvWriter(output)
    writer.write({"url": "u1", "a": 1})
    writer.write({"url": "u2", "b": "x,y", "extra": "e"})
    writer.write({"a": 3, "url": "u3"})
    output.close()
    assert output.error is None
    assert writer.written == 3
    assert rows_of(path) == [
        ["url", "a", "b", "extra"],
        ["u1", "1", "", ""],
        ["u2", "", "x,y", "e"],
        ["u3", "3", "", ""],
    ]


def test_the_rewritten_file_keeps_its_mode_and_later_writes_go_to_it(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_bytes(b"")
    path.chmod(0o640)
    output = OutputFile.open(str(path))
    output.begin(append=False)
    writer = ItemCsvWriter(output)
    writer.write({"a": 1})
    inode = path.stat().st_ino
    writer.write({"b": 2})  # widens: a new file is renamed over the old
    writer.write({"a": 3, "b": 4})
    output.close()
    assert path.stat().st_ino != inode
    assert path.stat().st_mode & 0o777 == 0o640
    assert rows_of(path) == [["a", "b"], ["1", ""], ["", "2"], ["3", "4"]]
    assert not [p for p in tmp_path.iterdir() if p.name != "items.csv"]  # no temporary left


def test_held_rows_widen_too_and_reach_the_file_on_commit(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text("old content\n")
    output = OutputFile.open(str(path))
    output.begin(append=False, hold=True)
    writer = ItemCsvWriter(output)
    writer.write({"a": 1})
    writer.write({"b": 2})
    assert path.read_text() == "old content\n"  # still held
    output.commit()
    output.close()
    assert rows_of(path) == [["a", "b"], ["1", ""], ["", "2"]]


def test_appending_starts_from_the_existing_header(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text("url,a\r\nu0,0\r\n")
    output = OutputFile.open(str(path))
    output.begin(append=True)
    writer = ItemCsvWriter(output)
    writer.write({"a": 1, "url": "u1"})
    writer.write({"url": "u2", "c": "new"})
    output.close()
    assert rows_of(path) == [
        ["url", "a", "c"],
        ["u0", "0", ""],
        ["u1", "1", ""],
        ["u2", "", "new"],
    ]


def test_a_pipe_cannot_grow_columns_and_says_so() -> None:
    read_end, write_end = os.pipe()
    try:
        output = OutputFile("<pipe>", write_end, created=False, owned=True)
        output.begin(append=False)
        writer = ItemCsvWriter(output)
        writer.write({"url": "u1", "a": 1})
        writer.write({"url": "u2", "b": 2})
        writer.write({"url": "u3", "a": 3})  # the output has failed: nothing more
        output.close()
        assert os.read(read_end, 1000) == b"url,a\r\nu1,1\r\n"
    finally:
        os.close(read_end)
    assert writer.written == 1
    assert output.error is not None
    assert str(output.error) == (
        "cannot write to <pipe>: an item has fields the CSV header lacks (b), and CSV on a "
        "pipe cannot grow columns: write items to a .csv file, or as JSON Lines"
    )


VARYING_ITEMS = """
from trio_crawl import Page


async def shapes(page: Page):
    n = int(page.url.rsplit("/", 1)[1])
    yield {"url": page.url, "a": n} if n % 2 == 0 else {"url": page.url, "b": n, "extra": "x"}
    for link in page.links():
        yield page.follow(link)
"""


def test_the_command_line_keeps_every_field_of_items_of_varying_shape(tmp_path: Path) -> None:
    (tmp_path / "shape_handlers.py").write_text(VARYING_ITEMS)
    items = tmp_path / "items.csv"
    routes = {f"/{i}": page(f"/{(i + 1) % 4}") for i in range(4)}
    with serve_site(Site(routes)) as server:
        result = subprocess.run(
            [sys.executable, "-m", "trio_crawl", server.base_url + "/0", "-q", "-o", os.devnull,
             "--ignore-robots", "--handler", "shape_handlers:shapes", "--items", str(items)],
            capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = rows_of(items)
    assert rows[0] == ["url", "a", "b", "extra"]
    assert sorted(rows[1:]) == sorted(
        [f"{server.base_url}/{n}", str(n), "", ""]
        if n % 2 == 0
        else [f"{server.base_url}/{n}", "", str(n), "x"]
        for n in range(4)
    )
