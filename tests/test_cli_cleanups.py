"""Issue #36 cleanups: ``--mirror FILE`` is a usage error at the start,
and a finished ``--state`` crawl run with another ``-o`` names the file
its records are in. Every subprocess has a timeout; every site is on
127.0.0.1."""

from __future__ import annotations

from pathlib import Path

from test_cli import small_site
from test_cli_exits import one_error_line

from trio_crawl.sites.server import serve_site

from cli_helpers import run_cli


def test_mirror_on_a_file_is_a_usage_error(tmp_path: Path) -> None:
    file = tmp_path / "site"
    file.write_text("not a directory")
    with serve_site(small_site(2)) as server:
        start = server.base_url + "/"
        result = run_cli(start, "--mirror", str(file), "-o", str(tmp_path / "out.jsonl"))
        below = run_cli(start, "--mirror", str(file / "deeper"), "-o", "-")
        assert server.targets() == []
    assert result.returncode == below.returncode == 2
    assert one_error_line(result) == f"trio-crawl: error: --mirror {file}: not a directory"
    assert one_error_line(below) == (
        f"trio-crawl: error: --mirror {file}/deeper: not a directory ({file} is a file)"
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_a_finished_crawl_run_with_another_output_names_where_its_records_are(
    tmp_path: Path,
) -> None:
    first_out, db = tmp_path / "first.jsonl", tmp_path / "crawl.db"
    with serve_site(small_site(3)) as server:
        start = server.base_url + "/"
        first = run_cli(start, "--state", str(db), "-o", str(first_out), "-q")
        asked = len(server.targets())
        notes = [
            run_cli(start, "--state", str(db), "-o", str(tmp_path / name)).stderr
            for name in ("second.jsonl", "third.jsonl")
        ]
        assert len(server.targets()) == asked
    assert first.returncode == 0, first.stderr
    for name, note in zip(("second.jsonl", "third.jsonl"), notes, strict=True):
        assert note == (
            f"trio-crawl: the crawl in {db} is complete (4 URLs done, their records in "
            f"{first_out}, where that crawl wrote them; {tmp_path / name} untouched): nothing "
            f"left to fetch. Report on it: trio-crawl report {first_out} -o report.html; "
            "to crawl it again, asking only for what changed, add --recrawl (or remove or rename "
            "the state file to start afresh)\n"
        )
        assert not (tmp_path / name).exists()
    status = run_cli("--state", str(db), "--status")
    assert "done 4 " in status.stdout, status.stdout
