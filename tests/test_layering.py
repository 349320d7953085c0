"""The package's layering, checked on every import statement of every module.

Dependencies point down; nothing imports upward:

    cli/        the command line           -> anything below; nothing imports it
    engine/     the crawl on WorkPool      -> workpool, frontiers, fetch, core
    outputs/    where results go           -> core, trio (the WARC writer's link)
    mirror/     the offline copy           -> core, trio (layout.py, links.py: pure)
    recrawl/    what a recrawl keeps       -> core, sqlite3 (visit.py: pure)
    frontiers/  where URLs live            -> core (never the engine, never HTTP)
    fetch/      HTTP clients               -> core (the only HTTP importers)
    workpool.py the termination core       -> trio only
    machine.py  the machine's limits (I/O) -> core (the pure sizing rules)
    robots/     robots.txt rules (pure)    -> core
    core/       pure decisions             -> the standard library, parsers
                                              (no trio, HTTP client, rich, sqlite3)

A feature's pure rules may live beside its I/O (``mirror/layout.py`` beside
``mirror/files.py``): the modules in ``PURE`` keep to core's rules wherever
they are, and import nothing of the package but core, ``errors`` and other
pure modules. The imports a rule forbids but that stay for now are listed
with their reason in ``KNOWN`` (``core/config.py`` asks ``machine.py``), and a
test fails once one is no longer made.

And no module imports the face (``trio_crawl/__init__.py``) or the CLI. Every
``import`` counts, inside functions and ``TYPE_CHECKING`` blocks too: a lazy
import is still a dependency. The rules are data (``RULES``); a test below
proves the checker catches a violating import. The package has no import
cycle either, lazy imports counted (``test_the_package_has_no_import_cycle``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "trio_crawl"

HTTP_CLIENTS = {"httpx2", "httpx", "httpcore2", "httpcore", "h11", "pycurl", "asks", "anyio"}
ASYNC = {"trio", "anyio"}
INTERNAL = {
    "engine", "fetch", "frontiers", "cli", "sites", "workpool", "testing", "report", "outputs",
    "mirror",
}  # fmt: skip
#: What core, and every pure module wherever it lives, must not import.
PURE_RULES = ASYNC | HTTP_CLIENTS | {"rich", "sqlite3"} | {f"trio_crawl.{x}" for x in INTERNAL}
#: Pure modules outside core/: no trio, no I/O, as core's. A module that
#: only one package uses lives beside its user (``engine/schedule.py``
#: beside ``engine/politeness.py``), and stays pure there.
PURE = {
    "trio_crawl.cli.units",
    "trio_crawl.engine.distinct",
    "trio_crawl.engine.fifo",
    "trio_crawl.engine.outcome",
    "trio_crawl.engine.schedule",
    "trio_crawl.engine.sitemap_parse",
    "trio_crawl.fetch.dns.name_cache",
    "trio_crawl.frontiers.bloom",
    "trio_crawl.frontiers.crawl_identity",
    "trio_crawl.frontiers.redis.turns",
    "trio_crawl.mirror.layout",
    "trio_crawl.mirror.links",
    "trio_crawl.outputs.warc.revisit",
    "trio_crawl.recrawl.visit",
}
#: What a pure module may import of the package besides other pure modules.
PURE_MAY_IMPORT = {"trio_crawl.core", "trio_crawl.errors", "trio_crawl.robots"}

#: layer -> what its modules must not import (top-level names, and
#: ``trio_crawl.X`` for the package's own layers; ``trio_crawl`` alone is the face).
RULES: dict[str, set[str]] = {
    "core": PURE_RULES | {"trio_crawl.robots", "trio_crawl.machine", "trio_crawl.recrawl"},
    "machine": PURE_RULES,
    "robots": PURE_RULES,
    "workpool": HTTP_CLIENTS
    | {"rich", "sqlite3", "trio_crawl.core", "trio_crawl.robots", "trio_crawl.machine"}
    | {f"trio_crawl.{x}" for x in INTERNAL - {"workpool"}},
    "fetch": {"rich", "sqlite3"} | {f"trio_crawl.{x}" for x in INTERNAL - {"fetch"}},
    "frontiers": HTTP_CLIENTS
    | {"rich"}
    | {f"trio_crawl.{x}" for x in INTERNAL - {"frontiers"}}
    | {"trio_crawl.fetch"},
    "engine": HTTP_CLIENTS | {"rich", "trio_crawl.cli", "trio_crawl.sites", "trio_crawl.testing"},
    "sites": HTTP_CLIENTS | {f"trio_crawl.{x}" for x in INTERNAL - {"sites"}},
    "cli": HTTP_CLIENTS,
    "outputs": HTTP_CLIENTS
    | {"sqlite3", "rich"}
    | {f"trio_crawl.{x}" for x in INTERNAL - {"outputs"}}
    | {"trio_crawl.frontiers"},
    "mirror": HTTP_CLIENTS
    | {"sqlite3", "rich"}
    | {f"trio_crawl.{x}" for x in INTERNAL - {"mirror"}}
    | {"trio_crawl.frontiers"},
    "recrawl": ASYNC
    | HTTP_CLIENTS
    | {"rich"}
    | {f"trio_crawl.{x}" for x in INTERNAL}
    | {"trio_crawl.frontiers", "trio_crawl.machine"},
    "report": ASYNC
    | HTTP_CLIENTS
    | {"sqlite3"}
    | {f"trio_crawl.{x}" for x in INTERNAL}
    | {"trio_crawl.frontiers"},
}
#: Imports a rule forbids that stay for now, each with its reason (a test
#: below fails once one is no longer made, so the list only shrinks).
KNOWN: dict[tuple[str, str], str] = {
    ("trio_crawl.core.config", "trio_crawl.machine"): "CrawlConfig.worker_ceiling reads the "
    "machine's limits; the configuration's rework moves that to where the pool is built",
}
#: Module (or package) -> frontier backends it must not import: a backend
#: never loads another (a Redis worker never loads the SQLite frontier, nor
#: sqlite3 with it), and what they share lives beside them in ``frontiers/``.
BACKEND_RULES: dict[str, set[str]] = {
    "trio_crawl.frontiers.redis": {"trio_crawl.frontiers.sqlite"},
    "trio_crawl.frontiers.sqlite": {"trio_crawl.frontiers.redis"},
    "trio_crawl.cli.redis_cli": {"trio_crawl.frontiers.sqlite"},
}
#: Modules no other module may import: the face and the command line.
FACE = {"trio_crawl", "trio_crawl.cli"}
FACE_IMPORTERS = {"trio_crawl.__main__", "trio_crawl.testing"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Absolute names imported by ``source`` (relative imports resolved)."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from . import x`` may import a submodule x
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
    return found


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RULES else None


def matches(name: str, forbidden: str) -> bool:
    return name == forbidden or name.startswith(forbidden + ".")


def pure_import_allowed(name: str) -> bool:
    """Whether a pure module may import ``name`` (only core, errors and pure
    modules of the package; anything outside it is left to ``PURE_RULES``)."""
    if not matches(name, "trio_crawl") or name == "trio_crawl":
        return True
    return any(matches(name, ok) for ok in PURE_MAY_IMPORT | PURE)


def violations(module: str, source: str, is_package: bool) -> list[str]:
    found = []
    layer = layer_of(module)
    for line, name in imports_of(source, module, is_package):
        if layer is not None:
            for forbidden in RULES[layer]:
                if (module, forbidden) in KNOWN:
                    continue
                if matches(name, forbidden) and not matches(module, forbidden):
                    found.append(f"{module}:{line} imports {name} ({layer} must not)")
        for owner, backends in BACKEND_RULES.items():
            if matches(module, owner):
                found += [
                    f"{module}:{line} imports {name} (another frontier backend)"
                    for backend in backends
                    if matches(name, backend)
                ]
        if module in PURE:
            for forbidden in PURE_RULES:
                if matches(name, forbidden) and not matches(module, forbidden):
                    found.append(f"{module}:{line} imports {name} (a pure module must not)")
            if not pure_import_allowed(name):
                found.append(f"{module}:{line} imports {name} (a pure module must not)")
        if module not in FACE_IMPORTERS and not module.startswith("trio_crawl.cli"):
            if name == "trio_crawl" and module != "trio_crawl":
                found.append(f"{module}:{line} imports the package face")
            if matches(name, "trio_crawl.cli"):
                found.append(f"{module}:{line} imports the command line")
    return found


def all_modules() -> list[tuple[str, Path]]:
    return sorted((module_name(p), p) for p in PACKAGE.rglob("*.py"))


def test_every_module_keeps_its_layer() -> None:
    problems = []
    for module, path in all_modules():
        problems += violations(module, path.read_text(), path.name == "__init__.py")
    assert problems == []


def test_every_layer_exists() -> None:
    layers = {layer_of(module) for module, _ in all_modules()}
    assert set(RULES) <= layers


def test_every_pure_module_exists() -> None:
    assert {module for module, _ in all_modules()} >= PURE


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("trio_crawl.core.frontier", "import trio\n"),
        ("trio_crawl.core.url", "def f():\n    from ..engine import crawler\n"),
        ("trio_crawl.frontiers.sqlite", "from ..engine.crawler import Crawler\n"),
        ("trio_crawl.engine.crawler", "import httpx2\n"),
        ("trio_crawl.engine.crawler", "from ..cli.main import main\n"),
        ("trio_crawl.fetch.curl", "from .. import __version__\n"),
        ("trio_crawl.workpool", "from .core.frontier import Entry\n"),
        ("trio_crawl.mirror.layout", "import trio\n"),
        ("trio_crawl.mirror.links", "from .files import MirrorFiles\n"),
        ("trio_crawl.core.url", "from ..mirror.layout import MirrorLayout\n"),
        ("trio_crawl.robots.policy", "import trio\n"),
        ("trio_crawl.robots.rules", "from ..fetch.base import Fetcher\n"),
        ("trio_crawl.fetch.dns.name_cache", "import trio\n"),
        ("trio_crawl.fetch.dns.name_cache", "from ..body import close_shielded\n"),
        ("trio_crawl.engine.schedule", "from ..workpool import WorkPool\n"),
        ("trio_crawl.engine.outcome", "from .crawler import Crawler\n"),
        ("trio_crawl.frontiers.bloom", "import sqlite3\n"),
        ("trio_crawl.core.pool_sizing", "from ..machine import machine_ceiling\n"),
        ("trio_crawl.machine", "import trio\n"),
        ("trio_crawl.core.shard_termination", "import trio\n"),
        ("trio_crawl.core.shard_termination", "from ..frontiers.cluster import termination\n"),
        ("trio_crawl.cli.redis_cli", "from ..frontiers.sqlite.resume import repair_output\n"),
        ("trio_crawl.frontiers.redis.frontier", "from ..sqlite import SqliteFrontier\n"),
    ],
)
def test_the_checker_catches_a_violating_import(module: str, source: str) -> None:
    assert violations(module, source, is_package=False)


def test_the_checker_allows_downward_imports() -> None:
    assert (
        violations("trio_crawl.engine.crawler", "from ..core.frontier import Entry\n", False) == []
    )
    assert violations("trio_crawl.frontiers.sqlite", "import trio\nimport sqlite3\n", False) == []
    assert violations("trio_crawl.mirror.links", "from .layout import INDEX\n", False) == []
    assert violations("trio_crawl.mirror.files", "from .layout import INDEX\n", False) == []


# -- no cycles ---------------------------------------------------------------------


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the package's modules it imports (a name imported from a
    module counts as that module; ``from . import x`` as the submodule x)."""
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in sources.items():
        targets = set()
        for _, name in imports_of(source, module, is_package):
            parts = name.split(".")
            while parts and ".".join(parts) not in sources:
                parts.pop()
            target = ".".join(parts)
            if target and target != module:
                targets.add(target)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected groups of two or more modules,
    package ``__init__`` modules left out (importing ``a.b`` runs ``a``
    first, but ``a`` re-exporting ``a.b`` is no cycle of ours)."""
    packages = {m for m in graph if any(other.startswith(m + ".") for other in graph)}
    edges = {m: {t for t in ts if t not in packages} for m, ts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in edges:
        if node not in index and node not in packages:
            visit(node)
    return found


def test_the_package_has_no_import_cycle() -> None:
    sources = {m: (p.read_text(), p.name == "__init__.py") for m, p in all_modules()}
    assert cycles(import_graph(sources)) == []


def test_the_cycle_finder_finds_a_lazy_cycle() -> None:
    sources = {
        "trio_crawl.cli.main": ("from .redis_cli import run\n", False),
        "trio_crawl.cli.redis_cli": ("def run():\n    from .main import run_cli\n", False),
        "trio_crawl.cli.demo": ("from .main import build_parser\n", False),
    }
    assert cycles(import_graph(sources)) == [["trio_crawl.cli.main", "trio_crawl.cli.redis_cli"]]
