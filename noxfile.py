"""Developer sessions: `nox -s lint typecheck tests` is what CI runs."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite (pytest + pytest-trio + hypothesis), servers on 127.0.0.1 only."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole tree."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package, against trio's own inline type hints."""
    session.install("-e", ".", "mypy>=1.11", "lxml-stubs>=0.5")
    session.run("mypy", "--strict", "trio_crawl")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Side-by-side benchmark against Scrapy (see benchmarks/README.md)."""
    session.install("-e", ".", "scrapy>=2.11")
    session.run("python", "benchmarks/run.py", *session.posargs)
