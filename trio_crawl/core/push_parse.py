"""Rule 6 of ``core/parse.py``: a big page read by libxml2's push parser.

A body of 1 MiB and more is fed 256 KiB at a time, only the tags that
matter raise events, and every finished element is deleted after each
chunk, so a 2.6 MB page costs ~8 MB of memory instead of ~32 MB for its
whole tree. ``PushParse.batches`` gives what each chunk held, which lets
``parse.iter_link_chunks`` hand a huge page's links out as they are found
(rule 7); ``stream`` gathers them for the callers that want them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, Literal

from .libxml2_links import LINK_TAGS, WALK_TAGS, read_elements
from .requisites import element_refs

if TYPE_CHECKING:
    from lxml import etree

__all__ = ["STREAM_CHUNK", "PushParse", "stream"]

#: Bytes fed to the push parser at once (smaller chunks cost libxml2 more).
STREAM_CHUNK: Final = 256 * 1024
_STYLE_ATTRIBUTE: Final = re.compile(rb"style\s*=", re.I)
#: libxml2's nesting limit: the depth of the last element when it stops.
_LIBXML2_MAX_DEPTH: Final = 2048


class PushParse:
    """Rule 6: libxml2's push parser over ``data``, read one chunk at a time.

    ``batches`` yields the hrefs (fragments cut, rule 1) and raw requisites
    found in each chunk fed; ``base`` is the first ``<base href>`` seen so
    far; ``failed`` is set at the end when libxml2 gave up part-way (the
    caller falls back to the tokenizer, as with a whole tree).

    Only the tags that matter raise events (libxml2 filters them), and after
    each chunk every finished element is deleted: all but the last child at
    each level of the path to the element being parsed."""

    def __init__(self, data: bytes, *, requisites: bool) -> None:
        self._data = data
        self._requisites = requisites
        self.base: str | None = None
        self.failed = False
        self._root: etree._Element | None = None

    def batches(self) -> Iterator[tuple[list[str], list[str]]]:
        from lxml import etree

        data = self._data
        requisites = self._requisites
        tags: set[str] | None = {"html", *LINK_TAGS}
        if requisites:
            # A style attribute may be on any element: then every element counts.
            tags = None if _STYLE_ATTRIBUTE.search(data) else {"html", *WALK_TAGS}
        # End events only for <style> text: 20,000 links make 20,000 more events.
        events: tuple[Literal["start", "end"], ...] = (
            ("start", "end") if requisites else ("start",)
        )
        parser = etree.HTMLPullParser(
            events=events, tag=tags, encoding="utf-8", huge_tree=True, collect_ids=False
        )
        try:
            for start in range(0, len(data), STREAM_CHUNK):
                parser.feed(data[start : start + STREAM_CHUNK])
                yield self._drain(parser)
                self._prune()
            parser.close()
        except etree.LxmlError:
            self.failed = True
            return
        yield self._drain(parser)
        last = parser.error_log.last_error
        # At the nesting limit the push parser stops silently, its last element
        # 2048 deep (where a page that ends at that depth is sent as well).
        if self._prune() >= _LIBXML2_MAX_DEPTH or (
            last is not None and last.level == etree.ErrorLevels.FATAL
        ):
            self.failed = True

    def _drain(self, parser: etree.HTMLPullParser) -> tuple[list[str], list[str]]:
        """The hrefs and raw requisites of the events parsed so far."""
        hrefs: list[str] = []
        refs: list[str] = []
        self.base = read_elements(
            self._started(parser.read_events(), refs),
            hrefs,
            refs if self._requisites else None,
            self.base,
            style_text=False,
        )
        return hrefs, refs

    def _started(
        self, events: Iterator[tuple[str, object]], refs: list[str]
    ) -> Iterator[etree._Element]:
        """The elements of the start events; the end event of a ``<style>``
        (asked for with requisites only) gives its text's requisites."""
        from lxml import etree

        for event, element in events:
            if not isinstance(element, etree._Element):
                continue  # not with these events; for the type checker
            if event == "end":
                if element.tag == "style":
                    element_refs("style", element.get, element.text, refs)
                continue
            if self._root is None:
                self._root = element.getroottree().getroot()
            yield element

    def _prune(self) -> int:
        """Delete every element before the last one inserted, on its path
        from the root (they are finished); the length of that path."""
        depth = 0
        node = self._root
        while node is not None:
            depth += 1
            if not len(node):
                break
            if len(node) > 1:
                del node[:-1]
            node = node[-1]
        return depth


def stream(data: bytes, *, requisites: bool) -> tuple[str | None, list[str], list[str]] | None:
    """Rule 6: (base, hrefs, raw requisites) of ``data`` from libxml2's push
    parser; None when libxml2 gave up part-way."""
    push = PushParse(data, requisites=requisites)
    hrefs: list[str] = []
    refs: list[str] = []
    for found, needed in push.batches():
        hrefs += found
        refs += needed
    return None if push.failed else (push.base, hrefs, refs)
