"""Rule 5 of ``parse``: a page's links from the stdlib's tokenizer. Pure.

libxml2 stops at its nesting limit; then ``parse`` reads the whole page
again with ``html.parser``'s tokenizer, which builds no tree and has no
depth limit (slow, but only for such pages). Its own module so that the
tokenizer (and ``html.entities``) is imported only when a page needs it.
"""

from __future__ import annotations

from html.parser import HTMLParser

from .requisites import css_refs, element_refs

__all__ = ["LinkTokenizer", "RequisiteTokenizer", "tokenize"]


class LinkTokenizer(HTMLParser):
    """Rule 5's fallback: collects a/area/base hrefs from a token stream."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("a", "area", "base"):
            for name, value in attrs:
                if name == "href":
                    if value is not None:
                        if tag != "base":
                            self.hrefs.append(value)
                        elif self.base is None:
                            self.base = value
                    break  # the first href attribute wins, as in a browser

    handle_startendtag = handle_starttag


class RequisiteTokenizer(LinkTokenizer):
    """Rule 5's fallback for ``extract_links_and_requisites``: links, and the
    raw requisites of every start tag and ``<style>`` text."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self._style: list[str] | None = None  # the text of the open <style>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        super().handle_starttag(tag, attrs)
        self._end_style()
        first: dict[str, str | None] = {}
        for name, value in attrs:
            first.setdefault(name, value)
        element_refs(tag, first.get, None, self.refs)
        if tag == "style":
            self._style = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self._end_style()

    def handle_endtag(self, tag: str) -> None:
        self._end_style()

    def handle_data(self, data: str) -> None:
        if self._style is not None:
            self._style.append(data)

    def close(self) -> None:
        super().close()
        self._end_style()

    def _end_style(self) -> None:
        if self._style is not None:
            self.refs.extend(css_refs("".join(self._style)))
            self._style = None


def tokenize(data: bytes, tokenizer: LinkTokenizer) -> tuple[str | None, list[str]]:
    """Feed ``data`` (UTF-8) to ``tokenizer``; its (base, hrefs)."""
    try:
        tokenizer.feed(data.decode("utf-8", "replace"))
        tokenizer.close()
    except (AssertionError, ValueError):  # old html.parser quirks on broken markup
        pass
    return tokenizer.base, tokenizer.hrefs
