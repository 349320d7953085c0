"""Rule 6 of ``core/parse.py``: large bodies are parsed incrementally, with the
same answers as from a whole tree. Every body here is run both ways by moving
the size threshold, and in tiny chunks to cross every token boundary."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_requisites import EVERY_KIND, EVERY_KIND_EXPECTED

from trio_crawl.core import parse, push_parse
from trio_crawl.core.parse import extract_links, extract_links_and_requisites, iter_link_chunks

URL = "http://example.com/dir/page.html"
HTML = "text/html; charset=utf-8"

BODIES = [
    EVERY_KIND,
    "<a href=in>1</a></html>\n<a href=after>2</a><img src=late.png></HTML >",
    "<html><head><base href='/base/'></head><body><a href='before'>b</a>"
    + "<div>" * 5000
    + "<a href='deep'>d</a><script>'<a href=\"/no\">'</script>"
    + "</div>" * 5000
    + "<a href='after'>a</a><area href='/area'>",
    "<div>" * 2045 + "<a href=/just-under-the-limit>x</a>",
    "<div>" * 2046 + "<a href=/just-over-the-limit>x</a>",
    "<p>unclosed <b><i>tags<a href=one>1</b></i><table><tr><td><a href=two>2<td>"
    "<a href='three'>3</table><a href=\"four\" <a href=five>5</a></a></span><a href=six>6",
    '<?xml version="1.0"?><html><a href="/a">\x00</a><a href="/b">b</a></html>',
    "<!-- only a comment -->",
    "",
    "   ",
    "<style>a{background:url(/s.png)}</style><div style='background:url(/d.png)'><a href=x>x</a>",
]


def both_ways(body: bytes, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    # libxml2 both ways: lexbor (rule 8) reads markup no site writes on purpose
    # as a browser does, not as libxml2's tree does (test_html_links.py).
    monkeypatch.setattr(parse, "_LEXBOR_BYTES", 0)
    with monkeypatch.context() as patch:
        patch.setattr(parse, "_STREAM_BYTES", 1 << 40)
        tree = (extract_links(body, URL, HTML), extract_links_and_requisites(body, URL, HTML))
    with monkeypatch.context() as patch:
        patch.setattr(parse, "_STREAM_BYTES", 0)
        patch.setattr(push_parse, "STREAM_CHUNK", chunk)
        streamed = (extract_links(body, URL, HTML), extract_links_and_requisites(body, URL, HTML))
        chunks = list(iter_link_chunks(body, URL, HTML, size=2))
    assert streamed == tree
    # Rule 7: the same links, in chunks of at most 2, each de-duplicated.
    assert all(0 < len(chunk) <= 2 and len(set(chunk)) == len(chunk) for chunk in chunks)
    assert list(dict.fromkeys(link for chunk in chunks for link in chunk)) == tree[0]


@pytest.mark.parametrize("chunk", [3, 64 * 1024])
@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_streamed_equals_tree(body: str, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    if body.count("<div>") > 1000:
        chunk = max(chunk, 1000)  # deep pages: each chunk walks the open path
    both_ways(body.encode(), monkeypatch, chunk)


def test_every_kind_streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse, "_STREAM_BYTES", 0)
    assert extract_links_and_requisites(EVERY_KIND.encode(), URL, HTML)[1] == EVERY_KIND_EXPECTED


def test_a_large_body_takes_the_streaming_path(monkeypatch: pytest.MonkeyPatch) -> None:
    chunk = "<p>" + "filler " * 100 + "</p>"
    body = "".join(f"<a href=/p/{i}>{i}</a>{chunk}" for i in range(2000)).encode()
    assert len(body) >= parse._STREAM_BYTES

    def no_tree(*args: object) -> object:
        raise AssertionError("a whole tree was built")

    monkeypatch.setattr(parse, "_fromstring", no_tree)
    assert extract_links(body, URL, HTML) == [f"http://example.com/p/{i}" for i in range(2000)]
    links, _ = extract_links_and_requisites(body, URL, HTML)
    assert len(links) == 2000


_fragments = st.sampled_from(
    [
        b"<a href='", b"'>", b'<a href="/x">', b"</a>", b"<base href=", b"<area href=/y>",
        b"<img src=", b"<style>", b"</style>", b"url(", b")", b"<div style='", b"<div>",
        b"</div>", b"</html>", b"<!--", b"-->", b"<script>", b"</script>", b"\x00", b"\xff",
        b"<table>", b"<td>", b"<p>", b" ", b"x",
    ]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    body=st.one_of(st.binary(max_size=300), st.lists(_fragments, max_size=40).map(b"".join)),
    chunk=st.sampled_from([1, 5, 4096]),
)
def test_any_bytes_streamed_equals_tree(body: bytes, chunk: int) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        both_ways(body, monkeypatch, chunk)
