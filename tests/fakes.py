"""An in-memory Fetcher: a whole website in a dict, with virtual-time delays.

Use it under ``trio.testing.MockClock`` where a real socket adds nothing: the
engine's logic (termination, depth, retries, politeness) is what is tested.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import trio

from trio_crawl.core.models import FetchResult
from trio_crawl.errors import FetchError


@dataclass
class FakePage:
    status: int = 200
    links: Sequence[str] = ()
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/html"
    #: Answers for the first attempts, before this page answers normally:
    #: each is a status (int) or a FetchError kind (str).
    first: Sequence[int | str] = ()
    #: The body as given, instead of anchors for ``links``.
    raw: bytes | None = None

    def body(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return "".join(f'<a href="{href}">x</a>' for href in self.links).encode()


@dataclass
class Call:
    url: str
    start: float
    end: float | None = None


class FakeFetcher:
    """Serves ``pages`` (absolute URL -> FakePage); unknown URLs are 404."""

    def __init__(
        self,
        pages: dict[str, FakePage],
        *,
        robots: str | Sequence[tuple[int | str, str]] | None = None,
        on_fetch: Callable[[str], None] | None = None,
    ) -> None:
        self.pages = pages
        self.robots = robots
        self.calls: list[Call] = []
        self.robots_calls: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._attempts: dict[str, int] = {}
        self._on_fetch = on_fetch

    @property
    def urls(self) -> list[str]:
        return [c.url for c in self.calls]

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        if url.endswith("/robots.txt"):
            self.robots_calls.append(url)
            await trio.lowlevel.checkpoint()
            robots = self.robots or []
            answers = [(200, robots)] if isinstance(robots, str) else robots
            if not answers:
                return FetchResult(url, 404, {}, b"", 0.0)
            status, text = answers[min(len(self.robots_calls), len(answers)) - 1]
            if isinstance(status, str):  # a FetchError kind; "timeout" after 30 s
                await trio.sleep(30 if status == "timeout" else 0)
                raise FetchError(status, "injected")
            return FetchResult(url, status, {"content-type": "text/plain"}, text.encode(), 0.0)
        call = Call(url, trio.current_time())
        self.calls.append(call)
        if self._on_fetch is not None:
            self._on_fetch(url)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            page = self.pages.get(url)
            if page is None:
                await trio.lowlevel.checkpoint()
                return FetchResult(url, 404, {"content-type": "text/html"}, b"", 0.0)
            await trio.sleep(page.delay)
            attempt = self._attempts.get(url, 0)
            self._attempts[url] = attempt + 1
            status = page.status
            if attempt < len(page.first):
                answer = page.first[attempt]
                if isinstance(answer, str):
                    raise FetchError(answer, "injected")
                status = answer
            headers = {"content-type": page.content_type, **page.headers}
            skipped = page.content_type != "text/html" and not any_body
            body = b"" if skipped else page.body()
            return FetchResult(url, status, headers, body, page.delay, skipped)
        finally:
            call.end = trio.current_time()
            self.in_flight -= 1

    async def aclose(self) -> None:
        pass


def bfs_depths(graph: Mapping[int, Sequence[int]], max_depth: int | None) -> dict[int, int]:
    """Shortest link distance from node 0 of every node a crawl limited to
    ``max_depth`` must fetch: the reference the engine and frontier tests use."""
    depth = {0: 0}
    todo = deque([0])
    while todo:
        node = todo.popleft()
        if max_depth is not None and depth[node] >= max_depth:
            continue
        for child in graph.get(node, ()):
            if child not in depth:
                depth[child] = depth[node] + 1
                todo.append(child)
    return depth
