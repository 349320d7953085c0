"""Check the built site against its sources; `nox -s docs` runs it after `mkdocs build`.

`mkdocs build --strict` passes when a snippet is not included at all:
pymdownx.snippets (with `check_paths`) fails on a marker that names a missing
file, but a line it does not recognise as a marker stays in the page as text.
That is what happened when ruff format (0.16 and later format the Python
blocks of Markdown files) rewrote `--8<-- "file:section"` inside a python fence
into the Python expression `--8 < --"file:section"`. So this script checks the
rendered HTML itself:

1. every snippet marker in docs/ (mangled ones too) names a section, and all of
   that section's code appears, line for line, in a code block of the page;
2. no snippet marker survives as text anywhere in the site (search index too);
3. no paragraph ends in a reStructuredText "::" (a literal block marker that
   Markdown renders as text, e.g. "Example::");
4. the signature of an @(async)contextmanager function shows the context
   manager, not the generator annotation of the undecorated function.

Usage: python docs/check_site.py [SITE_DIR]   (default: site). Exit 1 on failure.
"""

from __future__ import annotations

import ast
import html
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "trio_crawl"

# A snippet marker, as pymdownx.snippets writes it or as a formatter may have
# spaced it out: "--8<--", "--8 < --", "- -8<- -"...
MARKER = re.compile(r"-\s*-\s*8\s*<\s*-\s*-")
MARKER_LINE = re.compile(r"^\s*" + MARKER.pattern + r"\s*(?P<arg>.*?)\s*$")
SECTION_START = re.compile(r"--8<--\s*\[start:(?P<name>[^\]]+)\]")
SECTION_END = re.compile(r"--8<--\s*\[end:(?P<name>[^\]]+)\]")
SECTION_ANY = re.compile(r"--8<--\s*\[(?:start|end):[^\]]+\]")
TAG = re.compile(r"<[^>]+>")
CODE = re.compile(r"<code[^>]*>(.*?)</code>", re.S)
PARAGRAPH = re.compile(r"<p>(.*?)</p>", re.S)


def text_of(fragment: str) -> str:
    return html.unescape(TAG.sub("", fragment))


def page_html(site: Path, source: Path) -> Path:
    """The rendered file of a Markdown page (mkdocs' default directory URLs)."""
    rel = source.relative_to(DOCS).with_suffix("")
    if rel.name == "index":
        return site / rel.parent / "index.html"
    return site / rel / "index.html"


def snippet_refs(source: Path) -> Iterator[tuple[int, str]]:
    """(line number, "file[:section]") for every snippet marker in a Markdown file."""
    lines = source.read_text(encoding="utf-8").splitlines()
    block: list[str] | None = None  # inside a multi-line "--8<--" block
    for number, line in enumerate(lines, 1):
        match = MARKER_LINE.match(line)
        if block is not None:
            if match:
                yield from ((number, ref) for ref in block)
                block = None
            elif line.strip():
                block.append(line.strip())
            continue
        if not match:
            continue
        arg = match["arg"].strip().strip("\"'")
        if arg:
            yield number, arg
        else:
            block = []


def section_name(pattern: re.Pattern[str], line: str) -> str | None:
    match = pattern.search(line)
    return match["name"] if match else None


def snippet_text(ref: str) -> str:
    """The text pymdownx.snippets includes for "file", "file:section" or "file:a:b"."""
    name, _, selector = ref.partition(":")
    path = ROOT / name
    if not path.is_file():
        raise LookupError(f"no file {name}")
    lines = path.read_text(encoding="utf-8").splitlines()
    if not selector:
        chosen = lines
    elif re.fullmatch(r"\d*(:\d*)?", selector):
        start, _, end = selector.partition(":")
        chosen = lines[int(start or 1) - 1 : int(end) if end else None]
    else:
        starts = [
            i for i, line in enumerate(lines) if section_name(SECTION_START, line) == selector
        ]
        ends = [i for i, line in enumerate(lines) if section_name(SECTION_END, line) == selector]
        if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
            raise LookupError(f"no single section [start:{selector}]..[end:{selector}] in {name}")
        chosen = lines[starts[0] + 1 : ends[0]]
    # snippets drops section marker lines inside what it includes
    return "\n".join(line for line in chosen if not SECTION_ANY.search(line)).strip("\n")


def check_snippets(site: Path) -> list[str]:
    problems = []
    for source in sorted(DOCS.rglob("*.md")):
        page = page_html(site, source)
        shown = source.relative_to(ROOT)
        refs = list(snippet_refs(source))
        if not refs:
            continue
        if not page.is_file():
            problems.append(f"{shown}: includes snippets but {page} was not built")
            continue
        blocks = [text_of(code) for code in CODE.findall(page.read_text(encoding="utf-8"))]
        for number, ref in refs:
            try:
                wanted = snippet_text(ref)
            except LookupError as exc:
                problems.append(f"{shown}:{number}: snippet {ref!r}: {exc}")
                continue
            if not wanted.strip():
                problems.append(f"{shown}:{number}: snippet {ref!r} is empty")
            elif not any(wanted in block for block in blocks):
                first = next(line for line in wanted.splitlines() if line.strip())
                problems.append(
                    f"{shown}:{number}: the code of snippet {ref!r} is not in a code block"
                    f" of {page.relative_to(site.parent)} (its first line: {first.strip()!r})"
                )
    return problems


def check_no_markers(site: Path) -> list[str]:
    problems = []
    for path in sorted(site.rglob("*.html")):
        text = text_of(path.read_text(encoding="utf-8"))
        for match in MARKER.finditer(text):
            line = text[match.start() : text.find("\n", match.start())]
            problems.append(f"{path.relative_to(site.parent)}: snippet marker left: {line!r}")
    index = site / "search" / "search_index.json"
    if index.is_file():
        for doc in json.loads(index.read_text(encoding="utf-8")).get("docs", []):
            if MARKER.search(text_of(doc.get("text", ""))):
                problems.append(
                    f"{index.relative_to(site.parent)}: snippet marker in {doc['location']}"
                )
    return problems


def check_rst_leftovers(site: Path) -> list[str]:
    problems = []
    for path in sorted(site.rglob("*.html")):
        for paragraph in PARAGRAPH.findall(path.read_text(encoding="utf-8")):
            text = text_of(paragraph).strip()
            if text.endswith("::"):
                problems.append(f"{path.relative_to(site.parent)}: reST literal marker: {text!r}")
    return problems


def context_managers() -> set[str]:
    """Names of the package's functions decorated with (async)contextmanager."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    if ast.unparse(decorator).split(".")[-1] in {
                        "contextmanager",
                        "asynccontextmanager",
                    }:
                        names.add(node.name)
    return names


def check_context_manager_signatures(site: Path) -> list[str]:
    problems = []
    managers = context_managers()
    heading = re.compile(
        r'<h\d id="(?P<id>[\w.]+)"[^>]*>(?:(?!<h\d).)*?</h\d>\s*'
        r'<div class="doc-signature[^"]*">(?P<sig>.*?)</div>',
        re.S,
    )
    for path in sorted(site.rglob("*.html")):
        for match in heading.finditer(path.read_text(encoding="utf-8")):
            name = match["id"].rsplit(".", 1)[-1]
            signature = " ".join(text_of(match["sig"]).split())
            returns = signature.rpartition(")")[2]
            if name in managers and re.search(r"\b(Async)?(Iterator|Generator)\[", returns):
                problems.append(
                    f"{path.relative_to(site.parent)}: {match['id']} is a context manager,"
                    f" but its signature shows the generator: {returns.strip()!r}"
                )
    return problems


def main(argv: list[str]) -> int:
    site = Path(argv[1] if len(argv) > 1 else ROOT / "site").resolve()
    if not (site / "index.html").is_file():
        print(f"check_site: no built site at {site} (run mkdocs build first)", file=sys.stderr)
        return 1
    problems = (
        check_snippets(site)
        + check_no_markers(site)
        + check_rst_leftovers(site)
        + check_context_manager_signatures(site)
    )
    for problem in problems:
        print(f"check_site: {problem}", file=sys.stderr)
    if problems:
        print(f"check_site: {len(problems)} problem(s) in {site}", file=sys.stderr)
        return 1
    print(f"check_site: {site} is complete: snippets included, no leftover markup")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
