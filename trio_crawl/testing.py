"""Serve a local website, for tests and examples: no network needed.

Describe a site as data (a `Site` of routes to `Response`s, or a function of
the `SiteRequest`), then serve it on 127.0.0.1 with `serve_site` and crawl
`server.base_url`. The server runs in background threads (no trio), so it
sits beside a crawl in the same process. It logs every request it receives
(`server.log`), and can apply faults: delays, slow bodies, resets, truncated
bodies, `Retry-After`.

Example:

```python
import trio
import trio_crawl
from trio_crawl.testing import Site, page, serve_site

site = Site(routes={"/": page("/a", "/b"), "/a": page("/"), "/b": page()})

with serve_site(site) as server:
    summary = trio.run(trio_crawl.run_crawl, [server.url("/")])
    print(summary.records, sorted(server.targets()))
```

`serve_site` is a plain (synchronous) context manager: enter it outside
`trio.run`, or in a trio program, around the crawl. The names here are the
stable surface of trio-crawl's own test server; the rest of it is private.
"""

from __future__ import annotations

from .sites.server import LoggedRequest, SiteServer, serve_site
from .sites.site import Response, Route, Site, SiteRequest, page, redirect

__all__ = [
    "LoggedRequest",
    "Response",
    "Route",
    "Site",
    "SiteRequest",
    "SiteServer",
    "page",
    "redirect",
    "serve_site",
]
