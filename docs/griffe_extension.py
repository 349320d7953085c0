"""A griffe extension for the API reference (mkdocs.yml loads it for mkdocstrings).

The package's docstrings are written for `help()` and use reStructuredText's
literal blocks ("Example::" and an indented block). Markdown has no such
thing: it showed "Example::" as text. This extension rewrites them, as the
reference is built, into a paragraph ending in ":" and a fenced python block.
The sources stay as they are.

It also shows functions decorated with `contextlib.asynccontextmanager` (or
`contextmanager`) as what they are. Their annotation is that of the generator
they decorate, `-> AsyncIterator[RunningCrawl]`, but callers get a context
manager: the reference shows `-> AbstractAsyncContextManager[RunningCrawl]`.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

MANAGERS = {
    "asynccontextmanager": ("AsyncIterator", "AsyncGenerator", "AbstractAsyncContextManager"),
    "contextmanager": ("Iterator", "Generator", "AbstractContextManager"),
}
LITERAL_INTRO = re.compile(r"^(?P<indent>\s*)(?P<text>.*?)(?P<space>\s?)::\s*$")


def literal_blocks_to_fences(text: str) -> str:
    """Turn reST literal blocks ("Intro::", blank line, indented block) into fences."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        intro = LITERAL_INTRO.match(line)
        # the block: after blank lines, every line indented deeper than the intro
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if not intro or j == i + 1 or j == len(lines):
            out.append(line)
            i += 1
            continue
        base = len(intro["indent"])
        deeper = len(lines[j]) - len(lines[j].lstrip())
        if deeper <= base:
            out.append(line)
            i += 1
            continue
        end = j
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) >= deeper
        ):
            end += 1
        while not lines[end - 1].strip():
            end -= 1
        # "Text::" -> "Text:", "Text ::" -> "Text", a lone "::" -> nothing (reST rules)
        if intro["text"]:
            out.append(intro["indent"] + intro["text"] + ("" if intro["space"] else ":"))
            out.append("")
        block = textwrap.dedent("\n".join(lines[j:end])).splitlines()
        out.append(intro["indent"] + "```python")
        out.extend(intro["indent"] + code if code else "" for code in block)
        out.append(intro["indent"] + "```")
        i = end
    return "\n".join(out)


class TrioCrawlDocs(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and "::" in obj.docstring.value:
            obj.docstring.value = literal_blocks_to_fences(obj.docstring.value)

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        returns = func.returns
        if not isinstance(returns, griffe.ExprSubscript):
            return
        for decorator in func.decorators:
            kind = decorator.callable_path.rsplit(".", 1)[-1]
            if kind not in MANAGERS:
                continue
            *generators, manager = MANAGERS[kind]
            if str(returns.left).rsplit(".", 1)[-1] in generators:
                # (Async)Generator[Y, S] and (Async)Iterator[Y] both yield Y
                value = returns.slice
                if isinstance(value, griffe.ExprTuple):
                    value = value.elements[0]
                func.returns = griffe.ExprSubscript(griffe.ExprName(manager), value)
            return
