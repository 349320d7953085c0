"""Developer sessions: `nox -s lint typecheck tests` is what CI runs."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True
# A session whose interpreter is not installed fails instead of being skipped
# (nox's default outside CI is a skip, and a run of skips exits 0).
nox.options.error_on_missing_interpreters = True

#: None: the sessions run on the Python that runs nox, whichever supported
#: version that is (3.11 or newer). Another one: `nox --force-python 3.13 -s tests`.
PYTHON = None
CHECK_PYTHON = (
    "import sys; v = sys.version.split()[0]; "
    "sys.exit(f'trio-crawl needs Python 3.11 or newer, not {v}') "
    "if sys.version_info < (3, 11) else None"
)


def check_python(session: nox.Session) -> None:
    """Fail the session (never skip it) on a Python trio-crawl does not support."""
    session.run("python", "-c", CHECK_PYTHON, silent=True)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite (pytest + pytest-trio + hypothesis), servers on 127.0.0.1 only."""
    check_python(session)
    session.install("-e", ".[test]")
    # Two processes by default (pytest-xdist): most tests wait on servers and
    # subprocesses, so two cores run the suite in about half the time. Give
    # posargs to choose (`nox -s tests -- tests/test_url.py` runs in one).
    session.run("pytest", *(session.posargs or ["-n", "2"]))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole tree."""
    check_python(session)
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package, against trio's own inline type hints."""
    check_python(session)
    session.install("-e", ".[report,redis]", "mypy>=1.11", "lxml-stubs>=0.5")
    session.run("mypy", "--strict", "trio_crawl")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site (mkdocs --strict: any warning fails) into site/,
    then check the HTML: every snippet included, no leftover markup (docs/check_site.py)."""
    check_python(session)
    session.install(
        "mkdocs>=1.6,<2",
        "mkdocs-material>=9.5,<10",
        "mkdocstrings[python]>=0.26",
        "ruff>=0.6",
    )
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})
    session.run("python", "docs/check_site.py", "site")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Side-by-side benchmarks (see benchmarks/README.md): the synthetic site against
    Scrapy (run.py, takes the posargs), then the Python documentation against wget and
    Scrapy (realsite.py; installs python3.11-doc with apt when root, else skips)."""
    check_python(session)
    session.install("-e", ".[redis]", "scrapy>=2.11")
    session.run("python", "benchmarks/run.py", *session.posargs)
    session.run("python", "benchmarks/realsite.py")


@nox.session(python=PYTHON)
def bench_broad(session: nox.Session) -> None:
    """Broad crawls (benchmarks/broad.py, takes the posargs): 1,000 and 100 loopback hosts
    behind nginx with 100 ms of latency, trio-crawl against Scrapy. Needs nginx and
    libnginx-mod-http-lua (skips without them); with Scrapy, a run takes 30+ minutes on
    2 cores, so it is not part of `nox -s bench`."""
    check_python(session)
    session.install("-e", ".", "scrapy>=2.11")
    session.run("python", "benchmarks/broad.py", *session.posargs)


#: The newest versions asks runs on, found by experiment: asks 3.0.0 is the last
#: release and needs anyio ~= 3.0 (3.7.1 is the last 3.x); anyio 3 subclasses
#: trio.MultiError, which trio 0.24.0 removed (AttributeError on first use), so
#: trio 0.23.2 is the newest trio for it.
ASKS_PINS = [
    "asks==3.0.0",
    "anyio==3.7.1",
    "trio==0.23.2",
    # httpx2's own dependencies, less anyio (httpx2 itself goes in with --no-deps)
    "httpcore2==2.16.2",
    "idna>=3.18",
    "truststore>=0.10",
    "typing-extensions>=4.5",
    # the rest of trio-crawl's dependencies and its [test] extra
    "lxml>=5.0",
    "selectolax>=1.0",
    "beautifulsoup4>=4.12",
    "ada-url>=1.15,<5",
    "cssselect>=1.2",
    "rich>=13.0",
    "pycurl>=7.45",
    "matplotlib>=3.8",
    "isal>=1.6",
    "warcio>=1.7",
    "mypy>=1.11",
    "pytest>=8",
    "pytest-trio>=0.8",
    "pytest-timeout>=2.3",
    "hypothesis>=6.100",
    "brotli>=1.1",
    "h2>=4",
    "trustme>=1.1",
    "hypercorn[trio]>=0.16",
]


@nox.session(python=PYTHON)
def asks(session: nox.Session) -> None:
    """The asks fetcher, and the core, on the newest trio asks runs on (0.23.2).

    asks 3.0.0 (its last release) needs anyio 3, which fails to import under
    trio >= 0.24, and httpx2 needs anyio 4: pip cannot install both, so this
    session installs httpx2 and the project --no-deps on the pinned set and
    runs the whole suite there, the shared fetcher suite included for asks.
    """
    check_python(session)
    session.install(*ASKS_PINS)
    session.install("--no-deps", "httpx2==2.16.2")
    session.install("--no-deps", "-e", ".")
    # fail fast if anything above moved trio or anyio off the pins
    session.run(
        "python",
        "-c",
        "import importlib.metadata as m; "
        "got = {p: m.version(p) for p in ('trio', 'anyio', 'asks')}; "
        "assert got == {'trio': '0.23.2', 'anyio': '3.7.1', 'asks': '3.0.0'}, got",
    )
    # The whole suite: the core must keep working on the trio asks needs.
    session.run("pytest", *session.posargs)
