"""Module and file references in prose point at things that exist.

Docstrings, comments and the docs name our modules (``core/parse.py``,
``trio_crawl.frontiers.sqlite``, ``_robots``); when a module moves, those names
rot silently. This test reads the prose of every Python file in the project
(docstrings, other string literals and comments: ``tokenize``, not a regex over
code) and every Markdown file, and checks what looks like one of OUR paths:

1. ``trio_crawl.a.b``: an importable module, then attributes that exist.
2. ``trio_crawl/a/b.py`` and ``core/x.py`` (a path under one of the package's
   subpackages), ``tests/x.py``, ``benchmarks/x.py``, ``examples/x.py``,
   ``docs/x.md``: a file or folder that exists.
3. A quoted ``_name`` or ``_name.attr`` where ``name`` is one of our module
   names (``_url.resolve_many``, ``_robots_cache``): the layout before the
   subpackages, unless ``_name`` is defined in the file that says it.
4. A quoted ``name.py``: some module of that name exists.

Anything else (other projects' modules, URLs, code) is left alone, so the
check stays quiet where it cannot know. The checker is tested on planted
stale names first (``test_the_checker_finds_stale_names``).
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "trio_crawl"

SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
#: every module name of the package: ``parse``, ``robots``, ``warc`` ...
MODULE_NAMES = {p.stem for p in PACKAGE.rglob("*.py")} | set(SUBPACKAGES)
TOP_FOLDERS = ("tests", "benchmarks", "examples", "docs")

#: the names of the project's files: ``requisites.py``, ``fakes.py`` ...
FILE_NAMES = {
    p.name for folder in (PACKAGE, *(ROOT / t for t in TOP_FOLDERS)) for p in folder.rglob("*")
} | {p.name for p in ROOT.iterdir()}

#: logger names (``trio_crawl.mirror``) are dotted names that are not modules
LOGGERS = {
    name
    for path in PACKAGE.rglob("*.py")
    for name in re.findall(r"getLogger\(\"([\w.]+)\"\)", path.read_text())
}

DOTTED = re.compile(r"(?<![\w.])trio_crawl(?:\.[A-Za-z_]\w*)+")
FOLDERS = "|".join(map(re.escape, ["trio_crawl", *SUBPACKAGES, *TOP_FOLDERS]))
PATH = re.compile(rf"(?<![\w./-])((?:{FOLDERS})/[\w/.-]*)")
QUOTED = re.compile(r"`{1,2}([^`\s]+)`{1,2}")
UNDERSCORE_MODULE = re.compile(r"^_([a-z][a-z_]*)(\.\w+)*$")
PY_FILE = re.compile(r"^\w+\.py$")
UNDERSCORE_FILE = re.compile(r"(?<![\w/.])(_[a-z]\w*\.py)\b")
#: ``examples/NAME.py``, ``trio_crawl.X``, ``core/x.py``: a placeholder, not a name
PLACEHOLDER = re.compile(r"^(?:[A-Z]+|[a-z])$")


def _placeholder(reference: str) -> bool:
    parts = re.split(r"[./]", reference.rstrip("./"))
    return any(PLACEHOLDER.match(part) for part in parts if part not in ("py", "md"))


def _resolves(dotted: str) -> bool:
    """``trio_crawl.a.b.C.d``: the longest importable prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                # a field that is only annotated (a TypedDict key, a slot) is a name too
                return name in getattr(obj, "__annotations__", {})
            obj = getattr(obj, name)
        return True
    return False


def _path_exists(path: str, source: Path) -> bool:
    path = path.rstrip(".")
    if not path.endswith((".py", ".md", ".lua", "/")) and not path.startswith("trio_crawl/"):
        return True  # "core/frontier", "docs/intro.html" (a mirrored site): not our files
    # under the package (core/x.py), the project (tests/x.py), or the file saying it
    return any((base / path).exists() for base in (PACKAGE, ROOT, source.parent))


def _old_module_name(quoted: str, defined: set[str]) -> bool:
    """``_url.resolve_many``, ``_robots_cache``: the flat layout's private modules."""
    match = UNDERSCORE_MODULE.match(quoted)
    if match is None or f"_{match.group(1)}" in defined:
        return False
    name, dotted = match.group(1), match.group(2) is not None
    return dotted or name in MODULE_NAMES or name.split("_")[0] in MODULE_NAMES


def stale_names(text: str, source: Path, defined: set[str] | None = None) -> list[str]:
    """The references in ``text`` (prose from ``source``) that do not exist.

    ``defined`` holds the names the source file defines, so that its own
    ``_private.attribute`` is not taken for an old module.
    """
    defined = defined or set()
    stale = [
        m
        for m in DOTTED.findall(text)
        if m not in LOGGERS and not _placeholder(m) and not _resolves(m)
    ]
    stale += [m for m in PATH.findall(text) if not _placeholder(m) and not _path_exists(m, source)]
    for quoted in QUOTED.findall(text):
        if _old_module_name(quoted, defined) or (
            PY_FILE.match(quoted) and quoted not in FILE_NAMES
        ):
            stale.append(quoted)
    stale += [m for m in UNDERSCORE_FILE.findall(text) if m not in FILE_NAMES and m not in stale]
    return stale


def _prose_of_python(path: Path) -> tuple[str, set[str]]:
    """A file's docstrings, string literals and comments, and its top-level names."""
    source = path.read_text()
    pieces = [
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type in (tokenize.COMMENT, tokenize.STRING)
    ]
    defined: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name):
            defined.add(node.id)
        elif isinstance(node, ast.alias):
            defined.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.Attribute):
            defined.add(node.attr)
    return "\n".join(pieces), defined


def _project_files() -> list[Path]:
    python = [
        path
        for path in [
            *PACKAGE.rglob("*.py"),
            *(ROOT / "tests").glob("*.py"),
            *(ROOT / "benchmarks").glob("*.py"),
            *(ROOT / "examples").glob("*.py"),
            *(ROOT / "docs").glob("*.py"),
        ]
        if path.name != "test_references.py"  # its stale names are planted
    ]
    markdown = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *ROOT.glob("benchmarks/*.md")]
    return sorted(python) + sorted(markdown)


@pytest.mark.parametrize("path", _project_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_prose_names_only_modules_and_files_that_exist(path: Path) -> None:
    if path.suffix == ".py":
        text, defined = _prose_of_python(path)
    else:
        text, defined = path.read_text(), set()
    assert stale_names(text, path, defined) == []


def test_the_checker_finds_stale_names() -> None:
    here = ROOT / "trio_crawl" / "core" / "parse.py"
    planted = """
        canonicalized (``_url.resolve_many``), see ``_robots_cache.RobotsCache``
        and ``_robots``; the state is ``trio_crawl.core.state.CrawlState`` and
        ``trio_crawl.core.parse.no_such_function``; read trio_crawl/_parse.py,
        core/gone.py, frontiers/nothing/ and ``tests/test_nothing.py``; ``gone.py``.
    """
    assert stale_names(planted, here) == [
        "trio_crawl.core.state.CrawlState",
        "trio_crawl.core.parse.no_such_function",
        "trio_crawl/_parse.py",
        "core/gone.py",
        "frontiers/nothing/",
        "tests/test_nothing.py",
        "_url.resolve_many",
        "_robots_cache.RobotsCache",
        "_robots",
        "gone.py",
    ]


def test_the_checker_accepts_names_that_exist() -> None:
    here = ROOT / "trio_crawl" / "core" / "parse.py"
    fine = """
        ``trio_crawl.core.parse``, trio_crawl.frontiers.sqlite.SqliteFrontier,
        ``core/parse.py``, trio_crawl/engine/, ``requisites.py``, tests/fakes.py,
        ``_cut_fragment`` (a private function), ``_private.thing`` (defined here),
        ``httpx._exceptions``, https://example.com/core/x.py
    """
    assert stale_names(fine, here, {"_private"}) == []


# -- docs/reference.md lists the public surface --------------------------------

REFERENCE = ROOT / "docs" / "reference.md"
DIRECTIVE = re.compile(r"^::: (trio_crawl(?:\.\w+)+)\s*$", re.MULTILINE)


def _documented() -> list[str]:
    return DIRECTIVE.findall(REFERENCE.read_text())


def test_the_reference_documents_every_exported_name_once() -> None:
    import trio_crawl
    import trio_crawl.testing

    exported = [f"trio_crawl.{name}" for name in trio_crawl.__all__] + [
        f"trio_crawl.testing.{name}" for name in trio_crawl.testing.__all__
    ]
    documented = [name for name in _documented() if name != "trio_crawl.testing"]
    assert sorted(set(exported) - set(documented)) == []  # exported, not documented
    assert sorted(set(documented) - set(exported)) == []  # documented, not exported
    assert len(documented) == len(set(documented))


# -- the layout lists in docs/development.md and the face's docstring ----------


def _layout_entries(text: str) -> set[str]:
    """``cli/``, ``workpool.py`` ...: the first word of each line of a layout list."""
    return set(re.findall(r"^ +(\w+/|\w+\.py) ", text, re.MULTILINE))


def test_the_layout_lists_name_every_part_of_the_package() -> None:
    import trio_crawl

    parts = {f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} | {
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__main__.py", "testing.py")
    }
    development = (ROOT / "docs" / "development.md").read_text()
    block = development[development.index("  trio_crawl/\n") :].split("```", 1)[0]
    face = trio_crawl.__doc__ or ""
    assert sorted(parts - _layout_entries(block)) == []  # docs/development.md's list
    assert sorted(parts - {"__init__.py"} - _layout_entries(face)) == []  # the face's list
