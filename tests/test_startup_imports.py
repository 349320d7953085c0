"""A plain crawl imports only what it uses (issue #26: start-up is a crawl's
largest fixed cost).

``trio-crawl URL -o FILE`` (memory frontier, the curl fetcher, no option that
needs more) must not import the optional features' modules: the SQLite and
Redis frontiers, the WARC writer, the mirror, the Chromium fetcher, handlers'
``lxml.html``; with ``-q``, not rich either. Each is imported where its option
is chosen, and the library's public names for them still work (the face
imports them on first use). Checked in fresh interpreters: this one has
imported everything already.

And Ctrl-C while those modules load ends as Ctrl-C before a crawl does: exit
130 and one line, no traceback. ``import trio_crawl`` loads nothing heavy,
and the entry (``trio_crawl.__main__.run``) imports the command line inside
a ``try``.
"""

from __future__ import annotations

import json
import textwrap
import tomllib
from pathlib import Path

import pytest
from processes import run_python

import trio_crawl
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Site, page

#: Modules of features a plain crawl does not use.
OPTIONAL = (
    "trio_crawl.frontiers.sqlite",
    "sqlite3",
    "trio_crawl.frontiers.redis",
    "trio_crawl.cli.redis_cli",
    "coredis",
    "trio_crawl.outputs.archive",
    "trio_crawl.outputs.warc",
    "trio_crawl.mirror",
    "trio_crawl.engine.render",
    "trio_crawl.fetch.chromium",
    "trio_crawl.fetch.cookies",
    "lxml.html",
    # issue #36 item 11: only --sitemaps, --page-requisites and pages over
    # lexbor's 1 MiB use these (the requisite mark is core/payloads.py)
    "trio_crawl.engine.sitemaps",
    "trio_crawl.engine.sitemap_parse",
    "trio_crawl.core.requisites",
    "trio_crawl.core.libxml2_links",
    "trio_crawl.core.push_parse",
    "trio_crawl.core.stylesheet",
    "trio_crawl.core.tokenized",
    # issue #36 item 11: only a crawl that keeps visits (--state, --mirror)
    # uses the recrawl's rules (engine/revisits.py loads them on first use)
    "trio_crawl.recrawl",
    "trio_crawl.core.revisit_schedule",
    # a frontier named before it opens: --state, or a library's redis_frontier
    "trio_crawl.frontiers.specs",
    # --seeds, or --max-hosts's note on start URLs on too many hosts
    "trio_crawl.cli.seeds",
)
#: What only the summary table and the live display use (not with -q); rich
#: imports fractions, which a quiet crawl needs only for a size or a count
#: like 1e3 to parse (cli.units; ~2-5 ms).
DISPLAY = ("rich", "fractions")

#: Runs the command line in this interpreter, then prints which modules it
#: had imported by the end (exit code and module names, as JSON).
CRAWL = textwrap.dedent(
    """
    import json, sys
    import trio_crawl.cli.main
    try:
        trio_crawl.cli.main.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
    """
)


def loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``names`` (or their submodules) among ``modules``."""
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "summary"])
def test_a_plain_crawl_imports_no_optional_feature(tmp_path: Path, quiet: bool) -> None:
    site = Site({"/": page("/a", "/b"), "/a": page("/b"), "/b": page("/")})
    out = tmp_path / "out.jsonl"
    with serve_site(site) as server:
        args = [f"{server.base_url}/", "-o", str(out), *(["-q"] if quiet else [])]
        result = run_python(CRAWL, *args)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["code"] == 0, result.stderr
    urls = sorted(json.loads(line)["url"] for line in out.read_text().splitlines())
    assert urls == [f"{server.base_url}/{p}" for p in ("", "a", "b")]
    assert "trio_crawl.fetch.curl" in report["modules"]  # the crawl did run here
    unwanted = OPTIONAL + DISPLAY if quiet else OPTIONAL
    assert loaded(report["modules"], unwanted) == []
    if not quiet:
        assert "summary" in result.stderr  # rich drew the table


#: Starts ``trio-crawl`` as the console script does and prints, at exit,
#: whether the collector is on and how many objects its loading froze.
COLLECTOR = textwrap.dedent(
    """
    import atexit, gc, json, sys
    atexit.register(lambda: print(json.dumps([gc.isenabled(), gc.get_freeze_count()])))
    sys.argv[0] = "trio-crawl"
    from trio_crawl.__main__ import run
    run()
    """
)


def test_the_entry_loads_with_the_collector_off_then_freezes_what_it_loaded(
    tmp_path: Path,
) -> None:
    """The command line's modules load with no collector pass (~60 passes
    and ~10 ms of a crawl's start-up before): the objects they made are
    frozen out of later passes, and the collector is on for the crawl."""
    out = tmp_path / "out.jsonl"
    with serve_site(Site({"/": page("/a"), "/a": page("/")})) as server:
        result = run_python(COLLECTOR, f"{server.base_url}/", "-o", str(out), "-q")
    assert result.returncode == 0, result.stderr
    collecting, frozen = json.loads(result.stdout.splitlines()[-1])
    assert collecting is True
    assert frozen > 10_000  # trio's and the crawler's classes, functions, modules
    assert len(out.read_text().splitlines()) == 2


def test_the_version_imports_no_optional_feature() -> None:
    result = run_python(CRAWL, "--version")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert loaded(report["modules"], OPTIONAL + DISPLAY) == []


#: The face's names of optional features: importable, on first use.
LAZY_NAMES = {
    "RedisFrontier": "trio_crawl.frontiers.redis",
    "open_redis_frontier": "trio_crawl.frontiers.redis",
    "check_redis_crawl": "trio_crawl.frontiers.redis",
    "delete_redis_crawl": "trio_crawl.frontiers.redis",
    "SqliteFrontier": "trio_crawl.frontiers.sqlite",
}


def test_the_face_imports_optional_frontiers_on_first_use() -> None:
    code = textwrap.dedent(
        """
        import json, sys
        import trio_crawl
        before = sorted(sys.modules)
        from trio_crawl import RedisFrontier, SqliteFrontier
        print(json.dumps({
            "before": before,
            "after": sorted(sys.modules),
            "names": [RedisFrontier.__module__, SqliteFrontier.__module__],
        }))
        """
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert loaded(report["before"], tuple(LAZY_NAMES.values())) == []
    assert set(LAZY_NAMES.values()) <= set(report["after"])
    redis, sqlite = report["names"]
    assert redis == "trio_crawl.frontiers.redis.frontier"
    assert sqlite == "trio_crawl.frontiers.sqlite.frontier"


def test_every_public_name_resolves_to_its_module() -> None:
    from trio_crawl.frontiers import redis, sqlite

    assert trio_crawl.RedisFrontier is redis.RedisFrontier
    assert trio_crawl.open_redis_frontier is redis.open_redis_frontier
    assert trio_crawl.check_redis_crawl is redis.check_crawl
    assert trio_crawl.delete_redis_crawl is redis.delete_crawl
    assert trio_crawl.SqliteFrontier is sqlite.SqliteFrontier
    assert set(LAZY_NAMES) <= set(trio_crawl.__all__)
    assert set(trio_crawl.__all__) <= set(dir(trio_crawl))
    for name in trio_crawl.__all__:
        assert getattr(trio_crawl, name) is not None, name
    with pytest.raises(AttributeError, match=r"has no attribute 'NoSuchName'"):
        trio_crawl.NoSuchName  # noqa: B018


#: Sends this process SIGINT while it imports trio (the first heavy import of
#: the command line: KeyboardInterrupt is raised inside it, as a Ctrl-C then
#: would be), then starts ``trio-crawl`` the way ENTRY says.
INTERRUPTED_IMPORT = textwrap.dedent(
    """
    import os, runpy, signal, sys

    class InterruptTrioImport:
        def find_spec(self, name, path=None, target=None):
            if name == "trio":
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, InterruptTrioImport())
    sys.argv = ["trio-crawl", "http://127.0.0.1:1/", "-q", "-o", os.devnull]
    ENTRY
    """
)


@pytest.mark.parametrize(
    "entry",
    [
        # the console script (pyproject's [project.scripts])
        "from trio_crawl.__main__ import run; run()",
        # python -m trio_crawl
        "runpy.run_module('trio_crawl', run_name='__main__', alter_sys=True)",
    ],
    ids=["console-script", "python-m"],
)
def test_ctrl_c_while_importing_exits_130_without_a_traceback(entry: str) -> None:
    result = run_python(INTERRUPTED_IMPORT.replace("ENTRY", entry))
    assert result.stderr == "trio-crawl: error: interrupted before the crawl started\n"
    assert result.returncode == 130
    assert result.stdout == ""  # stopped before anything was crawled


def test_the_console_script_is_the_guarded_entry() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"] == {"trio-crawl": "trio_crawl.__main__:run"}


def test_the_entry_answers_the_version_before_loading_the_crawler() -> None:
    """``trio-crawl --version`` is a quarter of a second's imports otherwise
    (trio, the engine, the fetchers): issue #36 item 11."""
    code = textwrap.dedent(
        """
        import json, sys
        sys.argv = ["trio-crawl", "--version"]
        from trio_crawl.__main__ import run
        try:
            run()
        except SystemExit as exc:
            code = exc.code
        print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
        """
    )
    result = run_python(code)
    lines = result.stdout.splitlines()
    assert lines[0] == f"trio-crawl {trio_crawl.__version__}", result.stderr
    report = json.loads(lines[-1])
    assert report["code"] == 0
    assert loaded(report["modules"], ("trio", "trio_crawl.cli", "trio_crawl.engine")) == []
