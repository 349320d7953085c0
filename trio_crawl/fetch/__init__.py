"""Fetchers: the only modules that import an HTTP client.

``base`` has the ``Fetcher`` protocol the engine depends on; ``curl`` (libcurl
via pycurl, the default), ``httpx`` (httpx2) and ``asks`` implement it. What
they share, one job per module: ``errors`` (the one path from a library's
failure to a ``FetchError``), ``request`` (checks on what is sent),
``identity`` (headers, basic auth and cookies of each request), ``body``
(limits, skipping, draining, header joining, releasing connections) and
``decode`` (content codings in bounded steps). ``dns``: host names looked
up once per crawl for httpx (a pure name cache and its trio side).
"""
