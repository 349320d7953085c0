"""Per-host budgets: how many URLs of one host a crawl admits, how many hosts. Pure.

A broad crawl (``--span-hosts``) meets hosts without end, and one big host
can take the whole crawl; these budgets bound both, at *admission*: the
frontier asks ``admits(url)`` once for each URL it has never seen, after the
scope said yes, and counts what it admits.

Rules
-----
1. A host is ``host:port`` of the canonical URL (``core.url.host_port``).
2. ``max_hosts``: the first ``max_hosts`` distinct hosts admitted are the
   crawl's; a URL of any other host is refused.
3. ``max_pages_per_host``: at most that many URLs of one host are admitted
   (pages, redirects and requisites alike: each is one request to the host).
4. Start URLs (``count``) are always admitted (the user asked for them), but
   they count: a start host is one of the ``max_hosts``, a start URL one of its
   host's pages.
5. Memory: one dict entry per admitted host (its name and a count, ~150 bytes),
   whatever the budgets; ``refused`` counts the URLs turned away.

The rule itself (``fits``) is apart from the counts, so that a frontier
keeping its counts elsewhere decides the same way: the ``--state`` file keeps
them in its ``hosts`` table (``frontiers/sqlite/hosts.py``).
"""

from __future__ import annotations

from .url import host_port


class HostBudget:
    """``max_pages_per_host`` and ``max_hosts`` (None: no limit) at admission.

    >>> budget = HostBudget(max_pages_per_host=1, max_hosts=1)
    >>> budget.admits("http://a.test/"), budget.admits("http://a.test/2")
    (True, False)
    >>> budget.admits("http://b.test/"), budget.refused
    (False, 2)
    """

    __slots__ = ("_pages", "max_hosts", "max_pages_per_host", "refused")

    def __init__(
        self, *, max_pages_per_host: int | None = None, max_hosts: int | None = None
    ) -> None:
        if (max_pages_per_host is not None and max_pages_per_host < 1) or (
            max_hosts is not None and max_hosts < 1
        ):
            raise ValueError("max_pages_per_host and max_hosts must be at least 1")
        self.max_pages_per_host = max_pages_per_host
        self.max_hosts = max_hosts
        self._pages: dict[str, int] = {}
        self.refused = 0

    @property
    def hosts(self) -> int:
        """Distinct hosts admitted so far."""
        return len(self._pages)

    def pages(self, host: str) -> int:
        """URLs of ``host`` (``host:port``) admitted so far."""
        return self._pages.get(host, 0)

    def fits(self, pages: int | None, hosts: int) -> bool:
        """Whether one more URL of a host fits (rules 2 and 3), its host having
        ``pages`` URLs admitted (None: a host not admitted yet) among
        ``hosts`` hosts admitted. Counts nothing."""
        if pages is None:
            return self.max_hosts is None or hosts < self.max_hosts
        return self.max_pages_per_host is None or pages < self.max_pages_per_host

    def admits(self, url: str) -> bool:
        """Whether the new canonical ``url`` fits the budgets; if so, count it."""
        host = host_port(url)
        pages = self._pages.get(host)
        if not self.fits(pages, len(self._pages)):
            self.refused += 1
            return False
        self._pages[host] = (pages or 0) + 1
        return True

    def count(self, url: str) -> None:
        """Count a start URL, admitted whatever the budgets (rule 4)."""
        host = host_port(url)
        self._pages[host] = self._pages.get(host, 0) + 1
