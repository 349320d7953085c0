"""Fetchers: the only modules that import an HTTP client.

``base`` has the ``Fetcher`` protocol the engine depends on; ``curl`` (libcurl
via pycurl, the default), ``httpx`` (httpx2) and ``asks`` implement it.
"""
